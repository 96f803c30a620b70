"""Lowering: operator + tiling -> tile program (DESIGN.md section 3).

Compute operators (gemm, conv2d) lower through the compiled step kernel in
`lowering.steps`; vector operators lower to row tiles on the vector unit. Everything a
metric needs that does not depend on timing (bytes per level, useful / padding / fill
array cycles, compulsory bytes) is counted here, once per operator instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from simulator.config import Platform
from simulator.errors import AccsimError
from simulator.limits import MemoryBudget, check_inputs, check_tilings
from simulator.lowering import steps as kernel
from simulator.lowering.windows import window_elements, window_table
from simulator.mapping import (Mapping, Tiling, check_mapping_names, merged_spec,
                               operand_bytes, operator_dtype, resolve_tiling,
                               weight_element_bytes)
from simulator.program import TileProgram, validate_program
from simulator.system.collectives import CollectiveCost, collective_cost
from simulator.timing import DATAFLOW_CODES, ceil_div
from simulator.workload import (Conv2d, Workload, is_attention, is_collective,
                                is_compute)

DIM_CODES = {"m": 0, "n": 1, "k": 2}


@dataclass(frozen=True)
class Counters:
    """Timing-independent counts for one instance of an operator (bytes unless named)."""

    macs: int = 0
    vector_elements: int = 0            # element-ops on the vector unit, all passes
    useful_array_cycles: float = 0.0
    padding_array_cycles: float = 0.0
    fill_array_cycles: float = 0.0            # scalesim fold model's per-fold fill
    stationary_load_array_cycles: float = 0.0  # pipelined: P - T per fold when T < P
    skew_array_cycles: float = 0.0             # pipelined: R + C - 2 per step
    offchip_read: dict[str, int] = field(default_factory=dict)   # by operand a, b, c
    offchip_write: int = 0
    compulsory: dict[str, int] = field(default_factory=dict)     # by operand a, b, c
    sram_read: dict[str, int] = field(default_factory=dict)      # by buffer
    sram_write: dict[str, int] = field(default_factory=dict)     # by buffer
    sram_read_elements: dict[str, int] = field(default_factory=dict)  # SCALE-Sim counts
    slots: dict[str, int] = field(default_factory=dict)          # tiles each buffer holds
    live_c_tiles: int = 1
    spills: bool = False
    vector_compute_cycles: int = 0      # vector-unit cycles inside compute (unfused softmax)

    @property
    def offchip_bytes(self) -> int:
        return sum(self.offchip_read.values()) + self.offchip_write

    @property
    def compulsory_bytes(self) -> int:
        return sum(self.compulsory.values())


@dataclass(frozen=True)
class LoweredOperator:
    """One operator ready for an engine: its program runs `runs` times back to back."""

    name: str
    layer_type: str
    kind: str
    dtype: str                # input dtype (energy per MAC is looked up by it)
    unit: str                 # "array", "vector" or "interconnect" (a collective)
    tiling: Tiling | None     # None for a collective: it takes no tiling
    program: TileProgram      # empty for a collective
    instances: int            # gemm batch / conv groups: identical independent programs
    repeat: int
    onchip_home: bool         # A and C live in the on-chip activation memory
    fused: str | None
    counters: Counters
    collective: CollectiveCost | None = None   # the link cost of a collective

    @property
    def runs(self) -> int:
        return self.instances * self.repeat


def _fail(op, rule: str, source: str | None) -> AccsimError:
    return AccsimError(rule, file=source, field=f"operators.{op.name}")


def _onchip_home(platform: Platform, input_bytes: int, output_bytes: int) -> bool:
    capacity = platform.activation_memory_bytes
    return capacity is not None and input_bytes + output_bytes <= capacity


def _need_slots(op, operand: str, dims: str, buffer: str, capacity: int,
                tile_bytes: int, depth: int, source: str | None) -> int:
    """Tiles of `tile_bytes` a buffer holds; a plan needs at least `depth`."""
    slots = capacity // tile_bytes
    if slots < depth:
        raise _fail(op, f"{operand} tiles ({dims}) of {tile_bytes} bytes: the {buffer} "
                    f"buffer of {capacity} bytes holds {slots}, the plan needs {depth} "
                    f"(depth {depth}); overflow {depth * tile_bytes - capacity} bytes",
                    source)
    return slots


# Per-operand dtype fields: each must be an input dtype the platform's array lists.
DTYPE_FIELDS = ("dtype", "weight_dtype", "kv_dtype")


def check_dtypes(op, platform: Platform, workload_source: str | None) -> None:
    """Refuse an operand dtype the platform's array does not list, naming the field."""
    array = platform.systolic_array
    for name in DTYPE_FIELDS:
        dtype = operator_dtype(op, platform) if name == "dtype" else getattr(op, name, None)
        if dtype is not None and dtype not in array.input_dtypes:
            raise AccsimError(f"{name} {dtype} is not an input dtype of {platform.name} "
                              f"({', '.join(array.input_dtypes)})", file=workload_source,
                              field=f"operators.{op.name}.{name}")


