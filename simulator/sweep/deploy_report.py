"""What a deployment search concludes (DESIGN.md section 18): each platform's best
point under the objective, the constraint that binds it at its SLA capacity, and the
Pareto front across platforms (simulator.sweep.pareto)."""

from __future__ import annotations

import numpy as np

from simulator.errors import AccsimError
from simulator.mapping.plan import Mapping
from simulator.metrics.power_cap import platform_at
from simulator.serving.sla import split_key
from simulator.simulate import Inputs, simulate
from simulator.sweep.deploy import OBJECTIVES, Outcome
from simulator.sweep.pareto import pareto_mask
from simulator.sweep.power_budget import POWER_KEY, least_static_w, sla_keys
from simulator.system.parallelism import SystemPlan
from simulator.system.serving import ShardedFrontend

# The binding resource's thresholds (DESIGN.md section 18): off-chip bandwidth when the
# memory is busy this share of an iteration, the interconnect when collectives take
# this share of it.
HBM_BUSY = 0.80
COLLECTIVE_SHARE = 0.30
# KV capacity binds without preemptions when the requests in flight hold this share of
# a replica's KV cache (the rest wait for blocks).
KV_FULL = 0.90
FRONT_OBJECTIVES = ("tokens_per_s_per_chip", "tokens_per_s_per_watt", "cost_per_mtok")


def feasible(rows: list[dict], objective: str) -> list[dict]:
    """Points with an SLA capacity and a value of the objective."""
    return [row for row in rows if row.get("sla_rate_rps") is not None
            and row.get(objective) is not None]


def best(rows: list[dict], objective: str) -> dict | None:
    """The best point under the objective; ties to fewer chips, then the grid's order."""
    sign = -1 if OBJECTIVES[objective] == "max" else 1
    found = feasible(rows, objective)
    if not found:
        return None
    return min(enumerate(found), key=lambda item: (sign * item[1][objective],
                                                   item[1]["chips"], item[0]))[1]


def _metric_name(key: str) -> str:
    metric, statistic = split_key(key)
    return f"{metric.upper()} {statistic}"


def in_flight(row: dict) -> float:
    """Requests in a replica (running or waiting) in the run just above the point's SLA
    capacity, by Little's law."""
    above = row["above"]
    latency_s = (above["latency_ms"] or {}).get("mean", 0.0) / 1e3
    return above["throughput_rps"] * latency_s / row["replicas"]


def kv_held(outcome: Outcome, row: dict) -> float | None:
    """The share of a replica's KV cache the requests it can run would hold just above
    the SLA capacity: min(in flight, max batch) requests of the mean size (whole
    requests for static and dynamic batching, which reserve their KV up front; a
    decoding request's mean context for continuous). None without a KV cache size."""
    tokens = row.get("kv_tokens_per_replica")
    if not tokens:
        return None
    size = outcome.context if row["batching"] == "continuous" else outcome.request
    return min(in_flight(row), row["max_batch"]) * size / tokens


def iteration_shares(outcome: Outcome, row: dict, dtype: str | None) -> dict:
    """Where one iteration's time goes on a chip of the point, at the batch the run just
    above the SLA capacity kept in flight (Little's law, within 1 and max batch) and
    the workload's mean context: off-chip busy, collectives, array busy and vector
    busy, each a share of the iteration's cycles. The iteration is the one behind the
    metric that failed: decode steps when TPOT failed, else (TTFT, latency) one with
    a mean prefill chunk beside the other requests' decode steps."""
    above = row["above"]
    batch = int(min(max(round(in_flight(row)), 1), row["max_batch"]))
    decoding = any(split_key(key)[0] == "tpot" for key in sla_keys(above["missed"]))
    prefill = [] if decoding else [(outcome.prefill, 0)]
    plan = SystemPlan(chips=row["chips_per_replica"], tp=row["tp"], pp=row["pp"])
    platform = outcome.platform
    if row.get("power_cap"):  # the point ran at the clock its power cap left it
        clock = row["power_cap"]["clock_mhz"]
        index = next((i for i, point in enumerate(platform.dvfs.points if platform.dvfs
                                                  else ()) if point.clock_mhz == clock), None)
        if index is None:
            raise AccsimError(f"the point ran at {clock} MHz, which the platform's DVFS "
                              "table lacks (a stored row from another platform?)",
                              file=outcome.platform_file, field="dvfs.points")
        platform = platform_at(platform, index, file=outcome.platform_file)
    frontend = outcome.hf if plan.single_chip else \
        ShardedFrontend(outcome.hf, plan, platform)
    workload = frontend.iteration_workload(outcome.config, prefill=prefill,
                                           decode=[outcome.context] * (batch - len(prefill)),
                                           dtype=dtype)
    if row.get("precision_file"):  # the point's precision plan, as it was served
        workload = outcome.precisions[row["precision_file"]].apply(workload)
    total = simulate(Inputs(platform, workload, Mapping())).total
    cycles = max(total.cycles, 1)
    return {"batch": batch, "hbm_busy": total.offchip_busy_cycles / cycles,
            "collective": total.collective_cycles / cycles,
            "array_busy": total.busy_cycles / cycles,
            "vector_busy": total.vector_unit_busy_cycles / cycles}


