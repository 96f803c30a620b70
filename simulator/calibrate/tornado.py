"""The tornado figure of a sensitivity study, drawn on axes the caller owns, so that
`accsim sensitivity --plot` and the review packet draw the same picture."""

from __future__ import annotations

from simulator.calibrate.sensitivity import Sensitivity


def tornado_height(study: Sensitivity) -> float:
    """Inches of figure height that keep one bar per field legible."""
    return 1.5 + 0.3 * len(study.swings)


def draw_tornado(axes, study: Sensitivity, name: str) -> None:
    """Bars from the metric at each field's low end to its high end, around the base,
    widest at the top."""
    shown = study.swings[::-1]
    for row, swing in enumerate(shown):
        for end, colour in ((swing.metric_low, "tab:blue"), (swing.metric_high, "tab:red")):
            axes.barh(row, end - study.base, left=study.base, color=colour, height=0.6)
    axes.axvline(study.base, color="black", linewidth=0.8)
    axes.set_yticks(range(len(shown)), [s.field for s in shown], fontsize=7)
    axes.set_xlabel(f"{study.metric} ({study.unit}); blue: low end, red: high end")
    axes.set_title(f"{name}: sensitivity of {study.metric} to assumed values")
