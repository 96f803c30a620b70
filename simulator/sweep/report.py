"""Reports over a result store: the Pareto front per workload over chosen objectives,
the best point by one objective, the failed points, a scatter plot with the front
highlighted, and CSV or Parquet export of every row (with its on-front flag).

Points of different workloads are never compared: each workload has its own front.
Nor are points of different MODEL_VERSIONs (other timing semantics): a store holding
rows of two versions is reported for one of them, named with --model-version, and
refused without it, naming both.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from rich.table import Table
from rich.text import Text

from simulator.errors import AccsimError
from simulator.output.escape import csv_text
from simulator.output.figure import pyplot, save_figure
from simulator.output.files import write_file
from simulator.sweep.pareto import pareto_mask
from simulator.sweep.store import Store
from simulator.sweep.task import LABELS, METRICS

PARQUET_INSTALL = "install it with pip install 'accsim[parquet]'"
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


@dataclass(frozen=True)
class Objective:
    name: str
    sense: str  # "min" or "max"


@dataclass(frozen=True)
class Report:
    """The rows of a store and, per ok row, whether it is on its workload's front."""

    objectives: tuple[Objective, ...]
    rows: list[dict]              # every row, ordered by workload then key
    on_front: dict[str, bool]     # key -> on the front (ok rows with every objective)
    axes: tuple[str, ...]         # axis paths found in the rows' points
    model_version: int | None = None  # the MODEL_VERSION that computed every row

    def front(self, workload: str) -> list[dict]:
        """The front of one workload, best first by the first objective."""
        first = self.objectives[0]
        rows = [r for r in self.rows if r["workload"] == workload and self.on_front.get(r["key"])]
        return sorted(rows, key=lambda r: (r[first.name] if first.sense == "min"
                                           else -r[first.name], r["key"]))

    @property
    def workloads(self) -> list[str]:
        return sorted({row["workload"] for row in self.rows})


def parse_objectives(text: str | None, store: Store | None, flag: str = "--pareto"
                     ) -> tuple[Objective, ...]:
    """`time_s,tops_per_w` or `time_s:min,tops_per_w:max`; a sense left out comes from
    the objectives of the sweep run into the store most recently, else from the
    metric's natural direction. Without text: that sweep's objectives."""
    specs = list(store.sweep_specs().values()) if store is not None else []
    latest: dict[str, str] = specs[-1]["objectives"] if specs else {}
    if text is None:
        if not latest:
            raise AccsimError("the store records no sweep; name objectives with --pareto",
                              file=store.path, field=flag)
        return tuple(Objective(name, sense) for name, sense in latest.items())
    objectives = []
    for part in text.split(","):
        name, _, sense = part.strip().partition(":")
        if name not in METRICS:
            raise AccsimError(f"unknown objective {name!r} (known: {', '.join(METRICS)})",
                              field=flag)
        if sense not in ("", "min", "max"):
            raise AccsimError(f"{part!r}: the sense is min or max", field=flag)
        objectives.append(Objective(name, sense or latest.get(name) or METRICS[name][1]))
    if len({o.name for o in objectives}) != len(objectives):
        raise AccsimError("an objective is named twice", field=flag)
    return tuple(objectives)


def one_version(rows: list[dict], model_version: int | None, *, file: str
                ) -> tuple[list[dict], int | None]:
    """The rows of one MODEL_VERSION (`model_version`, or the only one there is) and
    that version; rows of several versions without a choice are an error naming them."""
    counts: dict[int, int] = {}
    for row in rows:
        version = row["inputs"]["model_version"]
        counts[version] = counts.get(version, 0) + 1
    held = " and ".join(f"MODEL_VERSION {version} ({count} rows)"
                        for version, count in sorted(counts.items()))
    if model_version is None and len(counts) > 1:
        raise AccsimError(f"holds rows of {held}: a front never mixes timing "
                          "models; choose one with --model-version", file=file,
                          field="--model-version")
    if model_version is not None and rows and model_version not in counts:
        raise AccsimError(f"no rows of MODEL_VERSION {model_version} (the store holds "
                          f"{held})", file=file, field="--model-version")
    if model_version is None:
        return rows, next(iter(counts), None)
    return [r for r in rows if r["inputs"]["model_version"] == model_version], model_version


