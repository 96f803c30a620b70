"""A GEMM's loop nest in closed form (issue 26, lowering.nest) and the fast engine's
fused generate-and-replay (engines.nest): on generated GEMMs, the closed-form counters
equal the LRU step kernel's sums (the test reference lru_steps.gemm_steps), the
generated steps equal its arrays, the closed-form totals equal the arrays' sums, and
the fused replay gives the whole program's outcome whatever the block size; a nest the
closed form cannot clear is checked step by step and refused with the checker's
message.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from lru_steps import gemm_steps
from platforms import make_platform
from test_engine_equivalence_lowered import lowering_cases

from simulator.engines.fast import replay_stream, run_fast
from simulator.engines.nest_replay import replay_nest, run_streamed
from simulator.errors import AccsimError, InvalidProgramError
from simulator.lowering import lower_compute
from simulator.lowering.nest import GemmArgs, LoopNest
from simulator.lowering.nest import _exact_sums as closed_form_sums
from simulator.lowering.gemm_stream import GemmStream
from simulator.lowering.tile_table import TileTable
from simulator.program.tile_program import MemoryParams, check_program, memory_params
from simulator.program.streamed import StreamChecker, WholeProgram

ARRAYS = ("load_bytes", "compute_cycles", "vector_cycles", "acquire", "release",
          "store_bytes", "reload_of")
BLOCK_SIZES = st.sampled_from([1, 2, 3, 5, 7, 16, 64, 4096, 10**6])


def tile_tables(*tables: np.ndarray) -> tuple[TileTable, ...]:
    """Whole per-tile tables as gemm_steps takes them."""
    return tuple(TileTable.from_array(table) for table in tables)


def drawn_output(draw) -> dict:
    """The systolic_array fields of a drawn output path: the default, or the vector
    unit's with a drawn evacuation."""
    if not draw(st.booleans()):
        return {}
    return {"output_path": "vector", "evacuation": {
        "elements_per_cycle": draw(st.sampled_from([1, 3, 8])),
        "tile_cycles": draw(st.sampled_from([0, 2])),
        "transpose_stationary": draw(st.booleans())}}


@st.composite
def nest_args(draw):
    """gemm_steps' arguments with every free choice drawn: buffer slots from 1 to past
    the tiles (so tiles hit, miss on each reuse, or partly), spilling or not, epilogue
    rows, load-time vector work on A (a prologue norm) and on B (a transposed load) or
    none, A and B tiles whose SRAM bytes differ from their off-chip bytes (either
    operand may be the weights: a transposed nest), non-dyadic array sizes and speeds (float sums summed
    step by step), and a platform with or without an evacuating output path."""
    m, n, k = (draw(st.integers(1, 30)) for _ in range(3))
    tm, tn, tk = draw(st.integers(1, m)), draw(st.integers(1, n)), draw(st.integers(1, k))
    nm, nn, nk = -(-m // tm), -(-n // tn), -(-k // tk)
    order = np.array(draw(st.permutations([0, 1, 2])), np.int64)
    ints = st.integers(0, 500)
    a_table = np.array(draw(st.lists(ints, min_size=nm * nk, max_size=nm * nk)),
                       np.int64).reshape(nm, nk)
    b_load = np.array(draw(st.lists(ints, min_size=nk * nn, max_size=nk * nn)),
                      np.int64).reshape(nk, nn)
    epilogue = np.array(draw(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3),
                                                st.integers(0, 4), st.integers(0, 2)),
                                      max_size=3)), np.int64).reshape(-1, 4)
    output = drawn_output(draw)
    platform = make_platform(systolic_array=output)
    args = GemmArgs(*(m, n, k, tm, tn, tk, order, draw(st.integers(0, 2)),
            draw(st.sampled_from([2, 3, 4, 8])), draw(st.sampled_from([2, 3, 8])),
            draw(st.integers(1, 3)), draw(st.integers(0, 1)),
            *tile_tables(a_table, a_table * draw(st.integers(1, 2)), b_load,
                         b_load * draw(st.integers(1, 2))),
            draw(st.booleans()), draw(st.booleans()), draw(st.booleans()),
            draw(st.integers(0, 4)), draw(st.integers(0, 4)),
            draw(st.integers(1, nm * nk + 1)), draw(st.integers(1, nk * nn + 1)),
            draw(st.booleans()), epilogue, draw(st.sampled_from([1, 4, 16])),
            draw(st.sampled_from([1.0, 2.0, 0.5, 1.5, 3.0])), draw(st.integers(0, 3)),
            draw(st.integers(0, 3))))
    return args, platform


