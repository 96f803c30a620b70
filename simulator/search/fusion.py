"""The fusion planner (DESIGN.md section 15): which vector operators run as a GEMM or
conv's epilogue, and which runs of vector operators run as one vector kernel, as a
compiler would group them. It follows the workload's producer ->
consumer edges (operators' `inputs`), or adjacency where the workload has none (the
plan says so), and keeps a group only where the output buffer holds its streamed
operands at the plan's depth, dropping members from the end with the reason recorded.

Modes: `none` (operator at a time, DESIGN.md section 3, kept exactly), `epilogue`
(only what a plan's `fuse:` asks) and `auto` (the planner; a plan's `fuse:` still wins
for its operator and `fuse: none` forbids a group there)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.inputs.platform import Platform
from simulator.mapping.footprint import buffer_fits
from simulator.model.loop_nest import live_c_tiles
from simulator.mapping.plan import EpilogueMember, Mapping, Tiling
from simulator.inputs.workload import BINARY_OPS, Elementwise, RowOperator, Workload, is_compute

# The planner is the default (MODEL_VERSION 4): serving prices fusion units and the
# mapper reports groups, so every consumer of a model's cost plans fusion alike;
# `--fusion none` runs operator at a time (DESIGN.md section 15).
DEFAULT_FUSION = "auto"
# A plan entry's `fuse: none` forbids the planner to group that operator.
NO_FUSION = "none"


def fusion_mode(mapping: Mapping) -> str:
    """The mode a plan runs under: its own `fusion`, else the default."""
    return mapping.fusion or DEFAULT_FUSION


@dataclass(frozen=True)
class Dropped:
    """A member the planner found but could not keep, and why."""

    name: str
    reason: str


def _epilogue_kind(op) -> bool:
    """Elementwise (bias, scale, activation, gating, residual add) or a row norm."""
    return isinstance(op, Elementwise) or (isinstance(op, RowOperator)
                                           and op.kind == "norm")


def has_edges(workload: Workload) -> bool:
    """Whether any operator names its inputs (else the planner follows adjacency)."""
    return any(op.inputs for op in workload.operators)


def _consumers(ops) -> dict[str, list[str]]:
    """Each operator's readers by name (from the `inputs` edges)."""
    consumers: dict[str, list[str]] = {}
    for op in ops:
        for name in op.inputs or ():
            consumers.setdefault(name, []).append(op.name)
    return consumers


def _chain(head, following, joins, edges: bool,
           consumers: dict[str, list[str]]) -> tuple[EpilogueMember, ...]:
    """The operators after `head` that join it, in order, while `joins(member)` holds
    and each reads the previous one (with edges; else adjacency), cut back until no
    member but the last is read outside the chain. A binary member streams its second
    operand in unless both its inputs are in the chain."""
    group, last, members = [head.name], head, []
    for member in following:
        if not joins(member) or (edges and last.name not in (member.inputs or ())):
            break
        binary = isinstance(member, Elementwise) and member.op in BINARY_OPS
        inside = sum(name in group for name in member.inputs or ())
        members.append(EpilogueMember(member, binary and (inside < 2 or not edges)))
        group.append(member.name)
        last = member
    while edges and members and not _intermediates_stay(group, consumers):
        members.pop()
        group.pop()
    return tuple(members)


def epilogue_candidates(workload: Workload) -> dict[int, tuple[EpilogueMember, ...]]:
    """For each GEMM or conv (by index), the chain of following vector operators that
    could run as its epilogue before any capacity check: each reading the previous one
    (with edges: and no intermediate read outside the group) or simply the next
    operator (adjacency), repeated as often as the producer, over at most the
    producer's output elements, a whole divisor of them. A binary member streams its
    second operand in unless both its inputs are in the group."""
    ops = workload.operators
    edges, consumers = has_edges(workload), _consumers(ops)
    chains: dict[int, tuple[EpilogueMember, ...]] = {}
    for index, op in enumerate(ops):
        if not is_compute(op):
            continue
        g = op.gemm()
        out = g.m * g.n * g.instances

        def joins(member, op=op, out=out) -> bool:
            if not _epilogue_kind(member) or member.repeat != op.repeat:
                return False
            elements = member.vector().rows * member.vector().cols
            return elements <= out and out % elements == 0

        members = _chain(op, ops[index + 1:], joins, edges, consumers)
        if members:
            chains[index] = members
    return chains


def _run_kind(op) -> bool:
    """A vector operator a vector run may hold: elementwise, norm or softmax (each
    writes as many elements as it reads per operand)."""
    return isinstance(op, Elementwise) or (isinstance(op, RowOperator)
                                           and op.kind in ("norm", "softmax"))


def _intermediates_stay(group: list[str], consumers: dict[str, list[str]]) -> bool:
    """Whether no member but the last is read outside the group."""
    return all(set(consumers.get(name, ())) <= set(group) for name in group[:-1])


