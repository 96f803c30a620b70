"""The scope-and-SLA section (what is reviewed, every SLA check) and the
environment section (each result's manifest and input hashes)."""

from __future__ import annotations

import simulator
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, RUN_COLUMNS,
                                              Context, finding, link, listing, pointer,
                                              run_cells, run_label, section, table)
from simulator.review.sections.checks import (operating_checks, served, serving_notes,
                                              serving_targets, sla_checks)


def scope_and_sla(ctx: Context) -> dict:
    study = ctx.study.study
    scope = study.scope
    text = [f"Objective: {study.objective}",
            f"Owners: {', '.join(study.owners)}",
            f"Baseline platform: {study.baseline}"]
    scope_rows = [["platform", p.label, p.source.path if p.source else "(built in)"]
                  for p in ctx.study.platforms]
    scope_rows += [["workload", w.label, w.source.path if w.source else "(built in)"]
                   for w in ctx.study.workloads]
    scope_rows += [["model", model.label, model.config] for model, _ in ctx.models]
    scope_rows += [["mapping", m.label, m.source.path if m.source else "(built in)"]
                   for m in ctx.study.mappings]
    for record in ctx.records:
        stamp = record.result.capacity
        if stamp is not None and stamp.ignored:
            text.append(f"Capacity IGNORED (--ignore-capacity) for {run_label(record)}: "
                        f"each chip needs {stamp.needed_bytes_per_chip:,} bytes of "
                        f"{stamp.capacity_bytes_per_chip:,}; a what-if that cannot run "
                        "as configured")
    if scope.system is not None:
        scope_rows.append(["system", scope.system.plan.flags(), "each run simulates one "
                           "chip's shard; its result file holds the system block", None])
    if scope.serving is not None:
        load = scope.serving
        scope_rows.append(["serving load", f"{load.arrival}, {load.requests} requests, "
                           f"{load.prompt_tokens} prompt / {load.output_tokens} output "
                           f"tokens (LLMs), SLA judged at {load.rate_per_s:g}/s",
                           ", ".join(f"{r:g}/s" for r in load.rates)])
    judged_runs = [(run_cells(record), "one request at a time", check,
                    pointer(record, "workload"))
                   for record in ctx.records for check in sla_checks(ctx, record)]
    for record in served(ctx):
        checks, href = operating_checks(ctx, record)
        judged_runs += [([record.platform, record.subject, "default"],
                         f"serving at {scope.serving.rate_per_s:g}/s", check, href)
                        for check in checks]
    rows, findings, missed = [], [], []
    for cells, basis, check, href in judged_runs:
        label = " / ".join(cells)
        rows.append(cells + [basis, check.target, check.bound, check.limit,
                             check.value, "met" if check.met else "MISSED",
                             check.headroom, link("result", href)])
        if not check.met:
            missed.append(f"{check.target} ({basis}) on {label}")
            findings.append(finding(
                "SLA missed", f"SLA missed: {check.target} {check.value:,.3f} vs "
                f"{check.bound} {check.limit:g} ({basis}) on {label}", href))
    judged = len(rows)
    notes = []
    if serving_targets(ctx) and not served(ctx):
        notes.append(f"{', '.join(serving_targets(ctx))} not evaluated: "
                     + "; ".join(serving_notes(ctx)))
    elif served(ctx):
        notes += serving_notes(ctx)
    if judged == 0:
        verdict, reason = NOT_EVALUATED, "; ".join(notes) or \
            "the study sets no SLA target a run can be judged on"
    elif missed:
        verdict = FAIL
        reason = f"SLA missed on {len(missed)} of {judged} checks: " + listing(missed)
    else:
        verdict, reason = PASS, f"{judged} of {judged} SLA checks met"
    if notes and judged:
        reason += "; " + listing(notes, 2)
    return section("scope-sla", verdict, reason, text=text, findings=findings, tables=[
        table("scope", "Scope", [("kind", "text"), ("name", "text"), ("source", "path")],
              scope_rows),
        table("sla-checks", "SLA checks per run (one request at a time: no queueing, "
              "so every latency percentile is the simulated latency; serving: the "
              "serving simulation at the study's load; headroom: fraction of the limit "
              "to spare, negative = missed)",
              RUN_COLUMNS + [("basis", "text"), ("target", "text"), ("bound", "text"),
                             ("limit", "g"),
                             ("value", "f3"), ("status", "text"), ("headroom %", "pct1"),
                             ("evidence", "link")], rows)])


def environment(ctx: Context) -> dict:
    rows, stale = [], []
    for record in ctx.records:
        manifest = record.result.manifest
        env = manifest.environment
        rows.append(run_cells(record) + [
            manifest.accsim_version, manifest.model_version,
            manifest.git_commit or "not recorded", env.python, env.numpy,
            env.numba, env.simpy, manifest.engine,
            link("manifest", pointer(record, "manifest"))])
        if manifest.model_version != simulator.MODEL_VERSION:
            stale.append(run_label(record))
    inputs: dict[tuple, list] = {}
    for record in ctx.records:
        for kind, entry in record.result.manifest.inputs.items():
            name = entry.canonical.get("name", "")
            key = (kind, name, entry.path)
            inputs.setdefault(key, [kind, name, entry.path or "(built in)",
                                    entry.sha256 or "-"])
    source = ctx.study.source
    input_rows = [["study", ctx.study.study.title, source.path, source.sha256]]
    input_rows += sorted(inputs.values(), key=lambda row: (row[0], row[1], row[2]))
    commits = sorted({row[5] for row in rows})
    text = [f"This packet: accsim {simulator.__version__}, MODEL_VERSION "
            f"{simulator.MODEL_VERSION}. Git commits of the results: {', '.join(commits)}."]
    if not ctx.records:
        verdict, reason = NOT_EVALUATED, "no run in this packet"
    elif stale:
        verdict = FAIL
        reason = (f"results from another MODEL_VERSION: {', '.join(stale)}")
    else:
        verdict = PASS
        reason = (f"every result has MODEL_VERSION {simulator.MODEL_VERSION} and embeds "
                  "its canonical inputs; every input file's sha256 is recorded")
    return section("environment", verdict, reason, text=text, tables=[
        table("environment", "Environment of each result (from its manifest)",
              RUN_COLUMNS + [("accsim", "text"), ("MODEL_VERSION", "int"),
                             ("git commit", "text"), ("python", "text"),
                             ("numpy", "text"), ("numba", "text"), ("simpy", "text"),
                             ("engine", "text"), ("evidence", "link")], rows),
        table("inputs", "Input files and their sha256", [
            ("kind", "text"), ("name", "text"), ("path", "path"), ("sha256", "text")],
            input_rows)])
