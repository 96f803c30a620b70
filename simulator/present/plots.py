"""Figures: where each layer_type's cycles go, as stacked horizontal bars. matplotlib is
imported only when a figure is written, so commands that import this module start fast."""

from __future__ import annotations

from pathlib import Path

from simulator.output.figure import pyplot, save_figure
from simulator.simulate import RunResult

# (label, Totals attribute) in stacking order; together they make up every cycle. The
# labels start with the tables' column names (report.PERCENT_COLUMNS). Each has its own
# colour (COLOURS): matplotlib's default cycle has ten, one fewer than the terms.
SEGMENTS = [
    ("useful", "useful_array_cycles"), ("pad: padding", "padding_array_cycles"),
    ("setup: array fill", "fill_array_cycles"),
    ("setup: stationary load", "stationary_load_array_cycles"),
    ("setup: skew", "skew_array_cycles"), ("vector unit", "vector_compute_cycles"),
    ("ovh: overhead", "overhead_cycles"), ("fill: pipeline fill", "fill_cycles"),
    ("in: input stall", "input_stall_cycles"), ("out: output stall", "output_stall_cycles"),
    ("drain", "drain_cycles"),
]
# Tableau's ten and a dark olive for the eleventh: distinct, one per SEGMENTS entry.
COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac", "#556b2f"]


def _segment(totals, attribute: str) -> float:
    if attribute == "vector_compute_cycles":  # busy cycles the array split leaves out
        return totals.busy_cycles - (totals.useful_array_cycles
                                     + totals.padding_array_cycles
                                     + totals.fill_array_cycles
                                     + totals.stationary_load_array_cycles
                                     + totals.skew_array_cycles)
    return getattr(totals, attribute)


def draw_breakdown(axes, groups: list[tuple[str, object]], title: str) -> None:
    """Stacked bars of cycles, one per (layer_type, Totals) in `groups`, bottom first."""
    names = [name for name, _ in groups]
    left = [0.0] * len(names)
    for (label, attribute), colour in zip(SEGMENTS, COLOURS, strict=True):
        widths = [_segment(totals, attribute) for _, totals in groups]
        axes.barh(names, widths, left=left, label=label, color=colour)
        left = [a + b for a, b in zip(left, widths)]
    axes.set_xlabel("cycles")
    axes.set_title(title)
    # Beside the axes, never over a bar.
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")


def write_breakdown_plot(result: RunResult, path: str | Path) -> None:
    """Stacked bars of cycles per layer_type, largest share at the top."""
    plt = pyplot()
    groups = sorted(result.by_layer_type.items(), key=lambda item: item[1].cycles)
    figure, axes = plt.subplots(figsize=(11, 0.45 * len(groups) + 1.6))
    inputs = result.inputs
    draw_breakdown(axes, groups, f"{inputs.workload.name} on {inputs.platform.name}: "
                   "cycles by layer_type")
    figure.tight_layout()
    save_figure(figure, path, dpi=120, bbox_inches="tight")  # the legend beside the axes


def write_compare_plot(results: list[RunResult], labels: list[str], path: str | Path
                       ) -> None:
    """`accsim compare --plot`: one stacked bar of the workload's cycles per platform."""
    plt = pyplot()
    groups = [(label, result.total) for label, result in zip(labels, results)][::-1]
    figure, axes = plt.subplots(figsize=(11, 0.45 * len(groups) + 1.6))
    draw_breakdown(axes, groups, f"{results[0].inputs.workload.name}: cycles by platform")
    figure.tight_layout()
    save_figure(figure, path, dpi=120, bbox_inches="tight")