def _fused_epilogue(op, fuse: str, g, following, platform: Platform,
                    source: str | None) -> tuple[int, int]:
    """(cycles per element, passes) of the vector operator absorbed as an epilogue."""
    if following is None or following.name != fuse:
        raise _fail(op, f"fuse: {fuse!r} must name the operator right after it", source)
    if is_compute(following):
        raise _fail(op, f"fuse: {fuse!r} is a {following.kind}, not a vector operator",
                    source)
    shape = following.vector()
    if shape.rows * shape.cols != g.m * g.n * g.instances:
        raise _fail(op, f"fuse: {fuse!r} works on {shape.rows * shape.cols} elements, "
                    f"the output has {g.m * g.n * g.instances}", source)
    return getattr(platform.vector_unit.cycles_per_element, shape.cost_kind), shape.passes


def lower_compute(op, tiling: Tiling, platform: Platform, *, following=None,
                  source: str | None = None,
                  workload_source: str | None = None) -> LoweredOperator:
    """Lower a gemm or conv2d under a tiling; raise naming the numbers that overflow."""
    g = op.gemm()
    array = platform.systolic_array
    for dim, tile, size in (("tm", tiling.tm, g.m), ("tn", tiling.tn, g.n),
                            ("tk", tiling.tk, g.k)):
        if tile > size:
            raise _fail(op, f"{dim} {tile} is larger than the operator's "
                        f"{dim[1].upper()} {size}", source)
    dtype = operator_dtype(op, platform)
    check_dtypes(op, platform, workload_source)
    if tiling.dataflow not in array.dataflows:
        raise _fail(op, f"dataflow {tiling.dataflow!r} is not supported by "
                    f"{platform.name} ({', '.join(array.dataflows)})", source)
    e, acc, out = operand_bytes(op, platform)
    wb = weight_element_bytes(op, platform)
    if isinstance(op, Conv2d):
        a_table = window_table(op, tiling.tm, tiling.tk) * e
        a_elements = window_elements(op, 0, g.m, 0, g.k)
        input_bytes = op.batch * op.h * op.w * op.cin * e
    else:
        nm, nk = ceil_div(g.m, tiling.tm), ceil_div(g.k, tiling.tk)
        sizes_m = np.minimum(tiling.tm, g.m - np.arange(nm) * tiling.tm)
        sizes_k = np.minimum(tiling.tk, g.k - np.arange(nk) * tiling.tk)
        a_table = np.outer(sizes_m, sizes_k).astype(np.int64) * e
        a_elements = g.m * g.k
        input_bytes = g.m * g.k * e * g.instances
    output_bytes = g.m * g.n * out * g.instances
    onchip = _onchip_home(platform, input_bytes, output_bytes)
    depth = tiling.depth
    buffers = platform.buffers
    tm, tn, tk = tiling.tm, tiling.tn, tiling.tk
    a_slots = _need_slots(op, "A", f"tm {tm} x tk {tk}", "ifmap", buffers.ifmap_bytes,
                          int(a_table.max()), depth, source)
    b_slots = _need_slots(op, "B", f"tk {tk} x tn {tn}", "weight", buffers.weight_bytes,
                          tk * tn * wb, depth, source)
    order = tiling.loop_order
    inside_k = order[order.index("k") + 1:]
    live = 1
    for dim, size, tile in (("m", g.m, tiling.tm), ("n", g.n, tiling.tn)):
        if dim in inside_k:
            live *= ceil_div(size, tile)
    c_slots = _need_slots(op, "C", f"tm {tm} x tn {tn}", "output", buffers.output_bytes,
                          tm * tn * acc, depth, source)
    spill = c_slots < live
    cpe, passes = (0, 0)
    if tiling.fuse is not None:
        cpe, passes = _fused_epilogue(op, tiling.fuse, g, following, platform, source)
    (load_b, compute, vector, acquire, release, store_b, reload_of, floats,
     ints) = kernel.gemm_steps(
        g.m, g.n, g.k, tiling.tm, tiling.tn, tiling.tk,
        np.array([DIM_CODES[d] for d in order], dtype=np.int64),
        DATAFLOW_CODES[tiling.dataflow], array.rows, array.cols, array.count,
        array.fold_model_code, a_table,
        not onchip, True, not onchip, wb, acc, out, a_slots, b_slots, spill, cpe, passes,
        platform.vector_unit.lanes)
    program = TileProgram(load_b, compute, vector, acquire, release, store_b, reload_of,
                          depth=depth, slots=c_slots,
                          overhead_cycles=platform.runtime.op_overhead_cycles)
    validate_program(program, source=f"lowering of {op.name}")
    counters = Counters(
        macs=g.m * g.n * g.k,
        vector_elements=int(g.m * g.n * passes) if passes else 0,
        useful_array_cycles=float(floats[kernel.USEFUL]),
        padding_array_cycles=float(floats[kernel.PADDING]),
        fill_array_cycles=float(floats[kernel.ARRAY_FILL]),
        stationary_load_array_cycles=float(floats[kernel.STATIONARY_LOAD]),
        skew_array_cycles=float(floats[kernel.SKEW]),
        offchip_read={"a": int(ints[kernel.A_OFFCHIP]), "b": int(ints[kernel.B_OFFCHIP]),
                      "c": int(ints[kernel.C_RELOAD_OFFCHIP])},
        offchip_write=int(ints[kernel.C_STORE_OFFCHIP]),
        compulsory={"a": 0 if onchip else a_elements * e, "b": g.k * g.n * wb,
                    "c": 0 if onchip else g.m * g.n * out},
        sram_read={"ifmap": int(ints[kernel.A_SRAM_READ_ELEMS]) * e,
                   "weight": int(ints[kernel.B_SRAM_READ_ELEMS]) * wb,
                   "output": int(ints[kernel.C_SRAM_READ])},
        sram_write={"ifmap": int(ints[kernel.A_SRAM_WRITE]),
                    "weight": int(ints[kernel.B_SRAM_WRITE]),
                    "output": int(ints[kernel.C_SRAM_WRITE])},
        sram_read_elements={"ifmap": int(ints[kernel.A_SRAM_READ_ELEMS]),
                            "weight": int(ints[kernel.B_SRAM_READ_ELEMS])},
        slots={"ifmap": a_slots, "weight": b_slots, "output": c_slots},
        live_c_tiles=live, spills=bool(spill))
    return LoweredOperator(op.name, op.layer_type, op.kind, dtype, "array", tiling, program,
                           g.instances, op.repeat, onchip, tiling.fuse, counters)


