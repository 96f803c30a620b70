"""Searching for the best tiling of each operator (DESIGN.md section 2, Mapping; the
mapping issue). Checking a given plan is `simulator.plan_check`.

Mapper (`map_workload`): per operator, candidate tilings from the array multiples and
divisors of its dims (`mapping.dim_candidates`), every loop order, every dataflow the
platform supports and depth 1 to 4 (vector operators: rows per tile in steps of an
eighth of a lane pass, and the divisors of its rows, at each depth), plus the
heuristics' own tilings, which are simulated first. It drops what cannot fit, then
walks the rest in order of a lower bound on the objective and stops once the bound
exceeds the best found. The cycle bound is the largest of: the first load's service and
latency + the exact busy cycles (`mapping.array_busy_cycles`; the vector unit's for
vector operators) + the last epilogue and the last store's service and latency; the
compulsory off-chip bytes over the bandwidth; for vector operators, every transfer's
service one after another. The energy bound counts the MACs, vector work, compulsory
off-chip bytes and SRAM traffic no tiling avoids (SRAM reads exactly) plus static power
over the cycle bound. Candidates whose loop orders differ only in dims of one tile give
the same program and are simulated once. The rest are lowered and replayed with the
fast engine (`_evaluate`: lower_compute or lower_vector, run_fast, operator_totals).

Ties on the objective go to fewer cycles, then less energy, then the canonical tiling
order (`Tiling.sort_key`); a candidate whose bound merely equals the best is pruned only
when its bounds lose that tie-break. Each operator is searched by one process in a fixed
order and the results are merged in workload order, so the result, and every count
reported, does not depend on the number of worker processes; tests check the pruned
search against an exhaustive one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, astuple, dataclass, replace

import numpy as np
from rich.table import Table

import simulator
from simulator.config import Platform
from simulator.energy import static_power_w
from simulator.engines.fast import run_fast
from simulator.errors import AccsimError
from simulator.limits import check_candidates, check_inputs
from simulator.lowering import lower_attention, lower_compute, lower_vector
from simulator.lowering.windows import window_elements, window_maxima
from simulator.mapping import (ATTENTION_FUSIONS, EFFECTIVE_ORDER, LOOP_ORDERS, Mapping,
                               Tiling, TilingSpec, attention_base, attention_rows,
                               a_tile_bound, array_busy_cycles, check_mapping_names,
                               coarse_candidates, dim_candidates, divisors, heuristic,
                               loop_tables_index,
                               merged_spec, operand_bytes, operator_dtype, resolve_tiling,
                               weight_element_bytes)
from simulator.metrics import operator_totals
from simulator.program import MAX_DEPTH
from simulator.simulate import Inputs, memory_params
from simulator.timing import ceil_div
from simulator.workload import Conv2d, is_attention, is_collective, is_compute

OBJECTIVES = ("cycles", "energy", "edp")
BUILTIN_HEURISTICS = ("array_aligned", "min_offchip", "os_k_inner")
MAPPER = "mapper"  # the heuristic field of the mapper's own tilings


# ---------------------------------------------------------------------- search

@dataclass(frozen=True)
class Evaluation:
    """A simulated tiling of one operator: totals over all its runs."""

    tiling: Tiling
    cycles: int
    energy_pj: float

    def objective(self, name: str) -> float:
        """cycles, energy (pJ) or edp (pJ x cycles), over all runs."""
        if name == "cycles":
            return float(self.cycles)
        if name == "energy":
            return self.energy_pj
        return self.energy_pj * self.cycles

    def key(self, objective: str) -> tuple:
        """Smaller is better: the objective, then cycles, energy, canonical order."""
        return (self.objective(objective), self.cycles, self.energy_pj,
                self.tiling.sort_key())

    def as_dict(self) -> dict:
        return {"tiling": asdict(self.tiling), "cycles": self.cycles,
                "energy_pj": self.energy_pj}

    @classmethod
    def from_dict(cls, data: dict) -> Evaluation:
        return cls(Tiling(**data["tiling"]), int(data["cycles"]), float(data["energy_pj"]))


@dataclass(frozen=True)
class SearchStats:
    """What happened to the candidates of one operator."""

    candidates: int = 0     # enumerated: the grid plus the heuristics' tilings
    unfit: int = 0          # a buffer cannot hold `depth` tiles
    duplicates: int = 0     # same program as a candidate earlier in canonical order
    bound_pruned: int = 0   # lower bound above the best found
    simulated: int = 0      # lowered and replayed (heuristics' tilings included)
    invalid: int = 0        # rejected by the lowering for another reason

    def __add__(self, other: SearchStats) -> SearchStats:
        return SearchStats(*(a + b for a, b in zip(astuple(self), astuple(other))))


@dataclass(frozen=True)
class OperatorSearch:
    """The best tiling of one operator and how each heuristic's tiling compares."""

    name: str
    layer_type: str
    kind: str
    runs: int
    best: Evaluation | None
    heuristics: dict[str, Evaluation | str]     # str: why the heuristic's tiling failed
    stats: SearchStats
    same_as: str | None = None     # searched once for an earlier operator of this shape

    @property
    def vector(self) -> bool:
        return self.kind not in ("gemm", "conv2d", "attention")

    def gap(self, heuristic: str, objective: str) -> float | None:
        """Percent by which the heuristic's objective exceeds the best; None if its
        tiling failed."""
        found = self.heuristics.get(heuristic)
        if not isinstance(found, Evaluation) or self.best is None:
            return None
        best = self.best.objective(objective)
        return 100.0 * (found.objective(objective) / best - 1.0) if best else 0.0


@dataclass(frozen=True)
class _Task:
    """One operator's search, as sent to a worker process."""

    op: object
    following: object
    spec: TilingSpec
    platform: Platform
    heuristics: tuple[str, ...]
    objective: str
    exhaustive: bool
    # The default mapping's search: a coarser grid (mapping.coarse_candidates) whose
    # candidates keep the fields the plan fixes, and, beyond the heuristics' tilings,
    # at most max_simulated candidates and max_steps tile steps replayed (None: no
    # limit).
    constrained: bool = False
    max_simulated: int | None = None
    max_steps: int = 0


