"""The Pareto front: points no other point beats on every objective at once."""

from __future__ import annotations

import numpy as np

# Rows compared at once against all points: bounds the boolean block to this x n x d.
BLOCK_ROWS = 512


def pareto_mask(values: np.ndarray, senses: list[str]) -> np.ndarray:
    """Which rows of `values` (points x objectives) are on the front. `senses` says
    per column whether smaller ("min") or larger ("max") is better. A point is off the
    front when another is at least as good on every objective and better on one;
    identical points are all on the front."""
    costs = np.asarray(values, dtype=float) * np.where(np.array(senses) == "max", -1, 1)
    on_front = np.ones(len(costs), dtype=bool)
    for start in range(0, len(costs), BLOCK_ROWS):
        block = costs[start:start + BLOCK_ROWS, None, :]          # b x 1 x d
        no_worse = (costs[None, :, :] <= block).all(axis=2)      # b x n: j no worse than i
        better = (costs[None, :, :] < block).any(axis=2)
        on_front[start:start + BLOCK_ROWS] = ~(no_worse & better).any(axis=1)
    return on_front
