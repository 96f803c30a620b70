"""From plan + workload + platform to resolved (operator, tiling, fused operator)
triples (DESIGN.md section 1): the one walk over a workload that places each operator
under its plan entry and follows `fuse`, and the resolution of each entry's open fields
(the default search, or the named heuristic). Lowering takes the triples and never
meets a plan, a heuristic or the search."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import NamedTuple

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.limits import MemoryBudget, check_inputs, check_tilings
from simulator.lowering import LoweredOperator, lower_resolved
from simulator.mapping.heuristics import heuristic_tiling, spec_overrides
from simulator.mapping.plan import (DEFAULT_HEURISTIC, SEARCH, EpilogueMember, Mapping,
                                    Tiling, TilingSpec, check_mapping_names,
                                    fully_specified, fusion_error, merged_spec)
from simulator.program.tile_program import memory_params
from simulator.search.default import SearchCache
from simulator.search.fusion import (NO_FUSION, Dropped, epilogue_candidates,
                                     fitted_group, fusion_mode, has_edges,
                                     vector_run_candidates)
from simulator.search.evaluation import evaluate
from simulator.search.prologue import (asked_without_norm, prologue_candidates,
                                      prologue_refusal, whole_rows)
from simulator.inputs.workload import (BINARY_OPS, Workload, is_attention,
                                       is_collective, is_compute)


class Placed(NamedTuple):
    """One operator as the plan places it. `spec`: its merged plan entry (None for a
    collective, which takes no tiling, or where the entry is wrong: `error`);
    `following`: the next operator; `absorbed_by`: the operator whose `fuse` (or the
    fusion planner) takes this one as its epilogue; `members`: the epilogue the planner
    proposes for this operator, before the capacity check of its tiling;
    `prologue_of`: the GEMMs a norm may run as the prologue of (search.prologue)."""

    op: object
    spec: TilingSpec | None
    following: object
    absorbed_by: str | None = None
    error: str | None = None
    members: tuple[EpilogueMember, ...] = ()
    prologue_of: tuple[str, ...] = ()


def placed_operators(workload: Workload, mapping: Mapping) -> Iterator[Placed]:
    """THE fused-operator walk: every operator in order with its merged plan entry;
    a compute operator whose entry sets `fuse` absorbs the operator of that name when
    it comes next, which is then yielded with `absorbed_by` set. Under `auto` fusion
    the planner's epilogue and vector-run members are yielded absorbed too (with their
    own entry, in case the capacity check of the producer's tiling gives them back), and
    a norm that may run as its consumers' prologue names them (it comes first: whether
    it runs alone is decided with their tilings)."""
    ops = workload.operators
    auto = fusion_mode(mapping) == "auto"
    planned = epilogue_candidates(workload) if auto else {}
    prologues = {ops[i].name: tuple(ops[c].name for c in consumers) for i, consumers in
                 prologue_candidates(workload, mapping, has_edges(workload)).items()} \
        if auto else {}
    taken = {m.op.name for chain in planned.values() for m in chain} | set(prologues)
    consumers = {name for names in prologues.values() for name in names}
    runs = vector_run_candidates(workload, taken) if auto else {}
    absorbed: dict[str, str] = {}   # absorbed name -> absorbing operator
    for index, op in enumerate(ops):
        following = ops[index + 1] if index + 1 < len(ops) else None
        owner = absorbed.pop(op.name, None)
        if owner is None:
            absorbed.clear()
        if is_collective(op):
            yield Placed(op, None, following)
            continue
        try:
            spec = merged_spec(mapping, op)
        except AccsimError as exc:
            yield Placed(op, None, following, absorbed_by=owner, error=exc.rule)
            continue
        prologue_of = prologues.get(op.name, ())
        unmet = None if op.name in consumers else asked_without_norm(op, mapping)
        if unmet is not None:
            yield Placed(op, None, following, absorbed_by=owner, error=unmet)
            continue
        if owner is not None:
            yield Placed(op, spec, following, absorbed_by=owner, prologue_of=prologue_of)
            continue
        members: tuple[EpilogueMember, ...] = ()
        if spec.fuse == NO_FUSION and is_compute(op):
            spec = spec.model_copy(update={"fuse": None})
        elif is_compute(op) and spec.fuse is not None:
            absorbed[spec.fuse] = op.name
        elif is_compute(op) and index in planned:
            members = planned[index]
            absorbed.update((m.op.name, op.name) for m in members)
        elif index in runs:
            members = runs[index]
            absorbed.update((m.op.name, op.name) for m in members)
        yield Placed(op, spec, following, members=members, prologue_of=prologue_of)


def fusion_units(workload: Workload, mapping: Mapping) -> list[tuple[int, ...]]:
    """The operators whose cost is one, by index in workload order: a producer with
    every member the walk gives it (before its tiling's capacity check, which may give
    some back: their cost then depends on the producer's tiling), every other operator
    alone. Costing each unit on its own and adding them gives a whole run's operator
    cycles, as operators run one after another (DESIGN.md section 3). A norm that may
    run as a prologue joins its consumers' units (and they each other's)."""
    units: list[list[int]] = []
    owner_unit: dict[str, int] = {}
    unit_of: dict[str, int] = {}
    prologues: list[tuple[str, tuple[str, ...]]] = []
    for index, placed in enumerate(placed_operators(workload, mapping)):
        name = placed.op.name
        if placed.prologue_of:
            prologues.append((name, placed.prologue_of))
        if placed.absorbed_by is not None and placed.absorbed_by in owner_unit:
            unit_of[name] = owner_unit[placed.absorbed_by]
            units[unit_of[name]].append(index)
            continue
        owner_unit[name] = unit_of[name] = len(units)
        units.append([index])
    joined = list(range(len(units)))   # each unit's representative (union-find)

    def root(unit: int) -> int:
        while joined[unit] != unit:
            unit = joined[unit]
        return unit

    for norm, consumers in prologues:
        for consumer in consumers:
            a, b = sorted((root(unit_of[norm]), root(unit_of[consumer])))
            joined[b] = a
    merged: dict[int, list[int]] = {}
    for unit, indices in enumerate(units):
        merged.setdefault(root(unit), []).extend(indices)
    return [tuple(sorted(indices)) for indices in merged.values()]


def walk_key(workload: Workload) -> tuple:
    """What the walk (placed_operators, so fusion_units) reads of a workload, hashable:
    each operator's class and field values, but an attention operator's sizes left out
    (of attention the walk reads its name, layer_type and inputs: no epilogue, prologue
    or vector run takes it in). Workloads of equal keys have equal fusion units under one
    mapping, so a caller that walks many workloads differing in attention's sizes alone
    (serving's grid points) may walk one."""
    key = []
    for op in workload.operators:
        inputs = None if op.inputs is None else tuple(op.inputs)  # (a list: unhashable)
        if is_attention(op):
            key.append((type(op), op.name, op.layer_type, inputs))
        else:
            fields = op.__dict__.copy()
            fields["inputs"] = inputs
            key.append((type(op), *fields.values()))
    return tuple(key)


def resolve_tiling(op, spec: TilingSpec, platform: Platform, *, following=None,
                   searches: SearchCache | None = None) -> Tiling:
    """The operator's tiling under its plan entry: with no heuristic named, the open
    fields are the default search's best (kept in `searches`, else searched afresh;
    `following` is the operator a `fuse` absorbs), else the named heuristic's; the
    entry's explicit fields laid over either. Attention's search also picks its
    lowering."""
    name = spec.heuristic or SEARCH
    if name == SEARCH and not fully_specified(op, spec):
        found = (SearchCache() if searches is None else searches).searched_tiling(
            op, spec, platform, following)
        if found is not None:
            return replace(found, **spec_overrides(spec))
        name = DEFAULT_HEURISTIC  # nothing fits: lowering reports this tiling's overflow
    return heuristic_tiling(op, spec, platform, name)


class Resolved(NamedTuple):
    """An operator ready to lower: its tiling (None for a collective), the vector
    operators it runs as its epilogue (empty when none), and the planner's members it
    could not keep, with why."""

    op: object
    tiling: Tiling | None
    fused: tuple[EpilogueMember, ...] = ()
    dropped: tuple[Dropped, ...] = ()


def resolve_workload(workload: Workload, mapping: Mapping, platform: Platform, *,
                     mapping_source: str | None = None,
                     searches: SearchCache | None = None) -> list[Resolved]:
    """Every operator that runs, resolved; a wrong plan entry or fusion is an error
    naming the plan's file. A planner member its producer's tiling cannot keep runs
    on its own. `searches`: the default search's cache (default: one for this call)."""
    searches = SearchCache() if searches is None else searches
    def refused(op, rule: str, file: str | None = None) -> AccsimError:
        return AccsimError(rule, file=file or mapping_source, field=f"operators.{op.name}")

    resolved: list[Resolved] = []
    kept: set[str] = set()
    walk = list(placed_operators(workload, mapping))
    by_name = {placed.op.name: placed for placed in walk}
    prologues: dict[str, tuple[Tiling, tuple[EpilogueMember, ...],
                               tuple[Dropped, ...]]] = {}
    refusals: dict[str, tuple[Dropped, ...]] = {}
    for placed in walk:
        op = placed.op
        if placed.absorbed_by is not None and op.name in kept:
            continue
        if placed.error is not None:
            raise refused(op, placed.error)
        if placed.spec is None:  # a collective: priced on the links
            resolved.append(Resolved(op, None))
            continue
        if placed.prologue_of:
            plans, reason = _prologue_plan(placed, [by_name[name] for name in
                                                    placed.prologue_of], platform,
                                           searches)
            if reason is None:
                prologues.update(plans)
                continue
            first = placed.prologue_of[0]
            refusals[first] = refusals.get(first, ()) + (Dropped(op.name, reason),)
        if op.name in prologues:  # a GEMM that runs a norm as its prologue
            tiling, fused, dropped = prologues[op.name]
            kept.update(member.op.name for member in fused)
            resolved.append(Resolved(op, tiling, fused, dropped))
            continue
        try:
            tiling = resolve_tiling(op, placed.spec, platform, following=placed.following,
                                    searches=searches)
        except AccsimError as exc:  # the plan's fault: name its file
            raise AccsimError(exc.rule, file=exc.file or mapping_source,
                              field=exc.field) from None
        fused: tuple[EpilogueMember, ...] = ()
        dropped: tuple[Dropped, ...] = refusals.get(op.name, ())
        if is_compute(op) and tiling.fuse is not None:
            error = fusion_error(op, tiling.fuse, placed.following)
            if error is not None:
                raise refused(op, error)
            fused = (EpilogueMember(placed.following,
                                    getattr(placed.following, "op", None) in BINARY_OPS),)
        elif placed.members:
            fused, given_back = fitted_group(op, tiling, placed.members, platform)
            dropped = given_back + dropped
        kept.update(member.op.name for member in fused)
        resolved.append(Resolved(op, tiling, fused, dropped))
    return resolved


def _prologue_plan(norm: Placed, consumers: list[Placed], platform: Platform,
                   searches: SearchCache) -> tuple[dict[str, tuple], str | None]:
    """Each consumer's tiling (whole rows per A tile), members with the norm as its
    prologue, and the epilogue members that tiling gives back; or why the norm runs
    alone: a consumer's tiling cannot hold whole rows, or the group would be slower than
    the norm alone plus the consumers as they would run otherwise (each replayed on the
    fast engine). Where every consumer's entry asks for the prologue (`prologue: true`,
    as the mapper writes a group it chose by its objective), no comparison is made."""
    memory = memory_params(platform)
    member = EpilogueMember(norm.op, prologue=True)
    plans: dict[str, tuple] = {}
    asked = all(consumer.spec.prologue for consumer in consumers)
    try:
        fused, alone = 0, 0 if asked else evaluate(
            norm.op, resolve_tiling(norm.op, norm.spec, platform, searches=searches),
            platform, memory, None).cycles
        for consumer in consumers:
            op, spec = consumer.op, consumer.spec
            tiling = resolve_tiling(op, whole_rows(spec, op), platform, searches=searches)
            reason = prologue_refusal(op, tiling, platform)
            if reason is not None:
                return {}, reason
            epilogue, dropped = fitted_group(op, tiling, consumer.members, platform) \
                if consumer.members else ((), ())
            plans[op.name] = (tiling, (member, *epilogue), dropped)
            if asked:
                continue
            fused += evaluate(op, tiling, platform, memory, None,
                              fused=plans[op.name][1]).cycles
            free = resolve_tiling(op, spec, platform, searches=searches)
            epilogue = fitted_group(op, free, consumer.members, platform)[0] \
                if consumer.members else ()
            alone += evaluate(op, free, platform, memory, None, fused=epilogue).cycles
    except AccsimError as exc:  # the consumer's own resolution reports it
        return {}, exc.rule
    if fused > alone:
        return {}, (f"the prologue group takes {fused:,} cycles; the norm alone and its "
                    f"consumers {alone:,}")
    return plans, None


def fusion_adjacency(workload: Workload, mapping: Mapping) -> bool:
    """Whether the planner ran on adjacency (auto, and the workload names no inputs)."""
    return fusion_mode(mapping) == "auto" and not has_edges(workload)


def resolve_checked(workload: Workload, mapping: Mapping, platform: Platform, *,
                    mapping_source: str | None = None,
                    workload_source: str | None = None,
                    platform_source: str | None = None,
                    budget: MemoryBudget | None = None,
                    searches: SearchCache | None = None) -> list[Resolved]:
    """Check and resolve every operator in order; every tiling is checked against the
    limits (simulator.limits: int64 bounds, the memory `budget`) before any is
    lowered. `searches`: the default search's cache (default: one for this call)."""
    check_mapping_names(mapping, workload, file=mapping_source)
    check_inputs(workload, platform, workload_source=workload_source,
                 platform_source=platform_source)
    resolved = resolve_workload(workload, mapping, platform, mapping_source=mapping_source,
                                searches=searches)
    check_tilings([r[:3] for r in resolved], platform, budget,
                  mapping_source=mapping_source, platform_source=platform_source)
    return resolved


def lower_workload(workload: Workload, mapping: Mapping, platform: Platform, *,
                   mapping_source: str | None = None,
                   workload_source: str | None = None,
                   platform_source: str | None = None,
                   budget: MemoryBudget | None = None,
                   searches: SearchCache | None = None) -> list[LoweredOperator]:
    """Check, resolve and lower every operator in order (operators absorbed as an
    epilogue are not emitted); GEMM programs longer than the budget's block stream."""
    resolved = resolve_checked(workload, mapping, platform, mapping_source=mapping_source,
                               workload_source=workload_source,
                               platform_source=platform_source, budget=budget,
                               searches=searches)
    return lower_resolved([r[:3] for r in resolved], platform,
                          mapping_source=mapping_source, workload_source=workload_source,
                          block_steps=None if budget is None else budget.block_steps)