def _evaluate(op, tiling: Tiling, platform: Platform, memory, following) -> Evaluation:
    """Lower, replay with the fast engine, and total one tiling of an operator."""
    if is_compute(op):
        lowered = lower_compute(op, tiling, platform, following=following)
    elif is_attention(op):
        lowered = lower_attention(op, tiling, platform)
    else:
        lowered = lower_vector(op, tiling, platform)
    run = run_fast(lowered.program, memory).breakdown
    totals = operator_totals(lowered, run, platform)
    return Evaluation(tiling, int(totals.cycles), float(totals.energy_pj))


def _onchip(op, platform: Platform) -> bool:
    """Whether A and C live in the on-chip activation memory (as lowering decides)."""
    capacity = platform.activation_memory_bytes
    if capacity is None:
        return False
    e, _, out = operand_bytes(op, platform)
    if not is_compute(op):
        shape = op.vector()
        return (shape.input_elements + shape.output_elements) * e <= capacity
    g = op.gemm()
    if isinstance(op, Conv2d):
        input_bytes = op.batch * op.h * op.w * op.cin * e
    else:
        input_bytes = g.m * g.k * e * g.instances
    return input_bytes + g.m * g.n * out * g.instances <= capacity


def _runs(op) -> int:
    if is_attention(op):
        return op.batch * op.kv_heads * op.repeat
    return (op.gemm().instances if is_compute(op) else 1) * op.repeat


