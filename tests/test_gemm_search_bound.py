"""The default search's GEMM walk (search.operator._search_tiles) over a grid of shapes
and platforms: its candidates' lower bounds (search.bounds) never exceed their replayed
cycles, so the walk that stops once the bound exceeds the best picks exactly what the
walk over every candidate picks; a seeded bound that is not a lower bound is caught by
the same check and changes what the pruned walk picks. And the walk's shortcuts (its
next candidate taken without a window of array operations; a tiling lowered at one depth
reused at the others) change no choice, count or figure of the default search, budgets
and all."""

from __future__ import annotations

import pytest

from in_turn import slow_unless_in_turn
from simulator.api import load_platform
from simulator.errors import AccsimError
from simulator.inputs.workload import Workload
from simulator.lowering.tile_table import TileTables
from simulator.mapping.plan import LOOP_ORDERS, Tiling, TilingSpec
from simulator.model.loop_nest import ORIENTATIONS
from simulator.program.tile_program import memory_params
from simulator.search import bounds as bounds_module
from simulator.search import evaluation as evaluation_module
from simulator.search import operator as operator_module
from simulator.search.bounds import MAPPER
from simulator.search.default import MAX_SIMULATED, MAX_STEPS, SEEDS
from simulator.search.operator import SearchTask, evaluate, search_operator

# A 128 x 128 array (os), a 256 x 256 one, a 32 x 32 edge part, every dataflow.
PLATFORMS = ("tpu_v5e_like", "whatif/tpu_v5e_256x256", "edge_32x32",
             "whatif/tpu_v5e_all_dataflows")
# A decode projection (few rows), a prefill one (uneven edge tiles), batched heads, a
# conv: small enough that every candidate of the default search's grid is replayed.
SHAPES = (dict(kind="gemm", m=8, n=384, k=256),
          dict(kind="gemm", m=200, n=256, k=320),
          dict(kind="gemm", batch=2, m=16, n=64, k=96),
          dict(kind="conv2d", h=4, w=4, cin=8, cout=32, kh=3, kw=3, padding=1))
CASES = [(platform, shape) for platform in PLATFORMS for shape in SHAPES]
# The bound is one code path whatever the case: the default run takes the walk of
# tests/in_turn.py (each platform and each shape once), the rest is marked slow.
NAMED = [(platform, f"shape{i}") for platform in PLATFORMS for i in range(len(SHAPES))]
WALK = slow_unless_in_turn(NAMED, arguments=CASES, ids=[f"{p}-{s}" for p, s in NAMED])


def _op(shape: dict):
    return Workload(name="w", operators=[dict(name="op", layer_type="fc", **shape)]
                    ).operators[0]


def _task(op, platform, *, exhaustive: bool, budget: bool = False) -> SearchTask:
    """The default search's task (its coarse grid, by cycles), with its budgets or
    none (`budget` False: the walk's stop is the bound's alone)."""
    return SearchTask(op, None, TilingSpec(), platform, SEEDS, "cycles",
                      exhaustive=exhaustive, constrained=True,
                      max_simulated=MAX_SIMULATED if budget else None,
                      max_steps=MAX_STEPS if budget else 0)


def bound_violations(op, platform, *,
                     first: bool = False) -> list[tuple[Tiling, int, int]]:
    """Every candidate of the default search's grid (each depth that fits, both
    orientations) whose cycle bound exceeds its replayed cycles: (tiling, bound,
    cycles); with `first`, only the first found (whether there is one)."""
    grid, dataflows = bounds_module.candidate_grid(op, None, None, platform, coarse=True)
    grid = grid.expand()
    memory = memory_params(platform)
    tables = TileTables(op, platform)
    found = []
    for i in range(len(grid)):
        tiling = Tiling(tm=int(grid.tm[i]), tn=int(grid.tn[i]), tk=int(grid.tk[i]),
                        loop_order=LOOP_ORDERS[int(grid.order[i])],
                        dataflow=dataflows[int(grid.dataflow[i])],
                        depth=int(grid.depth[i]), heuristic=MAPPER,
                        orientation=ORIENTATIONS[int(grid.orientation[i])])
        try:
            cycles = evaluate(op, tiling, platform, memory, None, tables=tables).cycles
        except AccsimError:
            continue
        if grid.cycles_lb[i] > cycles:
            found.append((tiling, int(grid.cycles_lb[i]), cycles))
            if first:
                break
    return found


def _seed_a_non_bound(monkeypatch) -> None:
    """Candidate bounds twice the true bound: above some candidates' cycles."""
    real = bounds_module.candidate_grid

    def inflated(op, *args, **kwargs):
        grid, dataflows = real(op, *args, **kwargs)
        grid.cycles_lb = grid.cycles_lb * 2
        return grid, dataflows

    monkeypatch.setattr(bounds_module, "candidate_grid", inflated)
    monkeypatch.setattr(operator_module, "candidate_grid", inflated)


