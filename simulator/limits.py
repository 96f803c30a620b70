"""Limits checked before any work (DESIGN.md section 7): every count that reaches an
int64 array or a compiled kernel is bounded first in exact (Python) integer arithmetic,
and a run whose tile programs would not fit the memory budget is refused up front.

Two entry points, each called with one line:
  - `check_inputs` before any tiling is resolved (simulator.search.resolve and the
    mapper): platform integers and operand sizes small enough for the heuristics'
    int64 arithmetic (its platform part, `check_platform`, is `accsim check`'s too);
  - `check_tilings` once every operator's tiling is resolved and before any is
    lowered: steps, bytes and an upper bound of the cycles of each
    operator and of their sum over repeats within int64, and the programs' memory
    within the budget;
(Two more live beside what they bound: `program.check_program`, the same cycle bound
from a program's own arrays, at each engine's entry; `mapping.heuristics.
check_candidates`, a candidate grid small enough to lay out as arrays.)
The bound is the serial sum of everything a step can cost, which no schedule exceeds.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass

from pydantic import BaseModel

from simulator.collectives.cost import collective_cost
from simulator.inputs.platform import DTYPE_BYTES
from simulator.errors import AccsimError
from simulator.mapping.footprint import (PROGRAM_STEPS, a_tile_bytes, attention_rows,
                                         b_tile_bytes, c_tile_bytes, epilogue_tile_bytes,
                                         operand_bytes, transpose_work)
from simulator.invocation import invocation_cycles
from simulator.numbers import decimal_float
from simulator.program.tile_program import INT64_BOUND
from simulator.program.streamed import DEFAULT_BLOCK_STEPS
from simulator.model.dataflow import DATAFLOW_CODES, fold_dims
from simulator.model.loop_nest import oriented
from simulator.inputs.workload import Conv2d, is_attention, is_collective, is_compute

# Any single platform integer (array dims, buffer bytes, lanes, cycles): beyond this the
# heuristics' int64 products could wrap before the cycle bound is even computed.
MAX_PLATFORM_INT = 2**48
# Any per-event cycle count (a latency, a setup, cycles per element, an overhead): 2**32
# is seconds per event at GHz clocks; beyond it the searches' own int64 bounds wrap.
MAX_EVENT_CYCLES = 2**32
# An array's rows or columns: 256x the largest side a shipped or published array has
# (256). Beyond it one step's fill and drain alone pass 2**17 cycles, and a program's
# float counters can pass what doubles sum exactly, which sends them down the
# step-by-step sum (simulator.lowering.nest: a 7e7-wide array ran for minutes).
MAX_ARRAY_SIDE = 2**16
# Elements of any one operand tensor of one operator instance.
MAX_TENSOR_ELEMENTS = 2**48

# Memory a tile program costs per step while it is lowered and replayed. fast: the
# program's arrays (5 int64 + 2 bool = 42 bytes) and validation's temporaries (measured:
# 888 MiB peak RSS for 16,777,216 steps, interpreter included); simpy: its per-step
# Python objects too (measured with tracemalloc: 941 bytes per step of a 65,536-step
# program); the trace writer: four events of a few hundred bytes per step.
BYTES_PER_STEP = {"fast": 64, "simpy": 1024}
TRACE_BYTES_PER_STEP = 2400
# Per LRU key of the lowering (tiles of A and B; C tiles' last visit): int64 links.
BYTES_PER_KEY = 24
# A program longer than a block streams (simulator.program.streamed): per step of its block, the
# generated arrays, the window the fast engine joins and the checker's temporaries.
STREAM_BYTES_PER_STEP = 256
# The budget's share one block may take, and the fewest steps a block may have (below
# that the per-block costs of Python dominate; correct, only slow).
BLOCK_SHARE = 4
MIN_BLOCK_STEPS = 16

def ceil_div(a: int, b: int) -> int:
    """Ceiling division in Python integers (which cannot wrap)."""
    return -(-a // b)


def default_memory_budget() -> int:
    """A quarter of the machine's RAM, in bytes (8 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