def build_report(store: Store, objectives: tuple[Objective, ...],
                 workload: str | None = None, keys: set[str] | None = None,
                 model_version: int | None = None) -> Report:
    """Read the store and mark each workload's front. `keys`: only those rows (one
    sweep's plan, in a store other sweeps share). `model_version`: only rows of that
    MODEL_VERSION (needed when the rows have several, see one_version)."""
    rows = sorted((r for r in store.rows() if keys is None or r["key"] in keys),
                  key=lambda r: (r["workload"], r["key"]))
    rows, version = one_version(rows, model_version, file=store.path)
    if workload is not None:
        known = sorted({r["workload"] for r in rows})
        if workload not in known:
            raise AccsimError(f"no rows for workload {workload!r} (the store has: "
                              f"{', '.join(known) or 'none'})", field="--workload")
        rows = [r for r in rows if r["workload"] == workload]
    ok = [r for r in rows if r["status"] == "ok"]
    for objective in objectives:
        if ok and all(r[objective.name] is None for r in ok):
            why = " (its platforms have no area table)" if objective.name == "area_mm2" else ""
            raise AccsimError(f"objective {objective.name} has no values in this store"
                              f"{why}", file=store.path, field="--pareto")
    on_front: dict[str, bool] = {}
    for name in sorted({r["workload"] for r in ok}):
        group = [r for r in ok if r["workload"] == name
                 and all(r[o.name] is not None for o in objectives)]
        if not group:
            continue
        values = np.array([[r[o.name] for o in objectives] for r in group], dtype=float)
        mask = pareto_mask(values, [o.sense for o in objectives])
        on_front.update((r["key"], bool(m)) for r, m in zip(group, mask))
    axes = tuple(sorted({path for r in rows for path in r["point"]}))
    return Report(objectives, rows, on_front, axes, version)


def best_by(report: Report, objective: Objective) -> list[dict]:
    """The best ok row of each workload by one objective (ties: the smaller key)."""
    best = []
    for name in report.workloads:
        rows = [r for r in report.rows if r["workload"] == name and r["status"] == "ok"
                and r[objective.name] is not None]
        if rows:
            best.append(min(rows, key=lambda r: (r[objective.name] if objective.sense
                                                 == "min" else -r[objective.name],
                                                 r["key"])))
    return best


