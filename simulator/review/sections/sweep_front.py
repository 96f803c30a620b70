"""The design-space sweep section, read from the sweep's export
(review.sweep): each workload's Pareto front and the points run and failed."""

from __future__ import annotations

from simulator.review import figures
from simulator.review.providers import NotEvaluated
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              finding, link, section, table)
from simulator.review.sweep import report_of
from simulator.sweep.report import axis_headings


def sweep(ctx: Context) -> dict:
    """The sweep's Pareto front per workload over the spec's objectives, read from its
    export (review.sweep): the front points' axis values and objectives, the points
    run and failed per workload, and the first two objectives plotted."""
    record = ctx.sweep
    if isinstance(record, NotEvaluated):
        return section("sweep", NOT_EVALUATED, record.reason)
    data, report = record.data, report_of(record.data)
    spec = data.sweep
    index_of = {point.key: index for index, point in enumerate(data.points)}
    front_rows, count_rows, findings, failures = [], [], [], {}
    for workload in data.workloads:
        points = [p for p in data.points if p.workload == workload]
        front = report.front(workload)  # the report's rows: dicts, as the store gives
        failed = [p for p in points if p.status == "failed"]
        for point in failed:
            failures[point.error] = failures.get(point.error, 0) + 1
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
            findings.append(finding("no sweep front", f"sweep {spec.name}: no point "
                                    f"of {workload} ran ({why})", "#table-sweep-points"))
    senses = ", ".join(f"{o.name} {o.sense}" for o in report.objectives)
    # the file as the study names it: where the review ran does not change the packet
    text = [f"Sweep {spec.name} ({ctx.study.study.scope.sweep}, beside the study): "
            f"{spec.samples} points sampled, "
            f"{spec.excluded} ruled out by its constraints; every point mapped with "
            f"the {spec.mapping}. One front per workload, over {senses}."]
    if spec.ignore_capacity:
        text.append("Capacity IGNORED (--ignore-capacity): a point whose chip cannot "
                    "hold the workload ran as a what-if instead of failing.")
    text += [f"{count} points failed: {reason}" for reason, count in
             sorted(failures.items(), key=lambda item: (-item[1], item[0]))]
    shown = []
    if len(report.objectives) < 2:
        text.append("One objective: no figure (it needs two).")
    elif front_rows:
        shown.append(figures.sweep_figure(report, spec.name))
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
