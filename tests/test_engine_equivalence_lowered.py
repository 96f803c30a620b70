"""The fast kernel and the SimPy engine agree on every per-step time of programs the
lowering emits (DESIGN.md section 5), over generated GEMMs on generated platforms:
several arrays, both fold models, output buffers small enough that partial sums spill,
fused epilogues (one member by a plan's `fuse`, or a planner's chain of up to four with
streamed second operands), norm prologues (the vector unit's work on each A tile loaded,
with or without an epilogue chain), a dispatch overhead and an output path through the
vector unit (evacuation cycles, with and without a transpose of the stationary
operand), in both operand orientations (a transposed GEMM's transposes free or on the
vector unit). The naive reference checks a share of them.
"""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st
from engine_agreement import assert_engines_agree
from platforms import make_platform

from simulator.lowering import lower_compute
from simulator.mapping.plan import LOOP_ORDERS, EpilogueMember, Tiling
from simulator.model.loop_nest import ORIENTATIONS
from simulator.program.tile_program import memory_params
from simulator.inputs.workload import Elementwise, Gemm, RowOperator

EQUIVALENCE = settings(max_examples=500, deadline=None)
EPILOGUE_OPS = ("gelu", "relu", "silu", "add", "mul")


@st.composite
def lowered_programs(draw, chains: bool = False, prologue: bool = False):
    """(program, memory, spills) of a random GEMM tiling on a random small platform;
    `chains`: with a multi-op epilogue (binary members streaming their second operand
    in, or not) instead of a plan's single `fuse`; `prologue`: with a norm over A's
    rows applied to each A tile loaded (whole rows: tk = K)."""
    gemm, tiling, platform, act, members = draw(lowering_cases(chains, prologue))
    lowered = lower_compute(gemm, tiling, platform, following=act, fused=members)
    return lowered.program, memory_params(platform), lowered.counters.spills


@st.composite
def lowering_cases(draw, chains: bool = False, prologue: bool = False):
    """lower_compute's inputs for lowered_programs: (gemm, tiling, platform, the
    operator a plan's `fuse` absorbs, group members or None)."""
    m, n, k = (draw(st.integers(1, 24)) for _ in range(3))
    tm, tn, tk = draw(st.integers(1, m)), draw(st.integers(1, n)), draw(st.integers(1, k))
    if prologue:
        chains, tk = draw(st.booleans()), k
    depth = draw(st.integers(1, 3))
    live = -(-m // tm) * -(-n // tn)
    slots = draw(st.integers(depth, max(depth, live + 1)))   # below live: it spills
    fuse = draw(st.booleans()) and not chains and not prologue
    chain = []   # (op, streamed) of a multi-op epilogue
    if chains:
        chain = [(op, op in ("add", "mul") and draw(st.booleans()))
                 for op in draw(st.lists(st.sampled_from(EPILOGUE_OPS), min_size=1,
                                         max_size=4))]
    streamed = sum(s for _, s in chain)   # each holds a tile of its operand beside C
    output = {"transpose": {
        "stationary_load": draw(st.sampled_from(["free", "vector"])),
        "store": draw(st.sampled_from(["free", "vector"])),
        "cycles_per_element": draw(st.integers(1, 3))}}
    if draw(st.booleans()):
        output |= {"output_path": "vector", "evacuation": {
            "elements_per_cycle": draw(st.sampled_from([1, 3, 8, 64])),
            "tile_cycles": draw(st.sampled_from([0, 2, 64])),
            "transpose_stationary": draw(st.booleans())}}
    platform = make_platform(
        systolic_array={"rows": draw(st.sampled_from([2, 4, 8])),
                        "cols": draw(st.sampled_from([2, 4, 8])),
                        "count": draw(st.integers(1, 4)),
                        "fold_model": draw(st.sampled_from(["pipelined", "scalesim"])),
                        **output},
        buffers={"ifmap_bytes": 1 << 14, "weight_bytes": 1 << 14,
                 "output_bytes": slots * tm * tn * (4 + 4 * streamed)},
        offchip={"bandwidth_gbps": draw(st.sampled_from([0.5, 3.0, 16.0, 64.0])),
                 "latency_cycles": draw(st.integers(0, 40)),
                 "efficiency": draw(st.sampled_from([1.0, 0.9, 0.35]))},
        dma={"setup_cycles": draw(st.integers(0, 5))},
        runtime={"op_overhead_cycles": draw(st.sampled_from([0, 0, 3, 250]))})
    gemm = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k)
    act = Elementwise(name="act", layer_type="act", kind="elementwise", elements=m * n,
                      op="gelu")
    tiling = Tiling(tm, tn, tk, draw(st.sampled_from(LOOP_ORDERS)),
                    draw(st.sampled_from(["os", "ws", "is"])), depth,
                    fuse="act" if fuse else None,
                    orientation=draw(st.sampled_from(ORIENTATIONS)))
    members = tuple(EpilogueMember(Elementwise(name=f"e{i}", layer_type="epilogue",
                                               kind="elementwise", elements=m * n, op=op),
                                   stream) for i, (op, stream) in enumerate(chain))
    if prologue:
        norm = RowOperator(name="norm", layer_type="norm", kind="norm", rows=m, cols=k)
        members = (EpilogueMember(norm, prologue=True), *members)
    return gemm, tiling, platform, act, members or None


def _assert_identical(case, naive: int) -> None:
    program, memory, spills = case
    event(f"spills partial sums: {spills}")
    event(f"dispatch overhead: {program.overhead_cycles > 0}")
    event(f"evacuation: {program.evacuation_cycles is not None}")
    # A tenth of the cases: the naive reference too (it is slow).
    fast = assert_engines_agree(program, memory, naive=naive == 0)
    assert fast.breakdown.overhead_cycles == program.overhead_cycles


@EQUIVALENCE
@given(case=lowered_programs(), naive=st.integers(0, 9))
def test_fast_and_simpy_identical_on_lowered_programs(case, naive):
    _assert_identical(case, naive)


@settings(max_examples=300, deadline=None)
@given(case=lowered_programs(chains=True), naive=st.integers(0, 9))
def test_fast_and_simpy_identical_with_multi_op_epilogues(case, naive):
    program, _, _ = case
    event(f"epilogue vector cycles: {bool(program.vector_cycles.any())}")
    _assert_identical(case, naive)


@EQUIVALENCE
@given(case=lowered_programs(prologue=True), naive=st.integers(0, 9))
def test_fast_and_simpy_identical_with_norm_prologues(case, naive):
    program, _, _ = case
    assert program.vector_cycles.any()   # every A tile loaded pays the norm
    _assert_identical(case, naive)
