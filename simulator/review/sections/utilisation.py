"""The utilisation section: MFU and memory-stall fraction by layer_type per
run, the utilisation targets, and the trend and breakdown figures."""

from __future__ import annotations

from simulator.review import figures
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, RUN_COLUMNS,
                                              Context, finding, link, listing, pointer,
                                              run_cells, run_label, section, table)
from simulator.review.sections.checks import Check


def utilisation(ctx: Context) -> dict:
    targets = ctx.study.study.targets
    rows, findings, missed, judged = [], [], [], 0
    for record in ctx.records:
        result = record.result
        whole = max(result.workload.cycles, 1)
        counts: dict[str, int] = {}
        for op in result.operators:
            counts[op.layer_type] = counts.get(op.layer_type, 0) + 1
        for name, totals in result.layer_types.items():
            rows.append(run_cells(record) + [
                name, counts[name], totals.cycles / whole, totals.mfu,
                totals.memory_stall_fraction, totals.bottleneck,
                link("result", pointer(record, "layer_types", name))])
        totals = result.workload
        rows.append(run_cells(record) + [
            "(workload)", len(result.operators), 1.0, totals.mfu,
            totals.memory_stall_fraction, totals.bottleneck,
            link("result", pointer(record, "workload"))])
        for metric, value, bound, limit in (
                ("mfu", totals.mfu, ">=", targets.min_mfu),
                ("memory_stall_fraction", totals.memory_stall_fraction, "<=",
                 targets.max_memory_stall_fraction)):
            if limit is None:
                continue
            judged += 1
            if not Check(metric, bound, limit, value).met:
                missed.append(f"{metric} {value:.3f} on {run_label(record)}")
                findings.append(finding(
                    "target missed", f"target missed: {metric} {value:.3f} vs "
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
    # One cycle scale for every platform's breakdown of a workload, so bars compare.
    longest = {name: max(t.cycles for r in ctx.records if r.spec.workload.label == name
                         for t in r.result.layer_types.values()) for name in workloads}
    shown += [figures.breakdown_figure(record, longest[record.spec.workload.label])
              for record in ctx.records]
    return section("utilisation", verdict, reason, findings=findings, figures_=shown,
                   tables=[table(
                       "utilisation", "MFU and memory-stall fraction by layer_type "
                       "(share: of the workload's cycles; bottleneck: the class holding "
                       "most cycles)", RUN_COLUMNS + [
                           ("layer_type", "text"), ("ops", "int"), ("share %", "pct1"),
                           ("MFU %", "pct1"), ("stall %", "pct1"), ("bottleneck", "text"),
                           ("evidence", "link")], rows)])
