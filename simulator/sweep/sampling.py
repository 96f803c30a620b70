"""Which points of the axes' grid a sweep visits: all of them (grid), n distinct ones
drawn uniformly (random), or n by a discrete Latin hypercube (lhs). Each returns one
row of value indices per point, one column per dimension; random and lhs draw from a
numpy Generator seeded by the spec, so the same seed gives the same points."""

from __future__ import annotations

import math

import numpy as np

from simulator.errors import AccsimError

# A grid larger than this is a sampling job, not an enumeration.
MAX_GRID_POINTS = 1_000_000


def grid(lengths: list[int]) -> np.ndarray:
    """Every combination, the last dimension varying fastest."""
    total = math.prod(lengths)
    if total > MAX_GRID_POINTS:
        raise AccsimError(f"the grid has {total:,} points (at most {MAX_GRID_POINTS:,}); "
                          "use random or lhs sampling with n", field="sampling")
    return np.stack(np.unravel_index(np.arange(total), lengths), axis=1)


def random(lengths: list[int], n: int, seed: int) -> np.ndarray:
    """n distinct grid points, uniformly without replacement."""
    total = math.prod(lengths)
    if n > total:
        raise AccsimError(f"n = {n:,} is more than the {total:,} points of the grid",
                          field="sampling.n")
    if total >= 2**63:
        raise AccsimError(f"the grid has {total:.3g} points, beyond what random sampling "
                          "indexes; use lhs", field="sampling")
    flat = np.random.default_rng(seed).choice(total, size=n, replace=False)
    return np.stack(np.unravel_index(flat, lengths), axis=1)


def latin_hypercube(lengths: list[int], n: int, seed: int) -> np.ndarray:
    """n points in which every axis's values appear equally often (within one), each
    axis's share shuffled independently. Points may repeat when n exceeds an axis."""
    rng = np.random.default_rng(seed)
    columns = [rng.permutation(np.arange(n) * length // n) for length in lengths]
    return np.stack(columns, axis=1)


def sample(method: str, lengths: list[int], n: int | None, seed: int) -> np.ndarray:
    """The index rows for a spec's sampling method."""
    if method == "grid":
        return grid(lengths)
    if method == "random":
        return random(lengths, n, seed)
    return latin_hypercube(lengths, n, seed)
