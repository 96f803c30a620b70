"""Disaggregated points of the deployment search (DESIGN.md section 20): how a plan's
replicas split into a prefill pool and a decode pool, and the serving spec of such a
point (simulator.sweep.deploy_verdict compares them with the co-located points)."""

from __future__ import annotations

from simulator.serving.pools import Disaggregation, Pool
from simulator.serving.spec import ServeSpec

def pool_pairs(replicas: tuple[int, ...], chips: int, budget: int) -> list[tuple[int, int]]:
    """(prefill, decode) replica counts, each from the replicas axis, whose chips fit
    the budget."""
    return [(prefill, decode) for prefill in replicas for decode in replicas
            if chips * (prefill + decode) <= budget]


def pool_axes(grid, plans) -> list[tuple]:
    """The disaggregated points' axes of a grid (none without grid.disaggregate, or
    without continuous batching among its policies): (T x P plan, prefill replicas,
    decode replicas, max batch, precision plan), `plans(chips)` giving the splits."""
    if not grid.disaggregate or "continuous" not in grid.batching:
        return []
    return [(plan, prefill, decode, max_batch, precision)
            for chips in grid.chips_per_replica for plan in plans(chips)
            for prefill, decode in pool_pairs(grid.replicas, chips, grid.budget_chips)
            for max_batch in grid.max_batch for precision in grid.precision]


def point_spec(point, spec: ServeSpec) -> ServeSpec:
    """`spec` (the search's, on the point's plan) serving as the point does: its
    replicas and batching, or its pools."""
    update = {"batching": point.batching, "max_batch": point.max_batch}
    if point.prefill_replicas is None:
        return spec.model_copy(update={**update, "replicas": point.replicas}).resolved()
    pools = Disaggregation(prefill=Pool(replicas=point.prefill_replicas),
                           decode=Pool(replicas=point.replicas), kv_link=point.kv_link)
    return spec.model_copy(update={**update, "replicas": 1, "chips": None,
                                   "disaggregate": pools}).resolved()