@pytest.mark.parametrize("platform_name,shape", WALK)
def test_the_bound_never_exceeds_a_candidates_cycles(platform_name, shape):
    platform = load_platform(platform_name)
    assert bound_violations(_op(shape), platform) == []


@pytest.mark.parametrize("platform_name,shape", WALK)
def test_the_pruned_walk_picks_what_the_full_walk_picks(platform_name, shape):
    platform = load_platform(platform_name)
    op = _op(shape)
    pruned = search_operator(_task(op, platform, exhaustive=False))
    full = search_operator(_task(op, platform, exhaustive=True))
    assert full.stats.bound_pruned == 0 and pruned.stats.bound_pruned > 0
    assert pruned.best is not None and pruned.best == full.best
    assert pruned.stats.simulated < full.stats.simulated


def test_a_seeded_non_bound_is_caught(monkeypatch):
    # The same checks on a bound that overstates some candidates: the direct check
    # names them, and the pruned walk then misses the full walk's best somewhere.
    # Each check stops once its assertion holds: further cases cannot change the
    # verdict (they only add to `caught` and `missed`).
    _seed_a_non_bound(monkeypatch)
    caught = missed = 0
    cases = [case for case in CASES if case[0] in PLATFORMS[:2]]
    for platform_name, shape in cases:
        platform = load_platform(platform_name)
        op = _op(shape)
        if caught < len(cases) // 2:
            caught += bool(bound_violations(op, platform, first=True))
        if missed < 1:
            pruned = search_operator(_task(op, platform, exhaustive=False))
            full = search_operator(_task(op, platform, exhaustive=True))
            missed += pruned.best != full.best
        if caught >= len(cases) // 2 and missed >= 1:
            break
    assert caught >= len(cases) // 2
    assert missed >= 1


# The default search as serving meets it: decode and prefill projections of an 8B
# model, with the default budgets (64 candidates, 2**23 steps) that bind on the larger.
SERVING = (dict(kind="gemm", m=24, n=4096, k=4096),
           dict(kind="gemm", m=600, n=14336, k=4096),
           dict(kind="gemm", m=1, n=1024, k=4096))


@pytest.mark.parametrize("platform_name", ["tpu_v5e_like", "whatif/tpu_v5e_256x256"])
@pytest.mark.parametrize("shape", SERVING)
def test_the_walks_shortcuts_change_nothing(monkeypatch, platform_name, shape):
    # Every window decided by its array operations, and every depth lowered afresh:
    # the search before its shortcuts. Its best, heuristics and counts are the same.
    platform = load_platform(platform_name)
    op = _op(shape)
    fast = search_operator(_task(op, platform, exhaustive=False, budget=True))
    with monkeypatch.context() as patch:
        patch.setattr(operator_module._Walk, "takes", lambda *args: False)
        patch.setattr(TileTables, "found", lambda self, key: None)
        plain = search_operator(_task(op, platform, exhaustive=False, budget=True))
    assert fast == plain
    assert fast.stats.simulated > len(SEEDS)


@pytest.mark.parametrize("platform_name", ["tpu_v5e_like", "whatif/tpu_v5e_256x256"])
@pytest.mark.parametrize("shape", SERVING)
def test_the_default_searchs_cuts_change_no_choice(monkeypatch, platform_name, shape):
    # The default search's own cuts: a grid of only the tile sizes its plan fixes, a
    # later orientation walked only up to the earlier one's best, a depth sibling's
    # arrays not checked again. Without them (the whole grid, filtered; every
    # orientation walked to its own end; every program checked) the same tilings win,
    # free and with whole rows (the norm prologue's plan), with fewer replays.
    platform = load_platform(platform_name)
    op = _op(shape)
    specs = (TilingSpec(), TilingSpec(tk=shape["k"]), TilingSpec(tm=shape["m"]))
    real_grid, real_walk = bounds_module.candidate_grid, operator_module._search_tiles
    for spec in specs:
        task = SearchTask(op, None, spec, platform, SEEDS, "cycles", exhaustive=False,
                          constrained=True, max_simulated=MAX_SIMULATED,
                          max_steps=MAX_STEPS)
        fast = search_operator(task)
        with monkeypatch.context() as patch:
            patch.setattr(operator_module, "candidate_grid",
                          lambda *args, fixed=None, **kwargs: real_grid(*args, **kwargs))
            patch.setattr(operator_module, "_search_tiles",
                          lambda task, limit=None, tables=None: real_walk(task, None,
                                                                          tables))
            patch.setattr(evaluation_module, "_same_arrays", lambda *args: False)
            plain = search_operator(task)
        assert fast.best is not None and fast.best == plain.best
        assert fast.heuristics == plain.heuristics
        assert fast.stats.simulated <= plain.stats.simulated