def vector_run_candidates(workload: Workload, taken: set[str]
                          ) -> dict[int, tuple[EpilogueMember, ...]]:
    """Runs of vector operators that could run as one vector kernel (by the first's
    index), before any capacity check: consecutive elementwise / norm / softmax
    operators outside every epilogue (`taken`), repeated alike, each over as many
    elements as the first writes, each reading the previous one (with edges: and no
    intermediate read outside the run) or simply the next (adjacency)."""
    ops = workload.operators
    edges, consumers = has_edges(workload), _consumers(ops)
    runs: dict[int, tuple[EpilogueMember, ...]] = {}
    index = 0
    while index < len(ops):
        op = ops[index]
        if not _run_kind(op) or op.name in taken:
            index += 1
            continue
        out = op.vector().output_elements

        def joins(member, op=op, out=out) -> bool:
            if not _run_kind(member) or member.name in taken \
                    or member.repeat != op.repeat:
                return False
            shape = member.vector()
            return shape.rows * shape.cols == out and shape.output_elements == out

        members = _chain(op, ops[index + 1:], joins, edges, consumers)
        if members:
            runs[index] = members
        index += 1 + len(members)
    return runs


def fitted_group(op, tiling: Tiling, members: tuple[EpilogueMember, ...],
                 platform: Platform) -> tuple[tuple[EpilogueMember, ...],
                                              tuple[Dropped, ...]]:
    """The members `op`'s tiling can keep (a GEMM or conv's epilogue, or a vector
    run's), and the rest with why."""
    if is_compute(op):
        return fitted_epilogue(op, tiling, members, platform)
    dropped: list[Dropped] = []
    for keep in range(len(members), 0, -1):
        reason = _run_refusal(op, tiling, members[:keep], platform)
        if reason is None:
            break
        dropped.insert(0, Dropped(members[keep - 1].op.name, reason))
    return members[:len(members) - len(dropped)], tuple(dropped)


def _run_refusal(op, tiling: Tiling, kept: tuple[EpilogueMember, ...],
                 platform: Platform) -> str | None:
    """Why a vector run cannot keep `kept` in tiles of the first operator's rows."""
    shape = op.vector()
    per_row = shape.output_elements // shape.rows if \
        shape.output_elements % shape.rows == 0 else None
    for member in kept:
        if isinstance(member.op, RowOperator):
            cols = member.op.cols
            tile = None if per_row is None else tiling.tm * per_row
            if tile is None or tile % cols:
                return (f"norm rows of {cols} must lie whole in one tile; the tile holds "
                        f"{tile if tile is not None else 'uneven'} elements")
    for fit in buffer_fits(op, tiling, platform, members=kept):
        if not fit.fits:
            return (f"{fit.buffer} buffer {fit.capacity} bytes holds {fit.slots} tiles "
                    f"of the run ({fit.tile_bytes} bytes each); needs {fit.depth}")
    return None


def fitted_epilogue(op, tiling: Tiling, members: tuple[EpilogueMember, ...],
                    platform: Platform) -> tuple[tuple[EpilogueMember, ...],
                                                 tuple[Dropped, ...]]:
    """The longest prefix of `members` the tiling can run: a norm needs whole rows in
    one C tile; the C tile and its streamed operands must fit the output buffer at the
    plan's depth without making the partial sums spill. The rest are dropped, each with
    the reason."""
    g = op.gemm()
    unfused = buffer_fits(op, tiling, platform)[2]
    live = live_c_tiles(g.m, g.n, tiling)
    dropped: list[Dropped] = []
    for keep in range(len(members), 0, -1):
        reason = _refusal(op, tiling, members[:keep], platform, unfused.slots, live)
        if reason is None:
            break
        dropped.insert(0, Dropped(members[keep - 1].op.name, reason))
    return members[:len(members) - len(dropped)], tuple(dropped)


def _refusal(op, tiling: Tiling, kept: tuple[EpilogueMember, ...], platform: Platform,
             unfused_slots: int, live: int) -> str | None:
    """Why the tiling cannot run `kept` as its epilogue (None: it can)."""
    g = op.gemm()
    for member in kept:
        if isinstance(member.op, RowOperator) and (member.op.cols != g.n
                                                   or tiling.tn < g.n):
            return (f"norm rows of {member.op.cols} must lie whole in one C tile; "
                    f"the tile has tn {tiling.tn} of N {g.n}")
    fit = buffer_fits(op, tiling, platform, members=kept)[2]
    spills = fit.slots < live <= unfused_slots
    if fit.fits and not spills:
        return None
    return (f"output buffer {fit.capacity} bytes holds {fit.slots} C tiles with their "
            f"streamed operands ({fit.tile_bytes} bytes each); needs "
            f"{max(fit.depth, live if spills else 0)}")
