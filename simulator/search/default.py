"""The default mapping: for every operator whose plan entry names no heuristic, the
mapper's best tiling by cycles (DESIGN.md section 2, Mapping), so that `accsim run`
without a plan, and every upper layer calling `simulate` with `Mapping()`, compares
platforms at their best rather than at a heuristic's luck.

The search is `search.operator.search_operator` with the built-in heuristics as its seeds, the
plan's fixed fields kept, and at most MAX_SIMULATED candidates and MAX_STEPS tile steps
simulated after the seeds (walked in order of their lower bound, so the budget goes to
the most promising), which bounds its time and keeps it deterministic. Its results are
kept in a SearchCache per distinct operator content (shape, dtype, repeat, the plan
entry, the fused operator) and platform, owned by the caller: one per `simulate` call
unless the caller passes its own (a serving cost model, a sweep worker), so workloads
sharing operators search each one once. The search is deterministic, so a cache,
shared or not, changes no result.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import replace

from simulator.inputs.platform import Platform
from simulator.mapping.plan import SEARCH, Tiling, TilingSpec
from simulator.search.operator import SearchTask, search_operator

# Candidates simulated per operator beyond the heuristics' seeds, and the tile steps
# they may replay in all (a candidate that would exceed it is skipped): the search's
# time bound, a few seconds of lowering and replay at most.
MAX_SIMULATED = 64
MAX_STEPS = 1 << 23
SEEDS = ("array_aligned", "min_offchip", "os_k_inner")
PLATFORM_TEXTS = 64  # platforms' canonical texts a cache holds (a sweep's are many)


def _canonical(op, spec: TilingSpec, platform_text: str, following) -> str:
    fused = following.model_dump(mode="json") if spec.fuse and following is not None \
        else None
    return json.dumps([op.model_dump(mode="json", exclude={"name", "layer_type"}),
                       spec.model_dump(mode="json", exclude_none=True), fused],
                      sort_keys=True) + platform_text


def _search(op, spec: TilingSpec, platform: Platform, following) -> Tiling | None:
    task = SearchTask(op, following, spec, platform, SEEDS, "cycles", exhaustive=False,
                      constrained=True, max_simulated=MAX_SIMULATED, max_steps=MAX_STEPS)
    best = search_operator(task).best
    return None if best is None else replace(best.tiling, heuristic=SEARCH)


class SearchCache:
    """The default search's best tilings by operator content and platform (at most
    `limit`, the least recently used dropped first), with the lookups it answered
    (`hits`) and the searches it ran (`misses`). Not shared between threads."""

    def __init__(self, limit: int = 4096):
        self.limit = limit
        self.hits = self.misses = 0
        self._found: OrderedDict[str, Tiling | None] = OrderedDict()
        # Each platform's canonical text by object (the object kept, so its id is not
        # reused): a key's platform part, dumped once per platform, not per lookup.
        self._platforms: dict[int, tuple[Platform, str]] = {}

    def _platform_text(self, platform: Platform) -> str:
        held = self._platforms.get(id(platform))
        if held is None:
            if len(self._platforms) >= PLATFORM_TEXTS:
                self._platforms.clear()
            held = self._platforms[id(platform)] = (platform, json.dumps(
                platform.model_dump(mode="json"), sort_keys=True))
        return held[1]

    def searched_tiling(self, op, spec: TilingSpec, platform: Platform,
                        following=None) -> Tiling | None:
        """The best tiling of `op` that keeps the fields `spec` sets; None if none
        fits."""
        key = _canonical(op, spec, self._platform_text(platform), following)
        found = self._found
        if key in found:
            self.hits += 1
            found.move_to_end(key)
            return found[key]
        self.misses += 1
        tiling = found[key] = _search(op, spec, platform, following)
        if len(found) > self.limit:
            found.popitem(last=False)
        return tiling