def lower_vector(op, tiling: Tiling, platform: Platform, *,
                 source: str | None = None) -> LoweredOperator:
    """Lower a vector operator to tiles of `tiling.tm` rows on the vector unit; each
    tile loads its share of the real input, computes, and stores its share of the
    output."""
    shape = op.vector()
    if tiling.tm > shape.rows:
        raise _fail(op, f"rows_per_tile {tiling.tm} is larger than the operator's "
                    f"{shape.rows} rows", source)
    e = operand_bytes(op, platform)[0]
    onchip = _onchip_home(platform, shape.input_elements * e, shape.output_elements * e)
    edges = np.minimum(np.arange(0, shape.rows + tiling.tm, tiling.tm), shape.rows)
    edges = np.unique(edges)
    in_bytes = np.diff(shape.input_elements * edges // shape.rows) * e
    out_bytes = np.diff(shape.output_elements * edges // shape.rows) * e
    depth = tiling.depth
    buffers = platform.buffers
    rows = f"{tiling.tm} rows"
    in_slots = _need_slots(op, "input", rows, "ifmap", buffers.ifmap_bytes,
                           int(in_bytes.max()), depth, source)
    out_slots = _need_slots(op, "output", rows, "output", buffers.output_bytes,
                            int(out_bytes.max()), depth, source)
    cpe = getattr(platform.vector_unit.cycles_per_element, shape.cost_kind)
    lanes = platform.vector_unit.lanes
    # timing.vector_cycles of each tile, on all tiles at once
    compute = -(-(np.diff(edges).astype(np.int64) * shape.cols) // lanes) * cpe * \
        shape.passes
    steps = compute.shape[0]
    always = np.ones(steps, dtype=bool)
    load = np.zeros(steps, dtype=np.int64) if onchip else in_bytes.astype(np.int64)
    store = np.zeros(steps, dtype=np.int64) if onchip else out_bytes.astype(np.int64)
    program = TileProgram(load, compute, np.zeros(steps, dtype=np.int64), always,
                          always.copy(), store, np.full(steps, -1, dtype=np.int64),
                          depth=depth, slots=out_slots,
                          overhead_cycles=platform.runtime.op_overhead_cycles)
    validate_program(program, source=f"lowering of {op.name}")
    total_in, total_out = shape.input_elements * e, shape.output_elements * e
    counters = Counters(
        vector_elements=shape.rows * shape.cols * shape.passes,
        offchip_read={"a": int(load.sum())}, offchip_write=int(store.sum()),
        compulsory={"a": 0 if onchip else total_in, "c": 0 if onchip else total_out},
        sram_read={"ifmap": total_in, "output": total_out},
        sram_write={"ifmap": total_in, "output": total_out},
        slots={"ifmap": in_slots, "output": out_slots})
    return LoweredOperator(op.name, op.layer_type, op.kind, operator_dtype(op, platform),
                           "vector", tiling, program, 1,
                           op.repeat, onchip, None, counters)


def lower_collective(op, platform: Platform, *,
                     workload_source: str | None = None) -> LoweredOperator:
    """A collective is priced on the interconnect, not replayed: its program is empty
    and its cycles come from simulator.system.collectives."""
    if platform.interconnect is None:
        raise AccsimError(f"collective {op.collective} over {op.chips} chips needs links: "
                          f"platform {platform.name} has no interconnect table",
                          file=workload_source, field=f"operators.{op.name}")
    empty = np.zeros(0, dtype=np.int64)
    none = np.zeros(0, dtype=bool)
    program = TileProgram(empty, empty, empty, none, none, empty, empty, depth=1, slots=1)
    cost = collective_cost(op.collective, op.payload_bytes, op.chips, platform)
    return LoweredOperator(op.name, op.layer_type, op.kind, operator_dtype(op, platform),
                           "interconnect", None, program, 1, op.repeat, False, None,
                           Counters(), cost)


def lower_attention(op, tiling: Tiling, platform: Platform, *, source: str | None = None,
                    workload_source: str | None = None) -> LoweredOperator:
    """Lower an attention operator, flash or unfused (lowering.attention); `fused`
    records the lowering used."""
    from simulator.lowering.attention import choose_lowering
    check_dtypes(op, platform, workload_source)
    chosen = choose_lowering(op, tiling, platform, source=source)
    counters = Counters(
        macs=chosen.macs, vector_elements=chosen.vector_elements,
        useful_array_cycles=chosen.useful_array_cycles,
        padding_array_cycles=chosen.padding_array_cycles,
        fill_array_cycles=chosen.fill_array_cycles,
        stationary_load_array_cycles=chosen.stationary_load_array_cycles,
        skew_array_cycles=chosen.skew_array_cycles, offchip_read=chosen.offchip_read,
        offchip_write=chosen.offchip_write, compulsory=chosen.compulsory,
        sram_read=chosen.sram_read, sram_write=chosen.sram_write, slots=chosen.slots,
        spills=chosen.scores_offchip, vector_compute_cycles=chosen.vector_compute_cycles)
    return LoweredOperator(op.name, op.layer_type, op.kind, operator_dtype(op, platform),
                           "array", replace(tiling, fuse=chosen.fusion), chosen.program,
                           op.batch * op.kv_heads, op.repeat, False, chosen.fusion,
                           counters)


def lower_workload(workload: Workload, mapping: Mapping, platform: Platform, *,
                   mapping_source: str | None = None,
                   workload_source: str | None = None,
                   platform_source: str | None = None,
                   budget: MemoryBudget | None = None) -> list[LoweredOperator]:
    """Lower every operator in order; operators absorbed by `fuse` are not emitted.
    Every tiling is resolved and checked against the limits (simulator.limits: int64
    bounds, the memory `budget`) before any operator is lowered."""
    check_mapping_names(mapping, workload, file=mapping_source)
    check_inputs(workload, platform, workload_source=workload_source,
                 platform_source=platform_source)
    resolved = []
    absorbed: str | None = None
    ops = workload.operators
    for index, op in enumerate(ops):
        if op.name == absorbed:
            continue
        if is_collective(op):  # priced on the links: no tiling, no program
            resolved.append((op, None, None, None))
            continue
        following = ops[index + 1] if index + 1 < len(ops) else None
        try:
            tiling = resolve_tiling(op, merged_spec(mapping, op), platform,
                                    following=following)
        except AccsimError as exc:  # the plan's fault: name its file
            raise AccsimError(exc.rule, file=exc.file or mapping_source,
                              field=exc.field) from None
        absorbed = tiling.fuse if is_compute(op) else None
        fused = following if absorbed is not None and following is not None \
            and following.name == absorbed and not is_compute(following) else None
        resolved.append((op, tiling, following, fused))
    check_tilings([(op, tiling, fused) for op, tiling, _, fused in resolved
                   if tiling is not None], platform, budget,
                  mapping_source=mapping_source, platform_source=platform_source)
    lowered: list[LoweredOperator] = []
    for op, tiling, following, _ in resolved:
        if is_collective(op):
            lowered.append(lower_collective(op, platform, workload_source=workload_source))
        elif is_compute(op):
            lowered.append(lower_compute(op, tiling, platform, following=following,
                                         source=mapping_source,
                                         workload_source=workload_source))
        elif is_attention(op):
            lowered.append(lower_attention(op, tiling, platform, source=mapping_source,
                                           workload_source=workload_source))
        else:
            lowered.append(lower_vector(op, tiling, platform, source=mapping_source))
    return lowered
