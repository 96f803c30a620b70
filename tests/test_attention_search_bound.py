"""The default search's attention walk (search.operator._search_attention): candidates
in order of lowering.attention_bound.cycles_bound, stopping once the bound exceeds the
best found. The bound must never exceed a candidate's replayed cycles, and the walk must
find the best the full walk finds; shared lowering tables must change no lowering."""

import re
from dataclasses import replace

import numpy as np
import pytest

from simulator.api import load_platform
from simulator.errors import AccsimError
from simulator.inputs.workload import Workload
from simulator.lowering.attention import _Steps, lower_attention_as, lowering_choices
from simulator.lowering.attention_bound import cycles_bound, cycles_bounds
from simulator.lowering.tile_table import TileTables
from simulator.mapping.heuristics import attention_base
from simulator.mapping.plan import TilingSpec
from simulator.program.tile_program import memory_params
from simulator.search.bounds import MAPPER
from simulator.search.default import MAX_SIMULATED, MAX_STEPS, SEEDS
from simulator.search.operator import (SearchTask, _attention_candidates, evaluate,
                                       search_operator)

# Output path direct and vector (psum), every dataflow, a scalesim fold model, a
# 256 x 256 array, packed int4 K/V.
PLATFORMS = ("tpu_v5e_like", "whatif/tpu_v5e_psum", "whatif/tpu_v5e_all_dataflows",
             "edge_32x32", "whatif/tpu_v5e_256x256", "whatif/tpu_v5e_int4")
# Decode (the vector unit a choice), GQA prefill (causal, uneven key tiles), MHA.
SHAPES = (dict(batch=4, heads=32, kv_heads=8, q_len=1, kv_len=1000, kv_cache=True),
          dict(batch=1, heads=32, kv_heads=8, q_len=300, kv_len=700, causal=True),
          dict(batch=2, heads=8, kv_heads=8, q_len=16, kv_len=64))


def _op(platform_name: str, shape: dict):
    kv = {"kv_dtype": "int4"} if platform_name.endswith("int4") else {}
    return Workload(name="w", operators=[dict(
        name="attn", layer_type="attention.core", kind="attention", head_dim=128,
        **shape, **kv)]).operators[0]


def _task(op, platform, exhaustive: bool) -> SearchTask:
    return SearchTask(op, None, TilingSpec(), platform, SEEDS, "cycles",
                      exhaustive=exhaustive, constrained=True,
                      max_simulated=MAX_SIMULATED, max_steps=MAX_STEPS)


@pytest.mark.parametrize("platform_name", PLATFORMS)
@pytest.mark.parametrize("shape", SHAPES)
def test_the_bound_never_exceeds_a_candidates_cycles(platform_name, shape):
    platform = load_platform(platform_name)
    op = _op(platform_name, shape)
    memory = memory_params(platform)
    tables = TileTables(op, platform)
    candidates = _attention_candidates(op, attention_base(op, TilingSpec(), platform,
                                                          MAPPER), TilingSpec(), platform)
    checked = 0
    for tiling in candidates:
        try:
            found = evaluate(op, tiling, platform, memory, None)
        except AccsimError:
            continue
        bound = cycles_bound(op, tiling, tiling.fuse, platform,
                             orientation=tiling.orientation, unit=tiling.unit,
                             tables=tables)
        assert 0 < bound <= found.cycles, tiling
        checked += 1
    assert checked >= len(candidates) // 2


@pytest.mark.parametrize("platform_name", PLATFORMS)
@pytest.mark.parametrize("shape", SHAPES)
def test_the_bounded_walk_finds_the_full_walks_best(platform_name, shape):
    platform = load_platform(platform_name)
    op = _op(platform_name, shape)
    bounded = search_operator(_task(op, platform, exhaustive=False))
    full = search_operator(_task(op, platform, exhaustive=True))
    assert full.stats.bound_pruned == 0
    assert bounded.best is not None and bounded.best == full.best
    # Every candidate replayed, refused or skipped; the full walk also replays the
    # heuristics' tilings, which never set the best.
    assert bounded.heuristics == {} and len(full.heuristics) == len(SEEDS)
    assert bounded.stats.simulated + bounded.stats.bound_pruned + \
        bounded.stats.invalid == full.stats.simulated + full.stats.invalid - sum(
            1 for found in full.heuristics.values() if not isinstance(found, str))


def test_the_bounded_walk_skips_most_candidates_of_a_prefill():
    platform = load_platform("tpu_v5e_like")
    op = _op("tpu_v5e_like", SHAPES[1])
    search = search_operator(_task(op, platform, exhaustive=False))
    assert search.stats.bound_pruned > search.stats.simulated


