"""The "Assumptions and sensitivity" section (DESIGN.md section 16): the assumed values
behind each platform, the tornado of the study's headline metric, whether each pair's
ranking and each SLA verdict hold across the assumed ranges. A verdict that can flip
is a finding. Built from the section's result file (review.assumption_study) only."""

from __future__ import annotations

from simulator.calibrate.sensitivity import Sensitivity, Swing
from simulator.inputs.loader import validate_model
from simulator.present.results import ServeResult
from simulator.review.assumption_study import AssumptionsRecord
from simulator.review.figures import tornado_figure
from simulator.review.providers import NotEvaluated
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              finding, link, listing, section, table)
from simulator.review.sections.checks import Check, served, serving_checks, sla_checks

# The SLA targets a run is judged on one request at a time, as the time metric moves.
RUN_TARGETS = {"latency_ms": lambda s: s * 1e3, "min_throughput_per_s": lambda s: 1 / s}


def _study(tornado: dict) -> Sensitivity:
    return Sensitivity(tornado["metric"], tornado["unit"], tornado["base"], [
        Swing(f["field"], f["value"], f["low"], f["high"], f["metric_low"],
              f["metric_high"]) for f in tornado["fields"]])


def _href(record: AssumptionsRecord, *parts) -> str:
    return f"{record.file}#/" + "/".join(str(p) for p in parts)


def _run_sla(ctx: Context, record: AssumptionsRecord, index: int, platform: dict) -> list:
    """(basis, check as given, at best, at worst, href) of the run's time-judged SLA
    checks at the platform's corners (time metric only)."""
    run = next((r for r in ctx.records if r.spec.platform.label == platform["platform"]
                and r.spec.workload.label == record.data["assumptions"]["workload"]
                and r.spec.mapping.label == record.data["assumptions"]["mapping"]), None)
    if run is None or record.data["assumptions"]["metric"] != "time_s":
        return []
    corners, found = platform["corners"], []
    for check in sla_checks(ctx, run):
        name = check.target.split()[0]
        if name not in RUN_TARGETS:
            continue
        ends = [Check(check.target, check.bound, check.limit, RUN_TARGETS[name](corners[e]))
                for e in ("best", "worst")]
        found.append(("one request at a time", check, *ends,
                      _href(record, "platforms", index, "corners")))
    return found


def _serving_sla(ctx: Context, record: AssumptionsRecord, index: int,
                 platform: dict) -> list:
    """The serving SLA checks at the load the SLA is judged at, at each corner."""
    if "serving" not in platform:
        return []
    given = next((r for r in served(ctx) if r.platform == platform["platform"]
                  and r.subject == record.data["assumptions"]["workload"]), None)
    if given is None:
        return []
    rate = ctx.study.study.scope.serving.rate_per_s
    point = given.data.points[given.data.serving.rates_per_s.index(rate)]
    ends = [serving_checks(ctx, validate_model(platform["serving"][e]["points"][0],
                                               ServeResult, file=record.file),
                           llm=given.llm) for e in ("best", "worst")]
    return [(f"serving at {rate:g}/s", check, best, worst,
             _href(record, "platforms", index, "serving"))
            for check, best, worst in zip(serving_checks(ctx, point, llm=given.llm),
                                          *ends)]


