"""The deployment search's axes as the command and the review packet name them: the
precision name of the model's own formats, the power-of-two chip and replica axes, and
the check that a cost objective has a cost table on every platform searched."""

from __future__ import annotations

import bisect

from simulator.errors import AccsimError
from simulator.inputs.loader import locate
from simulator.inputs.platform_file import load_platform
from simulator.sweep.deploy import COST_OBJECTIVES

# The --precision value that names the model's own formats (no plan).
BASELINE = "none"


def powers_of_two(limit: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to `limit`: the default chip and replica axes."""
    return tuple(2 ** i for i in range(limit.bit_length()) if 2 ** i <= limit)


def splits(chips: int) -> int:
    """How many T x P splits `chips` has (its divisors), as sweep.deploy.plans lays
    them out."""
    count, low = 0, 1
    while low * low <= chips:
        if chips % low == 0:
            count += 1 if low * low == chips else 2
        low += 1
    return count


def colocated_points(chips_per_replica, replicas, budget_chips: int, per_split: int, *,
                     limit: int) -> int:
    """How many co-located points sweep.deploy.deployments lays out on one platform
    (each chip count's T x P splits x the replica counts within the budget x
    `per_split`, the batching, max batch and precision values), counted in one pass
    over the chip counts without laying the points out (a forged grid may hold
    millions); the count stops once past `limit` (a number over it is returned)."""
    ordered, total = sorted(set(replicas)), 0
    for chips in sorted(set(chips_per_replica)):
        within = bisect.bisect_right(ordered, budget_chips // chips)
        if within:
            total += splits(chips) * within * per_split
            if total > limit:
                break
    return total


def check_cost(archs: list[str], objective: str) -> None:
    """A cost objective needs a cost table on every platform searched."""
    if objective not in COST_OBJECTIVES:
        return
    for arch in archs:
        platform, source = load_platform(locate(arch, "platform"))
        if platform.cost is None:
            raise AccsimError(f"objective {objective} needs the platform's cost table "
                              "(price_per_chip_hour, or capital_per_chip + "
                              "lifetime_years + power_price_per_kwh), which it lacks",
                              file=source.path, field="cost")