def format_value(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


# Ratios stored as fractions (0..1) and printed as percent, as every table prints them
# (`run`, `compare`: MFU%); the store, CSV and Parquet keep the fractions.
PERCENT_METRICS = {"mfu": "MFU%", "memory_stall_fraction": "stall%"}


def metric_heading(metric: str) -> str:
    return PERCENT_METRICS.get(metric, metric)


def metric_text(metric: str, value) -> str:
    """A metric's cell: a percent for PERCENT_METRICS, else format_value."""
    if metric in PERCENT_METRICS and isinstance(value, float):
        return f"{100 * value:.1f}"
    return format_value(value)


def axis_headings(axes: tuple[str, ...]) -> list[str]:
    """Each axis by its last field name where no other axis shares it, else in full
    (the exports always use the full dotted path)."""
    last = [axis.rsplit(".", 1)[-1] for axis in axes]
    return [name if last.count(name) == 1 else axis for axis, name in zip(axes, last)]


def points_table(report: Report, rows: list[dict], title: str,
                 metrics: tuple[str, ...]) -> Table:
    """One line per row: workload, axis values, the given metrics, bottleneck. Values
    never wrap; long headings (dotted axis paths) fold to the column's width."""
    headings = ("workload", *axis_headings(report.axes), *map(metric_heading, metrics),
                "bottleneck")
    cells = [[row["workload"], *(format_value(row["point"].get(a)) for a in report.axes),
              *(metric_text(m, row[m]) for m in metrics), row["bottleneck"] or "-"]
             for row in rows]
    table = Table(title=Text(title), title_justify="left")
    for index, heading in enumerate(headings):
        label = heading in ("workload", "bottleneck")
        width = max((len(line[index]) for line in cells), default=1)
        table.add_column(Text(heading), overflow="fold", min_width=min(width, 24),
                         justify="left" if label else "right")
    for line in cells:
        table.add_row(*map(Text, line))
    return table


def shown_metrics(objectives) -> tuple[str, ...]:
    """The objectives, then a few figures every table shows."""
    names = tuple(o.name for o in objectives)
    return names + tuple(m for m in ("time_s", "tops_per_w", "mfu", "energy_j")
                         if m not in names)


def front_table(report: Report, top: int) -> Table:
    """The Pareto front of every workload, its best `top` points by the first
    objective each (the CSV and Parquet exports flag every front point)."""
    rows, left_out = [], 0
    for name in report.workloads:
        front = report.front(name)
        rows += front[:top]
        left_out += max(len(front) - top, 0)
    senses = ", ".join(f"{o.name} {o.sense}" for o in report.objectives)
    on_front = sum(report.on_front.values())
    shown = f"; best {top} of each workload shown" if left_out else ""
    return points_table(report, rows, f"Pareto front ({senses}): {on_front} of "
                        f"{sum(r['status'] == 'ok' for r in report.rows)} ok points"
                        f"{shown}", shown_metrics(report.objectives))


def failed_table(report: Report) -> Table:
    table = Table(title=Text("Failed points"), title_justify="left")
    for heading in ("workload", *axis_headings(report.axes), "reason"):
        table.add_column(Text(heading), overflow="fold")
    for row in report.rows:
        if row["status"] == "failed":
            table.add_row(Text(row["workload"]),
                          *(Text(format_value(row["point"].get(a))) for a in report.axes),
                          Text(row["error"] or ""))
    return table


def export_columns(report: Report) -> list[str]:
    return ["key", "status", "error", "sweep", "workload", *report.axes, *METRICS,
            *LABELS, "on_front"]


def export_records(report: Report) -> list[dict]:
    """One flat record per row: axis values as their own columns, the front flag."""
    records = []
    for row in report.rows:
        record = {name: row[name] for name in ("key", "status", "error", "sweep",
                                               "workload", *METRICS, *LABELS)}
        record.update({axis: row["point"].get(axis) for axis in report.axes})
        record["on_front"] = report.on_front.get(row["key"], False)
        records.append({name: record[name] for name in export_columns(report)})
    return records


def write_csv(report: Report, path: str) -> None:
    write_file(path, csv_text(export_columns(report), export_records(report)))


def import_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise AccsimError(f"Parquet export needs pyarrow; {PARQUET_INSTALL}",
                          field="--parquet") from None
    return pyarrow


def write_parquet(report: Report, path: str) -> None:
    pyarrow = import_pyarrow()
    records = export_records(report)
    columns = {name: [record[name] for record in records]
               for name in export_columns(report)}
    buffer = io.BytesIO()
    pyarrow.parquet.write_table(pyarrow.table(columns), buffer)
    write_file(path, buffer.getvalue())


def write_plot(report: Report, path: str) -> None:
    """The front figure (draw_front) as an image file."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(7, 5))
    draw_front(axes, report)
    figure.tight_layout()
    save_figure(figure, path, dpi=120)


def draw_front(axes, report: Report) -> None:
    """Scatter of the first two objectives (one colour per workload), the front
    highlighted and joined in order; log axes where values span over 100x."""
    x, y = report.objectives[0], report.objectives[1]
    for index, name in enumerate(report.workloads):
        colour = f"C{index}"
        rows = [r for r in report.rows if r["workload"] == name and r["status"] == "ok"
                and r[x.name] is not None and r[y.name] is not None]
        axes.scatter([r[x.name] for r in rows], [r[y.name] for r in rows], s=12,
                     color=colour, alpha=0.3, label=f"{name} ({len(rows)} points)")
        front = sorted((r for r in rows if report.on_front.get(r["key"])),
                       key=lambda r: r[x.name])
        axes.plot([r[x.name] for r in front], [r[y.name] for r in front], "o-",
                  color=colour, markersize=6, label=f"{name} front ({len(front)})")
    for objective, set_scale, label in ((x, axes.set_xscale, axes.set_xlabel),
                                        (y, axes.set_yscale, axes.set_ylabel)):
        values = [r[objective.name] for r in report.rows
                  if r["status"] == "ok" and r[objective.name] is not None]
        if values and min(values) > 0 and max(values) / min(values) > 100:
            set_scale("log")
        label(f"{objective.name} ({objective.sense}: {METRICS[objective.name][2]})")
    if len(report.objectives) > 2:
        axes.set_title("front over " + ", ".join(o.name for o in report.objectives)
                       + f"; shown: {x.name} vs {y.name}", fontsize=9)
    axes.legend(fontsize=8)
    axes.grid(True, alpha=0.3)
