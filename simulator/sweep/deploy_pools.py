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
