"""The packet's figures as SVG text, drawn from result files: the MFU and memory-stall
trend by layer_type across platforms, and each run's cycle breakdown (simulator.present.plots).

SVG output is made deterministic (fixed id salt, no date) so equal inputs give equal
files, and the figure's text can be inlined in index.html.
"""

from __future__ import annotations

import io
import re

from simulator.calibrate.tornado import draw_tornado, tornado_height
from simulator.output.figure import pyplot
from simulator.metrics.totals import PEAK_FIELDS, Totals
from simulator.present.plots import draw_breakdown
from simulator.sweep.report import draw_front

SVG_SETTINGS = {"svg.hashsalt": "accsim-review", "svg.fonttype": "path"}


def _svg(figure) -> str:
    plt = pyplot()
    buffer = io.StringIO()
    figure.tight_layout()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    return buffer.getvalue()


def figure(figure_id: str, title: str, svg: str) -> dict:
    """A figure of the packet; its id (a file name and an anchor) made of safe
    characters only, whatever the names in it."""
    return {"id": re.sub(r"[^A-Za-z0-9_-]+", "_", figure_id), "title": title, "svg": svg}


def trend_figure(records: list, workload: str) -> dict:
    """MFU and memory-stall fraction per layer_type of one workload, one bar per run."""
    plt = pyplot()
    runs = [r for r in records if r.spec.workload.label == workload]
    layer_types: list[str] = []
    for record in runs:
        layer_types += [n for n in record.result.layer_types if n not in layer_types]
    height = 0.8 / max(len(runs), 1)
    with plt.rc_context(SVG_SETTINGS):
        fig, (mfu_axes, stall_axes) = plt.subplots(
            1, 2, sharey=True, figsize=(10, 0.5 * len(layer_types) * max(len(runs), 1)
                                        / 2 + 2))
        for offset, record in enumerate(runs):
            groups = record.result.layer_types
            where = [i + offset * height for i in range(len(layer_types))]
            label = f"{record.spec.platform.label} / {record.spec.mapping.label}"
            for axes, key in ((mfu_axes, "mfu"), (stall_axes, "memory_stall_fraction")):
                axes.barh(where, [100 * getattr(groups[n], key) if n in groups else 0.0
                                  for n in layer_types], height=height, label=label)
        mfu_axes.set_yticks([i + height * (len(runs) - 1) / 2
                             for i in range(len(layer_types))], layer_types)
        mfu_axes.invert_yaxis()
        mfu_axes.set_xlabel("MFU %")
        stall_axes.set_xlabel("memory-stall fraction %")
        mfu_axes.legend(fontsize="small", loc="lower right")
        fig.suptitle(f"{workload}: MFU and memory stalls by layer_type")
        svg = _svg(fig)
    return figure(f"trend-{workload}", f"{workload}: MFU and memory-stall fraction by "
                  "layer_type, per platform", svg)


def breakdown_figure(record, longest: int) -> dict:
    """Where each layer_type's cycles go, for one run, on an axis to `longest` cycles
    (the same for every run of the workload, so the platforms' figures compare)."""
    plt = pyplot()
    fields = [f for f in Totals.__dataclass_fields__ if f not in PEAK_FIELDS]  # additive
    groups = sorted(((name, Totals(**{f: getattr(totals, f) for f in fields}))
                     for name, totals in record.result.layer_types.items()),
                    key=lambda item: item[1].cycles)
    title = f"{record.spec.workload.label} on {record.spec.platform.label} " \
            f"({record.spec.mapping.label}): cycles by layer_type"
    with plt.rc_context(SVG_SETTINGS):
        fig, axes = plt.subplots(figsize=(9, 0.45 * len(groups) + 1.6))
        draw_breakdown(axes, groups, title)
        axes.set_xlim(0, max(longest, 1) * 1.02)
        svg = _svg(fig)
    return figure(f"breakdown-{record.spec.name}", title, svg)


