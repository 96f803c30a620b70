"""The performance-per-watt dashboard of a study that names a deployment search: every
searched deployment at its SLA capacity (tokens per second per watt and per chip,
energy per token, power per chip, cost per million tokens), against the baseline
platform's best and the study's power cap, read from the search's export instead of
the study's own runs."""

from __future__ import annotations

from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              listing, section, table)
from simulator.review.sections.deployment import label, point_link, searched

COLUMNS = [("platform", "text"), ("deployment", "text"), ("chips", "int"),
           ("SLA capacity req/s", "g4"), ("tokens/s", "f1"), ("tokens/s/chip", "f1"),
           ("tokens/s/W", "f2"), ("x baseline best", "f2"), ("J/token", "g4"),
           ("W per chip", "f1"), ("$/Mtok", "f3"), ("evidence", "link")]


def search_efficiency(ctx: Context) -> dict:
    """Each searched point's efficiency at its SLA capacity; judged against the power
    cap (sla.power_cap_w) per chip."""
    record = ctx.deployment
    cap = ctx.study.study.sla.power_cap_w
    base = record.data["best"].get(ctx.study.baseline)
    base_w = base and base.get("tokens_per_s_per_watt")
    rows, over = [], []
    for row in searched(record):
        per_watt = row.get("tokens_per_s_per_watt")
        chip_w = row["power_w"] / row["chips"] if row.get("power_w") else None
        rows.append([row["platform"], label(row), row["chips"], row["sla_rate_rps"],
                     row.get("tokens_per_s"), row.get("tokens_per_s_per_chip"), per_watt,
                     per_watt / base_w if per_watt and base_w else None,
                     row.get("energy_per_token_j"), chip_w, row.get("cost_per_mtok"),
                     point_link(record, row)])
        if cap is not None and chip_w is not None and chip_w > cap:
            over.append(f"{chip_w:,.1f} W per chip on {row['platform']} {label(row)}")
    if not rows:
        verdict, reason = NOT_EVALUATED, "no deployment searched meets the SLA at any rate"
    elif cap is None:
        verdict, reason = NOT_EVALUATED, "the study sets no power cap (sla.power_cap_w)"
    elif over:
        verdict, reason = FAIL, f"over the {cap:g} W power cap: " + listing(over)
    else:
        verdict, reason = PASS, (f"every deployment searched is under the {cap:g} W "
                                 "power cap per chip at its SLA capacity")
    return section("efficiency", verdict, reason, text=[
        "From the study's deployment search (scope.deployment_search): each deployment "
        f"at its SLA capacity; x baseline: tokens/s/W over {ctx.study.baseline}'s best "
        "deployment's."], tables=[table(
            "efficiency", "Performance per watt of the deployment search: each searched "
            "deployment at its SLA capacity", COLUMNS, rows)])
