"""The default mapping: for every operator whose plan entry names no heuristic, the
mapper's best tiling by cycles (DESIGN.md section 2, Mapping), so that `accsim run`
without a plan, and every upper layer calling `simulate` with `Mapping()`, compares
platforms at their best rather than at a heuristic's luck.

The search is `search.operator.search_operator` with the built-in heuristics as its seeds, the
plan's fixed fields kept, and at most MAX_SIMULATED candidates and MAX_STEPS tile steps
simulated after the seeds (walked in order of their lower bound, so the budget goes to
the most promising), which bounds its time and keeps it deterministic. It is memoised per distinct operator
content (shape, dtype, repeat, the plan entry, the fused operator) and platform within
a process: a pure cache, so serving and sweeps that simulate many workloads sharing
operators search each one once.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace

from simulator.inputs.platform import Platform
from simulator.mapping.plan import SEARCH, Tiling, TilingSpec
from simulator.search.operator import SearchTask, search_operator

# Candidates simulated per operator beyond the heuristics' seeds, and the tile steps
# they may replay in all (a candidate that would exceed it is skipped): the search's
# time bound, a few seconds of lowering and replay at most.
MAX_SIMULATED = 64
MAX_STEPS = 1 << 23
SEEDS = ("array_aligned", "min_offchip", "os_k_inner")


@dataclass(frozen=True)
class _Query:
    """One operator's search; equal and hashed by its canonical text alone."""

    text: str
    op: object = field(compare=False)
    spec: TilingSpec = field(compare=False)
    platform: Platform = field(compare=False)
    following: object = field(compare=False)


def _canonical(op, spec: TilingSpec, platform: Platform, following) -> str:
    fused = following.model_dump(mode="json") if spec.fuse and following is not None \
        else None
    return json.dumps([op.model_dump(mode="json", exclude={"name", "layer_type"}),
                       spec.model_dump(mode="json", exclude_none=True), fused,
                       platform.model_dump(mode="json")], sort_keys=True)


@functools.lru_cache(maxsize=4096)
def _search(query: _Query) -> Tiling | None:
    task = SearchTask(query.op, query.following, query.spec, query.platform, SEEDS, "cycles",
                 exhaustive=False, constrained=True, max_simulated=MAX_SIMULATED,
                 max_steps=MAX_STEPS)
    best = search_operator(task).best
    return None if best is None else replace(best.tiling, heuristic=SEARCH)


def searched_tiling(op, spec: TilingSpec, platform: Platform,
                    following=None) -> Tiling | None:
    """The best tiling of `op` that keeps the fields `spec` sets; None if none fits."""
    return _search(_Query(_canonical(op, spec, platform, following), op, spec, platform,
                          following))