def sweep_figure(report, name: str) -> dict:
    """A sweep's first two objectives: every point that ran and each workload's front
    joined (drawn as `accsim sweep report --plot` draws it)."""
    plt = pyplot()
    x, y = report.objectives[0], report.objectives[1]
    with plt.rc_context(SVG_SETTINGS):
        fig, axes = plt.subplots(figsize=(7, 5))
        draw_front(axes, report)
        svg = _svg(fig)
    return figure(f"sweep-{name}", f"sweep {name}: {x.name} against {y.name}, every "
                  "point that ran, the Pareto front of each workload joined", svg)


def serving_figure(record, sla) -> dict:
    """Per-request latency percentiles (TTFT and TPOT for LLMs) against the throughput
    achieved at each offered load, with the SLA's bounds as dashed lines."""
    plt = pyplot()
    metrics = ("ttft", "tpot") if record.llm else ("latency",)
    points = record.data.points
    achieved = [p.throughput_rps for p in points]
    with plt.rc_context(SVG_SETTINGS):
        fig, panels = plt.subplots(1, len(metrics), figsize=(5 * len(metrics) + 1, 3.8),
                                   squeeze=False)
        for axes, metric in zip(panels[0], metrics):
            for percentile in ("p50", "p95", "p99"):
                axes.plot(achieved, [getattr(getattr(p, f"{metric}_ms"), percentile)
                                     for p in points],
                          marker="o", label=percentile)
            bounds = getattr(sla, f"{metric}_ms")
            for percentile, bound in (bounds.bounds() if bounds else {}).items():
                axes.axhline(bound, linestyle="--", color="black", linewidth=1)
                axes.annotate(f"SLA {percentile} {bound:g} ms", (achieved[0], bound),
                              fontsize="small", va="bottom")
            axes.set_xlabel("achieved requests/s")
            axes.set_ylabel(f"{metric} ms")
            axes.set_yscale("log")
            axes.legend(fontsize="small")
        fig.suptitle(f"{record.subject} on {record.platform}: latency vs throughput")
        svg = _svg(fig)
    return figure(f"serving-{record.platform}-{record.subject}",
                  f"{record.subject} on {record.platform}: per-request latency "
                  "percentiles vs achieved throughput, SLA dashed", svg)


def capacity_latency_figure(points: list[dict], sla: dict[str, float]) -> dict:
    """A deployment search's points at their SLA capacity: TTFT and TPOT p99 against
    the throughput achieved there, one colour per platform, the SLA's p99 bounds
    dashed."""
    plt = pyplot()
    with plt.rc_context(SVG_SETTINGS):
        fig, panels = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
        for axes, metric in zip(panels[0], ("ttft", "tpot")):
            for platform in dict.fromkeys(row["platform"] for row in points):
                mine = [row for row in points if row["platform"] == platform]
                axes.scatter([row["throughput_rps"] for row in mine],
                             [row[f"{metric}_p99_ms"] for row in mine], label=platform)
            bound = sla.get(f"{metric}_p99_ms")
            if bound is not None:  # every point meets it: room above, from zero
                axes.axhline(bound, linestyle="--", color="black", linewidth=1)
                axes.set_ylim(0, bound * 1.1)
            axes.set_xlabel("achieved requests/s at the SLA capacity")
            axes.set_ylabel(f"{metric} p99 ms")
            axes.legend(fontsize="small")
        fig.suptitle("Deployment search: latency vs throughput at each SLA capacity")
        svg = _svg(fig)
    return figure("serving-deployment-search", "Each searched deployment's p99 TTFT "
                  "and TPOT at its SLA capacity vs the throughput achieved there, SLA "
                  "dashed", svg)


def tornado_figure(study, platform: str) -> dict:
    """A platform's tornado of the headline metric (drawn as `accsim sensitivity
    --plot` draws it)."""
    plt = pyplot()
    with plt.rc_context(SVG_SETTINGS):
        fig, axes = plt.subplots(figsize=(8, tornado_height(study)))
        draw_tornado(axes, study, platform)
        svg = _svg(fig)
    return figure(f"tornado-{platform}", f"{platform}: {study.metric} at each end of "
                  "every assumed range (the rest as given), widest swing first", svg)
