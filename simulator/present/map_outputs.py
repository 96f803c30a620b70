"""The mapper's answer as files (`accsim map --csv`, `--plot`): one CSV row per operator
with the table's columns, and a figure of each operator's best tiling against the
heuristics' tilings. Gaps stay percent by name, as the table and the JSON have them
(docs/reference/conventions.md)."""

from __future__ import annotations

from pathlib import Path

from simulator.output.escape import csv_text
from simulator.output.figure import pyplot, save_figure
from simulator.present.plots import COLOURS
from simulator.search.operator import Evaluation
from simulator.search.workload_search import MapResult

# The objective's value as the figure's axis names it.
OBJECTIVE_UNITS = {"cycles": "cycles", "energy": "energy (pJ)",
                   "edp": "energy x delay (pJ x cycles)"}
# Operators the figure draws at most (the costliest first); the CSV has them all.
MAX_PLOTTED = 60


def map_rows(result: MapResult) -> list[dict]:
    """Per operator: the table's columns (search counts, best tiling, its cycles) with
    the best's energy, and each heuristic's cycles, energy and gap (percent, by the
    objective; None where its tiling fails)."""
    rows = []
    for op in result.operators:
        best = op.best
        row = {"operator": op.name, "layer_type": op.layer_type, "kind": op.kind,
               "runs": op.runs, "same_as": op.same_as,
               "candidates": None if op.same_as else op.stats.candidates,
               "simulated": None if op.same_as else op.stats.simulated,
               "best_tiling": best.tiling.describe(vector=op.vector) if best else None,
               "cycles": best.cycles if best else None,
               "energy_pj": best.energy_pj if best else None}
        for name in result.heuristics:
            found = op.heuristics.get(name)
            ok = isinstance(found, Evaluation)
            row |= {f"{name}_cycles": found.cycles if ok else None,
                    f"{name}_energy_pj": found.energy_pj if ok else None,
                    f"{name}_gap_percent": op.gap(name, result.objective)}
        rows.append(row)
    return rows


def map_csv(result: MapResult) -> str:
    return csv_text(map_columns(result), map_rows(result))


def map_columns(result: MapResult) -> list[str]:
    """The CSV's columns, in map_rows' order."""
    return ["operator", "layer_type", "kind", "runs", "same_as", "candidates",
            "simulated", "best_tiling", "cycles", "energy_pj",
            *(f"{name}_{column}" for name in result.heuristics
              for column in ("cycles", "energy_pj", "gap_percent"))]


def write_map_plot(result: MapResult, path: str | Path) -> None:
    """Per operator (the costliest MAX_PLOTTED by the best's objective), a bar for the
    best tiling's objective and one beside it for each heuristic's tiling (none where
    its tiling fails): how far each heuristic lands from the best, operator by
    operator."""
    plt = pyplot()
    objective = result.objective
    found = [op for op in result.operators if op.best is not None]
    shown = sorted(found, key=lambda op: op.best.objective(objective),
                   reverse=True)[:MAX_PLOTTED][::-1]
    series = [("best tiling", lambda op: op.best)] + [
        (name, lambda op, name=name: op.heuristics.get(name)) for name in result.heuristics]
    height = 0.8 / len(series)
    figure, axes = plt.subplots(figsize=(11, (0.2 + 0.12 * len(series)) * len(shown) + 1.8))
    for offset, (label, pick) in enumerate(series):
        bars = [(i, pick(op).objective(objective)) for i, op in enumerate(shown)
                if isinstance(pick(op), Evaluation)]
        axes.barh([i - 0.4 + (offset + 0.5) * height for i, _ in bars],
                  [value for _, value in bars], height=height,
                  label=label if bars else f"{label} (its tilings fail)",
                  color=COLOURS[offset % len(COLOURS)])
    axes.set_yticks(range(len(shown)), [op.name for op in shown], fontsize="small")
    axes.xaxis.set_major_formatter(lambda value, _: f"{value:,.0f}")
    axes.set_xlabel(OBJECTIVE_UNITS[objective])
    left = len(found) - len(shown)
    axes.set_title(f"{result.workload} on {result.platform}: best tiling by {objective} "
                   "and the heuristics' per operator"
                   + (f" (costliest {len(shown)}; {left} more in --csv)" if left else ""))
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    figure.tight_layout()
    save_figure(figure, path, dpi=120, bbox_inches="tight")