def binding(outcome: Outcome, row: dict, dtype: str | None) -> dict:
    """The SLA metric that fails just above the point's SLA capacity and the resource
    behind it: the power budget where the deployment draws more than it there
    (simulator.sweep.power_budget), else KV capacity (preemptions or drops there, or
    the requests it can run holding >= 90% of the cache, so that others wait for
    blocks), else the interconnect (collectives >= 30% of an iteration), else off-chip
    bandwidth (>= 80% busy), else the busiest of the array, the vector unit and the
    memory."""
    above = row["above"]
    shares = iteration_shares(outcome, row, dtype)
    names = [_metric_name(key) for key in sla_keys(above["missed"])]
    drawn = above.get("power") if POWER_KEY in above["missed"] else None
    metrics = ", ".join(names + ["power"] * (drawn is not None)) or "no SLA metric"
    held = kv_held(outcome, row)
    if drawn is not None:
        watts = "an unknown power (no token finished)" if drawn["value"] is None else \
            f"{drawn['value']:,.4g} W"
        resource = (f"power: the deployment draws {watts}, over the budget of "
                    f"{drawn['target']:,.4g} W")
    elif above["preempted"] or above["dropped"]:
        resource = (f"KV capacity: {above['preempted']:,} preemptions, "
                    f"{above['dropped']:,} dropped")
    elif held is not None and held >= KV_FULL:
        resource = (f"KV capacity: the cache {100 * min(held, 1.0):.0f}% held, requests "
                    "wait for blocks")
    elif shares["collective"] >= COLLECTIVE_SHARE:
        resource = f"interconnect: collectives {100 * shares['collective']:.0f}%"
    elif shares["hbm_busy"] >= HBM_BUSY:
        resource = f"HBM bandwidth {100 * shares['hbm_busy']:.0f}% busy"
    else:
        name, share = max((("compute: array", shares["array_busy"]),
                           ("vector unit", shares["vector_busy"]),
                           ("HBM bandwidth", shares["hbm_busy"])), key=lambda p: p[1])
        resource = f"{name} {100 * share:.0f}% busy"
    return {"metric": metrics, "rate_rps": above["rate_rps"], "resource": resource,
            "iteration": shares,
            "text": f"limited by {metrics} at rate {above['rate_rps']:.4g}/s: {resource}"}


def front_objectives(rows: list[dict]) -> list[str]:
    """The objectives the front is taken over: cost only when every point has one."""
    return [name for name in FRONT_OBJECTIVES
            if rows and all(row.get(name) is not None for row in rows)]


def front(rows: list[dict]) -> list[dict]:
    """Points no other beats on every front objective, across platforms."""
    rows = [row for row in rows if row.get("sla_rate_rps") is not None]
    names = front_objectives(rows)
    if not rows or not names:
        return []
    values = np.array([[row[name] for name in names] for row in rows], dtype=float)
    mask = pareto_mask(values, [OBJECTIVES[name] for name in names])
    return [row for row, on in zip(rows, mask) if on]


def conclude(outcomes: list[Outcome], objective: str, dtype: str | None) -> dict:
    """Best point and its binding constraint per platform, and the front; refuses a
    search where no platform has any point to search."""
    chosen = {}
    for outcome in outcomes:
        top = best(outcome.points, objective)
        chosen[outcome.arch] = None if top is None else \
            {**top, "binding": binding(outcome, top, dtype)}
    everything = [row for outcome in outcomes for row in outcome.points]
    return {"objective": objective, "best": chosen, "front": front(everything),
            "front_objectives": front_objectives(feasible(everything, "sla_rate_rps")),
            "unbounded": {outcome.arch: [row for row in outcome.points
                                         if row["status"] == "unbounded"]
                          for outcome in outcomes}}


def all_pruned(outcomes: list[Outcome], budget_w: float | None = None
               ) -> AccsimError | None:
    """The error of a search where no platform has any point left to search (every
    point pruned), None otherwise; where the power budget pruned every point, an error
    that says so, with the least static power of any point."""
    if any(outcome.points for outcome in outcomes):
        return None
    pruned = [row for outcome in outcomes for row in outcome.pruned]
    if pruned and all(str(row["reason"]).startswith("power:") for row in pruned):
        least = min((row["chips"] * least_static_w(outcome.platform), row["chips"],
                     outcome.arch) for outcome in outcomes for row in outcome.pruned)
        return AccsimError(f"no deployment fits the power budget of {budget_w:,.4g} W: "
                           f"the least any searched point draws is {least[0]:,.4g} W, "
                           f"the static power alone of {least[1]} chips of {least[2]} "
                           "(raise the budget, or search fewer chips with "
                           "--chips-per-replica and --replicas)", field="--power-budget-w")
    first = f"; the first: {pruned[0]['reason']}" if pruned else ""
    budget = ", --power-budget-w" if budget_w is not None else ""
    return AccsimError(f"no deployment of any platform is left to search: all "
                       f"{len(pruned)} points were pruned{first} (raise --budget-chips"
                       f"{budget}, or --no-prune to search them anyway)", field="--arch")