@pytest.mark.parametrize("platform_name", PLATFORMS)
def test_lowerings_sharing_tables_equal_lowerings_alone(platform_name):
    """One TileTables across tile sizes, dataflows and choices (as a search shares it)
    gives each lowering exactly as a fresh one does."""
    platform = load_platform(platform_name)
    for shape in SHAPES:
        op = _op(platform_name, shape)
        tables = TileTables(op, platform)
        base = attention_base(op, TilingSpec(), platform, MAPPER)
        for tiling in _attention_candidates(op, base, TilingSpec(), platform):
            for fusion, orientation, unit in lowering_choices(op, tiling, platform):
                args = dict(orientation=orientation, unit=unit)
                try:
                    alone = lower_attention_as(op, tiling, fusion, platform, **args)
                except AccsimError as exc:
                    with pytest.raises(AccsimError, match=re.escape(exc.rule)):
                        lower_attention_as(op, tiling, fusion, platform, **args,
                                           tables=tables)
                    continue
                shared = lower_attention_as(op, tiling, fusion, platform, **args,
                                            tables=tables, check=False)
                for name in ("load_bytes", "compute_cycles", "vector_cycles", "acquire",
                             "release", "store_bytes", "reload_of"):
                    assert np.array_equal(getattr(shared.program, name),
                                          getattr(alone.program, name)), name
                evac = shared.program.evacuation_cycles
                assert (evac is None) == (alone.program.evacuation_cycles is None)
                if evac is not None:
                    assert np.array_equal(evac, alone.program.evacuation_cycles)
                assert replace(shared, program=None) == replace(alone, program=None)
                assert (shared.program.depth, shared.program.slots,
                        shared.program.overhead_cycles) == (
                    alone.program.depth, alone.program.slots,
                    alone.program.overhead_cycles)


@pytest.mark.parametrize("platform_name", PLATFORMS)
@pytest.mark.parametrize("spec", [TilingSpec(), TilingSpec(groups=3),
                                  TilingSpec(unit="vector")])
def test_the_searchs_bounds_are_each_candidates_bound(platform_name, spec):
    """cycles_bounds (the search's pass over its candidates, sharing their parts) gives
    each candidate cycles_bound alone, and 0 where the lowering refuses it (groups 3
    divide no shape's K/V head groups; the vector unit runs decode only)."""
    platform = load_platform(platform_name)
    refused = 0
    for shape in SHAPES:
        op = _op(platform_name, shape)
        candidates = _attention_candidates(op, attention_base(op, spec, platform, MAPPER),
                                           spec, platform)
        shared = cycles_bounds(op, candidates, platform, TileTables(op, platform))
        for tiling, bound in zip(candidates, shared, strict=True):
            try:
                alone = cycles_bound(op, tiling, tiling.fuse, platform,
                                     orientation=tiling.orientation, unit=tiling.unit,
                                     tables=TileTables(op, platform))
            except AccsimError:
                alone = 0
                refused += 1
            assert bound == alone, tiling
    assert (refused > 0) == (spec != TilingSpec())


def test_a_program_repeats_its_groups_steps_with_reloads_shifted():
    """_Steps.program: `groups` groups of one group's steps, `pairs` per step (each
    step's figures times `pairs`), a reload naming its own group's step."""
    steps = _Steps(load=[5, 6, 7], compute=[1, 2, 3], vector=[0, 1, 0],
                   acquire=[True, True, False], release=[True, False, True],
                   store=[9, 0, 4], reload_of=[-1, 0, -1], evacuation=[0, 2, 0],
                   split=[0.0] * 5, platform=None, dataflow=0, orientation="normal",
                   unit="array")
    program = steps.program(depth=2, slots=3, overhead=10, evacuates=True, groups=6,
                            pairs=2)
    expected = dict(load_bytes=[10, 12, 14], compute_cycles=[2, 4, 6],
                    vector_cycles=[0, 2, 0], store_bytes=[18, 0, 8],
                    evacuation_cycles=[0, 4, 0], acquire=[True, True, False],
                    release=[True, False, True])
    for name, one in expected.items():
        array = getattr(program, name)
        assert array.flags.c_contiguous and array.tolist() == one * 3, name
    assert program.reload_of.tolist() == [-1, 0, -1, -1, 3, -1, -1, 6, -1]
    assert program.acquire.dtype == bool and program.load_bytes.dtype == np.int64
    alone = steps.program(depth=2, slots=3, overhead=10, evacuates=False, groups=1)
    assert alone.reload_of.tolist() == [-1, 0, -1] and alone.evacuation_cycles is None
    assert (program.depth, program.slots, program.overhead_cycles) == (2, 3, 10)
