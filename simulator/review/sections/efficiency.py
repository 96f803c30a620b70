"""The efficiency section: performance per watt and per mm^2 of every run,
against the baseline platform and the study's power cap."""

from __future__ import annotations

from simulator.review.providers import NotEvaluated, platform_area_mm2
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, RUN_COLUMNS,
                                              Context, link, listing, pointer, run_cells,
                                              run_label, section, table, workload_metric)


def efficiency(ctx: Context) -> dict:
    cap = ctx.study.study.sla.power_cap_w
    baseline = {(r.spec.workload.label, r.spec.mapping.label): r for r in ctx.records
                if r.spec.platform.label == ctx.study.baseline}
    rows, over, notes = [], [], set()
    for record in ctx.records:
        per_joule = 1.0 / (record.result.workload.energy_j or float("inf"))
        base = baseline.get((record.spec.workload.label, record.spec.mapping.label))
        ratio = per_joule * base.result.workload.energy_j if base else None
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
