"""The distinct operators of a measurement file (DESIGN.md section 16): rows that repeat
an operator (every field the same but its name and measured time) share one simulation,
so that a fit simulates each distinct operator once per parameter point and its time
grows with the distinct operators, not the rows.

Sound because a measured row is simulated as one kernel timed alone (operator_fit runs
them with fusion none): operators run one after another, the default mapping couples
no neighbours, and no cost reads measured_s (the default search's cache keys on it:
before, each repeat was searched anew). Limits on a whole run's sum (its tile programs
held at once) see the distinct operators only."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from simulator.inputs.workload import Workload


@dataclass(frozen=True)
class Distinct:
    """The operators to simulate and, for each measured row, the index of the operator
    in `workload` whose simulated time is the row's."""

    workload: Workload
    row_of: np.ndarray


def _content(op) -> str:
    """Everything of an operator that its simulation may read: all but its name and
    measured time."""
    return json.dumps(op.model_dump(mode="json", exclude={"name", "measured_s"}),
                      sort_keys=True)


def distinct_operators(workload: Workload) -> Distinct:
    """Each distinct operator of `workload` once (the first of its repeats, in order)."""
    first: dict[str, int] = {}
    source = np.array([first.setdefault(_content(op), index)
                       for index, op in enumerate(workload.operators)], dtype=np.int64)
    kept = np.array(sorted(first.values()), dtype=np.int64)
    reduced = workload.model_copy(update={"operators": [workload.operators[i]
                                                        for i in kept]})
    return Distinct(reduced, np.searchsorted(kept, source))
