"""Lowering's one step generator (the loop nest: lowering.nest's closed form and
nest_steps' generator) against the step-by-step LRU model it replaced
(tests/lru_steps.py), on the nests lowering itself builds from generated GEMMs: both
operand orientations, spilling partial sums, fused epilogue chains, norm prologues and
evacuating output paths. The program's seven arrays, its evacuation cycles and the
float and integer counters must be equal, the floats bit for bit. (test_stream_nest
compares the two on nests drawn field by field, outside lowering.)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from lru_steps import reference_program
from test_engine_equivalence_lowered import lowering_cases

import simulator.lowering as lowering
from simulator.lowering import lower_compute
from simulator.lowering.nest import C_STORE_OFFCHIP, LoopNest
from simulator.lowering.tile_table import TileTables

ARRAYS = ("load_bytes", "compute_cycles", "vector_cycles", "acquire", "release",
          "store_bytes", "reload_of", "evacuation_cycles")


def _lowered_with_its_nest(case):
    """lower_compute's result on `case` and the (GemmArgs, platform, header) of the
    nest it built, recorded as it built it."""
    gemm, tiling, platform, act, members = case
    built = []
    made = lowering.GemmStream

    def recording(args, platform, *, nest, **header):
        built.append((args, platform, header))
        return made(args, platform, nest=nest, **header)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lowering, "GemmStream", recording)
        lowered = lower_compute(gemm, tiling, platform, following=act, fused=members)
    nest, = built
    return lowered, nest


def _lowered_cases():
    return st.one_of(lowering_cases(), lowering_cases(chains=True),
                     lowering_cases(prologue=True))


def _assert_like_the_reference(case) -> None:
    lowered, (args, nest_platform, header) = _lowered_with_its_nest(case)
    program, floats, ints = reference_program(args, nest_platform, **header)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(lowered.program, name),
                                      getattr(program, name), err_msg=name)
    assert (lowered.program.depth, lowered.program.slots,
            lowered.program.overhead_cycles) == (program.depth, program.slots,
                                                 program.overhead_cycles)
    nest_floats, nest_ints = LoopNest(args, nest_platform).counters()
    np.testing.assert_array_equal(nest_ints, ints)
    np.testing.assert_array_equal(nest_floats, floats)   # bit for bit
    assert lowered.counters.offchip_write == int(ints[C_STORE_OFFCHIP])
    event(f"orientation: {case[1].orientation}")
    event(f"spills partial sums: {lowered.counters.spills}")
    event(f"evacuation: {program.evacuation_cycles is not None}")


@settings(max_examples=400, deadline=None)
@given(case=_lowered_cases())
def test_lowering_builds_the_lru_models_programs(case):
    _assert_like_the_reference(case)


@settings(max_examples=200, deadline=None)
@given(case=_lowered_cases().filter(lambda case: case[1].orientation == "transposed"))
def test_a_transposed_nest_is_the_lru_models_program(case):
    """Transposed, lowering hands the generator the nest of the transpose (A and B,
    m and n exchanged with their tables and load-time work): the LRU model on the same
    nest steps alike."""
    _assert_like_the_reference(case)


@settings(max_examples=100, deadline=None)
@given(case=lowering_cases(), depths=st.lists(st.integers(1, 3), min_size=2, max_size=4),
       flips=st.lists(st.booleans(), min_size=2, max_size=4))
def test_tilings_sharing_their_tables_lower_as_each_alone(case, depths, flips):
    """The search lowers many tilings of one operator with one TileTables, which also
    holds one LoopNest per nest (tilings differing only in depth share it): each
    lowers as it does alone, whatever came before it."""
    gemm, tiling, platform, act, members = case
    tables = TileTables(gemm, platform)
    for depth, flip in zip(depths, flips):
        depth = min(depth, tiling.depth)   # the output buffer holds the drawn depth
        turned = replace(tiling, depth=depth, orientation=(
            "transposed" if (tiling.orientation == "normal") == flip else "normal"))
        shared = lower_compute(gemm, turned, platform, following=act, fused=members,
                               tables=tables)
        alone = lower_compute(gemm, turned, platform, following=act, fused=members)
        assert shared.counters == alone.counters
        for name in ARRAYS:
            np.testing.assert_array_equal(getattr(shared.program, name),
                                          getattr(alone.program, name), err_msg=name)
        assert shared.program.depth == alone.program.depth == depth