class TileMemoryError(MemoryError):
    """Memory ran out while tile programs were generated or replayed: the one case a
    lower --max-memory would have refused up front (the CLI says so only then)."""


@contextmanager
def tile_programs():
    """Around lowering and replaying tile programs: a MemoryError there is a
    TileMemoryError, so the advice to lower --max-memory is given where it helps."""
    try:
        yield
    except TileMemoryError:
        raise
    except MemoryError as exc:
        raise TileMemoryError(*exc.args) from None


@dataclass(frozen=True)
class MemoryBudget:
    """How much memory the tile programs of a run may take, and what a step costs."""

    max_bytes: int
    bytes_per_step: int = BYTES_PER_STEP["fast"]
    option: str = "--max-memory"
    # Steps per block of a streamed program (None: nothing streams, programs are held
    # whole); a longer GEMM or vector program is generated and replayed block by block.
    block_steps: int | None = None

    @classmethod
    def default(cls, engine: str = "fast", *, trace: bool = False,
                max_bytes: int | None = None) -> MemoryBudget:
        """The budget of a run; the fast engine without a trace streams programs in
        blocks of a quarter of the budget (at most DEFAULT_BLOCK_STEPS steps)."""
        per_step = BYTES_PER_STEP.get(engine, max(BYTES_PER_STEP.values()))
        limit = default_memory_budget() if max_bytes is None else max_bytes
        block = None
        if engine == "fast" and not trace:
            block = min(DEFAULT_BLOCK_STEPS,
                        limit // (BLOCK_SHARE * STREAM_BYTES_PER_STEP))
            if block < MIN_BLOCK_STEPS:
                need = MIN_BLOCK_STEPS * BLOCK_SHARE * STREAM_BYTES_PER_STEP
                raise AccsimError(f"{_size(limit)} is too small for one block of "
                                  f"{MIN_BLOCK_STEPS:,} tile steps (a quarter of the "
                                  f"budget holds a block): give at least {_size(need)}",
                                  field="--max-memory")
        return cls(limit, per_step + (TRACE_BYTES_PER_STEP if trace else 0),
                   block_steps=block)

    def held_steps(self, steps: int) -> tuple[int, int]:
        """(steps held at once, bytes per held step) of a program of `steps` steps."""
        if self.block_steps is not None and steps > self.block_steps:
            return self.block_steps, STREAM_BYTES_PER_STEP
        return steps, self.bytes_per_step


def parse_size(text: str) -> int:
    """A byte count such as 512M, 8G, 1.5T or 1000000 (K, M, G, T: powers of 1024), its
    number in ASCII decimal (simulator.numbers: float() read `８G` and `1_000M`)."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    body = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = body[-1:] if body[-1:] in units else ""
    try:
        value = decimal_float(body[:len(body) - len(unit)])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value * units[unit] > 2**62:
        raise AccsimError(f"{text!r} is not a positive size (bytes, or with K, M, G or T)",
                          field="--max-memory")
    return max(1, int(value * units[unit]))


def _size(n: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n):,} bytes"


def _platform_ints(model: BaseModel, prefix: str = ""):
    """(dotted field, value) of every integer field of a model, nested models included."""
    for name, value in model.__dict__.items():  # its fields, in order (extra forbidden)
        if isinstance(value, BaseModel):
            yield from _platform_ints(value, f"{prefix}{name}.")
        elif isinstance(value, int) and not isinstance(value, bool):
            yield f"{prefix}{name}", value


def check_platform(platform, platform_source: str | None = None) -> None:
    """The platform's integers within what int64 arithmetic can hold, and its array no
    larger than MAX_ARRAY_SIDE a side: what every run refuses (check_inputs), so that
    `accsim check` refuses it too."""
    for field, value in _platform_ints(platform):
        cycles = field.endswith("_cycles") or field.startswith(
            "vector_unit.cycles_per_element.")
        limit, said = (MAX_EVENT_CYCLES, "2**32 cycles accsim accepts for one event") \
            if cycles else (MAX_PLATFORM_INT, "2**48 accsim accepts for a platform value")
        if value > limit:
            raise AccsimError(f"{value} is larger than the {said} (int64 cycles would "
                              "overflow)", file=platform_source, field=field)
    array = platform.systolic_array
    for side in ("rows", "cols"):
        if getattr(array, side) > MAX_ARRAY_SIDE:
            raise AccsimError(f"{getattr(array, side)} is larger than the "
                              f"{MAX_ARRAY_SIDE:,} accsim accepts for an array's side "
                              "(256x the largest array built)", file=platform_source,
                              field=f"systolic_array.{side}")


def check_inputs(workload, platform, *, workload_source: str | None = None,
                 platform_source: str | None = None) -> None:
    """Platform integers and operand sizes within what int64 arithmetic can hold, and
    every array operator's dtype one the array takes (the searches look its energy up
    before any lowering would say so)."""
    check_platform(platform, platform_source)
    array = platform.systolic_array
    bytes_per_cycle = platform.bytes_per_cycle
    total = 0.0
    for op in workload.operators:
        if is_collective(op):  # priced in closed form (simulator.collectives.cost)
            _check_collective(op, platform, platform_source)
            continue
        on_array = is_compute(op) or is_attention(op)
        dtype = op.dtype or array.input_dtypes[0]
        if dtype not in DTYPE_BYTES and not is_compute(op):
            raise AccsimError(f"dtype {dtype} is a packed format; packed activations are "
                              f"modelled for gemm and conv2d only, a {op.kind} takes "
                              "whole-byte formats", file=workload_source,
                              field=f"operators.{op.name}.dtype")
        if on_array and dtype not in array.input_dtypes:
            packed = "" if dtype in DTYPE_BYTES else " (a packed format)"
            raise AccsimError(f"dtype {dtype}{packed} is not an input dtype of "
                              f"{platform.name} "
                              f"({', '.join(array.input_dtypes)})", file=workload_source,
                              field=f"operators.{op.name}.dtype")
        if is_compute(op):
            g = op.gemm()
            tensors = {"A (m x k)": g.m * g.k, "B (k x n)": g.k * g.n,
                       "C (m x n)": g.m * g.n}
            if isinstance(op, Conv2d):
                tensors["input"] = op.batch * op.h * op.w * op.cin
                tensors["kernel window pairs"] = (op.kh * op.kw) ** 2
        elif is_attention(op):
            tensors = {"Q": op.batch * op.heads * op.q_len * op.head_dim,
                       "K and V": 2 * op.batch * op.kv_heads * op.kv_len * op.head_dim,
                       "scores": op.batch * op.heads * op.q_len * op.kv_len}
        else:
            shape = op.vector()
            tensors = {"input": shape.input_elements, "output": shape.output_elements,
                       "rows x cols": shape.rows * shape.cols}
        for tensor, elements in tensors.items():
            if elements > MAX_TENSOR_ELEMENTS:
                raise AccsimError(f"{tensor} has {elements:,} elements, more than the "
                                  f"2**48 accsim accepts for one operand",
                                  file=workload_source, field=f"operators.{op.name}")
        # Whatever the tiling, an array operator's weights (B) cross the memory once per
        # run: a bandwidth so small that this alone passes int64 is refused before any
        # search. (A vector operator may move nothing, its tensors on chip.)
        runs = op.repeat * _instances(op)
        least = tensors["B (k x n)"] if is_compute(op) else 0
        total += least / bytes_per_cycle * runs if bytes_per_cycle > 0 else math.inf
        if not total < INT64_BOUND:
            raise AccsimError(f"moving operator {op.name}'s operands at "
                              f"{bytes_per_cycle:.3g} bytes per cycle (offchip."
                              "bandwidth_gbps / clock_ghz) takes past int64 cycles",
                              file=platform_source, field="offchip.bandwidth_gbps")
    try:  # a call's host transfers, priced apart from the operators (invocation.py)
        invocation_cycles(workload, platform)
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=platform_source, field=exc.field) from None


def _check_collective(op, platform, platform_source: str | None) -> None:
    """A collective's link cycles, over its repeats, within int64 (a tiny link
    bandwidth or a huge payload). Without an interconnect the lowering refuses it."""
    if platform.interconnect is None:
        return
    try:  # a group the wiring cannot hold: named with the platform and the operator
        cycles = collective_cost(op.collective, op.payload_bytes, op.chips,
                                 platform).cycles
    except AccsimError as exc:
        raise AccsimError(f"{exc.rule} (collective {op.name})",
                          file=exc.file or platform_source, field=exc.field) from None
    if cycles * op.repeat >= INT64_BOUND:
        raise AccsimError(f"collective {op.name} would take {cycles:.3g} cycles x "
                          f"{op.repeat:,} repeats on the links, past int64 (2**62 "
                          "allowed)", file=platform_source,
                          field="interconnect.link_bandwidth_gbps")


def _instances(op) -> int:
    """Independent program runs of one operator instance (GEMM batch, conv groups,
    attention's batch x K/V head groups)."""
    if is_compute(op):
        return op.gemm().instances
    return op.batch * op.kv_heads if is_attention(op) else 1


def _program_steps(op, tiling, steps: int) -> int:
    """Steps one program holds: an attention program chains `groups` K/V head groups
    (footprint.program_groups: at most PROGRAM_STEPS unless one group has more)."""
    if not is_attention(op):
        return steps
    return steps * tiling.groups if tiling.groups else max(PROGRAM_STEPS, steps)


def _vector_bound(elements: int, lanes: int, cycles_per_element: int, passes: int) -> int:
    """timing.vector_cycles in Python integers (which cannot wrap)."""
    return ceil_div(elements, lanes) * cycles_per_element * passes


@dataclass(frozen=True)
class _Estimate:
    """Exact upper bounds for one lowered operator instance."""

    steps: int
    keys: int              # LRU keys and table entries the lowering allocates
    scratch_bytes: int     # other working memory of the lowering (conv windows)
    terms: dict[str, int]  # per-instance cycle bound, by what contributes it
    moved_bytes: int       # per-instance bound of the bytes its transfers move


def _estimate(op, tiling, platform, fused) -> _Estimate:
    array, vector = platform.systolic_array, platform.vector_unit
    memory = platform.offchip
    bytes_per_cycle = platform.bytes_per_cycle
    access = memory.latency_cycles + platform.dma.setup_cycles
    costs = vector.cycles_per_element
    e, acc, out = operand_bytes(op, platform)
    if is_compute(op):
        g = op.gemm()
        tm, tn, tk = min(tiling.tm, g.m), min(tiling.tn, g.n), min(tiling.tk, g.k)
        nm, nn, nk = ceil_div(g.m, tm), ceil_div(g.n, tn), ceil_div(g.k, tk)
        steps = nm * nn * nk
        keys = 2 * nm * nk + nk * nn + nm * nn
        scratch = 0
        if isinstance(op, Conv2d):
            scratch = op.h * op.w * 9 + (op.kh * op.kw) ** 2 * 16
        # Every fold of the largest tile pays its streamed length and more than any fold
        # model's fill, stationary load and skew (on one array: more arrays are faster).
        sizes = oriented((tm, tn, tk), tiling.orientation)   # the nest's (loop_nest)
        sr, sc, t = (sizes[dim] for dim in fold_dims(DATAFLOW_CODES[tiling.dataflow]))
        compute = ceil_div(sr, array.rows) * ceil_div(sc, array.cols) \
            * (t + 3 * array.rows + 2 * array.cols)
        epilogue = 0
        for member in fused or ():  # a prologue norm works on each A tile it loads
            shape = member.op.vector()
            elements = tm * tk if member.prologue else tm * tn
            epilogue += _vector_bound(elements, vector.lanes,
                                      getattr(costs, shape.cost_kind), shape.passes)
        # A transposed run's passes: its stationary tiles as they load, its C tiles
        # as they are stored (mapping.footprint.transpose_work).
        a_work, b_work, store_work = transpose_work(platform, tiling.orientation,
                                                    tiling.dataflow)
        epilogue += _vector_bound(tm * tk, vector.lanes, a_work + b_work, 1) \
            + _vector_bound(tk * tn, vector.lanes, a_work + b_work, 1) \
            + _vector_bound(tm * tn, vector.lanes, store_work, 1)
        load = a_tile_bytes(op, platform, tm, tk, "bound") \
            + b_tile_bytes(op, platform, tk, tn) + c_tile_bytes(op, platform, tm, tn) \
            + epilogue_tile_bytes(op, tuple(fused or ()), platform, tm, tn)
        store = tm * tn * max(acc, out, *(operand_bytes(m.op, platform)[0]
                                          for m in fused or ()))
    elif is_attention(op):
        # Per (query tile, key tile): QK^T and PV on the array, the softmax on the
        # vector unit; unfused runs them as separate steps (at most three per pair).
        rows, d = attention_rows(op), op.head_dim
        tm, tn = min(tiling.tm, rows), min(tiling.tn, op.kv_len)
        pairs = ceil_div(rows, tm) * ceil_div(op.kv_len, tn)
        steps = 3 * pairs
        keys = scratch = 0
        per_product = max(ceil_div(d, array.rows) * ceil_div(tn, array.cols),
                          ceil_div(tn, array.rows) * ceil_div(d, array.cols),
                          ceil_div(tm, array.rows) * ceil_div(tn, array.cols),
                          ceil_div(tm, array.rows) * ceil_div(d, array.cols)) \
            * (max(tm, d, tn) + 3 * array.rows + 2 * array.cols)
        # either orientation on the array, or (decode) the vector unit's MACs
        compute = 2 * max(per_product, _vector_bound(tm * tn * d, vector.lanes,
                                                     costs.mul, 1))
        epilogue = _vector_bound(tm * (tn + d), vector.lanes, costs.softmax, 4)
        load = (tm * d + 2 * tn * d) * e + tm * tn * acc
        store = tm * max(tn, d) * max(acc, out)
    else:
        shape = op.vector()
        rows = min(tiling.tm, shape.rows)
        steps = ceil_div(shape.rows, rows)
        keys = scratch = 0
        compute = _vector_bound(rows * shape.cols, vector.lanes,
                                getattr(costs, shape.cost_kind), shape.passes)
        epilogue = 0
        load = (ceil_div(shape.input_elements * rows, shape.rows) + 1) * e
        store = (ceil_div(shape.output_elements * rows, shape.rows) + 1) * e
    per_transfer = (load + store) / bytes_per_cycle if bytes_per_cycle > 0 else math.inf
    service = math.ceil(per_transfer) + 2 if per_transfer < INT64_BOUND else INT64_BOUND
    terms = {"array or vector unit (systolic_array, vector_unit, workload sizes)":
             steps * (compute + epilogue),
             "off-chip service (offchip.bandwidth_gbps / clock_ghz)": steps * service,
             "latency (offchip.latency_cycles + dma.setup_cycles)": steps * (2 * access + 2),
             "dispatch (runtime.op_overhead_cycles)": platform.runtime.op_overhead_cycles}
    return _Estimate(steps, keys, scratch, terms, steps * (load + store))


def _fitting_tiling(op, tiling, budget: MemoryBudget) -> str:
    """A tiling of the operator whose program fits the budget: tiles doubled, the dim
    with the most tiles first, until the steps fit (buffers are checked afterwards)."""
    if is_attention(op):
        sizes = {"tm": attention_rows(op), "tn": op.kv_len}
        tiles = {"tm": tiling.tm, "tn": tiling.tn}
        while 3 * ceil_div(sizes["tm"], tiles["tm"]) * ceil_div(sizes["tn"], tiles["tn"]) \
                * budget.bytes_per_step > budget.max_bytes // 2:
            grow = max(tiles, key=lambda d: ceil_div(sizes[d], tiles[d]))
            if tiles[grow] >= sizes[grow]:
                break
            tiles[grow] = min(sizes[grow], 2 * tiles[grow])
        return " ".join(f"{d} {v}" for d, v in tiles.items())
    if not is_compute(op):
        rows = op.vector().rows
        most = max(1, budget.max_bytes // (2 * budget.bytes_per_step))
        return f"rows_per_tile {ceil_div(rows, most)} or more"
    g = op.gemm()
    sizes = {"tm": g.m, "tn": g.n, "tk": g.k}
    tiles = {"tm": tiling.tm, "tn": tiling.tn, "tk": tiling.tk}

    def need() -> int:
        nm, nn, nk = (ceil_div(sizes[d], tiles[d]) for d in ("tm", "tn", "tk"))
        return nm * nn * nk * budget.bytes_per_step + (2 * nm * nk + nk * nn + nm * nn) \
            * BYTES_PER_KEY
    while need() > budget.max_bytes // 2:
        grow = max(tiles, key=lambda d: ceil_div(sizes[d], tiles[d]))
        if tiles[grow] >= sizes[grow]:
            break
        tiles[grow] = min(sizes[grow], 2 * tiles[grow])
    return " ".join(f"{d} {v}" for d, v in tiles.items())


def check_tilings(resolved, platform, budget: MemoryBudget | None, *,
                  mapping_source: str | None = None,
                  platform_source: str | None = None) -> None:
    """Refuse, before anything is lowered, a run whose cycle or byte counts could pass
    int64 or whose programs would exceed the memory budget.

    `resolved`: (operator, tiling, fused epilogue members) triples
    (simulator.search.resolve); collectives, which take no tiling, were bounded by
    check_inputs.
    """
    total_cycles = 0
    total_memory = 0
    for op, tiling, fused in resolved:
        if tiling is None:
            continue
        estimate = _estimate(op, tiling, platform, fused)
        per_run = sum(estimate.terms.values())
        runs = op.repeat * _instances(op)
        if per_run * runs >= INT64_BOUND:
            term = max(estimate.terms, key=estimate.terms.get)
            raise AccsimError(
                f"cycles could reach {per_run:.3g} per run x {runs:,} runs, past int64 "
                f"(2**62 allowed); most of it from {term}", file=platform_source,
                field=f"operators.{op.name}")
        if estimate.moved_bytes * runs >= INT64_BOUND:
            raise AccsimError(f"its transfers could move {estimate.moved_bytes:.3g} bytes "
                              f"per run x {runs:,} runs, past int64 (2**62 allowed)",
                              file=mapping_source, field=f"operators.{op.name}")
        total_cycles += per_run * runs
        if total_cycles >= INT64_BOUND:
            raise AccsimError(f"the workload's cycles could reach {total_cycles:.3g}, "
                              "past int64 (2**62 allowed)", file=platform_source,
                              field=f"operators.{op.name}")
        if budget is None:
            continue
        held, per_step = (_program_steps(op, tiling, estimate.steps),
                          budget.bytes_per_step) if is_attention(op) \
            else budget.held_steps(estimate.steps)  # gemm, conv and vector programs stream
        memory = (held * per_step
                  + estimate.keys * BYTES_PER_KEY + estimate.scratch_bytes)
        total_memory += memory
        if memory > budget.max_bytes or total_memory > budget.max_bytes:
            described = (f"tm {tiling.tm} tn {tiling.tn}" if is_attention(op) else
                         f"tm {tiling.tm} tn {tiling.tn} tk {tiling.tk}" if is_compute(op)
                         else f"{tiling.tm} rows per tile")
            so_far = f" (the run so far {_size(total_memory)})" \
                if total_memory > memory else ""
            raise AccsimError(
                f"its tile program under {described} has {estimate.steps:,} steps and "
                f"needs {_size(memory)}{so_far}, over the memory budget of {_size(budget.max_bytes)} ({budget.option} to change "
                f"it); a tiling within it: {_fitting_tiling(op, tiling, budget)}",
                file=mapping_source, field=f"operators.{op.name}")
