"""Figures of serving results (matplotlib, files only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.output.figure import pyplot, save_figure
from simulator.serving.sla import split_key


def _sla_lines(draw, sla: dict[str, float], metric: str) -> None:
    """One dashed line per SLA target on `metric`, labelled with its bound."""
    for key, ceiling in sorted(sla.items()):
        name, statistic = split_key(key)
        if name == metric:
            draw(ceiling, linestyle="--", color="black", linewidth=1,
                 label=f"SLA {metric} {statistic} {ceiling:g} ms")


def curve_figure(rows: list[dict], path: str | Path, title: str,
                 sla: dict[str, float] | None = None) -> None:
    """Latency (and TTFT where there are tokens) p50/p95/p99 against achieved and
    offered requests per second, each SLA bound on them a dashed line."""
    plt = pyplot()
    llm = rows[0]["tokens_per_s"] is not None  # plain workloads' TTFT is their latency
    metrics = ["latency"] + (["ttft"] if llm else [])
    figure, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4.2),
                                squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for stat, style in (("p50", "-o"), ("p95", "-s"), ("p99", "-^")):
            values = [row[f"{metric}_{stat}_ms"] for row in rows]
            ax.plot([row["achieved_rps"] for row in rows], values, style, label=f"{stat} "
                    "vs achieved")
            ax.plot([row["offered_rps"] for row in rows], values, ":", color="grey")
        _sla_lines(ax.axhline, sla or {}, metric)
        ax.set_xlabel("requests/s (solid: achieved, dotted: offered)")
        ax.set_ylabel(f"{metric} (ms)")
        ax.set_yscale("log")
        ax.legend(fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    save_figure(figure, path, dpi=120)


def distribution_figure(series: dict[str, np.ndarray], path: str | Path,
                        title: str, sla: dict[str, float] | None = None) -> None:
    """Empirical CDF of each per-request time (ms), each SLA bound a dashed line."""
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7, 4.2))
    for label, values_s in series.items():
        if values_s.size:
            ms = np.sort(values_s) * 1e3
            ax.plot(ms, np.arange(1, ms.size + 1) / ms.size, label=label)
        _sla_lines(ax.axvline, sla or {}, label)
    ax.set_xscale("log")
    ax.set_xlabel("ms")
    ax.set_ylabel("fraction of requests")
    ax.set_title(title)
    ax.legend()
    figure.tight_layout()
    save_figure(figure, path, dpi=120)
