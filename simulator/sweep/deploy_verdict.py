"""Disaggregated or co-located (DESIGN.md section 20): of one platform's searched
points, the best of each kind under the objective, which wins, and why: the only one
that meets the SLA at some rate, or the better objective, with each one's SLA
capacity per chip and the SLA metric that binds the loser."""

from __future__ import annotations

from simulator.serving.sla import split_key
from simulator.sweep.deploy import OBJECTIVES


def is_disaggregated(row: dict) -> bool:
    return row.get("prefill_replicas") is not None


def _best(rows: list[dict], objective: str) -> dict | None:
    """The best row with an SLA capacity under the objective (ties: fewer chips)."""
    sign = -1 if OBJECTIVES[objective] == "max" else 1
    found = [row for row in rows if row.get("sla_rate_rps") is not None
             and row.get(objective) is not None]
    return min(found, key=lambda row: (sign * row[objective], row["chips"]),
               default=None)


def _missed(row: dict) -> str:
    """The SLA metrics that fail just above a point's SLA capacity."""
    keys = (row.get("above") or {}).get("missed") or []
    return ", ".join(f"{split_key(key)[0].upper()} {split_key(key)[1]}" for key in keys) \
        or "no SLA metric"


def _name(row: dict) -> str:
    pools = f"P{row['prefill_replicas']}+D{row['replicas']}" \
        if is_disaggregated(row) else f"{row['replicas']}"
    return f"{pools} x (T{row['tp']} x P{row['pp']}) b{row['max_batch']}"


def verdict(rows: list[dict], objective: str) -> dict | None:
    """Which of the platform's best co-located and best disaggregated points wins
    under the objective, and why: the only one with an SLA capacity, or the better
    objective, with each one's SLA capacity per chip and the SLA metric that binds
    the loser. None where the search held no disaggregated point."""
    pooled = [row for row in rows if is_disaggregated(row)]
    if not pooled:
        return None
    sides = {"co-located": _best([r for r in rows if not is_disaggregated(r)], objective),
             "disaggregated": _best(pooled, objective)}
    found = {side: row for side, row in sides.items() if row is not None}
    out = {"objective": objective,
           **{side: None if row is None else row["key"] for side, row in sides.items()}}
    if not found:
        return {**out, "winner": None, "text": "neither co-located nor disaggregated "
                "deployments meet the SLA at any rate"}
    if len(found) == 1:
        (winner, row), = found.items()
        loser = "disaggregated" if winner == "co-located" else "co-located"
        return {**out, "winner": winner, "text": (
            f"{winner} wins: {_name(row)} meets the SLA up to {row['sla_rate_rps']:,.3f} "
            f"requests/s; no {loser} deployment meets it at any rate")}
    sign = 1 if OBJECTIVES[objective] == "max" else -1
    pooled_row, colocated_row = found["disaggregated"], found["co-located"]
    winner = "disaggregated" if sign * (pooled_row[objective] - colocated_row[objective]) \
        > 0 else "co-located"
    win, lose = (pooled_row, colocated_row) if winner == "disaggregated" else \
        (colocated_row, pooled_row)

    def per_chip(row: dict) -> str:
        return f"{row['sla_rate_rps'] / row['chips']:,.3f}"

    return {**out, "winner": winner, "text": (
        f"{winner} wins on {objective}: {_name(win)} {win[objective]:,.4g} against "
        f"{_name(lose)} {lose[objective]:,.4g}; SLA capacity per chip {per_chip(win)} "
        f"against {per_chip(lose)} requests/s; the loser is bound by {_missed(lose)} "
        f"above {lose['sla_rate_rps']:,.3f} requests/s")}
