"""The sections on what the study declares: precision changes and their
guardrails, risks and owners, and the rollback trigger evaluated on every run."""

from __future__ import annotations

from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, RUN_COLUMNS,
                                              Context, finding, link, listing, pointer,
                                              run_cells, run_label, section, table,
                                              workload_metric)
from simulator.review.study import WORKLOAD_METRICS


def precision(ctx: Context) -> dict:
    rows, findings = [], []
    for index, change in enumerate(ctx.study.study.precision_changes):
        where = ", ".join(change.layer_types + change.operators) or "all operators"
        flag = "ok" if change.guardrail else "NO GUARDRAIL"
        rows.append([change.what, where, change.from_dtype or "-", change.to_dtype,
                     change.guardrail or "none", flag])
        if not change.guardrail:
            findings.append(finding("precision without guardrail",
                                    f"precision change without a quality guardrail: "
                                    f"{change.what} ({change.from_dtype or '?'} to "
                                    f"{change.to_dtype} on {where})", "#table-precision"))
    if not rows:
        verdict, reason = NOT_EVALUATED, "the study declares no precision change"
    elif findings:
        verdict = FAIL
        reason = f"{len(findings)} of {len(rows)} precision changes have no guardrail"
    else:
        verdict, reason = PASS, f"{len(rows)} of {len(rows)} precision changes have a " \
            "guardrail"
    return section("precision", verdict, reason, findings=findings, tables=[table(
        "precision", "Precision changes and their quality guardrails",
        [("change", "text"), ("where", "text"), ("from", "text"), ("to", "text"),
         ("guardrail", "text"), ("flag", "text")], rows)])


def risks(ctx: Context) -> dict:
    rows = [[r.risk, r.owner, r.mitigation or "-"] for r in ctx.study.study.risks]
    if rows:
        verdict, reason = PASS, f"{len(rows)} risks, each with an owner"
    else:
        verdict, reason = NOT_EVALUATED, "the study names no risks"
    return section("risks", verdict, reason, text=[
        f"Study owners: {', '.join(ctx.study.study.owners)}"], tables=[table(
            "risks", "Risks and owners", [("risk", "text"), ("owner", "text"),
                                          ("mitigation", "text")], rows)])


def rollback(ctx: Context) -> dict:
    trigger = ctx.study.study.rollback
    if trigger is None:
        return section("rollback", NOT_EVALUATED, "the study names no rollback trigger")
    platforms = trigger.platforms or [p.label for p in ctx.study.platforms]
    rows, fired, findings = [], [], []
    bound = ">" if trigger.fires_when == "above" else "<"
    for record in ctx.records:
        if record.spec.platform.label not in platforms:
            continue
        value = workload_metric(record, trigger.metric)
        fires = value > trigger.threshold if trigger.fires_when == "above" \
            else value < trigger.threshold
        href = pointer(record, "workload")
        rows.append(run_cells(record) + [trigger.metric, value, bound, trigger.threshold,
                                         "FIRED" if fires else "not fired",
                                         link("result", href)])
        if fires:
            fired.append(run_label(record))
            findings.append(finding(
                "rollback fired", f"rollback trigger FIRED: {trigger.metric} {value:.4g} "
                f"{bound} {trigger.threshold:g} on {run_label(record)}", href))
    unit = WORKLOAD_METRICS[trigger.metric][0]
    text = [f"Trigger: roll back when {trigger.metric} ({unit}) is {trigger.fires_when} "
            f"{trigger.threshold:g} on any run of {', '.join(platforms)}."]
    if not rows:
        verdict, reason = NOT_EVALUATED, "no run of the trigger's platforms in this packet"
    elif fired:
        verdict, reason = FAIL, "FIRED on " + listing(fired)
    else:
        verdict, reason = PASS, f"did not fire on any of {len(rows)} runs"
    return section("rollback", verdict, reason, text=text, findings=findings, tables=[
        table("rollback", "Rollback trigger evaluated on every run of its platforms",
              RUN_COLUMNS + [("metric", "text"), ("value", "g4"), ("fires if", "text"),
                             ("threshold", "g"), ("status", "text"),
                             ("evidence", "link")], rows)])
