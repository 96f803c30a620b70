"""Tiling plans: the mapping schema, its resolution per operator, and the heuristics
registry that fills in whatever a plan leaves open (DESIGN.md section 2, Mapping)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import permutations

from pydantic import Field, field_validator

from simulator.config import DTYPE_BYTES, Dataflow, Platform, Strict
from simulator.errors import AccsimError
from simulator.program import MAX_DEPTH
from simulator.timing import ceil_div
from simulator.workload import Workload, is_compute

LOOP_ORDERS = tuple("".join(p) for p in permutations("mnk"))
DEFAULT_HEURISTIC = "array_aligned"
DEFAULT_DEPTH = 2


class TilingSpec(Strict):
    """Any subset of a tiling; unset fields come from the heuristic.

    Compute operators use tm, tn, tk, loop_order, dataflow, fuse; vector operators use
    rows_per_tile. Both use depth (1 = no prefetch, 2 = double buffering, up to 4).
    """

    heuristic: str | None = None
    tm: int | None = Field(default=None, gt=0)
    tn: int | None = Field(default=None, gt=0)
    tk: int | None = Field(default=None, gt=0)
    loop_order: str | None = Field(default=None, description="outermost first, e.g. mnk")
    dataflow: Dataflow | None = None
    depth: int | None = Field(default=None, ge=1, le=MAX_DEPTH)
    rows_per_tile: int | None = Field(default=None, gt=0)
    fuse: str | None = Field(default=None, description="following vector op to absorb")

    @field_validator("loop_order")
    @classmethod
    def _is_permutation(cls, value: str | None) -> str | None:
        if value is not None and value not in LOOP_ORDERS:
            raise ValueError(f"{value!r} is not a permutation of m, n, k "
                             f"(one of {', '.join(LOOP_ORDERS)})")
        return value


COMPUTE_FIELDS = ("tm", "tn", "tk", "loop_order", "dataflow", "fuse")
VECTOR_FIELDS = ("rows_per_tile",)


class Mapping(Strict):
    """Tilings by operator name, by layer_type, and a default, most specific winning."""

    name: str = "default"
    default: TilingSpec = TilingSpec()
    layer_types: dict[str, TilingSpec] = {}
    operators: dict[str, TilingSpec] = {}


@dataclass(frozen=True)
class Tiling:
    """A complete tiling of one operator. Vector operators use tm as rows per tile."""

    tm: int
    tn: int
    tk: int
    loop_order: str
    dataflow: str
    depth: int
    fuse: str | None = None
    heuristic: str = DEFAULT_HEURISTIC


Heuristic = Callable[..., Tiling]
_HEURISTICS: dict[str, Heuristic] = {}


def register(name: str) -> Callable[[Heuristic], Heuristic]:
    """Decorator adding a heuristic (operator, platform, depth, dataflow) -> Tiling."""
    def add(func: Heuristic) -> Heuristic:
        _HEURISTICS[name] = func
        return func
    return add


def heuristic(name: str) -> Heuristic:
    try:
        return _HEURISTICS[name]
    except KeyError:
        raise AccsimError(f"unknown heuristic {name!r} (known: "
                          f"{', '.join(sorted(_HEURISTICS))})", field="heuristic") from None


def operator_dtype(op, platform: Platform) -> str:
    """The operator's input dtype: its own, else the array's default."""
    return op.dtype or platform.systolic_array.input_dtypes[0]


def operand_bytes(op, platform: Platform) -> tuple[int, int, int]:
    """Bytes per element of (input operands, accumulators, outputs) for an operator."""
    dtype = operator_dtype(op, platform)
    if not is_compute(op):
        return DTYPE_BYTES[dtype], DTYPE_BYTES[dtype], DTYPE_BYTES[dtype]
    array = platform.systolic_array
    return (DTYPE_BYTES[dtype], DTYPE_BYTES[array.accumulator_dtype],
            DTYPE_BYTES[array.output_dtype])


def _balanced(total: int, cap: int) -> int:
    """The smallest tile size with the same tile count as `cap`, so edge tiles are not
    slivers."""
    cap = max(1, min(total, cap))
    return ceil_div(total, ceil_div(total, cap))


@register("array_aligned")
def array_aligned(op, platform: Platform, depth: int, dataflow: str) -> Tiling:
    """Stationary dims one array fold, the streamed dim as long as `depth` tiles of every
    operand fit their buffers; k innermost; the platform's default dataflow."""
    buffers = platform.buffers
    e, acc, _ = operand_bytes(op, platform)
    if not is_compute(op):
        shape = op.vector()
        per_row = max(ceil_div(shape.input_elements, shape.rows),
                      ceil_div(shape.output_elements, shape.rows)) * e
        rows = min(buffers.ifmap_bytes, buffers.output_bytes) // (depth * per_row)
        return Tiling(_balanced(shape.rows, rows), 1, 1, "mnk", "os", depth)
    g = op.gemm()
    rows, cols = platform.systolic_array.rows, platform.systolic_array.cols
    if dataflow == "os":
        tm, tn = min(g.m, rows), min(g.n, cols)
        tk = min(buffers.ifmap_bytes // (depth * tm * e), buffers.weight_bytes // (depth * tn * e))
        return Tiling(tm, tn, _balanced(g.k, tk), "mnk", dataflow, depth)
    tk = min(g.k, rows)
    if dataflow == "ws":
        tn = min(g.n, cols)
        tm = min(buffers.ifmap_bytes // (depth * tk * e), buffers.output_bytes // (depth * tn * acc))
        return Tiling(_balanced(g.m, tm), tn, tk, "mnk", dataflow, depth)
    tm = min(g.m, cols)
    tn = min(buffers.weight_bytes // (depth * tk * e), buffers.output_bytes // (depth * tm * acc))
    return Tiling(tm, _balanced(g.n, tn), tk, "mnk", dataflow, depth)


def merged_spec(mapping: Mapping, op) -> TilingSpec:
    """Default, then the layer_type's spec, then the operator's own, field by field.

    Fields of the other operator family are dropped from the default and layer_type
    specs (a default tm is not a row count) but are an error on the operator's own spec.
    """
    own_fields = COMPUTE_FIELDS if is_compute(op) else VECTOR_FIELDS
    foreign = VECTOR_FIELDS if is_compute(op) else COMPUTE_FIELDS
    own = mapping.operators.get(op.name, TilingSpec())
    wrong = [f for f in foreign if getattr(own, f) is not None]
    if wrong:
        raise AccsimError(f"{', '.join(wrong)} do not apply to a {op.kind} operator "
                          f"(it takes {', '.join(own_fields)}, depth, heuristic)",
                          field=f"operators.{op.name}")
    merged: dict = {}
    for spec in (mapping.default, mapping.layer_types.get(op.layer_type), own):
        if spec is None:
            continue
        for key, value in spec.model_dump(exclude_none=True).items():
            if spec is own or key not in foreign:
                merged[key] = value
    return TilingSpec(**merged)


def resolve_tiling(op, spec: TilingSpec, platform: Platform) -> Tiling:
    """The heuristic's tiling with the spec's explicit fields laid over it."""
    name = spec.heuristic or DEFAULT_HEURISTIC
    depth = spec.depth or DEFAULT_DEPTH
    dataflow = spec.dataflow or platform.systolic_array.default_dataflow
    base = heuristic(name)(op, platform, depth, dataflow)
    overrides = {k: v for k, v in spec.model_dump(exclude_none=True).items()
                 if k in ("tm", "tn", "tk", "loop_order", "dataflow", "fuse")}
    if spec.rows_per_tile is not None:
        overrides["tm"] = spec.rows_per_tile
    return replace(base, depth=depth, heuristic=name, **overrides)


def check_mapping_names(mapping: Mapping, workload: Workload, *, file: str | None) -> None:
    """Operator names in a plan must exist in the workload."""
    known = {op.name for op in workload.operators}
    for name in mapping.operators:
        if name not in known:
            raise AccsimError(f"no operator named {name!r} in workload {workload.name!r}",
                              file=file, field=f"operators.{name}")
