"""Lowering: operator + tiling -> tile program (DESIGN.md section 3).

It takes resolved (operator, tiling, fused operator) triples (simulator.search.resolve
makes them) and never meets a plan, a heuristic or the search. Compute operators (gemm,
conv2d) lower to their loop nest (`lowering.nest`: counters in closed form, steps from
the compiled generator `lowering.nest_steps`); vector operators lower to row tiles on
the vector unit. Everything a metric needs that does not depend on timing (bytes per
level, useful / padding / fill array cycles, compulsory bytes) is counted here, once per
operator instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from simulator.collectives.cost import CollectiveCost, collective_cost
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.lowering import nest
from simulator.lowering.attention import checked_slots, choose_lowering, operator_error
from simulator.lowering.gemm_stream import GemmStream
from simulator.lowering.tile_table import TileTable, TileTables, tile_sizes
from simulator.lowering.vector_stream import (VectorStream, vector_program, vector_steps,
                                              vector_totals)
from simulator.mapping.footprint import (activation_bytes, array_speed, buffer_fits,
                                         epilogue_store_bytes, epilogue_table,
                                         onchip_home, operand_bytes,
                                         operator_dtype, prologue_cycles, run_dtype,
                                         sparsity_mode, split_members, tensor_bytes,
                                         transpose_work, unsupported_orientation,
                                         weight_bytes, weights_alike)
from simulator.mapping.plan import EpilogueMember, Tiling, fusion_error
from simulator.model.loop_nest import live_c_tiles, oriented, oriented_order
from simulator.inputs.workload import BINARY_OPS
from simulator.mapping.windows import window_elements, window_table
from simulator.program.tile_program import MAX_DEPTH, TileProgram, validate_program
from simulator.program.streamed import StreamedProgram
from simulator.model.dataflow import DATAFLOW_CODES
from simulator.inputs.workload import Conv2d, is_attention, is_collective, is_compute

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
class Precision:
    """How an array operator ran where it differs from the platform's default dtype
    (DESIGN.md section 17): the dtype whose MAC rate it ran at, that rate, and its
    weight sparsity with the mode it ran in (simulator.model.sparsity)."""

    run_dtype: str
    macs_per_cycle: int
    sparsity: str | float | None = None
    sparsity_mode: str | None = None   # structured, decompressed or bandwidth-only
    speedup: float = 1.0               # array streaming speedup of the sparsity

    def as_dict(self) -> dict:
        record = {"run_dtype": self.run_dtype, "macs_per_cycle": self.macs_per_cycle}
        if self.sparsity is not None:
            record.update(sparsity=self.sparsity, sparsity_mode=self.sparsity_mode,
                          sparsity_speedup=self.speedup)
        return record


def operator_precision(op, platform: Platform) -> Precision | None:
    """An array operator's Precision, or None when it runs at the default dtype's rate
    with dense weights (so results of such runs are unchanged)."""
    array = platform.systolic_array
    dtype = run_dtype(op, platform)
    rate = array.rate(dtype)
    mode = sparsity_mode(op, platform)
    if mode is None and rate == array.rate(array.input_dtypes[0]):
        return None
    speed = array_speed(op, platform)
    return Precision(dtype, rate, getattr(op, "sparsity", None), mode, speed / rate)


@dataclass(frozen=True)
class LoweredOperator:
    """One operator ready for an engine: its program runs `runs` times back to back."""

    name: str
    layer_type: str
    kind: str
    dtype: str                # input dtype (energy per MAC is looked up by it)
    unit: str                 # "array", "vector" or "interconnect" (a collective)
    tiling: Tiling | None     # None for a collective: it takes no tiling
    program: TileProgram | StreamedProgram  # empty for a collective; or a GemmStream
    instances: int            # gemm batch / conv groups: identical independent programs
    repeat: int
    onchip_home: bool         # A and C live in the on-chip activation memory
    fused: str | None
    counters: Counters
    collective: CollectiveCost | None = None   # the link cost of a collective
    precision: Precision | None = None         # None: default dtype's rate, dense
    speed: float = 1.0     # the array's streaming speed (mapping.footprint.array_speed)

    @property
    def runs(self) -> int:
        return self.instances * self.repeat


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


def _fused_epilogue(op, fuse: str, following, source: str | None) -> EpilogueMember:
    """The vector operator a plan's `fuse` absorbs as the epilogue: a binary one
    streams its second operand in with each C tile."""
    error = fusion_error(op, fuse, following)
    if error is not None:
        raise operator_error(op, error, source)
    return EpilogueMember(following, getattr(following, "op", None) in BINARY_OPS)


@dataclass(frozen=True)
class _ArrayFacts:
    """What lowering a gemm or conv2d on a platform is under every tiling, worked out
    (its dtypes checked) once per TileTables: a search lowers dozens of its tilings."""

    dtype: str
    acc_bytes: int           # per accumulator element
    onchip: bool             # A and C live in the on-chip activation memory
    a_elements: int          # of A, compulsory (a conv's input windows, not im2col)
    precision: Precision | None
    speed: float


def _array_facts(op, platform: Platform, workload_source: str | None) -> _ArrayFacts:
    check_dtypes(op, platform, workload_source)
    g = op.gemm()
    return _ArrayFacts(
        operator_dtype(op, platform), operand_bytes(op, platform)[1],
        onchip_home(platform, *tensor_bytes(op, platform)),
        window_elements(op, 0, g.m, 0, g.k) if isinstance(op, Conv2d) else g.m * g.k,
        operator_precision(op, platform), array_speed(op, platform))


def _stored_elements(g, fused) -> int:
    """Elements one instance stores: its output, or a fused epilogue's last member's
    output (a gating multiply halves it): what no schedule can avoid writing."""
    if not fused:
        return g.m * g.n
    return fused[-1].op.vector().output_elements // g.instances


def lower_compute(op, tiling: Tiling, platform: Platform, *, following=None,
                  fused: tuple[EpilogueMember, ...] | None = None,
                  source: str | None = None, workload_source: str | None = None,
                  block_steps: int | None = None, check: bool = True,
                  tables: TileTables | None = None) -> LoweredOperator:
    """Lower a gemm or conv2d under a tiling; raise naming the numbers that overflow.
    `fused`: the group's members (the planner's: a prologue norm applied to each A
    tile as it loads, then the epilogue); without it a tiling's `fuse` absorbs
    `following`. A program of more than `block_steps` steps is a GemmStream
    (generated block by block when replayed), else a TileProgram in memory, validated
    unless `check` is False (a caller that replays it at once with run_fast, which
    validates it: the search, so each candidate is validated once). `tables`: the
    per-tile tables of earlier lowerings of this operator (the search's), reused;
    with check False, a lowering of the same tiling at another depth is reused too
    (`_at_depth`)."""
    if tables is None or not tables.serves(op, platform):
        tables = TileTables(op, platform)
    sibling = None
    if not check and fused is None and 1 <= tiling.depth <= MAX_DEPTH:
        sibling = ("lowered at a depth", tiling.tm, tiling.tn, tiling.tk,
                   tiling.loop_order, tiling.dataflow, tiling.orientation, tiling.fuse,
                   block_steps)
        known = tables.found(sibling)
        if known is not None and known[0] is following:
            lowered = _at_depth(known[1], tiling)
            if lowered is not None:
                return lowered
    lowered = _lower_compute(op, tiling, platform, following=following, fused=fused,
                             source=source, workload_source=workload_source,
                             block_steps=block_steps, check=check, tables=tables)
    if sibling is not None and isinstance(lowered.program, TileProgram):
        tables.keep(sibling, (following, lowered))
    return lowered


def _at_depth(lowered: LoweredOperator, tiling: Tiling) -> LoweredOperator | None:
    """A lowering of the same tiling at another depth as `tiling`'s (None where a
    buffer's slots are fewer than its depth: lowering it reports the overflow). Depth
    enters a lowering only there and in its program's header: the tiles, the loop
    nest, its steps and counters, and each buffer's slots are the same at every depth,
    so the two share them (nobody writes a lowering's arrays)."""
    if min(lowered.counters.slots.values()) < tiling.depth:
        return None
    return replace(lowered, tiling=tiling, program=replace(lowered.program,
                                                           depth=tiling.depth))


def _lower_compute(op, tiling: Tiling, platform: Platform, *, following, fused, source,
                   workload_source, block_steps, check,
                   tables: TileTables) -> LoweredOperator:
    """lower_compute's lowering of one tiling (`tables`: this operator's)."""
    g = op.gemm()
    array = platform.systolic_array
    for dim, tile, size in (("tm", tiling.tm, g.m), ("tn", tiling.tn, g.n),
                            ("tk", tiling.tk, g.k)):
        if tile > size:
            raise operator_error(op, f"{dim} {tile} is larger than the operator's "
                        f"{dim[1].upper()} {size}", source)
    facts = tables.get(("operator",), lambda: _array_facts(op, platform, workload_source))
    if tiling.dataflow not in array.dataflows:
        raise operator_error(op, f"dataflow {tiling.dataflow!r} is not supported by "
                    f"{platform.name} ({', '.join(array.dataflows)})", source)
    if tiling.orientation not in array.transpose.orientations:
        raise operator_error(op, unsupported_orientation(tiling.orientation, platform),
                             source)
    acc, onchip, speed = facts.acc_bytes, facts.onchip, facts.speed
    tm, tn, tk = tiling.tm, tiling.tn, tiling.tk
    if isinstance(op, Conv2d):
        a_table = tables.get(("a", tm, tk), lambda: TileTable.from_array(
            activation_bytes(op, platform, window_table(op, tm, tk))))
    else:
        a_table = tables.get(("a", tm, tk), lambda: TileTable.of_sizes(
            tile_sizes(g.m, tm), tile_sizes(g.k, tk),
            partial(activation_bytes, op, platform)))
    depth = tiling.depth
    order = tiling.loop_order
    b_load = tables.get(("b_load", tk, tn), lambda: TileTable.of_sizes(
        tile_sizes(g.k, tk), tile_sizes(g.n, tn),
        partial(weight_bytes, op, platform, offchip=True)))
    b_sram = b_load if weights_alike(op, platform) else tables.get(
        ("b_sram", tk, tn), lambda: TileTable.of_sizes(
            tile_sizes(g.k, tk), tile_sizes(g.n, tn),
            partial(weight_bytes, op, platform, offchip=False)))
    if fused is None:
        fused = () if tiling.fuse is None else \
            (_fused_epilogue(op, tiling.fuse, following, source),)
    prologue, fused = split_members(fused)
    slots = checked_slots(op, buffer_fits(op, tiling, platform, a_bytes=a_table.max(),
                                          members=fused), source)
    a_slots, b_slots, c_slots = slots["ifmap"], slots["weight"], slots["output"]
    live = live_c_tiles(g.m, g.n, tiling)
    spill = c_slots < live
    stored = epilogue_store_bytes(op, fused, platform)
    # The nest of the tiling's orientation (model.loop_nest): run transposed, m and n
    # exchange and so do A and B, with their tables (transposed: indexed by the nest's
    # dims), their homes and their load-time work; the C tile is stored transposed.
    orientation = tiling.orientation
    a_work, b_work, store_work = transpose_work(platform, orientation, tiling.dataflow)
    epilogue = epilogue_table(op, fused, platform)
    if store_work:   # one vector pass over each finished tile, as it is stored
        epilogue = np.vstack([epilogue, np.array([[1, 1, store_work, 0]], np.int64)])
    if orientation == "transposed":   # the tables indexed by the nest's dims
        a_table, b_load, b_sram = (t.transposed() for t in (a_table, b_load, b_sram))
    (nest_m, nest_n, _), (nest_tm, nest_tn, _) = oriented((g.m, g.n, g.k), orientation), \
        oriented((tm, tn, tk), orientation)
    (a_load, a_sram, a_off, a_vec), (b_load_, b_sram_, b_off, b_vec) = oriented(
        ((a_table, a_table, not onchip, prologue_cycles(prologue, platform)),
         (b_load, b_sram, True, 0)), orientation)
    args = nest.GemmArgs(
        m=nest_m, n=nest_n, k=g.k, tm=nest_tm, tn=nest_tn, tk=tiling.tk,
        order=np.array([DIM_CODES[d] for d in oriented_order(order, orientation)],
                       dtype=np.int64),
        dataflow=DATAFLOW_CODES[tiling.dataflow], rows=array.rows, cols=array.cols,
        count=array.count, fold_model=array.fold_model_code, a_load_bytes=a_load,
        a_sram_bytes=a_sram, b_load_bytes=b_load_, b_sram_bytes=b_sram_, a_offchip=a_off,
        b_offchip=b_off, c_offchip=not onchip, acc_bytes=acc, out_bytes=stored,
        a_slots=a_slots, b_slots=b_slots, spill=spill, epilogue=epilogue,
        lanes=platform.vector_unit.lanes, speed=speed, a_vector=a_vec + a_work,
        b_vector=b_vec + b_work)
    steps = -(-g.m // tm) * -(-g.n // tn) * -(-g.k // tk)   # not the ceil_div kernel
    nest_key = (orientation, args.key())
    program = _gemm_program(args, platform, tables, nest_key, depth=depth, slots=c_slots,
                            overhead_cycles=platform.runtime.op_overhead_cycles)
    floats, ints = program.counters()
    if block_steps is None or steps <= block_steps:
        # In memory; streamed, the steps are generated block by block when an engine
        # replays it (checked then).
        program = program.materialize()
        if check:
            validate_program(program, source=f"lowering of {op.name}")
    # The nest's counters by the operator's operands (a, b) and by buffer (ifmap feeds
    # the nest's A, weight its B).
    a_key, b_key = oriented(("a", "b"), orientation)
    a_elems, b_elems = oriented((ints[nest.A_VECTOR_ELEMS], ints[nest.B_VECTOR_ELEMS]),
                                orientation)   # the operator's A and B, loaded with work
    read_elems = {"ifmap": int(ints[nest.A_SRAM_READ_ELEMS]),
                  "weight": int(ints[nest.B_SRAM_READ_ELEMS])}
    read_bytes = {"a": partial(activation_bytes, op, platform),
                  "b": partial(weight_bytes, op, platform, offchip=False)}
    counters = Counters(
        macs=g.m * g.n * g.k,
        vector_elements=sum(m.op.vector().rows * m.op.vector().cols * m.op.vector().passes
                            for m in fused) // g.instances
        + int(a_elems) * sum(m.op.vector().passes for m in prologue)
        + int(ints[nest.A_VECTOR_ELEMS] if a_work else 0)
        + int(ints[nest.B_VECTOR_ELEMS] if b_work else 0)
        + (_stored_elements(g, fused) if store_work else 0),
        useful_array_cycles=float(floats[nest.USEFUL]),
        padding_array_cycles=float(floats[nest.PADDING]),
        fill_array_cycles=float(floats[nest.ARRAY_FILL]),
        stationary_load_array_cycles=float(floats[nest.STATIONARY_LOAD]),
        skew_array_cycles=float(floats[nest.SKEW]),
        offchip_read=_offchip_read(ints, {"a": a_key, "b": b_key}),
        offchip_write=int(ints[nest.C_STORE_OFFCHIP]),
        compulsory={"a": 0 if onchip else int(activation_bytes(op, platform,
                                                                facts.a_elements)),
                    "b": int(weight_bytes(op, platform, g.k * g.n, offchip=True)),
                    "c": 0 if onchip else _stored_elements(g, fused) * stored},
        sram_read={"ifmap": int(read_bytes[a_key](read_elems["ifmap"])),
                   "weight": int(read_bytes[b_key](read_elems["weight"])),
                   "output": int(ints[nest.C_SRAM_READ])},
        sram_write={"ifmap": int(ints[nest.A_SRAM_WRITE]),
                    "weight": int(ints[nest.B_SRAM_WRITE]),
                    "output": int(ints[nest.C_SRAM_WRITE])},
        sram_read_elements=read_elems,
        slots={"ifmap": a_slots, "weight": b_slots, "output": c_slots},
        live_c_tiles=live, spills=bool(spill))
    names = "+".join(m.op.name for m in prologue + fused) or None
    return LoweredOperator(op.name, op.layer_type, op.kind, facts.dtype, "array", tiling,
                           program, g.instances, op.repeat, onchip, names, counters,
                           precision=facts.precision, speed=speed)


def _gemm_program(args: nest.GemmArgs, platform: Platform, tables: TileTables,
                  nest_key: tuple, **header) -> GemmStream:
    """The GEMM's program on its LoopNest, one per nest in `tables` (`nest_key`: its
    orientation and args.key()): the search's tilings that differ only in the
    program's header (depth) share it."""
    loop_nest = tables.get(("nest", *nest_key), lambda: nest.LoopNest(args, platform))
    return GemmStream(args, platform, nest=loop_nest, **header)


def _offchip_read(ints, operands: dict[str, str]) -> dict[str, int]:
    """Off-chip reads by the operator's operand (`operands`: the operator's operand the
    nest's a and b each are); `epilogue` (streamed second operands) only when some."""
    moved = {operands["a"]: int(ints[nest.A_OFFCHIP]),
             operands["b"]: int(ints[nest.B_OFFCHIP])}
    read = {"a": moved["a"], "b": moved["b"], "c": int(ints[nest.C_RELOAD_OFFCHIP])}
    if ints[nest.EPILOGUE_OFFCHIP]:
        read["epilogue"] = int(ints[nest.EPILOGUE_OFFCHIP])
    return read


def lower_vector(op, tiling: Tiling, platform: Platform, *,
                 source: str | None = None, fused: tuple[EpilogueMember, ...] = (),
                 check: bool = True, block_steps: int | None = None) -> LoweredOperator:
    """Lower a vector operator to tiles of `tiling.tm` rows on the vector unit; each
    tile loads its share of the real input, computes, and stores its share of the
    output. `fused`: the vector operators that follow it as one kernel (a vector run,
    DESIGN.md section 15 b): each tile also loads their streamed second operands, runs
    every member on its share, and stores only the last member's. `check`: as for
    lower_compute. A program of more than `block_steps` steps is a VectorStream
    (generated block by block when replayed), its counters in closed form."""
    shape = op.vector()
    if tiling.tm > shape.rows:
        raise operator_error(op, f"rows_per_tile {tiling.tm} is larger than the operator's "
                    f"{shape.rows} rows", source)
    total_in, total_out, work = vector_totals(op, fused, platform)
    onchip = onchip_home(platform, *tensor_bytes(op, platform)) if not fused else \
        onchip_home(platform, total_in, total_out)
    slots = checked_slots(op, buffer_fits(op, tiling, platform, members=fused), source)
    in_slots, out_slots = slots["ifmap"], slots["output"]
    header = dict(depth=tiling.depth, slots=out_slots,
                  overhead_cycles=platform.runtime.op_overhead_cycles)
    steps = -(-shape.rows // tiling.tm)
    if block_steps is not None and steps > block_steps:
        program = VectorStream(op, fused, tiling.tm, platform, onchip, **header)
    else:
        program = vector_program(*vector_steps(op, fused, tiling.tm, platform, onchip,
                                               (0, steps)), **header)
        if check:
            validate_program(program, source=f"lowering of {op.name}")
    moved_in, moved_out = (0, 0) if onchip else (total_in, total_out)
    counters = Counters(
        vector_elements=work,
        offchip_read={"a": moved_in}, offchip_write=moved_out,
        compulsory={"a": moved_in, "c": moved_out},
        sram_read={"ifmap": total_in, "output": total_out},
        sram_write={"ifmap": total_in, "output": total_out},
        slots={"ifmap": in_slots, "output": out_slots})
    names = "+".join(m.op.name for m in fused) or None
    return LoweredOperator(op.name, op.layer_type, op.kind, operator_dtype(op, platform),
                           "vector", tiling, program, 1,
                           op.repeat, onchip, names, counters)


def lower_collective(op, platform: Platform, *,
                     workload_source: str | None = None) -> LoweredOperator:
    """A collective is priced on the interconnect, not replayed: its program is empty
    and its cycles come from simulator.collectives.cost."""
    if platform.interconnect is None:
        raise AccsimError(f"collective {op.collective} over {op.chips} chips needs links: "
                          f"platform {platform.name} has no interconnect table",
                          file=workload_source, field=f"operators.{op.name}")
    empty = np.zeros(0, dtype=np.int64)
    none = np.zeros(0, dtype=bool)
    program = TileProgram(load_bytes=empty, compute_cycles=empty, vector_cycles=empty,
                          acquire=none, release=none, store_bytes=empty, reload_of=empty,
                          depth=1, slots=1)
    cost = collective_cost(op.collective, op.payload_bytes, op.chips, platform)
    return LoweredOperator(op.name, op.layer_type, op.kind, operator_dtype(op, platform),
                           "interconnect", None, program, 1, op.repeat, False, None,
                           Counters(), cost)


def lower_attention(op, tiling: Tiling, platform: Platform, *, source: str | None = None,
                    workload_source: str | None = None, tables: TileTables | None = None,
                    check: bool = True) -> LoweredOperator:
    """Lower an attention operator, flash or unfused (lowering.attention); `fused`
    records the lowering used, the tiling its orientation, unit and groups. `tables`
    and `check`: lowering.attention.choose_lowering's (a search's lowerings of this
    operator, reused; the program validated by run_fast instead)."""
    if tables is None or not tables.serves(op, platform):
        tables = TileTables(op, platform)
    dtype, precision, speed = tables.get(
        ("attention operator",), lambda: _attention_facts(op, platform, workload_source))
    chosen = choose_lowering(op, tiling, platform, source=source, tables=tables,
                             check=check)
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
    ran = replace(tiling, fuse=chosen.fusion, orientation=chosen.orientation,
                  unit=chosen.unit, groups=chosen.groups)
    return LoweredOperator(op.name, op.layer_type, op.kind, dtype, "array", ran,
                           chosen.program, op.batch * op.kv_heads // chosen.groups,
                           op.repeat, False, chosen.fusion, counters, precision=precision,
                           speed=speed)


def _attention_facts(op, platform: Platform, workload_source: str | None
                     ) -> tuple[str, Precision | None, float]:
    """An attention operator's input dtype, Precision and array speed, its dtypes
    checked: the same under every tiling, so worked out once per TileTables (a search
    lowers several of its tilings)."""
    check_dtypes(op, platform, workload_source)
    return operator_dtype(op, platform), operator_precision(op, platform), \
        array_speed(op, platform)


def lower_resolved(resolved, platform: Platform, *, mapping_source: str | None = None,
                   workload_source: str | None = None,
                   block_steps: int | None = None) -> list[LoweredOperator]:
    """Lower resolved (operator, tiling, fused epilogue members) triples in order (a
    collective takes no tiling: priced on the links); GEMM and vector programs longer
    than `block_steps` are streamed (lower_compute, lower_vector)."""
    lowered: list[LoweredOperator] = []
    for op, tiling, fused in resolved:
        if is_collective(op):
            lowered.append(lower_collective(op, platform, workload_source=workload_source))
        elif is_compute(op):
            lowered.append(lower_compute(op, tiling, platform, fused=fused,
                                         source=mapping_source,
                                         workload_source=workload_source,
                                         block_steps=block_steps))
        elif is_attention(op):
            lowered.append(lower_attention(op, tiling, platform, source=mapping_source,
                                           workload_source=workload_source))
        else:
            lowered.append(lower_vector(op, tiling, platform, source=mapping_source,
                                        fused=fused, block_steps=block_steps))
    return lowered
