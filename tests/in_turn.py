"""The default run's walk through a matrix of cases (platform x workload, platform x
shape, model x phase): a few cases that together hold every value of every axis, case i
taking value i of each axis in turn (modulo the axis's length). A property that is one
code path whatever the case (an identity between two ways of computing a figure, a bound)
is checked in CI on each platform, each workload, each shape; the rest of the matrix is
marked slow and runs with `pytest -m slow` (CI's suite must stay inside its time)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest


def in_turn(cases: Sequence[tuple]) -> set[tuple]:
    """The cases of the walk that bring a value no earlier case held; then, for any value
    the walk missed (axes whose lengths share a factor, a matrix with holes), the first
    case holding it."""
    axes = [list(dict.fromkeys(case[i] for case in cases)) for i in range(len(cases[0]))]
    present = set(cases)
    held: list[set] = [set() for _ in axes]
    kept: set[tuple] = set()

    def keep_if_new(case: tuple) -> None:
        if case in present and any(v not in h for v, h in zip(case, held)):
            kept.add(case)
            for value, values in zip(case, held):
                values.add(value)

    for i in range(math.prod(len(axis) for axis in axes)):
        if all(len(h) == len(axis) for h, axis in zip(held, axes)):
            break
        keep_if_new(tuple(axis[i % len(axis)] for axis in axes))
    for case in cases:
        keep_if_new(case)
    return kept


def slow_unless_in_turn(cases: Sequence[tuple], arguments: Sequence[tuple] | None = None,
                        ids: Sequence[str] | None = None) -> list:
    """`cases` as pytest params (`arguments[i]` the test's arguments for case i, the
    case itself by default), those off the walk marked slow."""
    kept = in_turn(cases)
    arguments = cases if arguments is None else arguments
    return [pytest.param(*args, id=None if ids is None else ids[i],
                         marks=() if case in kept else pytest.mark.slow)
            for i, (case, args) in enumerate(zip(cases, arguments))]
