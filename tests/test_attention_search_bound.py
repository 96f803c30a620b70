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
from simulator.lowering.attention import lower_attention_as, lowering_choices
from simulator.lowering.attention_bound import cycles_bound
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
