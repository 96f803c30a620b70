"""The distinct operators of a measurement file (DESIGN.md section 16): rows that repeat
an operator (every field the same but its name and measured time) share one simulation,
so that a fit simulates each distinct operator once per parameter point and its time
grows with the distinct operators, not the rows.

A fusion unit (search.resolve.fusion_units: an operator alone, or a producer with the
members the fusion planner gives it) costs the same wherever it stands: operators run one
after another, the default mapping couples no neighbours outside a unit, and no cost
reads measured_s (the default search's cache keys on it: before, each repeat was searched
anew). So the workload of each distinct unit's first occurrence, in order, gives every
row's cycles, provided it falls into the same units: where dropping the repeats between
two kept units would join them, or where operators name their inputs (the planner then
follows edges by name), every row is simulated as measured. Limits on a whole run's sum
(its tile programs held at once) see the distinct operators only."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from simulator.inputs.workload import Workload
from simulator.mapping.plan import Mapping
from simulator.search.fusion import has_edges
from simulator.search.resolve import fusion_units


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


def distinct_units(workload: Workload, mapping: Mapping) -> Distinct:
    """Each distinct fusion unit of `workload` once (the first of its repeats), or the
    workload as it is where that would group its operators otherwise."""
    ops = workload.operators
    every = Distinct(workload, np.arange(len(ops)))
    if has_edges(workload):
        return every
    units = fusion_units(workload, mapping)
    first: dict[tuple[str, ...], tuple[int, ...]] = {}
    source = np.arange(len(ops))  # each row's representative: the same place in the first
    for unit in units:
        held = first.setdefault(tuple(_content(ops[i]) for i in unit), unit)
        source[list(unit)] = held
    kept = np.flatnonzero(source == np.arange(len(ops)))
    if len(kept) == len(ops):
        return every
    reduced = workload.model_copy(update={"operators": [ops[i] for i in kept]})
    expected = sorted(tuple(int(i) for i in np.searchsorted(kept, unit))
                      for unit in first.values())
    if sorted(fusion_units(reduced, mapping)) != expected:
        return every
    return Distinct(reduced, np.searchsorted(kept, source))
