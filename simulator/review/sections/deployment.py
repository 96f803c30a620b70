"""The deployment search section (DESIGN.md section 18), read from its export
(review.deployment_search): per platform, whether any deployment meets the SLA (the workload
fit), the best one's latency at its SLA capacity (where the latency-throughput curve
crosses the SLA) and its tokens per second per watt and per chip, and the constraint
that binds it, which is a finding; the Pareto front across platforms."""

from __future__ import annotations

from simulator.review.providers import NotEvaluated
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              finding, link, section, table)

# Every latency the best point's table shows, as the review checklist asks (p95 too).
PERCENTILES = ("p50", "p95", "p99")
BEST_COLUMNS = [("platform", "text"), ("deployment", "text"), ("chips", "int"),
                ("SLA capacity req/s", "g4"), ("achieved req/s", "f3"), ("tokens/s", "f1"),
                ("tokens/s/chip", "f1"), ("tokens/s/W", "f2"), ("J/token", "g4"),
                ("$/Mtok", "f3")] + [
    (f"{metric} {p} ms", "g4") for metric in ("TTFT", "TPOT") for p in PERCENTILES] + [
    ("binding constraint", "text"), ("evidence", "link")]
COUNT_COLUMNS = [("platform", "text"), ("points", "int"), ("searched", "int"),
                 ("pruned", "int"), ("meet the SLA at some rate", "int"),
                 ("on the front", "int")]


def label(row: dict) -> str:
    plan = row.get("precision", "none")
    return (f"{row['replicas']} x (T{row['tp']} x P{row['pp']}) {row['batching']} "
            f"max batch {row['max_batch']}" + ("" if plan == "none" else f", {plan}"))


def point_link(record, row: dict) -> dict:
    """A link to a point of the search's export."""
    index = next(i for i, point in enumerate(record.data["points"])
                 if point["key"] == row["key"])
    return link("point", f"{record.file}#/points/{index}")


def unbounded(record) -> list[dict]:
    """The export's points that meet the SLA at every rate tried (no SLA capacity)."""
    return [row for row in record.data["points"] if row["status"] == "unbounded"]


def searched(record) -> list[dict]:
    """The export's points that have an SLA capacity, platform by platform."""
    return [row for row in record.data["points"] if row.get("sla_rate_rps") is not None]


def deployment(ctx: Context) -> dict:
    """The search's best point per platform, its binding constraint (a finding each),
    and the points searched, pruned and on the front."""
    record = ctx.deployment
    if isinstance(record, NotEvaluated):
        return section("deployment", NOT_EVALUATED, record.reason)
    data = record.data
    index = {row["key"]: i for i, row in enumerate(data["points"])}
    best_rows, count_rows, findings, unfit = [], [], [], []
    for platform, top in data["best"].items():
        mine = [row for row in data["points"] if row["platform"] == platform]
        count_rows.append([platform, len(mine),
                           sum(row["status"] != "pruned" for row in mine),
                           sum(row["status"] == "pruned" for row in mine),
                           sum(row.get("sla_rate_rps") is not None for row in mine),
                           sum(row["on_front"] for row in mine)])
        met_always = [row for row in mine if row["status"] == "unbounded"]
        if top is None and met_always:  # met at every rate tried: no capacity to rank
            findings.append(finding("unbounded", f"{platform}: {len(met_always)} "
                                    "deployments meet the SLA at every rate tried, so "
                                    "none has an SLA capacity to rank",
                                    "#table-deployment-best"))
            best_rows.append([platform, "meets the SLA at every rate tried",
                              *[None] * (len(BEST_COLUMNS) - 3), None])
            continue
        if top is None:
            unfit.append(platform)
            findings.append(finding("no fit", f"{platform}: no deployment searched meets "
                                    f"the SLA {data['sla']}", "#table-deployment-best"))
            best_rows.append([platform, "none meets the SLA",
                              *[None] * (len(BEST_COLUMNS) - 3), None])
            continue
        evidence = link("point", f"{record.file}#/points/{index[top['key']]}")
        best_rows.append([platform, label(top), top["chips"], top["sla_rate_rps"],
                          top.get("throughput_rps"), top["tokens_per_s"],
                          top["tokens_per_s_per_chip"], top["tokens_per_s_per_watt"],
                          top["energy_per_token_j"], top["cost_per_mtok"],
                          *[top.get(f"{metric}_{p}_ms") for metric in ("ttft", "tpot")
                            for p in PERCENTILES], top["binding"]["text"], evidence])
        findings.append(finding("binding constraint", f"{platform}: best {label(top)} "
                                f"({top['chips']} chips), {top['binding']['text']}",
                                "#table-deployment-best"))
    front = [row for row in data["points"] if row["on_front"]]
    text = [f"Deployment search against the SLA {data['sla']}: each point's SLA "
            f"capacity is the highest arrival rate meeting every target (serve's "
            f"--find-max-rate); the best point of each platform by {data['objective']}. "
            f"Pareto front over {', '.join(data['front_objectives'])}: " + "; ".join(
                f"{row['platform']} {label(row)}" for row in front)]
    if len(unfit) == len(data["best"]):
        verdict, reason = FAIL, "no platform has a deployment meeting the SLA"
    else:
        verdict = PASS
        reason = (f"{len(data['best']) - len(unfit)} of {len(data['best'])} platforms "
                  f"meet the SLA; best by {data['objective']}: " + "; ".join(
                      f"{p} {t[data['objective']]:.4g}" for p, t in data["best"].items()
                      if t is not None))
    return section("deployment", verdict, reason, text=text, findings=findings, tables=[
        table("deployment-best", "Best deployment per platform at its SLA capacity (fit: "
              "any meets the SLA; latency at the capacity; perf per watt) and the "
              "constraint that binds it", BEST_COLUMNS, best_rows),
        table("deployment-points", "Points per platform", COUNT_COLUMNS, count_rows)])
