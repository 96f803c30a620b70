"""The latency-throughput section of a study that names a deployment search: every
searched deployment at its SLA capacity (the highest arrival rate meeting the SLA) with
its per-request percentiles, and the SLA metric that fails just above it, read from the
search's export instead of the study's own serving runs."""

from __future__ import annotations

from simulator.review import figures
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              listing, section, table)
from simulator.review.sections.deployment import label, point_link, searched

COLUMNS = [("platform", "text"), ("deployment", "text"), ("chips", "int"),
           ("SLA capacity req/s", "g4"), ("achieved req/s", "f3"),
           ("goodput req/s", "f3")] + [
    (f"{metric} {p} ms", "g4") for metric in ("ttft", "tpot", "latency")
    for p in ("p50", "p95", "p99")] + [
    ("tokens/s", "f1"), ("just above: req/s", "g4"), ("just above: missed", "text"),
    ("evidence", "link")]


def highest(rows: list[dict]) -> dict[str, float]:
    """Each platform's highest SLA capacity over its deployments."""
    found: dict[str, float] = {}
    for row in rows:
        found[row["platform"]] = max(found.get(row["platform"], 0.0), row["sla_rate_rps"])
    return found


def search_serving(ctx: Context) -> dict:
    """Every searched point at its SLA capacity; judged at the study's serving load
    (scope.serving.rate_per_s) where it names one: a platform whose every deployment's
    SLA capacity is below it misses."""
    record = ctx.deployment
    points = searched(record)
    rows = [[row["platform"], label(row), row["chips"], row["sla_rate_rps"],
             row.get("throughput_rps"), row.get("goodput_rps"),
             *[row.get(f"{metric}_{p}_ms") for metric in ("ttft", "tpot", "latency")
               for p in ("p50", "p95", "p99")],
             row.get("tokens_per_s"), row["above"]["rate_rps"],
             ", ".join(row["above"]["missed"]) or "-", point_link(record, row)]
            for row in points]
    best = highest(points)
    load = ctx.study.study.scope.serving
    capacities = "; ".join(f"{p} {rate:.4g}/s" for p, rate in best.items())
    if not points:
        verdict, reason = NOT_EVALUATED, "no deployment searched meets the SLA at any rate"
    elif load is None:
        verdict, reason = PASS, f"highest SLA capacity per platform: {capacities}"
    else:
        short = [f"{p} (at most {best.get(p, 0.0):.4g}/s)" for p in record.data["best"]
                 if best.get(p, 0.0) < load.rate_per_s]
        verdict = FAIL if short else PASS
        reason = (f"no deployment holds the SLA at {load.rate_per_s:g}/s on " +
                  listing(short) if short else
                  f"every platform holds the SLA at {load.rate_per_s:g}/s: {capacities}")
    shown = [figures.capacity_latency_figure(points, record.data["sla"])] if points else []
    return section("serving", verdict, reason, figures_=shown, text=[
        "From the study's deployment search (scope.deployment_search): each deployment "
        "at its SLA capacity, the metric that fails just above it beside."], tables=[
        table("serving", "Latency-throughput points of the deployment search: each "
              "searched deployment's per-request p50/p95/p99 at its SLA capacity",
              COLUMNS, rows)])
