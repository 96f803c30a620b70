"""Norm prologues (DESIGN.md section 15 c): a row norm (layer norm, RMS norm) whose
every reader is a GEMM taking it as its activations (A) is applied to those GEMMs' A
tiles as they load, so its output never goes off chip. A consumer needs whole rows in
each A tile (tk = K, the normalised dimension), held by its ifmap buffer at the plan's
depth (mapping.footprint). A norm read by several GEMMs is recomputed whole in each
one's prologue rather than written out: XLA duplicates a norm's cheap elementwise part
into every consumer and keeps its row reduction apart because a duplicated reduction
would read its operand again; here each A tile already holds whole rows, so the
statistics cost vector work and no read. The group is kept only where it is no slower
than the norm alone plus its consumers as they would run otherwise, else the norm runs
alone and the reason is recorded."""

from __future__ import annotations

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.mapping.footprint import buffer_fits
from simulator.mapping.plan import Mapping, Tiling, TilingSpec, merged_spec
from simulator.inputs.workload import RowOperator, Workload


def _reads_rows(norm, op) -> bool:
    """Whether GEMM `op` takes `norm`'s output, row for row, as its A operand."""
    if op.kind != "gemm" or op.repeat != norm.repeat or op.dtype != norm.dtype:
        return False
    g = op.gemm()
    return g.k == norm.cols and g.m * g.instances == norm.rows


def _open(mapping: Mapping, op) -> bool:
    """Whether the plan lets a consumer take a prologue: no `fuse` of its own (a
    `fuse: none` forbids the group), no `prologue: false`, and its tk not fixed (the
    prologue sets it) unless the entry asks for the prologue (`prologue: true`)."""
    try:
        spec = merged_spec(mapping, op)
    except AccsimError:
        return False  # the run reports the entry's error
    return spec.fuse is None and spec.prologue is not False and \
        (spec.tk is None or spec.prologue is True)


def prologue_candidates(workload: Workload, mapping: Mapping,
                        edges: bool) -> dict[int, tuple[int, ...]]:
    """For each norm (by index) that could run as a prologue, its consumers' indices,
    before any capacity check: with edges, every reader of the norm, each a GEMM that
    names the norm as its only input; by adjacency, the next operator, such a GEMM.
    Every consumer must take the norm's rows as its A rows, repeat as often, share its
    dtype, and leave fusion and tk to the planner (or ask for the prologue)."""
    ops = workload.operators
    readers: dict[str, list[int]] = {}
    for index, op in enumerate(ops):
        for name in op.inputs or ():
            readers.setdefault(name, []).append(index)
    found: dict[int, tuple[int, ...]] = {}
    for index, norm in enumerate(ops):
        if not (isinstance(norm, RowOperator) and norm.kind == "norm"):
            continue
        if edges:
            consumers = readers.get(norm.name, [])
            if any(list(ops[c].inputs or ()) != [norm.name] for c in consumers):
                continue
        else:
            consumers = [index + 1] if index + 1 < len(ops) else []
        if consumers and all(_reads_rows(norm, ops[c]) and _open(mapping, ops[c])
                             for c in consumers):
            found[index] = tuple(consumers)
    return found


def whole_rows(spec: TilingSpec, op) -> TilingSpec:
    """The consumer's plan entry with tk set to K: each A tile holds whole rows."""
    return spec.model_copy(update={"tk": op.gemm().k})


def prologue_refusal(op, tiling: Tiling, platform: Platform) -> str | None:
    """Why the consumer's tiling cannot take the norm as its prologue (None: it can):
    its A tiles must hold whole rows, and every operand fit its buffer at the plan's
    depth."""
    k = op.gemm().k
    if tiling.tk < k:
        return (f"norm rows of {k} must lie whole in one A tile of {op.name}; "
                f"the tile has tk {tiling.tk}")
    for fit in buffer_fits(op, tiling, platform):
        if not fit.fits:
            return (f"{fit.buffer} buffer {fit.capacity} bytes holds {fit.slots} "
                    f"{fit.operand} tiles of {op.name} with whole rows ({fit.dims}, "
                    f"{fit.tile_bytes} bytes each); needs {fit.depth}")
    return None


def asked_without_norm(op, mapping: Mapping) -> str | None:
    """Why the operator's own plan entry's `prologue: true` cannot be met (None: it
    asks nothing): no norm before this GEMM may run as its prologue. (A default's or
    layer_type's `prologue: true` applies where a norm can be, silently elsewhere.)"""
    own = mapping.operators.get(op.name)
    if own is None or own.prologue is not True:
        return None
    return (f"prologue: true asks for a norm run as {op.name}'s prologue, and none can "
            f"be: that needs fusion auto, no `fuse` on this entry, and a layer or RMS "
            f"norm before it read only by GEMMs that take its rows as their A operand")