def _attention_candidates(op, base: Tiling, spec: TilingSpec,
                          platform: Platform) -> list[Tiling]:
    """An attention operator's candidates: its tiling's query and key tiles halved,
    kept and doubled (within the operator), every dataflow, both lowerings (or the
    plan's), at the plan's depth."""
    rows = attention_rows(op)
    sizes_m = sorted({min(rows, max(1, base.tm * f // 2)) for f in (1, 2, 4)})
    sizes_n = sorted({min(op.kv_len, max(1, base.tn * f // 2)) for f in (1, 2, 4)})
    flows = [spec.dataflow] if spec.dataflow else list(platform.systolic_array.dataflows)
    fusions = [spec.fuse] if spec.fuse else list(ATTENTION_FUSIONS)
    return [replace(base, tm=spec.tm or tm, tn=spec.tn or tn, dataflow=flow, fuse=fuse,
                    heuristic=MAPPER)
            for tm in sizes_m for tn in sizes_n for flow in flows for fuse in fusions]


def _search_attention(task: _Task) -> OperatorSearch:
    """Attention's search: every candidate simulated (a few dozen programs of few
    steps); the heuristics all give attention's one tiling rule, both lowerings
    considered by the default's estimate."""
    op, platform, objective = task.op, task.platform, task.objective
    memory = memory_params(platform)
    heuristics: dict[str, Evaluation | str] = {}
    best: Evaluation | None = None
    simulated = invalid = 0
    for name in task.heuristics:
        try:
            tiling = resolve_tiling(op, task.spec.model_copy(update={"heuristic": name}),
                                    platform)
            lowered = lower_attention(op, tiling, platform)
            found = _evaluate(op, lowered.tiling, platform, memory, None)
        except AccsimError as exc:
            heuristics[name] = exc.rule
            continue
        heuristics[name] = found
        simulated += 1
    base = attention_base(op, task.spec, platform, MAPPER)
    candidates = _attention_candidates(op, base, task.spec, platform)
    for tiling in candidates:
        try:
            found = _evaluate(op, tiling, platform, memory, None)
        except AccsimError:
            invalid += 1
            continue
        simulated += 1
        if best is None or found.key(objective) < best.key(objective):
            best = found
    stats = SearchStats(len(candidates) + len(task.heuristics), 0, 0, 0, simulated,
                        invalid)
    return OperatorSearch(op.name, op.layer_type, op.kind, _runs(op), best, heuristics,
                          stats)


@dataclass
class _Candidates:
    """Candidate tilings as parallel arrays with their lower bounds (totals over all
    runs). Before `expand`, one entry per (tiles, loop order, dataflow) with the deepest
    depth that fits; after, one entry per depth 1..that."""

    tm: np.ndarray
    tn: np.ndarray
    tk: np.ndarray
    order: np.ndarray       # index into LOOP_ORDERS
    dataflow: np.ndarray    # index into the dataflows searched
    max_depth: np.ndarray   # 0: not even depth 1 fits
    cycles_lb: np.ndarray
    energy_lb: np.ndarray
    effective: np.ndarray   # EFFECTIVE_ORDER code: equal codes, equal step sequences
    depth: np.ndarray | None = None

    def select(self, mask: np.ndarray) -> _Candidates:
        return _Candidates(*(None if getattr(self, f) is None else getattr(self, f)[mask]
                             for f in self.__dataclass_fields__))

    def expand(self) -> _Candidates:
        """One entry per fitting depth."""
        repeat = self.max_depth
        fields = {f: np.repeat(getattr(self, f), repeat)
                  for f in self.__dataclass_fields__ if f != "depth"}
        starts = np.cumsum(repeat) - repeat
        depth = np.arange(int(repeat.sum()), dtype=np.int64) - np.repeat(starts, repeat) + 1
        return _Candidates(**fields, depth=depth)

    def __len__(self) -> int:
        return int(self.tm.shape[0])


def _service(nbytes, bytes_per_cycle: float) -> np.ndarray:
    """Server cycles of transfers of nbytes (0 for none), the engines' float64 ceil."""
    nbytes = np.asarray(nbytes)
    return np.where(nbytes > 0, np.ceil(nbytes / bytes_per_cycle), 0).astype(np.int64)


def _fold_sum(size: int, tile: np.ndarray, unit: int) -> np.ndarray:
    """Sum over the tiles of one dim of ceil(tile size / unit)."""
    full, rem = size // tile, size % tile
    return full * -(-tile // unit) + (rem > 0) * -(-rem // unit)


def _static_pj_per_cycle(platform: Platform) -> float:
    return static_power_w(platform) / (platform.clock_ghz * 1e9) * 1e12


def _compute_grid(op, fuse: str | None, following, platform: Platform,
                  coarse: bool = False) -> _Candidates:
    """Every tile size (`dim_candidates`, or `coarse_candidates`), loop order and
    dataflow of an array operator with the deepest depth that fits and its lower bounds.
    Quantities are built on axes (m tile, n tile, k tile, loop order, dataflow) and
    broadcast, so each is computed on its own axes."""
    array = platform.systolic_array
    g = op.gemm()
    e, acc, out = operand_bytes(op, platform)
    wb = weight_element_bytes(op, platform)  # B follows the weight dtype
    units = (array.rows, array.cols)
    dataflows = array.dataflows
    sizes = coarse_candidates if coarse else dim_candidates
    vm, vn, vk = (np.asarray(sizes(size, units), dtype=np.int64)
                  for size in (g.m, g.n, g.k))
    check_candidates(len(vm) * len(vn) * len(vk) * len(LOOP_ORDERS) * len(dataflows), op,
                     "the mapper")
    # Axes: 0 m tile, 1 n tile, 2 k tile, 3 loop order, 4 dataflow.
    tm, tn, tk = vm[:, None, None], vn[None, :, None], vk[None, None, :]
    order = np.arange(len(LOOP_ORDERS))[None, None, None, :]
    cm, cn, ck = -(-g.m // tm), -(-g.n // tn), -(-g.k // tk)
    onchip = _onchip(op, platform)
    buffers = platform.buffers
    # Fit: the deepest depth at which every operand's depth tiles fit.
    # A's largest tile: its im2col size for a GEMM. For a conv, its window lies between
    # one middle tile's window (a_low; counted only where the bound a_bytes leaves the
    # depth open) and a_bytes (mapping.a_tile_bound); the exact largest window is
    # counted only where those two disagree on the depth that fits.
    a_bytes = np.broadcast_to(a_tile_bound(op, tm, tk) * e, (len(vm), 1, len(vk))).copy()
    a_low = np.zeros_like(a_bytes) if isinstance(op, Conv2d) else a_bytes.copy()
    a_compulsory = (window_elements(op, 0, g.m, 0, g.k) if isinstance(op, Conv2d)
                    else g.m * g.k) * e
    if isinstance(op, Conv2d):
        unsure = buffers.ifmap_bytes // a_bytes < MAX_DEPTH
        for i, _, j in zip(*np.nonzero(unsure)):
            rows, cols = int(vm[i]), int(vk[j])
            m0 = (ceil_div(g.m, rows) // 2) * rows
            a_low[i, 0, j] = window_elements(op, m0, min(g.m, m0 + rows), 0, cols) * e
        undecided = unsure & (np.minimum(buffers.ifmap_bytes // a_bytes, MAX_DEPTH)
                              != np.minimum(buffers.ifmap_bytes // np.maximum(a_low, 1),
                                            MAX_DEPTH))
        for i in np.flatnonzero(undecided.any(axis=(1, 2))):
            js = np.flatnonzero(undecided[i, 0])
            a_bytes[i, 0, js] = a_low[i, 0, js] = window_maxima(op, int(vm[i]), vk[js]) * e
    max_depth = np.minimum(np.minimum(buffers.ifmap_bytes // a_bytes, MAX_DEPTH),
                           np.minimum(buffers.weight_bytes // (tk * tn * wb),
                                      buffers.output_bytes // (tm * tn * acc)))
    # Off-chip bytes, per loop order (axis 3): exact for a GEMM (the LRU reuse that
    # mapping.offchip_estimate models), a lower bound for a conv, whose A tiles are
    # counted as its compulsory window and whose A slots as at most those of the mean
    # window (so reuse is never underestimated).
    counts = {"m": cm[..., None], "n": cn[..., None], "k": ck[..., None]}

    def inside(reuse: str, own: str) -> np.ndarray:
        """Product of the tile counts of the dims `own` inside the loop of `reuse`."""
        product = np.ones((1, 1, 1, len(LOOP_ORDERS)), dtype=np.int64)
        for dim in own:
            flag = np.array([dim in name[name.index(reuse) + 1:] for name in LOOP_ORDERS])
            product = product * np.where(flag, counts[dim], 1)
        return product

    def fetches(reuse: str, own: str, slots: np.ndarray) -> np.ndarray:
        """Times each tile of an operand moves: once if its reuse dim has one tile or
        its own tiles inside the reuse loop fit its slots (LRU), else once per tile of
        the reuse dim."""
        return np.where((counts[reuse] == 1) | (inside(reuse, own) <= slots[..., None]), 1,
                        counts[reuse])

    a_mean = np.maximum(a_low, -(-a_compulsory // (cm * ck * e)) * e)
    a_moves = (a_compulsory if isinstance(op, Conv2d) else g.m * g.k * e) * \
        fetches("n", "mk", buffers.ifmap_bytes // a_mean)
    b_moves = g.k * g.n * wb * fetches("m", "kn", buffers.weight_bytes // (tk * tn * wb))
    spill = (buffers.output_bytes // (tm * tn * acc))[..., None] < inside("k", "mn")
    c_moves = g.m * g.n * out + spill * 2 * g.m * g.n * acc * (counts["k"] - 1)
    offchip = b_moves + (0 if onchip else a_moves + c_moves)
    # Cycles: the first load, exact busy array cycles, the last epilogue and store; or
    # the off-chip server busy with every byte (a cycle spared for float rounding),
    # then the last store's latency.
    memory = memory_params(platform)
    bpc, access = memory.bytes_per_cycle, memory.access_cycles
    a0 = 0 if onchip or isinstance(op, Conv2d) else tm * tk * e  # conv: 0, a bound
    head = 1 + _service(a0 + tk * tn * wb, bpc) + access
    ms_last, ns_last = g.m - (cm - 1) * tm, g.n - (cn - 1) * tn
    epilogue, passes = 0, 0
    if fuse is not None and following is not None and not is_compute(following):
        shape = following.vector()
        cpe = getattr(platform.vector_unit.cycles_per_element, shape.cost_kind)
        passes = shape.passes
        epilogue = -(-(ms_last * ns_last) // platform.vector_unit.lanes) * cpe * passes
    tail = 0 if onchip else 1 + _service(ms_last * ns_last * out, bpc) + access
    busy = np.stack([array_busy_cycles(g.m, g.n, g.k, tm[..., None], tn[..., None],
                                       tk[..., None], order, name, array.rows, array.cols,
                                       array.count, array.fold_model)
                     for name in dataflows], axis=-1)
    served = np.floor(offchip / bpc).astype(np.int64) + (0 if onchip else access)
    per_run = np.maximum((head + epilogue + tail)[..., None, None] + busy,
                         served[..., None]) + platform.runtime.op_overhead_cycles
    runs = _runs(op)
    # Energy: MACs, fused vector work, the off-chip bytes above, SRAM reads (exact,
    # SCALE-Sim's per-fold counting in closed form), SRAM writes of those A and B
    # fetches and of the C partial sums, and static power over the cycle bound.
    reads = []
    for name in dataflows:
        if name == "os":
            a_reads, b_reads = g.m * g.k * _fold_sum(g.n, tn, array.cols), \
                g.k * g.n * _fold_sum(g.m, tm, array.rows)
        elif name == "ws":
            a_reads, b_reads = g.m * g.k * _fold_sum(g.n, tn, array.cols), g.k * g.n * cm
        else:
            a_reads, b_reads = g.m * g.k * cn, g.k * g.n * _fold_sum(g.m, tm, array.cols)
        reads.append(np.broadcast_to(a_reads * e + b_reads * wb, max_depth.shape))
    c_traffic = g.m * g.n * acc * ck
    table = platform.energy
    dynamic = (np.stack(reads, axis=-1)[:, :, :, None, :] * table.sram_read_pj_per_byte
               + ((a_moves + b_moves) * table.sram_write_pj_per_byte
                  + offchip * table.offchip_pj_per_byte
                  + (c_traffic * (table.sram_read_pj_per_byte
                                  + table.sram_write_pj_per_byte))[..., None])[..., None]
               + g.m * g.n * g.k * table.mac_pj[operator_dtype(op, platform)]
               + g.m * g.n * passes * table.vector_op_pj)
    # A hair under, so float rounding in another summation order cannot lift the bound
    # above a candidate's true energy.
    energy = (dynamic + _static_pj_per_cycle(platform) * per_run) * runs * (1 - 1e-9)
    effective = EFFECTIVE_ORDER[loop_tables_index(g.m, g.n, g.k, tm[..., None],
                                                  tn[..., None], tk[..., None], order)]
    shape = (len(vm), len(vn), len(vk), len(LOOP_ORDERS), len(dataflows))

    def flat(values) -> np.ndarray:
        values = np.asarray(values)
        return np.broadcast_to(values.reshape(values.shape + (1,) * (5 - values.ndim)),
                               shape).ravel()

    return _Candidates(flat(tm), flat(tn), flat(tk), flat(order),
                       np.broadcast_to(np.arange(len(dataflows)), shape).ravel(),
                       flat(max_depth), per_run.ravel() * runs, energy.ravel(),
                       flat(effective))


# Rows-per-tile candidates of a vector operator step by an eighth of a lane pass, and
# there are at most this many steps (coarser steps beyond).
VECTOR_STEPS_PER_PASS = 8
MAX_VECTOR_SIZES = 4096


def _vector_sizes(op, platform: Platform) -> list[int]:
    """Rows per tile worth trying: the divisors of the rows and the multiples of a step
    of rows (an eighth of what one pass of the lanes covers, coarser where that would
    give more than MAX_VECTOR_SIZES sizes), ascending."""
    shape = op.vector()
    lanes = platform.vector_unit.lanes
    step = max(1, ceil_div(lanes, VECTOR_STEPS_PER_PASS * shape.cols),
               ceil_div(shape.rows, MAX_VECTOR_SIZES))
    rows = set(divisors(shape.rows))
    rows.update(range(step, shape.rows, step))
    rows.add(shape.rows)
    return sorted(rows)


def _vector_grid(op, platform: Platform) -> _Candidates:
    """Rows per tile (`_vector_sizes`) of a vector operator with the deepest depth that
    fits and its lower bounds (its dynamic energy is fixed)."""
    shape = op.vector()
    e = operand_bytes(op, platform)[0]
    buffers = platform.buffers
    memory = memory_params(platform)
    bpc, access = memory.bytes_per_cycle, memory.access_cycles
    onchip = _onchip(op, platform)
    cpe = getattr(platform.vector_unit.cycles_per_element, shape.cost_kind)
    lanes = platform.vector_unit.lanes
    total_in, total_out = shape.input_elements * e, shape.output_elements * e
    table = platform.energy
    dynamic = (shape.rows * shape.cols * shape.passes * table.vector_op_pj
               + (total_in + total_out) * (table.sram_read_pj_per_byte
                                           + table.sram_write_pj_per_byte)
               + (0 if onchip else (total_in + total_out) * table.offchip_pj_per_byte))
    sizes = np.asarray(_vector_sizes(op, platform), dtype=np.int64)
    full, rem = shape.rows // sizes, shape.rows % sizes
    if shape.input_elements % shape.rows == 0 and shape.output_elements % shape.rows == 0:
        # Every row holds the same elements: full tiles and one edge tile.
        per_in, per_out = shape.input_elements // shape.rows * e, \
            shape.output_elements // shape.rows * e
        in_max, out_max = per_in * sizes, per_out * sizes
        in_service = full * _service(in_max, bpc) + _service(per_in * rem, bpc)
        out_service = full * _service(out_max, bpc) + _service(per_out * rem, bpc)
        last_out = np.where(rem > 0, per_out * rem, out_max)
        last_in = np.where(rem > 0, per_in * rem, in_max)
    else:  # rows of unequal share (pool): every tile, counted as lowering splits
        columns = []
        for tile in sizes.tolist():
            edges = np.append(np.arange(0, shape.rows, tile), shape.rows)
            in_bytes = np.diff(shape.input_elements * edges // shape.rows) * e
            out_bytes = np.diff(shape.output_elements * edges // shape.rows) * e
            columns.append((in_bytes.max(), out_bytes.max(), _service(in_bytes, bpc).sum(),
                            _service(out_bytes, bpc).sum(), in_bytes[-1], out_bytes[-1]))
        in_max, out_max, in_service, out_service, last_in, last_out = \
            np.array(columns, dtype=np.int64).T
    max_depth = np.minimum(np.minimum(buffers.ifmap_bytes // in_max, MAX_DEPTH),
                           buffers.output_bytes // out_max)

    def cycles(rows):
        return -(-(rows * shape.cols) // lanes) * cpe * shape.passes

    busy = full * cycles(sizes) + np.where(rem > 0, cycles(rem), 0)
    last_rows = np.where(rem > 0, rem, sizes)
    if onchip:  # nothing moves off chip: the vector unit's work is the bound
        per_run = busy
    else:
        # The first tile's load precedes all compute, the last store follows it; and
        # the server serves every transfer, one at a time, the last store's completion
        # coming `access` cycles after its service.
        first_in = shape.input_elements * np.minimum(sizes, shape.rows) // shape.rows * e
        head = np.where(first_in > 0, 1 + _service(first_in, bpc) + access, 0)
        tail = np.where(last_out > 0, 1 + _service(last_out, bpc) + access, 0)
        # The last tile computes after every load has been served, then stores.
        last_load = np.where(last_in > 0, 1 + in_service + access, 0) + \
            cycles(last_rows) + tail
        served = np.where(last_out > 0, 1 + in_service + out_service + access, 0)
        per_run = np.maximum.reduce([head + busy + tail, last_load, served])
    per_run = per_run + platform.runtime.op_overhead_cycles
    runs = _runs(op)
    zeros = np.zeros(len(sizes), dtype=np.int64)
    return _Candidates(sizes, zeros + 1, zeros + 1, zeros + LOOP_ORDERS.index("mnk"),
                       zeros, max_depth, per_run * runs,
                       (dynamic + _static_pj_per_cycle(platform) * per_run) * runs
                       * (1 - 1e-9), zeros)


def _grid(op, fuse: str | None, following, platform: Platform,
          coarse: bool = False) -> tuple[_Candidates, list[str]]:
    """An operator's candidates before depth, and the dataflows they index."""
    if is_compute(op):
        return (_compute_grid(op, fuse, following, platform, coarse),
                list(platform.systolic_array.dataflows))
    return _vector_grid(op, platform), ["os"]


def _objective_lb(c: _Candidates, objective: str) -> np.ndarray:
    if objective == "cycles":
        return c.cycles_lb.astype(np.float64)
    if objective == "energy":
        return c.energy_lb
    return c.energy_lb * c.cycles_lb


def _rank(names: list[str]) -> np.ndarray:
    """Position of each name in sorted order (the canonical order of strings)."""
    return np.argsort(np.argsort(np.array(names)))


def _tie_loses(op, objective: str, best: Evaluation, bound: float, cycles: int,
               energy: float, tiling: Tiling) -> bool:
    """Whether a candidate whose objective bound does not exceed the best's still loses
    the tie-break: its bounds, compared in the order of the tie-break, exceed the
    best's figures. A vector operator's energy is its fixed work plus static power over
    its cycles, so whatever the objective its candidates order exactly by (cycles,
    canonical order), and a cycle bound equal to the best's cycles settles it."""
    if not is_compute(op):
        return (cycles, tiling.sort_key()) > (best.cycles, best.tiling.sort_key())
    return (bound, cycles, energy) > (best.objective(objective), best.cycles,
                                      best.energy_pj)


def _fixed_by_plan(grid: _Candidates, spec: TilingSpec, dataflows: list[str], *,
                   vector: bool) -> np.ndarray:
    """Grid candidates that agree with every tiling field the plan sets (depth aside:
    it is checked once candidates are expanded by depth)."""
    keep = np.ones(len(grid), dtype=bool)
    fixed = {"tm": spec.rows_per_tile} if vector else \
        {"tm": spec.tm, "tn": spec.tn, "tk": spec.tk}
    for name, value in fixed.items():
        if value is not None:
            keep &= getattr(grid, name) == value
    if not vector and spec.loop_order is not None:
        keep &= grid.order == LOOP_ORDERS.index(spec.loop_order)
    if not vector and spec.dataflow is not None:
        keep &= grid.dataflow == (dataflows.index(spec.dataflow)
                                  if spec.dataflow in dataflows else -1)
    return keep


def search_operator(task: _Task) -> OperatorSearch:
    """The best tiling of one operator (see the module docstring)."""
    if is_attention(task.op):
        return _search_attention(task)
    op, platform, objective = task.op, task.platform, task.objective
    memory = memory_params(platform)
    heuristics: dict[str, Evaluation | str] = {}
    seen: set[tuple] = set()
    best: Evaluation | None = None
    simulated = invalid = 0

    def consider(evaluation: Evaluation) -> None:
        nonlocal best
        mine = replace(evaluation, tiling=replace(evaluation.tiling, heuristic=MAPPER))
        if best is None or mine.key(objective) < best.key(objective):
            best = mine

    evaluated: dict[tuple, Evaluation] = {}  # heuristics agreeing on a tiling: one replay
    for name in task.heuristics:
        try:
            tiling = resolve_tiling(op, task.spec.model_copy(update={"heuristic": name}),
                                    platform)
            found = evaluated.get(tiling.sort_key())
            if found is None:
                found = _evaluate(op, tiling, platform, memory, task.following)
            else:
                found = replace(found, tiling=tiling)
            evaluated[tiling.sort_key()] = found
        except AccsimError as exc:
            heuristics[name] = exc.rule
            continue
        heuristics[name] = found
        seen.add(found.tiling.sort_key())
        simulated += 1
        consider(found)
    fuse = task.spec.fuse if is_compute(op) else None
    op_dims = (op.gemm().m, op.gemm().n, op.gemm().k) if is_compute(op) \
        else (op.vector().rows,)
    grid, dataflows = _grid(op, fuse, task.following, platform, coarse=task.constrained)
    enumerated = len(grid) * MAX_DEPTH
    unfit = int((MAX_DEPTH - grid.max_depth).sum())
    keep = grid.max_depth > 0
    if task.constrained:
        keep &= _fixed_by_plan(grid, task.spec, dataflows, vector=not is_compute(op))
    pruned = 0
    if not task.exhaustive and best is not None:
        # What the heuristics' best already beats: the walk below would stop before it.
        over = _objective_lb(grid, objective) > best.objective(objective)
        pruned = int(grid.max_depth[keep & over].sum())
        keep &= ~over
    grid = grid.select(keep).expand()
    if task.constrained and task.spec.depth is not None:
        grid = grid.select(grid.depth == task.spec.depth)
    order_rank = _rank(list(LOOP_ORDERS))[grid.order]
    flow_rank = _rank(dataflows)[grid.dataflow]
    duplicates = 0
    if not task.exhaustive and len(grid):
        # One program per (tiles, dataflow, depth, effective loop order): keep the
        # member first in canonical order.
        ranked = np.lexsort((order_rank, grid.effective, grid.depth, flow_rank, grid.tk,
                             grid.tn, grid.tm))
        keys = np.stack([grid.tm, grid.tn, grid.tk, flow_rank, grid.depth,
                         grid.effective])[:, ranked]
        first = np.ones(len(grid), dtype=bool)
        first[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
        unique = np.zeros(len(grid), dtype=bool)
        unique[ranked[first]] = True
        duplicates = int(len(grid) - unique.sum())
        grid = grid.select(unique)
        order_rank, flow_rank = order_rank[unique], flow_rank[unique]
    bound = _objective_lb(grid, objective)
    grid_steps = -(-op_dims[0] // grid.tm) * -(-op_dims[1] // grid.tn) * \
        -(-op_dims[2] // grid.tk) if is_compute(op) else -(-op_dims[0] // grid.tm)
    seeded = simulated
    steps_replayed = 0
    walk = np.lexsort((grid.depth, flow_rank, order_rank, grid.tk, grid.tn, grid.tm, bound))
    for position, i in enumerate(walk.tolist()):
        if not task.exhaustive and best is not None and \
                bound[i] > best.objective(objective):
            pruned += len(walk) - position   # the walk is in bound order: all the rest
            break
        if task.max_simulated is not None:
            if simulated - seeded >= task.max_simulated:
                pruned += len(walk) - position   # the search's candidate budget is spent
                break
            if steps_replayed + int(grid_steps[i]) > task.max_steps:
                pruned += 1   # too long for what is left of the step budget
                continue
        tiling = Tiling(int(grid.tm[i]), int(grid.tn[i]), int(grid.tk[i]),
                        LOOP_ORDERS[int(grid.order[i])], dataflows[int(grid.dataflow[i])],
                        int(grid.depth[i]), fuse, MAPPER)
        if tiling.sort_key() in seen:
            duplicates += 1
            continue
        seen.add(tiling.sort_key())
        if not task.exhaustive and best is not None and _tie_loses(
                op, objective, best, float(bound[i]), int(grid.cycles_lb[i]),
                float(grid.energy_lb[i]), tiling):
            pruned += 1
            continue
        try:
            found = _evaluate(op, tiling, platform, memory, task.following)
        except AccsimError:
            invalid += 1
            continue
        simulated += 1
        steps_replayed += int(grid_steps[i])
        consider(found)
    stats = SearchStats(enumerated + len(task.heuristics), unfit, duplicates, pruned,
                        simulated, invalid)
    return OperatorSearch(op.name, op.layer_type, op.kind, _runs(op), best, heuristics,
                          stats)


def candidate_bounds(op, platform: Platform, *, fuse: str | None = None,
                     following=None) -> tuple[list[Tiling], np.ndarray, np.ndarray]:
    """Every fitting grid candidate of an operator with its (cycles, energy) lower
    bounds, totals over its runs (for tests and studies of the bound)."""
    grid, dataflows = _grid(op, fuse, following, platform)
    grid = grid.expand()
    tilings = [Tiling(int(grid.tm[i]), int(grid.tn[i]), int(grid.tk[i]),
                      LOOP_ORDERS[int(grid.order[i])], dataflows[int(grid.dataflow[i])],
                      int(grid.depth[i]), fuse, MAPPER) for i in range(len(grid))]
    return tilings, grid.cycles_lb, grid.energy_lb


# ------------------------------------------------------------------- workload

@dataclass(frozen=True)
class MapResult:
    """The mapper's answer for a workload on a platform."""

    platform: str
    workload: str
    mapping: str
    objective: str
    exhaustive: bool
    heuristics: list[str]
    operators: list[OperatorSearch]
    model_version: int = simulator.MODEL_VERSION
    accsim_version: str = simulator.__version__

    def operator(self, name: str) -> OperatorSearch | None:
        return next((op for op in self.operators if op.name == name), None)

    @property
    def stats(self) -> SearchStats:
        """Counts summed over the searches made (shared shapes once)."""
        total = SearchStats()
        for op in self.operators:
            if op.same_as is None:
                total = total + op.stats
        return total

    def summary(self) -> list[dict]:
        """Per heuristic: workload totals and gaps to the sum of the per-operator bests."""
        rows = []
        best_cycles = sum(op.best.cycles for op in self.operators if op.best)
        best_energy = sum(op.best.energy_pj for op in self.operators if op.best)
        for name in self.heuristics:
            found = [op.heuristics.get(name) for op in self.operators if op.best]
            ok = [f for f in found if isinstance(f, Evaluation)]
            failed = [op.name for op in self.operators
                      if op.best and not isinstance(op.heuristics.get(name), Evaluation)]
            gaps = [(op.gap(name, self.objective), op.name) for op in self.operators
                    if op.gap(name, self.objective) is not None]
            worst = max(gaps, default=(None, None))
            cycles = sum(f.cycles for f in ok) if not failed else None
            energy = sum(f.energy_pj for f in ok) if not failed else None
            rows.append({
                "heuristic": name,
                "cycles": cycles,
                "cycles_gap_percent": 100 * (cycles / best_cycles - 1)
                if cycles is not None and best_cycles else None,
                "energy_pj": energy,
                "energy_gap_percent": 100 * (energy / best_energy - 1)
                if energy is not None and best_energy else None,
                "operators_at_best": sum(1 for g, _ in gaps if g <= 1e-9),
                "mean_operator_gap_percent": sum(g for g, _ in gaps) / len(gaps)
                if gaps else None,
                "worst_operator": worst[1],
                "worst_operator_gap_percent": worst[0],
                "not_fitting": failed,
            })
        return rows

    def best_totals(self) -> tuple[int, float]:
        """(cycles, energy pJ) of the per-operator bests, summed over the workload."""
        return (sum(op.best.cycles for op in self.operators if op.best),
                sum(op.best.energy_pj for op in self.operators if op.best))

    def as_dict(self) -> dict:
        """Deterministic content: no wall-clock figure, no worker count."""
        cycles, energy = self.best_totals()
        return {
            "kind": "accsim.map",
            "accsim_version": self.accsim_version,
            "model_version": self.model_version,
            "platform": self.platform, "workload": self.workload, "mapping": self.mapping,
            "objective": self.objective, "exhaustive": self.exhaustive,
            "heuristics": self.heuristics,
            "best": {"cycles": cycles, "energy_pj": energy},
            "summary": self.summary(),
            "search": asdict(self.stats),
            "operators": [{
                "name": op.name, "layer_type": op.layer_type, "kind": op.kind,
                "runs": op.runs, "same_as": op.same_as,
                "best": op.best.as_dict() if op.best else None,
                "heuristics": {name: ({**found.as_dict(),
                                       "gap_percent": op.gap(name, self.objective)}
                                      if isinstance(found, Evaluation)
                                      else {"error": found})
                               for name, found in op.heuristics.items()},
                "search": asdict(op.stats),
            } for op in self.operators],
        }

    @classmethod
    def from_dict(cls, data: dict, *, file: str | None = None) -> MapResult:
        """Read a mapper result written by `accsim map --json`."""
        try:
            if data.get("kind") != "accsim.map":
                raise ValueError("kind is not accsim.map")
            operators = []
            for op in data["operators"]:
                heuristics = {name: (Evaluation.from_dict(found) if "error" not in found
                                     else found["error"])
                              for name, found in op["heuristics"].items()}
                operators.append(OperatorSearch(
                    op["name"], op["layer_type"], op["kind"], int(op["runs"]),
                    Evaluation.from_dict(op["best"]) if op["best"] else None, heuristics,
                    SearchStats(**op["search"]), op.get("same_as")))
            return cls(data["platform"], data["workload"], data["mapping"],
                       data["objective"], bool(data["exhaustive"]),
                       list(data["heuristics"]), operators, int(data["model_version"]),
                       str(data["accsim_version"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AccsimError(f"not an accsim mapper result ({type(exc).__name__}: "
                              f"{exc})", file=file) from None

    def plan(self) -> Mapping:
        """The best tilings as a plan: `accsim run --mapping` reproduces them."""
        operators = {}
        for op in self.operators:
            if op.best is not None:
                operators[op.name] = op.best.tiling.spec(
                    vector=op.vector, attention=op.kind == "attention")
        return Mapping(name=f"{self.workload}_{self.platform}_best_{self.objective}",
                       operators=operators)


def _warm(task: _Task) -> None:
    """Run the lowering and the fast engine once on a tiny operator, so that the kernels
    are loaded from Numba's cache in this process and inherited by forked workers."""
    from simulator.workload import Conv2d as Conv, Gemm
    tiny = Tiling(1, 1, 1, "mnk", task.platform.systolic_array.dataflows[0], 1)
    memory = memory_params(task.platform)
    for op in (Gemm(name="warm", layer_type="warm", kind="gemm", m=1, n=1, k=1),
               Conv(name="warm", layer_type="warm", kind="conv2d", h=1, w=1, cin=1, cout=1,
                    kh=1, kw=1)):
        try:
            _evaluate(op, tiny, task.platform, memory, None)
        except AccsimError:
            pass


def _grid_size(op, platform: Platform) -> int:
    """An operator's candidate count (its search's rough cost)."""
    if is_attention(op):
        return 9 * 2 * len(platform.systolic_array.dataflows)
    if not is_compute(op):
        return len(_vector_sizes(op, platform)) * MAX_DEPTH
    array = platform.systolic_array
    g = op.gemm()
    units = (array.rows, array.cols)
    return (len(dim_candidates(g.m, units)) * len(dim_candidates(g.n, units))
            * len(dim_candidates(g.k, units)) * len(LOOP_ORDERS) * len(array.dataflows)
            * MAX_DEPTH)


def _shape_key(op, spec: TilingSpec) -> str | None:
    """Operators equal in everything but name and layer_type share a search; None for
    those that fuse (the fused operator's name is part of the tiling)."""
    if spec.fuse is not None:
        return None
    fields = op.model_dump(mode="json", exclude={"name", "layer_type"})
    return json.dumps([fields, spec.model_dump(mode="json", exclude_none=True)],
                      sort_keys=True)


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


Progress = Callable[[int, int, str, int], None]   # (done, total, operator, candidates)


def map_workload(inputs: Inputs, *, objective: str = "cycles",
                 heuristics: list[str] | None = None, workers: int | None = None,
                 exhaustive: bool = False, reuse_shapes: bool = True,
                 progress: Progress | None = None) -> MapResult:
    """Search every operator of the workload (operators absorbed by a plan's `fuse`
    excepted), in parallel across operators, and merge in workload order."""
    if objective not in OBJECTIVES:
        raise AccsimError(f"unknown objective {objective!r} (one of "
                          f"{', '.join(OBJECTIVES)})", field="objective")
    platform, workload, mapping = inputs.platform, inputs.workload, inputs.mapping
    check_mapping_names(mapping, workload,
                        file=inputs.mapping_source.path if inputs.mapping_source else None)
    workload_file = inputs.workload_source.path if inputs.workload_source else None
    check_inputs(workload, platform, workload_source=workload_file,
                 platform_source=inputs.platform_source.path if inputs.platform_source
                 else None)
    for op in workload.operators:
        try:
            check_candidates(_grid_size(op, platform) // MAX_DEPTH, op, "the mapper")
        except AccsimError as exc:
            raise AccsimError(exc.rule, file=workload_file, field=exc.field) from None
    names = list(dict.fromkeys(heuristics if heuristics else BUILTIN_HEURISTICS))
    for name in names:
        heuristic(name)  # an unknown name errors here, naming the known ones
    tasks: list[_Task] = []
    owners: list[int] = []          # per operator: the task it takes its result from
    shapes: dict[str, int] = {}
    ops = workload.operators
    order: list[int] = []
    absorbed = None
    for index, op in enumerate(ops):
        if op.name == absorbed or is_collective(op):  # collectives take no tiling
            continue
        spec = merged_spec(mapping, op)
        following = ops[index + 1] if index + 1 < len(ops) else None
        absorbed = spec.fuse if is_compute(op) else None
        key = _shape_key(op, spec) if reuse_shapes else None
        order.append(index)
        if key is not None and key in shapes:
            owners.append(shapes[key])
            continue
        task = _Task(op, following, spec, platform, tuple(names), objective, exhaustive)
        tasks.append(task)
        owners.append(len(tasks) - 1)
        if key is not None:
            shapes[key] = len(tasks) - 1
    results: list[OperatorSearch | None] = [None] * len(tasks)
    workers = default_workers() if workers is None else max(1, workers)
    done = 0

    def finished(task_index: int, found: OperatorSearch) -> None:
        nonlocal done
        results[task_index] = found
        done += 1
        if progress:
            progress(done, len(tasks), found.name, found.stats.candidates)

    if workers == 1 or len(tasks) <= 1:
        if progress:
            progress(0, len(tasks), "", 0)
        for task_index, task in enumerate(tasks):
            finished(task_index, search_operator(task))
    else:
        _warm(tasks[0])  # load the compiled kernels once, before the workers fork
        # Largest grids first, so the long searches do not start last.
        schedule = sorted(range(len(tasks)), reverse=True,
                          key=lambda t: (_grid_size(tasks[t].op, platform), -t))
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            # Submitting starts the workers; only then may a progress bar start its
            # thread (forking a threaded process can deadlock the child).
            futures = {pool.submit(search_operator, tasks[t]): t for t in schedule}
            if progress:
                progress(0, len(tasks), "", 0)
            for future in as_completed(futures):
                finished(futures[future], future.result())
    operators = []
    for index, owner in zip(order, owners):
        found = results[owner]
        op = ops[index]
        if found.name != op.name:
            found = replace(found, name=op.name, layer_type=op.layer_type,
                            runs=_runs(op), same_as=found.name)
        operators.append(found)
    return MapResult(platform.name, workload.name, mapping.name, objective, exhaustive,
                     names, operators)


# ---------------------------------------------------------------------- tables

def _gap_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def operator_search_table(result: MapResult) -> Table:
    """Per operator: the search's counts, the best tiling and each heuristic's gap."""
    table = Table(title=f"Best tiling per operator by {result.objective} "
                  f"({result.workload} on {result.platform}); gap % = heuristic / best - 1",
                  title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("operator", no_wrap=True)
    for header in ("candidates", "simulated"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("best tiling", no_wrap=True)
    table.add_column("cycles", justify="right", no_wrap=True)
    for name in result.heuristics:
        table.add_column(f"{name} %", justify="right", no_wrap=True)
    for op in result.operators:
        stats = f"= {op.same_as}" if op.same_as else f"{op.stats.candidates:,}"
        simulated = "" if op.same_as else f"{op.stats.simulated:,}"
        best = op.best.tiling.describe(vector=op.vector) if op.best else "nothing fits"
        cycles = f"{op.best.cycles:,}" if op.best else "-"
        table.add_row(op.name, stats, simulated, best, cycles,
                      *[_gap_cell(op.gap(name, result.objective))
                        for name in result.heuristics])
    return table


def gap_table(result: MapResult) -> Table:
    """Per heuristic: workload cycles and energy and their gaps to the per-operator
    bests, operators at the best, mean and worst operator gap."""
    cycles, energy = result.best_totals()
    table = Table(title=f"Heuristics against the mapper's best by {result.objective}: "
                  f"{result.workload} on {result.platform}, best {cycles:,} cycles, "
                  f"{energy / 1e9:,.3f} mJ", title_justify="left", show_edge=False,
                  pad_edge=False)
    for header in ("heuristic", "cycles", "gap %", "energy mJ", "gap %", "ops at best",
                   "mean op gap %", "worst op", "worst gap %", "not fitting"):
        table.add_column(header, justify="left" if header in ("heuristic", "worst op")
                         else "right", no_wrap=True)
    ops = len([op for op in result.operators if op.best])
    for row in result.summary():
        table.add_row(
            row["heuristic"], "-" if row["cycles"] is None else f"{row['cycles']:,}",
            _gap_cell(row["cycles_gap_percent"]),
            "-" if row["energy_pj"] is None else f"{row['energy_pj'] / 1e9:,.3f}",
            _gap_cell(row["energy_gap_percent"]), f"{row['operators_at_best']}/{ops}",
            _gap_cell(row["mean_operator_gap_percent"]), row["worst_operator"] or "-",
            _gap_cell(row["worst_operator_gap_percent"]),
            str(len(row["not_fitting"])))
    return table


def write_map_json(result: MapResult, path: str) -> None:
    """Write a mapper result (MapResult.as_dict) as JSON; equal inputs, equal bytes."""
    from pathlib import Path

    from simulator.loader import dump_json
    Path(path).write_text(dump_json(result.as_dict(), indent=1) + "\n")


def read_map_json(path: str) -> MapResult:
    """Read a mapper result written by write_map_json (`accsim map --json`)."""
    from simulator.loader import read_json
    data, _ = read_json(path)
    if not isinstance(data, dict):
        raise AccsimError("not an accsim mapper result (not a JSON object)", file=path)
    return MapResult.from_dict(data, file=path)


__all__ = ["Evaluation", "SearchStats", "OperatorSearch", "MapResult", "map_workload",
           "search_operator", "candidate_bounds", "OBJECTIVES", "BUILTIN_HEURISTICS",
           "read_map_json", "write_map_json"]