def assumptions(ctx: Context) -> dict:
    record = ctx.assumptions
    if isinstance(record, NotEvaluated):
        return section("assumptions", NOT_EVALUATED, record.reason)
    head = record.data["assumptions"]
    metric = head["metric"]
    assumed_rows, tornado_rows, figures, sla_rows, findings = [], [], [], [], []
    for index, platform in enumerate(record.data["platforms"]):
        name = platform["platform"]
        for item in platform["assumed"]:
            low, high = item["range"] or (None, None)
            assumed_rows.append([name, item["field"], item["kind"], item["value"], low,
                                 high, item["source"]])
        study = _study(platform["tornado"])
        for row, swing in enumerate(study.swings):
            tornado_rows.append([name, swing.field, swing.value, swing.low, swing.high,
                                 swing.metric_low, swing.metric_high,
                                 swing.spread / study.base if study.base else None,
                                 swing.elasticity(study.base),
                                 link("result", _href(record, "platforms", index,
                                                      "tornado", "fields", row))])
        if study.swings:
            figures.append(tornado_figure(study, name))
        for basis, check, best, worst, href in _run_sla(ctx, record, index, platform) \
                + _serving_sla(ctx, record, index, platform):
            holds = check.met == best.met == worst.met
            sla_rows.append([name, basis, check.target, check.bound, check.limit,
                             check.value, best.value, worst.value,
                             "met" if check.met else "MISSED",
                             "holds" if holds else "CAN FLIP", link("result", href)])
            if not holds:
                findings.append(finding(
                    "verdict can flip", f"SLA verdict can flip: {check.target} ({basis}) "
                    f"on {name} is {'met' if check.met else 'missed'} as given, "
                    f"{best.value:,.4g} to {worst.value:,.4g} across the assumed ranges "
                    f"against {check.bound} {check.limit:g}", href))
    pair_rows = []
    for index, pair in enumerate(record.data["pairs"]):
        href = _href(record, "pairs", index)
        pair_rows.append([pair["first"], pair["second"], pair["winner"],
                          "holds" if pair["holds"] else "CAN FLIP", pair["line"],
                          link("result", href)])
        if not pair["holds"]:
            findings.append(finding("verdict can flip",
                                    f"ranking can flip: {pair['line']}", href))
    unit = record.data["platforms"][0]["tornado"]["unit"] if record.data["platforms"] \
        else ""
    flips = [f["text"] for f in findings]
    if not record.data["platforms"]:
        verdict, reason = NOT_EVALUATED, f"no run of {head['workload']} to perturb"
    elif flips:
        verdict, reason = FAIL, "verdicts that can flip across the assumed ranges: " \
            + listing(flips)
    else:
        verdict, reason = PASS, ("every ranking and SLA verdict holds across the "
                                 "assumed ranges" if pair_rows or sla_rows else
                                 "no ranking or SLA verdict to judge across the ranges")
    text = [f"Headline metric: {metric} ({unit}) of {head['workload']} under mapping "
            f"{head['mapping']}; each assumed value set to each end of its range, one "
            "at a time; a platform's best and worst corners set every field to the end "
            "that lowers, resp. raises, the metric."]
    return section("assumptions", verdict, reason, text=text, figures_=figures,
                   findings=findings, tables=[
        table("assumed", "Assumed and fitted values behind each platform (field, value, "
              "plausible range, provenance kind and source)",
              [("platform", "text"), ("field", "text"), ("kind", "text"), ("value", "g"),
               ("low", "g"), ("high", "g"), ("source", "text")], assumed_rows),
        table("tornado", f"Tornado of {metric}: the metric at the low and high end of "
              "each assumed range, the swing over the value as given, and the "
              "elasticity", [("platform", "text"), ("field", "text"), ("value", "g"),
                             ("low", "g"), ("high", "g"), (f"{metric} at low", "g4"),
                             (f"{metric} at high", "g4"), ("swing %", "pct1"),
                             ("elasticity", "g4"), ("evidence", "link")], tornado_rows),
        table("robust-ranking", f"Does each pair's ranking on {metric} hold across the "
              "assumed ranges (the winner at its worst corner still beats the other at "
              "its best)? Otherwise the single assumptions that flip it",
              [("first", "text"), ("second", "text"), ("winner", "text"),
               ("across ranges", "text"), ("verdict", "text"), ("evidence", "link")],
              pair_rows),
        table("robust-sla", "SLA checks at each platform's best and worst corner",
              [("platform", "text"), ("basis", "text"), ("target", "text"),
               ("bound", "text"), ("limit", "g"), ("as given", "g4"),
               ("best corner", "g4"), ("worst corner", "g4"), ("verdict", "text"),
               ("across ranges", "text"), ("evidence", "link")], sla_rows)])
