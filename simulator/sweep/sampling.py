"""Which points of the axes' grid a sweep visits: all of them (grid), n distinct ones
drawn uniformly (random), or n by a discrete Latin hypercube (lhs). Each returns one
row of value indices per point, one column per dimension; random and lhs draw from a
numpy Generator seeded by the spec, so the same seed gives the same points."""

from __future__ import annotations

import math

import numpy as np

from simulator.errors import AccsimError

# Jobs (sampled points x workloads) a sweep may plan: planning takes about 1 ms a job
# and holds each in memory, simulating each takes 10 ms to minutes, so more is a
# mistake in the spec; a larger sweep is refused before anything is built.
MAX_JOBS = 100_000
# Seeds are numpy SeedSequence entropy: whole numbers from 0 to 2**64 - 1.
MAX_SEED = 2**64 - 1


def check_size(method: str, lengths: list[int], n: int | None, workloads: int) -> None:
    """Refuse a sweep of more than MAX_JOBS jobs from the sizes alone, before any
    point is drawn."""
    points = math.prod(lengths) if method == "grid" else n
    jobs = points * workloads
    if jobs > MAX_JOBS:
        advice = ("use random or lhs sampling with n, or fewer values" if method == "grid"
                  else "lower n")
        shown = f"{points:,}" if points < 10**15 else f"{points:.3g}"
        raise AccsimError(f"{shown} {method} points x {workloads} workloads = {jobs:,} "
                          f"jobs, more than the {MAX_JOBS:,} a sweep may have: {advice}",
                          field="sampling")


def grid(lengths: list[int]) -> np.ndarray:
    """Every combination, the last dimension varying fastest (check_size bounds it)."""
    return np.stack(np.unravel_index(np.arange(math.prod(lengths)), lengths), axis=1)


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
