"""From plan + workload + platform to resolved (operator, tiling, fused operator)
triples (DESIGN.md section 1): the one walk over a workload that places each operator
under its plan entry and follows `fuse`, and the resolution of each entry's open fields
(the default search, or the named heuristic). Lowering takes the triples and never
meets a plan, a heuristic or the search."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import NamedTuple

from simulator.config import Platform
from simulator.errors import AccsimError
from simulator.limits import MemoryBudget, check_inputs, check_tilings
from simulator.lowering import LoweredOperator, lower_resolved
from simulator.mapping.heuristics import heuristic_tiling, spec_overrides
from simulator.mapping.plan import (DEFAULT_HEURISTIC, SEARCH, Mapping, Tiling, TilingSpec,
                                    check_mapping_names, fully_specified, fusion_error,
                                    merged_spec)
from simulator.search.default import searched_tiling
from simulator.workload import Workload, is_collective, is_compute


class Placed(NamedTuple):
    """One operator as the plan places it. `spec`: its merged plan entry (None for a
    collective, which takes no tiling, or where the entry is wrong: `error`);
    `following`: the next operator; `absorbed_by`: the operator whose `fuse` takes
    this one as its epilogue (it does not run on its own)."""

    op: object
    spec: TilingSpec | None
    following: object
    absorbed_by: str | None = None
    error: str | None = None


def placed_operators(workload: Workload, mapping: Mapping) -> Iterator[Placed]:
    """THE fused-operator walk: every operator in order with its merged plan entry;
    a compute operator whose entry sets `fuse` absorbs the operator of that name when
    it comes next, which is then yielded with `absorbed_by` set."""
    ops = workload.operators
    absorber: tuple[str, str] | None = None   # (absorbed name, absorbing operator)
    for index, op in enumerate(ops):
        following = ops[index + 1] if index + 1 < len(ops) else None
        if absorber is not None and op.name == absorber[0]:
            yield Placed(op, None, following, absorbed_by=absorber[1])
            absorber = None
            continue
        absorber = None
        if is_collective(op):
            yield Placed(op, None, following)
            continue
        try:
            spec = merged_spec(mapping, op)
        except AccsimError as exc:
            yield Placed(op, None, following, error=exc.rule)
            continue
        if is_compute(op) and spec.fuse is not None:
            absorber = (spec.fuse, op.name)
        yield Placed(op, spec, following)


def resolve_tiling(op, spec: TilingSpec, platform: Platform, *, following=None) -> Tiling:
    """The operator's tiling under its plan entry: with no heuristic named, the open
    fields are the default search's best (memoised per distinct operator; `following`
    is the operator a `fuse` absorbs), else the named heuristic's; the entry's explicit
    fields laid over either. Attention's search also picks its lowering."""
    name = spec.heuristic or SEARCH
    if name == SEARCH and not fully_specified(op, spec):
        found = searched_tiling(op, spec, platform, following)
        if found is not None:
            return replace(found, **spec_overrides(spec))
        name = DEFAULT_HEURISTIC  # nothing fits: lowering reports this tiling's overflow
    return heuristic_tiling(op, spec, platform, name)


class Resolved(NamedTuple):
    """An operator ready to lower: its tiling (None for a collective) and the vector
    operator its `fuse` absorbs (None when it absorbs none)."""

    op: object
    tiling: Tiling | None
    fused: object = None


def resolve_workload(workload: Workload, mapping: Mapping, platform: Platform, *,
                     mapping_source: str | None = None) -> list[Resolved]:
    """Every operator that runs, resolved; a wrong plan entry or fusion is an error
    naming the plan's file."""
    def refused(op, rule: str, file: str | None = None) -> AccsimError:
        return AccsimError(rule, file=file or mapping_source, field=f"operators.{op.name}")

    resolved: list[Resolved] = []
    for placed in placed_operators(workload, mapping):
        op = placed.op
        if placed.absorbed_by is not None:
            continue
        if placed.error is not None:
            raise refused(op, placed.error)
        if placed.spec is None:  # a collective: priced on the links
            resolved.append(Resolved(op, None))
            continue
        try:
            tiling = resolve_tiling(op, placed.spec, platform, following=placed.following)
        except AccsimError as exc:  # the plan's fault: name its file
            raise AccsimError(exc.rule, file=exc.file or mapping_source,
                              field=exc.field) from None
        fused = None
        if is_compute(op) and tiling.fuse is not None:
            error = fusion_error(op, tiling.fuse, placed.following)
            if error is not None:
                raise refused(op, error)
            fused = placed.following
        resolved.append(Resolved(op, tiling, fused))
    return resolved


def lower_workload(workload: Workload, mapping: Mapping, platform: Platform, *,
                   mapping_source: str | None = None,
                   workload_source: str | None = None,
                   platform_source: str | None = None,
                   budget: MemoryBudget | None = None) -> list[LoweredOperator]:
    """Check, resolve and lower every operator in order (operators absorbed by `fuse`
    are not emitted). Every tiling is resolved and checked against the limits
    (simulator.limits: int64 bounds, the memory `budget`) before any is lowered."""
    check_mapping_names(mapping, workload, file=mapping_source)
    check_inputs(workload, platform, workload_source=workload_source,
                 platform_source=platform_source)
    resolved = resolve_workload(workload, mapping, platform, mapping_source=mapping_source)
    check_tilings(resolved, platform, budget, mapping_source=mapping_source,
                  platform_source=platform_source)
    return lower_resolved(resolved, platform, mapping_source=mapping_source,
                          workload_source=workload_source)
