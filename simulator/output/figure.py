"""Matplotlib for figure files, loaded on first use: importing it costs a good part of a
second, which no command that writes no figure should pay."""

from __future__ import annotations

import io
from pathlib import Path

from simulator.output.files import write_file


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only: no display is needed or
    assumed), with mathtext off: names from input files are drawn as they are, never
    parsed as $...$ formulas (an unbalanced one would otherwise fail the figure)."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt
    return plt


def save_figure(figure, path: str | Path, **options) -> None:
    """Render a figure in the format its file name says and write it through the
    output guard (simulator.output.files.write_file); the figure is closed."""
    buffer = io.BytesIO()
    suffix = Path(path).suffix.lower().lstrip(".") or "png"
    try:
        figure.savefig(buffer, format=suffix, **options)
    finally:
        pyplot().close(figure)
    write_file(path, buffer.getvalue())
