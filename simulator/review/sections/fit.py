"""The workload fit matrix: which platform meets every SLA check for each
workload, one request at a time and served."""

from __future__ import annotations

from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              finding, section, table)
from simulator.review.sections.checks import (Check, operating_checks, served,
                                              sla_checks)


def workload_fit(ctx: Context) -> dict:
    """Platform x workload: a platform fits a workload when one mapping meets every
    check one request at a time and, where it was served, serving meets them too."""
    workloads = [w.label for w in ctx.study.workloads]
    workloads += [loaded.label for _, loaded in ctx.models]
    by_run = {(r.spec.platform.label, r.spec.mapping.label, r.spec.workload.label): r
              for r in ctx.records}
    verdicts: dict[tuple[str, str], list[tuple[str, bool]]] = {}  # (basis, meets)

    def cells(platform: str, name: str, checks: list[Check], basis: str) -> list:
        if not checks:
            return ["not evaluated", None]
        meets = all(c.met for c in checks)
        verdicts.setdefault((platform, name), []).append((basis, meets))
        return ["yes" if meets else "NO", min(c.headroom for c in checks)]

    rows = []
    for platform in ctx.study.platforms:
        for mapping in ctx.study.mappings:
            row = [platform.label, mapping.label]
            for name in workloads:
                record = by_run.get((platform.label, mapping.label, name))
                row += cells(platform.label, name,
                             sla_checks(ctx, record) if record else [], "run")
            rows.append(row)
    serving = {(r.platform, r.subject): r for r in served(ctx)}
    for platform in ctx.study.platforms if serving else []:
        row = [platform.label, f"serving at {ctx.study.study.scope.serving.rate_per_s:g}/s"]
        for name in workloads:
            record = serving.get((platform.label, name))
            row += cells(platform.label, name,
                         operating_checks(ctx, record)[0] if record else [], "serving")
        rows.append(row)
    columns = [("platform", "text"), ("mapping", "text")]
    for name in workloads:
        columns += [(f"{name}: meets SLA", "text"), (f"{name}: headroom %", "pct1")]

    def fits(platform: str, name: str) -> bool:
        judged = verdicts.get((platform, name), [])
        runs = [meets for basis, meets in judged if basis == "run"]
        return bool(judged) and (not runs or any(runs)) and \
            all(meets for basis, meets in judged if basis == "serving")

    unfit = [name for name in workloads
             if not any(fits(p.label, name) for p in ctx.study.platforms)]
    findings = []
    if not verdicts:
        verdict = NOT_EVALUATED
        reason = "no SLA target a run can be judged on"
    elif unfit:
        verdict = FAIL
        reason = "no platform meets the SLA for " + ", ".join(unfit)
        findings = [finding("no fit", f"no platform in scope meets the SLA for {name}",
                            "#table-fit") for name in unfit]
    else:
        verdict = PASS
        reason = "every workload meets the SLA on at least one platform"
    return section("fit", verdict, reason, findings=findings, tables=[table(
        "fit", "Workload fit: does each platform meet every SLA check for each workload "
        "(one row per mapping, one row served; headroom: the smallest over the checks; "
        "a platform fits when a mapping meets them and serving does too)", columns,
        rows)])
