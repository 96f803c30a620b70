"""The packet's sections (DESIGN.md section 12), each with a verdict: pass, fail, or not
evaluated and why. Every number comes from a result file (a run's, a serving result,
the sweep's export) and every claim carries a link to it: `results/FILE.json#/JSON/
POINTER` (RFC 6901) for the record, `#op-...` for the operator's row in the mapping
sheet.

Sections are built from decoded result files only, so a cached result and a fresh one
give the same packet. Nothing here simulates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import simulator
from simulator.bottleneck import Verdict
from simulator.review import figures
from simulator.review.providers import NotEvaluated, platform_area_mm2
from simulator.review.runs import RunRecord
from simulator.review.study import WORKLOAD_METRICS, ModelUnderReview, ResolvedStudy
from simulator.review.sweep import SweepRecord, report_of
from simulator.sweep.report import axis_headings

PASS, FAIL, NOT_EVALUATED = "pass", "fail", "not evaluated"
# Findings on the first screen, in this order: a mismatch between the expected and the
# simulated bottleneck class first (DESIGN.md section 12, issue 14 item 4).
FINDING_ORDER = ("bottleneck mismatch", "SLA missed", "rollback fired",
                 "precision without guardrail", "target missed", "no fit",
                 "no sweep front", "validation failed")
SERVING_TARGETS = ("ttft_ms", "tpot_ms", "min_tokens_per_s")
RUN_COLUMNS = [("platform", "text"), ("workload", "text"), ("mapping", "text")]


@dataclass(frozen=True)
class Context:
    """What every section is built from."""

    study: ResolvedStudy
    records: list[RunRecord]
    models: list[tuple[ModelUnderReview, object]]  # (model, study.Loaded)
    serving: list | NotEvaluated                   # review.serving.ServingRecord
    sweep: SweepRecord | NotEvaluated


# --- building blocks (plain dicts: packet.json holds them as they are) ---

def table(table_id: str, caption: str, columns: list[tuple[str, str]],
          rows: list[list]) -> dict:
    """A table: columns (name, format) and rows of raw cells (number, text, None, or a
    link {"text", "href"})."""
    return {"id": table_id, "caption": caption,
            "columns": [{"name": name, "format": fmt} for name, fmt in columns],
            "rows": rows}


def link(text: str, href: str) -> dict:
    return {"text": text, "href": href}


def pointer(record: RunRecord, *parts) -> str:
    """A link into a result file: its path and a JSON Pointer fragment."""
    escaped = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return f"{record.file}#" + quote("/" + "/".join(escaped), safe="/~")


def operator_anchor(record: RunRecord, index: int) -> str:
    return f"op-{record.spec.name}-{index}"


def finding(kind: str, text: str, href: str | None) -> dict:
    return {"kind": kind, "text": text, "href": href}


def section(section_id: str, verdict: str, reason: str, *, text: list[str] = (),
            tables: list[dict] = (), figures_: list[dict] = (),
            findings: list[dict] = ()) -> dict:
    return {"id": section_id, "title": TITLES[section_id], "verdict": verdict,
            "reason": reason, "text": list(text), "tables": list(tables),
            "figures": list(figures_), "findings": list(findings)}


def listing(items: list[str], limit: int = 3) -> str:
    """The first few items and how many more (the full list is in the tables)."""
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def run_cells(record: RunRecord) -> list[str]:
    spec = record.spec
    return [spec.platform.label, spec.workload.label, spec.mapping.label]


def run_label(record: RunRecord) -> str:
    return " / ".join(run_cells(record))


def workload_metric(record: RunRecord, metric: str) -> float:
    return WORKLOAD_METRICS[metric][1](record.result["workload"])


# --- SLA checks, shared by the SLA, fit and efficiency sections ---

def _check(target: str, bound: str, limit: float, value: float) -> dict:
    met = value <= limit if bound == "<=" else value >= limit
    headroom = (limit - value) / limit if bound == "<=" else (value - limit) / limit
    return {"target": target, "bound": bound, "limit": limit, "value": value,
            "met": met, "headroom": headroom}


def sla_checks(ctx: Context, record: RunRecord) -> list[dict]:
    """Every SLA target a workload run can be judged on. Without serving there is one
    request at a time and no queueing, so every latency percentile is the latency."""
    sla = ctx.study.study.sla
    checks = []
    if sla.latency_ms is not None:
        latency = workload_metric(record, "latency_ms")
        checks += [_check(f"latency_ms {p}", "<=", bound, latency)
                   for p, bound in sla.latency_ms.bounds().items()]
    if sla.min_throughput_per_s is not None:
        checks.append(_check("min_throughput_per_s", ">=", sla.min_throughput_per_s,
                             workload_metric(record, "throughput_per_s")))
    if sla.power_cap_w is not None:
        checks.append(_check("power_cap_w", "<=", sla.power_cap_w,
                             workload_metric(record, "average_power_w")))
    return checks


def serving_targets(ctx: Context) -> list[str]:
    sla = ctx.study.study.sla
    return [name for name in SERVING_TARGETS if getattr(sla, name) is not None]


def served(ctx: Context) -> list:
    """The serving records that have results."""
    return [] if isinstance(ctx.serving, NotEvaluated) else \
        [r for r in ctx.serving if r.data is not None]


def serving_point(record, rate: float) -> tuple[int, dict]:
    index = record.data["serving"]["rates_per_s"].index(rate)
    return index, record.data["points"][index]


def serving_checks(ctx: Context, point: dict, *, llm: bool,
                   throughput: bool = True) -> list[dict]:
    """The SLA targets a serving result at one load is judged on: latency percentiles
    under queueing, TTFT and TPOT for LLMs, and (with `throughput`: at the load the
    SLA is judged at, since below it the achieved rate is the offered one) tokens and
    requests per second."""
    sla = ctx.study.study.sla
    checks = []
    for metric in ("latency", "ttft", "tpot") if llm else ("latency",):
        bounds = getattr(sla, f"{metric}_ms")
        stats = point[f"{metric}_ms"]
        for percentile, bound in (bounds.bounds() if bounds else {}).items():
            if stats is not None and stats[percentile] is not None:
                checks.append(_check(f"{metric}_ms {percentile}", "<=", bound,
                                     stats[percentile]))
    if not throughput:
        return checks
    if sla.min_tokens_per_s is not None and llm and point["tokens_per_s"] is not None:
        checks.append(_check("min_tokens_per_s", ">=", sla.min_tokens_per_s,
                             point["tokens_per_s"]))
    if sla.min_throughput_per_s is not None:
        checks.append(_check("min_throughput_per_s", ">=", sla.min_throughput_per_s,
                             point["throughput_rps"]))
    return checks


def operating_checks(ctx: Context, record) -> tuple[list[dict], str]:
    """A serving record's checks at the load the SLA is judged at, and their evidence."""
    index, point = serving_point(record, ctx.study.study.scope.serving.rate_per_s)
    return serving_checks(ctx, point, llm=record.llm), \
        f"{record.file}#/points/{index}"


