"""The deployment grid counted without laying it out (sweep.deploy_axes.
colocated_points, what `accsim verify` bounds a study's search by) is the number of
co-located points sweep.deploy.deployments lays out, on grids with uneven budgets,
repeated and unsorted axis values, and counts stopped at a limit."""

from __future__ import annotations

import pytest

from simulator.sweep.deploy import Grid, deployments, plans
from simulator.sweep.deploy_axes import colocated_points, splits


def test_splits_are_the_plans_laid_out():
    assert [splits(chips) for chips in range(1, 200)] == \
        [len(plans(chips)) for chips in range(1, 200)]


@pytest.mark.parametrize("budget, chips, replicas, batching, max_batch, precision", [
    (1, (1,), (1,), ("continuous",), (16,), (None,)),
    (2, (1, 2), (1,), ("continuous",), (32,), (None,)),
    (12, (12, 1, 3, 6, 5), (4, 1, 2, 3), ("static", "continuous"), (8, 64), (None, "p")),
    (64, (1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8, 16, 32, 64), ("continuous",),
     (16, 64, 256), (None,)),
    (7, (8, 9), (1,), ("continuous",), (16,), (None,)),    # no chip count fits
    (30, (30, 2, 2, 15), (1, 1, 30), ("dynamic",), (4,), (None,))])
def test_the_count_is_the_points_laid_out(budget, chips, replicas, batching, max_batch,
                                          precision):
    grid = Grid(budget, chips, replicas, batching, max_batch, precision)
    # deployments walks the axes as given; the count reads each value once
    laid_out = deployments("a", Grid(budget, tuple(dict.fromkeys(chips)),
                                     tuple(dict.fromkeys(replicas)), batching,
                                     max_batch, precision))
    per_split = len(batching) * len(max_batch) * len(precision)
    assert colocated_points(grid.chips_per_replica, grid.replicas, budget, per_split,
                            limit=10**9) == len(laid_out)


def test_the_count_stops_past_its_limit_without_laying_out_millions():
    values = range(1, 2**16 + 1)
    # the first chip count alone has 2**16 replica counts within the budget
    assert colocated_points(values, values, 2**16, 3, limit=900) == 3 * 2**16
    # under the limit, every point: 1 x 2 + 2 x 2 + 3 x 1 splits x replica counts
    assert colocated_points((1, 2, 4), (1, 2), 4, 1, limit=900) == 9
