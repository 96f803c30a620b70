"""The workload fit matrix of a study that names a deployment search: a platform fits
the searched model when one of its deployments meets every SLA target at some arrival
rate (its SLA capacity, serve's --find-max-rate), read from the search's export
instead of the study's own runs."""

from __future__ import annotations

from pathlib import Path

from simulator.review.sections.blocks import FAIL, PASS, Context, finding, section, table
from simulator.review.sections.deployment import label, point_link, searched, unbounded

COLUMNS = [("platform", "text"), ("model", "text"), ("meets SLA", "text"),
           ("deployments meeting it", "int"), ("points", "int"),
           ("best deployment", "text"), ("SLA capacity req/s", "g4"),
           ("headroom %", "pct1"), ("evidence", "link")]


def headroom(sla: dict[str, float], row: dict) -> float | None:
    """The smallest share of an SLA target left at the point's SLA capacity, over the
    targets the point reports (p50, p95 and p99 of TTFT, TPOT and latency)."""
    left = [1 - row[key] / target for key, target in sla.items()
            if row.get(key) is not None]
    return min(left) if left else None


def search_fit(ctx: Context) -> dict:
    """Platform x the searched model: whether any deployment meets the SLA, how many,
    and the best one's SLA capacity and headroom."""
    record = ctx.deployment
    data = record.data
    model = Path(data["spec"]["model"]).stem
    meeting = searched(record)
    rows, fitting = [], []
    for platform, top in data["best"].items():
        mine = [row for row in data["points"] if row["platform"] == platform]
        good = [row for row in meeting if row["platform"] == platform]
        always = [row for row in unbounded(record) if row["platform"] == platform]
        if good or always:  # unbounded: met at every rate tried, no capacity to show
            fitting.append(platform)
        met = "yes" if good else "yes, at every rate tried" if always else "NO"
        rows.append([platform, model, met, len(good), len(mine),
                     label(top) if top else "-", top and top["sla_rate_rps"],
                     top and headroom(data["sla"], top),
                     point_link(record, top) if top else None])
    if fitting:
        verdict = PASS
        reason = (f"{model} meets the SLA {data['sla']} on {len(fitting)} of "
                  f"{len(rows)} platforms in some deployment searched")
        findings = []
    else:
        verdict = FAIL
        reason = f"no platform has a deployment searched meeting the SLA for {model}"
        findings = [finding("no fit", f"no platform in scope meets the SLA for {model} "
                            "in any deployment searched", "#table-fit")]
    return section("fit", verdict, reason, findings=findings, text=[
        "From the study's deployment search (scope.deployment_search): a platform fits "
        "when one of its deployments meets every SLA target at some arrival rate."],
        tables=[table("fit", "Workload fit from the deployment search: does each "
                      "platform have a deployment meeting the SLA (headroom: the "
                      "smallest share of a target left at the best point's SLA "
                      "capacity)", COLUMNS, rows)])