def serving_notes(ctx: Context) -> list[str]:
    """Why serving figures are missing, where they are."""
    if isinstance(ctx.serving, NotEvaluated):
        return [ctx.serving.reason]
    return [f"serving {r.subject} on {r.platform} not evaluated: {r.reason}"
            for r in ctx.serving if r.data is None]


# --- the sections ---

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
        rows.append(cells + [basis, check["target"], check["bound"], check["limit"],
                             check["value"], "met" if check["met"] else "MISSED",
                             check["headroom"], link("result", href)])
        if not check["met"]:
            missed.append(f"{check['target']} ({basis}) on {label}")
            findings.append(finding(
                "SLA missed", f"SLA missed: {check['target']} {check['value']:,.3f} vs "
                f"{check['bound']} {check['limit']:g} ({basis}) on {label}", href))
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
        table("scope", "Scope", [("kind", "text"), ("name", "text"), ("source", "text")],
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
        manifest = record.result["manifest"]
        env = manifest["environment"]
        rows.append(run_cells(record) + [
            manifest["accsim_version"], manifest["model_version"],
            manifest["git_commit"] or "not recorded", env["python"], env["numpy"],
            env["numba"], env["simpy"], manifest["engine"],
            link("manifest", pointer(record, "manifest"))])
        if manifest["model_version"] != simulator.MODEL_VERSION:
            stale.append(run_label(record))
    inputs: dict[tuple, list] = {}
    for record in ctx.records:
        for kind, entry in record.result["manifest"]["inputs"].items():
            name = entry["canonical"].get("name", "")
            key = (kind, name, entry["path"])
            inputs.setdefault(key, [kind, name, entry["path"] or "(built in)",
                                      entry["sha256"] or "-"])
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
            ("kind", "text"), ("name", "text"), ("path", "text"), ("sha256", "text")],
            input_rows)])


