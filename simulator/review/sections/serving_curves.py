"""The serving section: latency-throughput points per pair served, with
p50/p95/p99 at each offered load and the SLA judged at the study's load."""

from __future__ import annotations

from simulator.review import figures
from simulator.serving.tails import CAUSES, MEMORY_CAUSES, TAIL_PERCENTILES
from simulator.review.providers import NotEvaluated
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context, link,
                                              listing, section, table)
from simulator.review.sections.checks import (operating_checks, served, serving_checks,
                                              serving_notes)


SERVING_COLUMNS = [("platform", "text"), ("served", "text"), ("offered /s", "g"),
                   ("achieved /s", "f3")] + [
    (f"{metric} {p} ms", "f1") for metric in ("latency", "ttft", "tpot")
    for p in ("p50", "p95", "p99")] + [
    ("tokens/s", "f1"), ("utilisation %", "pct1"), ("completed", "int"),
    ("dropped", "int"), ("SLA at this load", "text"), ("evidence", "link")]
TAIL_COLUMNS = [("platform", "text"), ("served", "text"), ("tail", "text"),
                ("latency ms", "f1")] + [(f"{cause} %", "pct1") for cause in CAUSES] + [
    ("rest (service) %", "pct1"), ("evidence", "link")]


def tail_rows(record, index: int) -> tuple[list[list], list[str]]:
    """Where the time of one point's slow requests went (serving.tails): a row per
    latency tail, and a sentence where memory (KV blocks, preemption, swap) holds any
    of the p99 tail: what memory-tail behaviour costs is what the section is for."""
    tails = record.data.points[index].memory_tails
    rows, text = [], []
    for p in TAIL_PERCENTILES if tails else ():
        shares = tails[f"p{p}"]
        rest = max(0.0, 1.0 - sum(shares[c] for c in CAUSES))
        rows.append([record.platform, record.subject, f">= p{p}", shares["latency_ms"],
                     *(shares[c] for c in CAUSES), rest,
                     link("result", f"{record.file}#/points/{index}/memory_tails")])
        if p == 99 and any(shares[c] > 0 for c in MEMORY_CAUSES):
            top = max(CAUSES, key=lambda c: shares[c])
            text.append(f"{record.subject} on {record.platform}: the p99 latency tail "
                        f"({shares['latency_ms']:,.0f} ms) is {100 * (1 - rest):.0f}% "
                        f"lost to queueing and memory, the most to "
                        f"{top.replace('_', ' ')} ({100 * shares[top]:.0f}%)")
    return rows, text


def serving(ctx: Context) -> dict:
    if isinstance(ctx.serving, NotEvaluated):
        return section("serving", NOT_EVALUATED, ctx.serving.reason)
    rows, missed, text, shown, judged, tails = [], [], [], [], 0, []
    operating = ctx.study.study.scope.serving.rate_per_s
    for record in served(ctx):
        best = None
        for index, point in enumerate(record.data.points):
            rate = record.data.serving.rates_per_s[index]
            checks = serving_checks(ctx, point, llm=record.llm, throughput=False)
            meets = all(c.met for c in checks)
            if meets and checks:
                best = rate
            stats = [point.stats(metric).at(p)
                     if point.stats(metric) and (record.llm or metric == "latency")
                     else None for metric in ("latency", "ttft", "tpot")
                     for p in ("p50", "p95", "p99")]
            rows.append([record.platform, record.subject, rate, point.throughput_rps,
                         *stats, point.tokens_per_s, point.utilization,
                         point.completed, point.dropped,
                         "-" if not checks else "met" if meets else "MISSED",
                         link("result", f"{record.file}#/points/{index}")])
        at_operating = record.data.serving.rates_per_s.index(operating)
        more_rows, tail_text = tail_rows(record, at_operating)
        tails += more_rows
        text += tail_text
        at_load, _ = operating_checks(ctx, record)
        judged += bool(at_load)
        if not all(c.met for c in at_load):
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
        "targets)", SERVING_COLUMNS, rows)] + ([table(
        "serving-tails", f"Memory tails at {operating:g}/s: the share of the latency of "
        "the requests at or above each percentile lost to queueing, to waiting at the "
        "head of the queue for KV blocks, to preemption (until recomputed) and to swaps "
        "(serving.tails); the rest is service", TAIL_COLUMNS, tails)]
        if tails else []))
