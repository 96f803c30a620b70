"""The roofline bounds that prune a deployment before any serving run (DESIGN.md
section 18): no schedule beats an iteration's roofline floor, so an SLA target below
one batch-1 step's floor is missed at every rate."""

from __future__ import annotations

from collections.abc import Callable

from simulator.inputs.platform import Platform
from simulator.mapping.plan import Mapping
from simulator.metrics.totals import roofline_bound_cycles
from simulator.search.default import SearchCache
from simulator.search.resolve import lower_workload
from simulator.serving.sla import split_key
from simulator.serving.spec import ServeSpec


def iteration_bound_s(platform: Platform, workload,
                      searches: SearchCache | None = None) -> float:
    """Seconds no schedule beats for one iteration: each operator's roofline floor
    (compute, compulsory bytes or its collective's link time), summed (`searches`: the
    default tiling search's results, shared by content: a cache changes no result)."""
    lowered = lower_workload(workload, Mapping(), platform, searches=searches)
    cycles = sum(roofline_bound_cycles(op, platform) * op.runs for op in lowered)
    return platform.seconds(cycles)


def bound_misses(spec: ServeSpec, bound: Callable[[str], float]) -> str | None:
    """Why the roofline bound already misses the SLA (None if it does not): a TPOT
    target below one batch-1 decode step's bound, or a TTFT target below one batch-1
    prefill's (`bound`: a metric's, phase_bound_ms for the smallest request). Any
    statistic of a metric is at least its smallest value, which is at least this
    bound."""
    for key, target_ms in sorted(spec.sla.items()):
        metric, _ = split_key(key)
        if metric not in ("tpot", "ttft"):
            continue
        bound_ms = bound(metric)
        if bound_ms > target_ms:
            return (f"bound: one batch-1 {'decode step' if metric == 'tpot' else 'prefill'}"
                    f" takes at least {bound_ms:.4g} ms > {key} {target_ms:g}")
    return None