def utilisation(ctx: Context) -> dict:
    targets = ctx.study.study.targets
    rows, findings, missed, judged = [], [], [], 0
    for record in ctx.records:
        result = record.result
        whole = max(result["workload"]["cycles"], 1)
        counts: dict[str, int] = {}
        for op in result["operators"]:
            counts[op["layer_type"]] = counts.get(op["layer_type"], 0) + 1
        for name, totals in result["layer_types"].items():
            rows.append(run_cells(record) + [
                name, counts[name], totals["cycles"] / whole, totals["mfu"],
                totals["memory_stall_fraction"], totals["bottleneck"],
                link("result", pointer(record, "layer_types", name))])
        totals = result["workload"]
        rows.append(run_cells(record) + [
            "(workload)", len(result["operators"]), 1.0, totals["mfu"],
            totals["memory_stall_fraction"], totals["bottleneck"],
            link("result", pointer(record, "workload"))])
        for metric, bound, limit in (("mfu", ">=", targets.min_mfu),
                                     ("memory_stall_fraction", "<=",
                                      targets.max_memory_stall_fraction)):
            if limit is None:
                continue
            judged += 1
            check = _check(metric, bound, limit, totals[metric])
            if not check["met"]:
                missed.append(f"{metric} {totals[metric]:.3f} on {run_label(record)}")
                findings.append(finding(
                    "target missed", f"target missed: {metric} {totals[metric]:.3f} vs "
                    f"{bound} {limit:g} on {run_label(record)}",
                    pointer(record, "workload")))
    if judged == 0:
        verdict, reason = NOT_EVALUATED, ("the study sets no utilisation target "
                                          "(targets.min_mfu, "
                                          "targets.max_memory_stall_fraction)")
    elif missed:
        verdict, reason = FAIL, "targets missed: " + listing(missed)
    else:
        verdict, reason = PASS, f"{judged} of {judged} utilisation targets met"
    if not ctx.records:
        verdict, reason = NOT_EVALUATED, "no run in this packet"
    workloads = list(dict.fromkeys(r.spec.workload.label for r in ctx.records))
    shown = [figures.trend_figure(ctx.records, name) for name in workloads]
    shown += [figures.breakdown_figure(record) for record in ctx.records]
    return section("utilisation", verdict, reason, findings=findings, figures_=shown,
                   tables=[table(
                       "utilisation", "MFU and memory-stall fraction by layer_type "
                       "(share: of the workload's cycles; bottleneck: the class holding "
                       "most cycles)", RUN_COLUMNS + [
                           ("layer_type", "text"), ("ops", "int"), ("share %", "pct1"),
                           ("MFU %", "pct1"), ("stall %", "pct1"), ("bottleneck", "text"),
                           ("evidence", "link")], rows)])


def _tiling(op: dict) -> list:
    tiling = op["tiling"]
    if tiling is None:  # a collective: links only, no tiling
        return ["-", "-", "-", "-"]
    if op["unit"] == "vector":
        return [f"{tiling['tm']} rows", "-", "-", tiling["depth"]]
    return [f"{tiling['tm']}x{tiling['tn']}x{tiling['tk']}", tiling["loop_order"],
            tiling["dataflow"], tiling["depth"]]


