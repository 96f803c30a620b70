"""Steady-state skipping in the fused nest replay (engines.steady, issue 26): periods
added in closed form give exactly the outcome of replaying every step, on generated
nests with and without spills, reloads, evacuation, a prologue and epilogue loads;
nests whose steps or state never repeat fall back to replaying every step; nothing is
skipped when per-step times are asked for.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from platforms import make_platform
from test_stream_nest import drawn_output, nest_args, tile_tables

from simulator.engines.fast import run_fast
from simulator.engines.nest_replay import replay_nest_counted
from simulator.errors import AccsimError
from simulator.lowering.nest import GemmArgs, LoopNest
from simulator.lowering.gemm_stream import GemmStream
from simulator.program.tile_program import MemoryParams


def _outcomes(stream, memory, block):
    """(outcome with skipping, steps skipped, outcome replaying every step); a program
    either way refuses gives the same error both ways."""
    try:
        skipping, skipped = replay_nest_counted(stream, memory, block_steps=block)
    except AccsimError as error:
        with pytest.raises(type(error)) as again:
            replay_nest_counted(stream, memory, block_steps=block, skip=False)
        assert str(again.value) == str(error)
        return None, 0, None
    every, none = replay_nest_counted(stream, memory, block_steps=block, skip=False)
    assert none == 0
    return skipping, skipped, every


@st.composite
def regular_nests(draw):
    """gemm_steps' arguments (as test_stream_nest.nest_args) for nests of 2 to 20 tiles
    per dim, so whole periods fit many times, with load tables that repeat (one value,
    one value per row or column) or mostly do not (drawn per tile), and A and B
    buffers of one tile (a miss on every use) or of all of them."""
    counts = [draw(st.integers(2, 20)) for _ in range(3)]
    tiles = [draw(st.integers(1, 3)) for _ in range(3)]
    m, n, k = (c * t - draw(st.integers(0, t - 1)) for c, t in zip(counts, tiles))
    nm, nn, nk = counts
    values = st.sampled_from([0, 16, 48, 64])

    def table(rows, cols):
        kind = draw(st.sampled_from(["one", "one", "rows", "cols", "tiles"]))
        if kind == "one":
            return np.full((rows, cols), draw(values), np.int64)
        if kind == "tiles":
            return np.array(draw(st.lists(values, min_size=rows * cols,
                                          max_size=rows * cols)), np.int64).reshape(
                rows, cols)
        line = np.array(draw(st.lists(values, min_size=rows if kind == "rows" else cols,
                                      max_size=rows if kind == "rows" else cols)))
        return np.broadcast_to(line[:, None] if kind == "rows" else line,
                               (rows, cols)).astype(np.int64)
    a_table, b_load = tile_tables(table(nm, nk), table(nk, nn))
    epilogue = np.array(draw(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3),
                                                st.integers(0, 4), st.integers(0, 2)),
                                      max_size=2)), np.int64).reshape(-1, 4)
    output = drawn_output(draw)
    args = GemmArgs(*(m, n, k, *tiles, np.array(draw(st.permutations([0, 1, 2])), np.int64),
            draw(st.integers(0, 2)), draw(st.sampled_from([2, 3, 4])),
            draw(st.sampled_from([2, 3, 8])), 1, draw(st.integers(0, 1)), a_table, a_table,
            b_load, b_load, draw(st.booleans()), draw(st.booleans()), draw(st.booleans()),
            draw(st.integers(0, 4)), draw(st.integers(0, 4)),
            draw(st.sampled_from([1, nm * nk])), draw(st.sampled_from([1, nk * nn])),
            draw(st.booleans()), epilogue, draw(st.sampled_from([1, 4])),
            draw(st.sampled_from([1.0, 1.5])), draw(st.integers(0, 3)),
            draw(st.integers(0, 3))))
    return args, make_platform(systolic_array=output)


@settings(max_examples=300, deadline=None)
@given(case=st.one_of(nest_args(), regular_nests()), block=st.integers(1, 600),
       depth=st.integers(1, 4), slots=st.integers(1, 8), fit=st.booleans(),
       bandwidth=st.sampled_from([0.5, 1.0, 3.0, 64.0]), latency=st.integers(0, 20))
def test_skipping_periods_gives_the_replay_of_every_step(case, block, depth, slots, fit,
                                                         bandwidth, latency):
    """fit: as many slots as live C tiles or more (the closed form clears the nest)."""
    args, platform = case
    if fit:
        slots += LoopNest(args, platform).k_stride
    stream = GemmStream(args, platform, depth=depth, slots=slots, overhead_cycles=3)
    skipping, skipped, every = _outcomes(stream, MemoryParams(bandwidth, latency, 1),
                                         block)
    event(f"skipped some steps: {skipped > 0}")
    assert 0 <= skipped < stream.steps or stream.steps == 0
    assert skipping == every


def _nest(order, a_table, b_load, *, spill=False, prologue=0, epilogue_load=0,
          slots=2):
    """A 36 x 36 x 36 GEMM in 2^3 tiles (5832 steps), A and B tiles loaded on every
    use, C off chip."""
    epilogue = np.array([[1, 1, 2, epilogue_load]], np.int64)
    return GemmArgs(*(36, 36, 36, 2, 2, 2, np.array(order, np.int64), 0, 4, 4, 1, 0,
            *tile_tables(a_table, a_table, b_load, b_load), True, True, True, 4, 4, 1, 1,
            spill, epilogue, 4, 1.0, prologue, 0))


@pytest.mark.parametrize("spill, prologue, epilogue_load, evacuates", [
    (False, 0, 0, False), (True, 0, 0, False), (False, 2, 1, True),
    (True, 3, 2, True)])
@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_a_regular_nest_skips_most_of_its_steps(order, spill, prologue, epilogue_load,
                                                evacuates):
    tiles = np.full((18, 18), 16, np.int64)
    output = {"output_path": "vector", "evacuation": {
        "elements_per_cycle": 3, "tile_cycles": 2, "transpose_stationary": True}}
    platform = make_platform(systolic_array=output if evacuates else {})
    args = _nest(order, tiles, tiles, spill=spill, prologue=prologue,
                 epilogue_load=epilogue_load)
    slots = max(2, LoopNest(args, platform).k_stride)  # the live C tiles without spills
    stream = GemmStream(args, platform, depth=2, slots=slots, overhead_cycles=0)
    assert stream.nest.follows_the_rules(stream.slots)
    assert stream.reloads == spill
    memory = MemoryParams(2.0, 7, 1)
    skipping, skipped, every = _outcomes(stream, memory, 400)
    assert skipped > stream.steps // 2
    assert skipping == every == run_fast(stream.materialize(), memory)


def test_a_nest_whose_runs_never_repeat_replays_every_step():
    """A and B tiles of distinct sizes with k innermost: every run of k loads other
    rows of both tables than any run before it. (With the A tiles all alike, the B
    rows repeat from one mi to the next and most steps are skipped.)"""
    b_load = np.arange(324, dtype=np.int64).reshape(18, 18) + 1
    memory = MemoryParams(1.0, 5, 1)
    for a_table, repeats in ((3 * b_load, False), (np.ones((18, 18), np.int64), True)):
        stream = GemmStream(_nest((0, 1, 2), a_table, b_load), make_platform(), depth=2,
                            slots=16, overhead_cycles=0)
        skipping, skipped, every = _outcomes(stream, memory, 400)
        assert (skipped > stream.steps // 2) == repeats and (skipped == 0) != repeats
        assert skipping == every


def test_nothing_is_skipped_when_step_times_are_kept():
    tiles = np.full((18, 18), 16, np.int64)
    stream = GemmStream(_nest((0, 1, 2), tiles, tiles), make_platform(), depth=2,
                        slots=16, overhead_cycles=0)
    memory = MemoryParams(2.0, 7, 1)
    kept, skipped = replay_nest_counted(stream, memory, block_steps=400, keep_steps=True)
    assert skipped == 0
    assert replay_nest_counted(stream, memory, block_steps=400)[1] > 0
    expected = run_fast(stream.materialize(), memory, keep_steps=True)
    assert kept.breakdown == expected.breakdown
    for name, times in expected.steps.as_dict().items():
        np.testing.assert_array_equal(getattr(kept.steps, name), times, err_msg=name)
