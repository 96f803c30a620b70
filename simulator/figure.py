"""Matplotlib for figure files, loaded on first use: importing it costs a good part of a
second, which no command that writes no figure should pay."""

from __future__ import annotations


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only: no display is needed or
    assumed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
