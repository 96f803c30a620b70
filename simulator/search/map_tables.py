"""The mapper's answer as terminal tables (`accsim map`); imported only by commands."""

from __future__ import annotations

from rich.table import Table

from simulator.search.workload_search import MapResult


def _gap_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def operator_search_table(result: MapResult) -> Table:
    """Per operator: the search's counts, the best tiling and each heuristic's gap."""
    table = Table(title=f"Best tiling per operator by {result.objective} "
                  f"({result.workload} on {result.platform}); gap % = heuristic / best - 1",
                  title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("operator", no_wrap=True)
    for header in ("candidates", "simulated"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("best tiling", no_wrap=True)
    table.add_column("cycles", justify="right", no_wrap=True)
    for name in result.heuristics:
        table.add_column(f"{name} %", justify="right", no_wrap=True)
    for op in result.operators:
        stats = f"= {op.same_as}" if op.same_as else f"{op.stats.candidates:,}"
        simulated = "" if op.same_as else f"{op.stats.simulated:,}"
        best = op.best.tiling.describe(vector=op.vector) if op.best else "nothing fits"
        cycles = f"{op.best.cycles:,}" if op.best else "-"
        table.add_row(op.name, stats, simulated, best, cycles,
                      *[_gap_cell(op.gap(name, result.objective))
                        for name in result.heuristics])
    return table


def gap_table(result: MapResult) -> Table:
    """Per heuristic: workload cycles and energy and their gaps to the per-operator
    bests, operators at the best, mean and worst operator gap."""
    cycles, energy = result.best_totals()
    table = Table(title=f"Heuristics against the mapper's best by {result.objective}: "
                  f"{result.workload} on {result.platform}, best {cycles:,} cycles, "
                  f"{energy / 1e9:,.3f} mJ", title_justify="left", show_edge=False,
                  pad_edge=False)
    for header in ("heuristic", "cycles", "gap %", "energy mJ", "gap %", "ops at best",
                   "mean op gap %", "worst op", "worst gap %", "not fitting"):
        table.add_column(header, justify="left" if header in ("heuristic", "worst op")
                         else "right", no_wrap=True)
    ops = len([op for op in result.operators if op.best])
    for row in result.summary():
        table.add_row(
            row["heuristic"], "-" if row["cycles"] is None else f"{row['cycles']:,}",
            _gap_cell(row["cycles_gap_percent"]),
            "-" if row["energy_pj"] is None else f"{row['energy_pj'] / 1e9:,.3f}",
            _gap_cell(row["energy_gap_percent"]), f"{row['operators_at_best']}/{ops}",
            _gap_cell(row["mean_operator_gap_percent"]), row["worst_operator"] or "-",
            _gap_cell(row["worst_operator_gap_percent"]),
            str(len(row["not_fitting"])))
    return table


