"""Figures: where each layer_type's cycles go, as stacked horizontal bars."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display is needed or assumed
import matplotlib.pyplot as plt  # noqa: E402

from simulator.simulate import RunResult  # noqa: E402

# (label, Totals attribute) in stacking order; together they make up every cycle.
SEGMENTS = [
    ("useful", "useful_array_cycles"), ("padding", "padding_array_cycles"),
    ("array fill", "fill_array_cycles"),
    ("stationary load", "stationary_load_array_cycles"), ("skew", "skew_array_cycles"),
    ("vector unit", "vector_compute_cycles"), ("overhead", "overhead_cycles"),
    ("pipeline fill", "fill_cycles"), ("input stall", "input_stall_cycles"),
    ("output stall", "output_stall_cycles"), ("drain", "drain_cycles"),
]


def _segment(totals, attribute: str) -> float:
    if attribute == "vector_compute_cycles":  # busy cycles the array split leaves out
        return totals.busy_cycles - (totals.useful_array_cycles
                                     + totals.padding_array_cycles
                                     + totals.fill_array_cycles
                                     + totals.stationary_load_array_cycles
                                     + totals.skew_array_cycles)
    return getattr(totals, attribute)


def write_breakdown_plot(result: RunResult, path: str | Path) -> None:
    """Stacked bars of cycles per layer_type, largest share at the top."""
    groups = sorted(result.by_layer_type.items(), key=lambda item: item[1].cycles)
    names = [name for name, _ in groups]
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(names) + 1.6))
    left = [0.0] * len(names)
    for label, attribute in SEGMENTS:
        widths = [_segment(totals, attribute) for _, totals in groups]
        axes.barh(names, widths, left=left, label=label)
        left = [a + b for a, b in zip(left, widths)]
    inputs = result.inputs
    axes.set_xlabel("cycles")
    axes.set_title(f"{inputs.workload.name} on {inputs.platform.name}: cycles by layer_type")
    axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
