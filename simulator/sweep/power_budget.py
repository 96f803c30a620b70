"""A deployment search's power budget (DESIGN.md section 20, `plan-deployment
--power-budget-w W`): the whole deployment's power at a rate - its chips at their
modelled power, static included (serve's energy per token, which counts each chip's
static power while idle too, times the tokens per second: chips x (static + dynamic at
the run's utilisation)) - is held under the budget as the SLA's targets are held. A
deployment whose chips' static power alone passes the budget is pruned before any
simulation (no rate draws less); a run drawing more than the budget misses the target
POWER_KEY, so a point's SLA capacity is the highest rate that meets the SLA within the
budget, and the binding constraint names power where the budget is what fails first
above it. Runs do not depend on the budget (it judges their figures), so a search
under another budget reads the same stored runs."""

from __future__ import annotations

from simulator.inputs.dvfs import STATIC_FIELDS, scales
from simulator.inputs.platform import Platform
from simulator.metrics.energy import static_power_w

# The target a run's SLA report holds for the budget, beside the SLA's own keys.
POWER_KEY = "power_w"
# What a point's stored inputs name the budget by (absent without one, so the keys of
# a search without a budget are those it always had).
BUDGET_KEY = "power_budget_w"


def deployment_power_w(figures: dict, chips_per_replica: int) -> float | None:
    """Watts the whole deployment draws in a run (serve's summary): tokens/s x joules
    per token of one chip of each replica x chips per replica, as the search's
    power_w figure counts it; None where the run finished no token."""
    per_chip_j, tokens_s = figures.get("energy_per_token_j"), figures.get("tokens_per_s")
    if not per_chip_j or tokens_s is None:
        return None
    return tokens_s * per_chip_j * chips_per_replica


def judged(report: dict, figures: dict, chips_per_replica: int,
           budget_w: float | None) -> dict:
    """An SLA report (simulator.serving.sla.sla_report) with the power budget as one
    more target: met when the deployment's power is at most the budget. Unchanged
    without a budget."""
    if budget_w is None:
        return report
    watts = deployment_power_w(figures, chips_per_replica)
    check = {"target": budget_w, "value": watts,
             "met": watts is not None and watts <= budget_w}
    targets = {**report["targets"], POWER_KEY: check}
    return {"met": report["met"] and check["met"], "targets": targets}


def least_static_w(platform: Platform) -> float:
    """The least static power one chip draws at any clock it may run at: at the lowest
    point of its DVFS table (a power cap may take it there), else at clock_ghz."""
    static = static_power_w(platform)
    if platform.dvfs is None:
        return static
    on_chip = sum(getattr(platform.energy.static_power, name) for name in STATIC_FIELDS)
    return static - on_chip + on_chip * scales(platform.dvfs.points, 0, static)[1]


def static_floor_reason(chips: int, platform: Platform, budget_w: float | None) -> str | None:
    """Why a deployment of `chips` chips is pruned before simulation under the budget:
    their static power alone (least_static_w) passes it, so a run draws more at any
    rate; None when it fits or without a budget."""
    if budget_w is None:
        return None
    floor = chips * least_static_w(platform)
    if floor <= budget_w:
        return None
    lowest = " at their lowest DVFS point" if platform.dvfs is not None else ""
    return (f"power: {chips} chips draw {floor:,.4g} W static alone{lowest}, over the "
            f"budget of {budget_w:,.4g} W")


def sla_keys(keys: list[str]) -> list[str]:
    """The SLA's own keys among a run's missed targets (the power budget's left out)."""
    return [key for key in keys if key != POWER_KEY]
