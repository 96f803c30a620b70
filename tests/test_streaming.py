"""Streamed lowering and replay (issue 26): a program generated, checked and replayed
block by block gives exactly what the whole program gives, on both engines, whatever
the block size (1 step, sizes that split a C tile's k loop or an epilogue mid-way, one
block); a stream is checked by the same rules; the memory budget sets the block size.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import memory_params as memory_strategy
from strategies import tile_programs
from test_engine_equivalence_lowered import lowering_cases

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.engines.des import run_des
from simulator.engines.fast import replay_stream, run_fast
from simulator.errors import AccsimError, InvalidProgramError
from simulator.limits import MemoryBudget
from simulator.lowering import lower_compute
from simulator.lowering.gemm_stream import GemmStream
from simulator.program.tile_program import MemoryParams, make_program, memory_params, validate_program
from simulator.present.run_report import result_dict
from simulator.simulate import simulate
from simulator.program.streamed import StreamChecker, WholeProgram
from simulator.present.timeline import trace_events

STREAMING = settings(max_examples=150, deadline=None)
BLOCK_SIZES = st.sampled_from([1, 2, 3, 5, 7, 16, 64, 10**6])


def _same(streamed, whole) -> None:
    assert streamed.breakdown == whole.breakdown
    if whole.steps is not None:
        for name, times in whole.steps.as_dict().items():
            np.testing.assert_array_equal(getattr(streamed.steps, name), times,
                                          err_msg=name)


@STREAMING
@given(case=lowering_cases(), chained=lowering_cases(chains=True),
       prologued=lowering_cases(prologue=True), block=BLOCK_SIZES, keep=st.booleans())
def test_streamed_lowering_replays_identically_on_the_fast_engine(case, chained,
                                                                  prologued, block, keep):
    for gemm, tiling, platform, act, members in (case, chained, prologued):
        whole = lower_compute(gemm, tiling, platform, following=act, fused=members)
        streamed = lower_compute(gemm, tiling, platform, following=act, fused=members,
                                 block_steps=block)
        assert streamed.counters == whole.counters
        memory = memory_params(platform)
        if whole.program.steps > block:
            assert isinstance(streamed.program, GemmStream)
            # The generated blocks, gathered, are the whole program, array for array.
            gathered = streamed.program.materialize()
            for name in ("load_bytes", "compute_cycles", "vector_cycles", "acquire",
                         "release", "store_bytes", "reload_of", "evacuation_cycles"):
                a, b = getattr(gathered, name), getattr(whole.program, name)
                assert (a is None) == (b is None), name
                if a is not None:
                    np.testing.assert_array_equal(a, b, err_msg=name)
        _same(run_fast(streamed.program, memory, keep_steps=keep, block_steps=block),
              run_fast(whole.program, memory, keep_steps=keep))


@settings(max_examples=60, deadline=None)
@given(case=lowering_cases(), block=BLOCK_SIZES)
def test_streamed_lowering_replays_identically_on_the_simpy_engine(case, block):
    gemm, tiling, platform, act, members = case
    whole = lower_compute(gemm, tiling, platform, following=act, fused=members)
    streamed = lower_compute(gemm, tiling, platform, following=act, fused=members,
                             block_steps=block)
    memory = memory_params(platform)
    _same(run_des(streamed.program, memory, keep_steps=True, block_steps=block),
          run_des(whole.program, memory, keep_steps=True))
    _same(run_fast(streamed.program, memory, keep_steps=True, block_steps=block),
          run_des(whole.program, memory, keep_steps=True))


@STREAMING
@given(program=tile_programs(), memory=memory_strategy(), block=BLOCK_SIZES)
def test_generated_programs_replay_identically_in_blocks(program, memory, block):
    """Hand-made programs (reloads, vector work, uneven residencies) in blocks."""
    whole = run_fast(program, memory, keep_steps=True)
    _same(replay_stream(WholeProgram(program), memory, block_steps=block, keep_steps=True),
          whole)
    _same(run_fast(program, memory, keep_steps=True, block_steps=block), whole)


@STREAMING
@given(program=tile_programs(), memory=memory_strategy(), block=BLOCK_SIZES,
       data=st.data())
def test_a_stream_breaks_the_rule_validate_program_finds(program, memory, block, data):
    """Spoil one array entry of a valid program: the stream's checker refuses it exactly
    when validate_program does, on the same field when one rule is broken (several
    broken rules: the stream names the first met in step order, so for the residency
    and reload rules either may be named)."""
    name = data.draw(st.sampled_from(["load_bytes", "compute_cycles", "store_bytes",
                                      "acquire", "release", "reload_of"]))
    at = data.draw(st.integers(0, program.steps - 1))
    arrays = {n: getattr(program, n).copy() for n in
              ("load_bytes", "compute_cycles", "vector_cycles", "acquire", "release",
               "store_bytes", "reload_of")}
    spoiled = {"load_bytes": -1, "compute_cycles": 0, "store_bytes": 5,
               "acquire": not arrays["acquire"][at], "release": not arrays["release"][at],
               "reload_of": data.draw(st.integers(-1, program.steps))}[name]
    arrays[name][at] = spoiled
    bad = make_program(**arrays, depth=program.depth, slots=program.slots)
    try:
        validate_program(bad)
        expected = None
    except InvalidProgramError as error:
        expected = error.field
    checker = StreamChecker(WholeProgram(bad))
    try:
        for part in WholeProgram(bad).blocks(block):
            checker.check(part)
        checker.finish()
        found = None
    except InvalidProgramError as error:
        found = error.field
    assert (found is None) == (expected is None)
    assert found == expected or {found, expected} <= {"acquire", "release", "reload_of"}


def test_a_stream_that_deadlocks_is_refused_before_it_runs():
    program = make_program([8, 8], [1, 1], acquire=[True, True], release=[False, True],
                           store_bytes=[0, 8], depth=1, slots=1)
    with pytest.raises(InvalidProgramError) as raised:
        run_fast(WholeProgram(program), MemoryParams(4.0, 10, 2), block_steps=1)
    assert raised.value.field == "acquire"


def test_the_budget_sets_the_block_size_and_refuses_one_too_small_for_a_block():
    budget = MemoryBudget.default("fast", max_bytes=2**30)
    assert budget.block_steps is not None and budget.block_steps >= 1024
    assert MemoryBudget.default("fast", max_bytes=64 * 2**10).block_steps == 64
    small = MemoryBudget.default("fast", max_bytes=2**20)
    assert small.block_steps < budget.block_steps
    with pytest.raises(AccsimError) as raised:
        MemoryBudget.default("fast", max_bytes=10_000)
    assert raised.value.field == "--max-memory"
    assert "block" in str(raised.value)
    # The SimPy model holds every step: it does not stream.
    assert MemoryBudget.default("simpy", max_bytes=2**30).block_steps is None


def test_a_budget_too_small_for_one_block_is_one_clear_line(capsys):
    assert main(["run", "--max-memory", "10K"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("accsim: error: --max-memory: ") and "\n" not in err
    assert "too small for one block" in err


@pytest.mark.parametrize("block", [1024, 4096])
def test_a_streamed_run_gives_the_unstreamed_result(block):
    """A whole run through simulate(): GEMMs longer than the block stream (and the
    checker names the budget's block size), the result is the run held whole's."""
    inputs = load_inputs("edge_32x32", "gemm_4096", None)
    whole = simulate(inputs, budget=MemoryBudget(2**40))
    streamed_budget = MemoryBudget(2**40, block_steps=block)
    streamed = simulate(inputs, budget=streamed_budget)
    assert any(op.lowered.program.steps > block for op in whole.operators)
    assert any(isinstance(op.lowered.program, GemmStream) for op in streamed.operators)
    assert json.dumps(result_dict(streamed), sort_keys=True) == \
        json.dumps(result_dict(whole), sort_keys=True)


def test_a_trace_of_a_streamed_run_is_the_unstreamed_trace():
    inputs = load_inputs("edge_32x32", "gemm_4096", None)
    whole = simulate(inputs, budget=MemoryBudget(2**40))
    streamed = simulate(inputs, budget=MemoryBudget(2**40, block_steps=1024))
    assert trace_events(streamed) == trace_events(whole)
