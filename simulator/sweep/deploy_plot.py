"""The deployment search's figure: each platform's SLA capacity against the chips a
deployment uses (the best point at each chip count joined by a line), the Pareto
front's points ringed (matplotlib through simulator.output.figure, files only)."""

from __future__ import annotations

from pathlib import Path

from simulator.output.figure import pyplot, save_figure


def capacity_figure(rows: list[dict], front: list[dict], path: str | Path,
                    title: str) -> None:
    """SLA capacity (requests/s) vs chips, one colour per platform; every searched
    point a dot, the best at each chip count joined, front points ringed in black."""
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7, 4.5))
    searched = [row for row in rows if row.get("sla_rate_rps") is not None]
    for arch in dict.fromkeys(row["arch"] for row in searched):
        mine = [row for row in searched if row["arch"] == arch]
        dots = ax.scatter([row["chips"] for row in mine],
                          [row["sla_rate_rps"] for row in mine], s=18, alpha=0.6,
                          label=Path(arch).stem)
        best = {}
        for row in mine:
            best[row["chips"]] = max(best.get(row["chips"], 0.0), row["sla_rate_rps"])
        chips = sorted(best)
        ax.plot(chips, [best[c] for c in chips], color=dots.get_facecolor()[0][:3])
    if front:
        ax.scatter([row["chips"] for row in front], [row["sla_rate_rps"] for row in front],
                   s=90, facecolors="none", edgecolors="black", linewidths=1.5,
                   label="Pareto front")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # Plain numbers on the ticks (mathtext is off, so no 10^x labels).
    plain = plt.FuncFormatter(lambda value, _: f"{value:g}")
    chips = sorted({row["chips"] for row in searched})
    ax.set_xticks(chips)
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.yaxis.set_major_formatter(plain)
    ax.set_xlabel("chips per deployment")
    ax.set_ylabel("SLA capacity (requests/s)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    figure.tight_layout()
    save_figure(figure, path, dpi=120)