@settings(max_examples=400, deadline=None)
@given(case=nest_args(), block=st.integers(1, 40))
def test_closed_form_counters_and_steps_are_the_step_kernels(case, block):
    args, platform = case
    nest = LoopNest(args, platform)
    arrays = gemm_steps(*args)
    floats, ints = nest.counters()
    np.testing.assert_array_equal(ints, arrays[8])
    np.testing.assert_array_equal(floats, arrays[7])   # bit for bit
    exact = closed_form_sums(nest._cases, nest.split)   # used on long nests
    if exact is not None:
        np.testing.assert_array_equal(exact, arrays[7])
    event(f"float sums exact in closed form: {exact is not None}")
    event(f"A tiles reloaded each pass: {nest.a_always}, B: {nest.b_always}")
    stream = GemmStream(args, platform, depth=1, slots=4, overhead_cycles=0)
    whole = stream.materialize()
    for index, name in enumerate(ARRAYS):
        np.testing.assert_array_equal(getattr(whole, name), arrays[index], err_msg=name)
    # The same steps in blocks of any size.
    for part in stream.blocks(block):
        for name in ARRAYS:
            np.testing.assert_array_equal(getattr(part.program, name),
                                          getattr(whole, name)[part.begin:part.begin
                                                               + part.program.steps])
    moved, compute, vector = nest.totals()
    assert moved == int(whole.load_bytes.sum()) + int(whole.store_bytes.sum())
    assert compute == int(whole.compute_cycles.sum())
    assert vector == int(whole.vector_work().sum())


def _same(a, b) -> None:
    assert a.breakdown == b.breakdown
    if b.steps is not None:
        for name, times in b.steps.as_dict().items():
            np.testing.assert_array_equal(getattr(a.steps, name), times, err_msg=name)


@settings(max_examples=200, deadline=None)
@given(case=lowering_cases(), chained=lowering_cases(chains=True), block=BLOCK_SIZES,
       keep=st.booleans())
def test_the_fused_replay_is_the_whole_programs(case, chained, block, keep):
    for gemm, tiling, platform, act, members in (case, chained):
        whole = lower_compute(gemm, tiling, platform, following=act, fused=members)
        streamed = lower_compute(gemm, tiling, platform, following=act, fused=members,
                                 block_steps=0)
        assert isinstance(streamed.program, GemmStream)
        memory = memory_params(platform)
        expected = run_fast(whole.program, memory, keep_steps=keep)
        _same(replay_nest(streamed.program, memory, block_steps=block, keep_steps=keep),
              expected)
        _same(run_streamed(streamed.program, memory, keep_steps=keep, block_steps=block),
              expected)


def test_a_nest_the_closed_form_cannot_clear_is_checked_step_by_step():
    """k outermost with fewer output slots than live C tiles and no spill: the fourth
    acquisition waits on a release after it. The fused replay names the rule the stream
    checker names on the same steps."""
    args, platform = GemmArgs(*(8, 8, 8, 2, 4, 4, np.array([2, 0, 1]), 0, 4, 4, 1, 0,
                      *tile_tables(np.ones((4, 2), np.int64), np.ones((4, 2), np.int64),
                                   np.ones((2, 2), np.int64), np.ones((2, 2), np.int64)),
                      True, True, True, 4, 4, 8, 4, False,
                      np.zeros((0, 4), np.int64), 4, 1.0, 0, 0)), make_platform()
    stream = GemmStream(args, platform, depth=1, slots=3, overhead_cycles=0)
    assert not stream.nest.follows_the_rules(stream.slots)
    whole = WholeProgram(stream.materialize())
    checker = StreamChecker(whole)
    with pytest.raises(InvalidProgramError) as expected:
        for part in whole.blocks(5):
            checker.check(part)
    memory = MemoryParams(4.0, 10, 2)
    with pytest.raises(InvalidProgramError) as raised:
        replay_nest(stream, memory, block_steps=5)
    assert raised.value.field == expected.value.field == "acquire"
    assert str(raised.value) == str(expected.value)
    fine = GemmStream(args, platform, depth=1, slots=8, overhead_cycles=0)
    assert fine.nest.follows_the_rules(fine.slots)
    _same(replay_nest(fine, memory, block_steps=5, keep_steps=True),
          replay_stream(fine, memory, block_steps=5, keep_steps=True))


def test_a_nest_past_the_cycle_bound_is_refused_as_its_whole_program_is():
    """The bound from the closed-form totals: the error check_program gives the whole
    program, before any step is generated."""
    args, platform = GemmArgs(*(64, 64, 64, 8, 8, 8, np.array([0, 1, 2]), 0, 4, 4, 1, 0,
                      *tile_tables(*[np.full((8, 8), 64, np.int64)] * 4),
                      True, True, True, 4, 4, 2, 2, False,
                      np.zeros((0, 4), np.int64), 4, 1.0, 0, 0)), make_platform()
    stream = GemmStream(args, platform, depth=1, slots=2, overhead_cycles=0)
    memory = MemoryParams(1e-15, 10, 2)
    with pytest.raises(AccsimError) as expected:
        check_program(stream.materialize(), memory)
    with pytest.raises(AccsimError) as raised:
        replay_nest(stream, memory, block_steps=16)
    assert raised.value.field == expected.value.field == "cycles"
    assert str(raised.value) == str(expected.value)