def mapping_sheet(ctx: Context) -> dict:
    expected = ctx.study.study.expected_bottlenecks
    mismatched, matched, findings = [], [], []
    compared = 0
    for record in ctx.records:
        groups: dict[tuple, list] = {}
        for index, op in enumerate(record.result["operators"]):
            want = expected.operators.get(op["name"]) or \
                expected.layer_types.get(op["layer_type"])
            got = op["bottleneck"]["class"]
            verdict = Verdict(got, tuple(op["bottleneck"]["rules_tried"]))
            status = "-" if want is None else "match" if want == got else "MISMATCH"
            row = [{"text": op["name"], "id": operator_anchor(record, index)}] + \
                run_cells(record) + [op["layer_type"], *_tiling(op), op["fused"] or "-",
                                     want or "-", got, status, verdict.reason(),
                                     op["totals"]["cycles"],
                                     link("result", pointer(record, "operators", index))]
            if want is not None:
                compared += 1
            (mismatched if status == "MISMATCH" else matched).append(row)
            if status == "MISMATCH":
                groups.setdefault((op["layer_type"], want, got), []).append((index, op))
        for (layer_type, want, got), ops in groups.items():
            first = ops[0][0]
            names = ", ".join(op["name"] for _, op in ops[:4]) + \
                (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
            findings.append(finding(
                "bottleneck mismatch", f"bottleneck mismatch on {run_label(record)}: "
                f"{layer_type} expected {want}, simulated {got} ({len(ops)} operators: "
                f"{names})", "#" + operator_anchor(record, first)))
    if not ctx.records:
        verdict, reason = NOT_EVALUATED, "no run in this packet"
    elif compared == 0:
        verdict, reason = NOT_EVALUATED, ("the study states no expected bottleneck class "
                                          "(expected_bottlenecks)")
    elif mismatched:
        verdict = FAIL
        reason = (f"{len(mismatched)} of {compared} operators with an expected class "
                  "simulate in another (listed first)")
    else:
        verdict, reason = PASS, f"{compared} of {compared} expected classes match the " \
            "simulation"
    text = ["Per operator of every run: the tiling it ran with (Tm x Tn x Tk, or rows "
            "per tile on the vector unit), loop order outermost first, dataflow, "
            "prefetch depth, the vector operator fused as its epilogue, the expected and "
            "simulated bottleneck class, and the measured values of the rule that "
            "decided the class (DESIGN.md section 4). Mismatches come first. Buffer "
            "occupancy per operand is in `accsim run --sheet` for the same inputs."]
    return section("mapping-sheet", verdict, reason, text=text, findings=findings,
                   tables=[table("mapping-sheet", "Operator-to-kernel mapping sheet",
                                 [("operator", "anchor")] + RUN_COLUMNS + [
                                     ("layer_type", "text"), ("tiling", "text"),
                                     ("loop", "text"), ("dataflow", "text"),
                                     ("depth", "int"), ("fused", "text"),
                                     ("expected", "text"), ("simulated", "text"),
                                     ("check", "text"), ("evidence", "text"),
                                     ("cycles", "int"), ("result", "link")],
                                 mismatched + matched)])


SERVING_COLUMNS = [("platform", "text"), ("served", "text"), ("offered /s", "g"),
                   ("achieved /s", "f3")] + [
    (f"{metric} {p} ms", "f1") for metric in ("latency", "ttft", "tpot")
    for p in ("p50", "p95", "p99")] + [
    ("tokens/s", "f1"), ("utilisation %", "pct1"), ("completed", "int"),
    ("dropped", "int"), ("SLA at this load", "text"), ("evidence", "link")]


def serving(ctx: Context) -> dict:
    if isinstance(ctx.serving, NotEvaluated):
        return section("serving", NOT_EVALUATED, ctx.serving.reason)
    rows, missed, text, shown, judged = [], [], [], [], 0
    operating = ctx.study.study.scope.serving.rate_per_s
    for record in served(ctx):
        best = None
        for index, point in enumerate(record.data["points"]):
            rate = record.data["serving"]["rates_per_s"][index]
            checks = serving_checks(ctx, point, llm=record.llm, throughput=False)
            meets = all(c["met"] for c in checks)
            if meets and checks:
                best = rate
            stats = [point[f"{metric}_ms"][p]
                     if point[f"{metric}_ms"] and (record.llm or metric == "latency")
                     else None for metric in ("latency", "ttft", "tpot")
                     for p in ("p50", "p95", "p99")]
            rows.append([record.platform, record.subject, rate, point["throughput_rps"],
                         *stats, point["tokens_per_s"], point["utilization"],
                         point["completed"], point["dropped"],
                         "-" if not checks else "met" if meets else "MISSED",
                         link("result", f"{record.file}#/points/{index}")])
        at_load, _ = operating_checks(ctx, record)
        judged += bool(at_load)
        if not all(c["met"] for c in at_load):
            missed.append(f"{record.subject} on {record.platform}")
        text.append(f"{record.subject} on {record.platform}: highest offered load whose "
                    "latency percentiles meet the SLA: " +
                    (f"{best:g}/s" if best is not None else "none of those offered"))
        shown.append(figures.serving_figure(record, ctx.study.study.sla))
    if any(r.llm for r in served(ctx)):
        text.append("An LLM is served whole: every request's prefill and decode, "
                    "whatever phase its operator run uses.")
    text += serving_notes(ctx)
    if not rows:
        verdict, reason = NOT_EVALUATED, "; ".join(serving_notes(ctx)) or "nothing served"
    elif not judged:
        verdict, reason = NOT_EVALUATED, "the study's SLA sets no target serving can be " \
            "judged on"
    elif missed:
        verdict = FAIL
        reason = f"SLA missed at {operating:g}/s: " + listing(missed)
    else:
        verdict, reason = PASS, f"SLA met at {operating:g}/s on every pair served"
    return section("serving", verdict, reason, text=text, figures_=shown, tables=[table(
        "serving", "Latency-throughput points: per request p50/p95/p99 at each offered "
        "load (TTFT and TPOT for LLMs; SLA at this load: its latency percentile "
        "targets)", SERVING_COLUMNS, rows)])


def efficiency(ctx: Context) -> dict:
    cap = ctx.study.study.sla.power_cap_w
    baseline = {(r.spec.workload.label, r.spec.mapping.label): r for r in ctx.records
                if r.spec.platform.label == ctx.study.baseline}
    rows, over, notes = [], [], set()
    for record in ctx.records:
        per_joule = 1.0 / (record.result["workload"]["energy_j"] or float("inf"))
        base = baseline.get((record.spec.workload.label, record.spec.mapping.label))
        ratio = per_joule * base.result["workload"]["energy_j"] if base else None
        area = platform_area_mm2(ctx.study.platform(record.spec.platform.label))
        if isinstance(area, NotEvaluated):
            notes.add(f"per mm^2 not evaluated: {area.reason}")
            area = None
        throughput = workload_metric(record, "throughput_per_s")
        power = workload_metric(record, "average_power_w")
        rows.append(run_cells(record) + [
            workload_metric(record, "latency_ms"), throughput, power,
            workload_metric(record, "energy_mj"), workload_metric(record, "tflops_per_joule"),
            per_joule, ratio, area, throughput / area if area else None,
            link("result", pointer(record, "workload"))])
        if cap is not None and power > cap:
            over.append(f"{power:,.1f} W on {run_label(record)}")
    if not ctx.records:
        verdict, reason = NOT_EVALUATED, "no run in this packet"
    elif cap is None:
        verdict, reason = NOT_EVALUATED, "the study sets no power cap (sla.power_cap_w)"
    elif over:
        verdict, reason = FAIL, f"over the {cap:g} W power cap: " + listing(over)
    else:
        verdict, reason = PASS, f"every run is under the {cap:g} W power cap"
    return section("efficiency", verdict, reason, text=sorted(notes), tables=[table(
        "efficiency", "Performance per watt (runs/J = throughput per watt; x baseline: "
        f"runs/J over {ctx.study.baseline}'s for the same workload and mapping) and per "
        "mm^2", RUN_COLUMNS + [
            ("latency ms", "f3"), ("runs/s", "f1"), ("avg W", "f1"), ("energy mJ", "f3"),
            ("TFLOP/J", "f3"), ("runs/J", "f1"), ("x baseline", "f2"), ("area mm^2", "f1"),
            ("runs/s/mm^2", "f3"), ("evidence", "link")], rows)])


def workload_fit(ctx: Context) -> dict:
    """Platform x workload: a platform fits a workload when one mapping meets every
    check one request at a time and, where it was served, serving meets them too."""
    workloads = [w.label for w in ctx.study.workloads]
    workloads += [loaded.label for _, loaded in ctx.models]
    by_run = {(r.spec.platform.label, r.spec.mapping.label, r.spec.workload.label): r
              for r in ctx.records}
    verdicts: dict[tuple[str, str], list[tuple[str, bool]]] = {}  # (basis, meets)

    def cells(platform: str, name: str, checks: list[dict], basis: str) -> list:
        if not checks:
            return ["not evaluated", None]
        meets = all(c["met"] for c in checks)
        verdicts.setdefault((platform, name), []).append((basis, meets))
        return ["yes" if meets else "NO", min(c["headroom"] for c in checks)]

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


def sweep(ctx: Context) -> dict:
    """The sweep's Pareto front per workload over the spec's objectives, read from its
    export (review.sweep): the front points' axis values and objectives, the points
    run and failed per workload, and the first two objectives plotted."""
    record = ctx.sweep
    if isinstance(record, NotEvaluated):
        return section("sweep", NOT_EVALUATED, record.reason)
    data, report = record.data, report_of(record.data)
    spec = data["sweep"]
    index_of = {point["key"]: index for index, point in enumerate(data["points"])}
    front_rows, count_rows, findings, failures = [], [], [], {}
    for workload in data["workloads"]:
        points = [p for p in data["points"] if p["workload"] == workload]
        front = report.front(workload)
        failed = [p for p in points if p["status"] == "failed"]
        for point in failed:
            failures[point["error"]] = failures.get(point["error"], 0) + 1
        front_rows += [[workload, *(row["point"].get(axis) for axis in report.axes),
                        *(row[o.name] for o in report.objectives), row["bottleneck"],
                        link("point", f"{record.file}#/points/{index_of[row['key']]}")]
                       for row in front]
        count_rows.append([workload, len(points), len(points) - len(failed),
                           len(failed), len(front),
                           link("points", f"{record.file}#/points")])
        if not front:
            why = f"{len(failed)} of {len(points)} failed" if points else \
                "the constraints rule out every point"
            findings.append(finding("no sweep front", f"sweep {spec['name']}: no point "
                                    f"of {workload} ran ({why})", "#table-sweep-points"))
    senses = ", ".join(f"{o.name} {o.sense}" for o in report.objectives)
    text = [f"Sweep {spec['name']} ({spec['path']}): {spec['samples']} points sampled, "
            f"{spec['excluded']} ruled out by its constraints; every point mapped with "
            f"the {spec['mapping']}. One front per workload, over {senses}."]
    text += [f"{count} points failed: {reason}" for reason, count in
             sorted(failures.items(), key=lambda item: (-item[1], item[0]))]
    shown = []
    if len(report.objectives) < 2:
        text.append("One objective: no figure (it needs two).")
    elif front_rows:
        shown.append(figures.sweep_figure(report, spec["name"]))
    if findings:
        verdict = FAIL
        reason = "no Pareto front for " + ", ".join(row[0] for row in count_rows
                                                    if not row[4])
    else:
        verdict = PASS
        reason = (f"Pareto front ({senses}): {len(front_rows)} of "
                  f"{sum(row[2] for row in count_rows)} points that ran "
                  f"({sum(row[3] for row in count_rows)} failed)")
    front_columns = [("workload", "text")] \
        + [(name, "g") for name in axis_headings(report.axes)] \
        + [(f"{o.name} ({o.sense})", "g4") for o in report.objectives] \
        + [("bottleneck", "text"), ("evidence", "link")]
    count_columns = [("workload", "text"), ("points", "int"), ("ran", "int"),
                     ("failed", "int"), ("on front", "int"), ("evidence", "link")]
    return section("sweep", verdict, reason, text=text, findings=findings,
                   figures_=shown, tables=[
                       table("sweep-front", "Pareto front of each workload, best first "
                             f"by {report.objectives[0].name}", front_columns,
                             front_rows),
                       table("sweep-points", "Points run per workload (each a point x "
                             "workload job)", count_columns, count_rows)])


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


# Checks each result is held to, from its operator records: (name, what it checks,
# the test that holds the rule in accsim's suite, failing operator predicate).
RESULT_CHECKS: tuple[tuple[str, str, Callable[[dict], bool]], ...] = (
    ("roofline bound", "simulated cycles >= roofline bound (compute or compulsory "
     "bytes) on every operator",
     lambda t: t["cycles"] + 1e-9 >= t["roofline_bound_cycles"]),
    ("cycle identity", "busy + fill + input stall + output stall + drain (+ collective "
     "link time) = total on every operator",
     lambda t: t["busy_cycles"] + t["fill_cycles"] + t["input_stall_cycles"]
     + t["output_stall_cycles"] + t["drain_cycles"] + t.get("overhead_cycles", 0)
     + t.get("collective_cycles", 0) == t["cycles"]),
)
# What accsim's own test suite validates, not rerun for a packet.
SUITE_VALIDATIONS = (
    ("SCALE-Sim v3 exactness", "compute cycles in `accsim run --validate scalesim` "
     "(unbounded buffers, one tile per GEMM) equal SCALE-Sim's for every layer and "
     "dataflow of its shipped topologies", "tests/test_scalesim_goldens.py; does not "
     "cover these runs' own tilings"),
    ("Engine equivalence", "the Numba kernel gives cycle-identical results to the SimPy "
     "model of record on every shipped platform x workload",
     "tests/test_engine_equivalence_shipped.py"),
    ("Platform facts", "shipped real-chip platforms match their cited peak FLOP/s and "
     "bandwidth within 1%", "tests/test_shipped_inputs.py"),
)


def validation(ctx: Context) -> dict:
    rows, failed = [], []
    for name, what, holds in RESULT_CHECKS:
        for record in ctx.records:
            bad = [i for i, op in enumerate(record.result["operators"])
                   if not holds(op["totals"])]
            ops = len(record.result["operators"])
            status = f"pass ({ops} of {ops} operators)" if not bad else \
                f"FAIL ({len(bad)} of {ops} operators)"
            href = pointer(record, "operators", bad[0]) if bad else pointer(record,
                                                                            "operators")
            rows.append([name, what, run_label(record), status, link("result", href)])
            if bad:
                failed.append(f"{name} on {run_label(record)}")
    for name, what, where in SUITE_VALIDATIONS:
        rows.append([name, what, "accsim's test suite", "not rerun for this packet",
                     where])
    findings = [finding("validation failed", f"validation failed: {text}", "#table-"
                        "validation") for text in failed]
    if not ctx.records:
        verdict, reason = NOT_EVALUATED, "no run in this packet"
    elif failed:
        verdict, reason = FAIL, listing(failed)
    else:
        verdict = PASS
        reason = (f"roofline bound and cycle identity hold on every operator of "
                  f"{len(ctx.records)} runs")
    return section("validation", verdict, reason, findings=findings, tables=[table(
        "validation", "What the figures are validated against", [
            ("check", "text"), ("what", "text"), ("applies to", "text"),
            ("status", "text"), ("evidence", "link")], rows)])


# (section id, heading, builder), in the packet's order.
SECTIONS: tuple[tuple[str, str, Callable[[Context], dict]], ...] = (
    ("scope-sla", "Scope and SLA", scope_and_sla),
    ("environment", "Environment manifest", environment),
    ("utilisation", "MFU and memory stalls by layer type", utilisation),
    ("mapping-sheet", "Mapping sheet", mapping_sheet),
    ("serving", "Latency-throughput curves", serving),
    ("efficiency", "Performance per watt and per mm^2", efficiency),
    ("fit", "Workload fit matrix", workload_fit),
    ("sweep", "Design-space sweep", sweep),
    ("precision", "Precision changes", precision),
    ("risks", "Risks and owners", risks),
    ("rollback", "Rollback trigger", rollback),
    ("validation", "Validation status", validation),
)
TITLES = {section_id: title for section_id, title, _ in SECTIONS}


def build_sections(ctx: Context) -> list[dict]:
    """Every section, in order."""
    return [builder(ctx) for _, _, builder in SECTIONS]


def ordered_findings(sections: list[dict]) -> list[dict]:
    """All findings, bottleneck mismatches first, then by FINDING_ORDER."""
    found = [dict(f, section=s["id"]) for s in sections for f in s["findings"]]
    return sorted(found, key=lambda f: FINDING_ORDER.index(f["kind"]))
