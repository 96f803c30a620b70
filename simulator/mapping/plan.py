"""Tiling plans as data (DESIGN.md section 2, Mapping): the plan schema (TilingSpec,
Mapping), a complete tiling of one operator (Tiling), how a plan's entries merge per
operator, and the rules a plan must keep (names that exist, a fusion that can happen).
Nothing here chooses a tiling: mapping.heuristics and simulator.search do."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from typing import Literal

from pydantic import Field, field_validator, model_serializer

from simulator.inputs.platform import Dataflow, Name, Strict
from simulator.errors import AccsimError
from simulator.program.tile_program import MAX_DEPTH
from simulator.inputs.workload import Workload, is_attention, is_collective, is_compute
from simulator.model.loop_nest import LOOP_ORDERS, ORIENTATIONS

# What fills the fields a plan leaves open when it names no heuristic: the mapper's best
# tiling of the operator (simulator.search.default). A plan that sets every field of an
# operator is taken as it is (its tilings are labelled PLAN).
SEARCH = "search"
PLAN = "plan"
DEFAULT_HEURISTIC = "array_aligned"  # the heuristic a fully set plan entry is built on
DEFAULT_DEPTH = 2
FUSION_MODES = ("none", "epilogue", "auto")
# --orientation / a plan's `orientation`: auto lets the search weigh both operand
# orientations (DESIGN.md section 19); normal or transposed fixes every GEMM's and
# every attention product's on the array.
ORIENTATION_MODES = ("auto",) + ORIENTATIONS
DEFAULT_ORIENTATION = "auto"


class TilingSpec(Strict):
    """Any subset of a tiling; unset fields come from the heuristic.

    Compute operators use tm, tn, tk, loop_order, dataflow, orientation, fuse, prologue;
    vector operators use rows_per_tile. Both use depth (1 = no prefetch, 2 = double
    buffering, up to 4). tm, tn and the loop order name the operator's own dims whatever
    the orientation.
    """

    heuristic: Name | None = None
    tm: int | None = Field(default=None, gt=0)
    tn: int | None = Field(default=None, gt=0)
    tk: int | None = Field(default=None, gt=0)
    loop_order: str | None = Field(default=None, description="outermost first, e.g. mnk")
    dataflow: Dataflow | None = None
    depth: int | None = Field(default=None, ge=1, le=MAX_DEPTH)
    rows_per_tile: int | None = Field(default=None, gt=0)
    fuse: Name | None = Field(default=None, description="following vector op to absorb")
    prologue: bool | None = Field(
        default=None, description="GEMM under fusion auto: true runs the norm before it as "
        "its prologue (tk = K), whatever the planner's cycle comparison; false runs the "
        "norm alone; unset: the planner decides where tk is unset (DESIGN.md section 15)")
    orientation: Literal["normal", "transposed"] | None = Field(
        default=None, description="which operand the array holds: normal (B), "
        "transposed (A: C = A.B run as its transpose Bᵀ.Aᵀ; attention's Q), exchanging "
        "which operand is stationary (DESIGN.md section 19); unset: the search weighs "
        "both, or normal where the entry sets every other field")
    unit: Literal["array", "vector"] | None = Field(
        default=None, description="attention: the unit its products run on (vector: "
        "q_len 1 only)")
    groups: int | None = Field(default=None, gt=0, description="attention: K/V head "
                               "groups (batch items x kv_heads) one program runs")

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler):
        return without_unset(handler(self))

    @field_validator("loop_order")
    @classmethod
    def _is_permutation(cls, value: str | None) -> str | None:
        if value is not None and value not in LOOP_ORDERS:
            raise ValueError(f"{value!r} is not a permutation of m, n, k "
                             f"(one of {', '.join(LOOP_ORDERS)})")
        return value


SPEC_FIELDS = tuple(TilingSpec.model_fields)
_NO_SPEC = TilingSpec()  # an operator without an entry of its own

COMPUTE_FIELDS = ("tm", "tn", "tk", "loop_order", "dataflow", "orientation", "fuse",
                  "prologue")
VECTOR_FIELDS = ("rows_per_tile",)
# Attention: tm query rows (of the group's heads x q_len) and tn keys per tile; fuse is
# `flash` or `unfused`, orientation `normal` or `transposed`, unit `array` or `vector`,
# groups the K/V head groups one program runs back to back (unset: lowering keeps the
# faster, lowering.attention; groups by its rule).
ATTENTION_FIELDS = ("tm", "tn", "dataflow", "fuse", "orientation", "unit", "groups")
# Per family's own fields, the fields of the other families (merged_spec).
_FOREIGN = {own: tuple(f for f in dict.fromkeys(COMPUTE_FIELDS + VECTOR_FIELDS
                                                + ATTENTION_FIELDS) if f not in own)
            for own in (COMPUTE_FIELDS, VECTOR_FIELDS, ATTENTION_FIELDS)}
ATTENTION_FUSIONS = ("flash", "unfused")
ATTENTION_UNITS = ("array", "vector")
# Tiling and plan-entry fields a result leaves out while unset (so tilings and plans
# that do not set them dump as they did before the fields existed).
OPTIONAL_TILING_FIELDS = ("orientation", "unit", "groups", "prologue")


def without_unset(fields: dict) -> dict:
    """A tiling's fields with the optional ones that are unset (None) left out, so
    plans and results dump as they did before those fields existed."""
    return {k: v for k, v in fields.items()
            if v is not None or k not in OPTIONAL_TILING_FIELDS}


class Mapping(Strict):
    """Tilings by operator name, by layer_type, and a default, most specific winning;
    and how a multi-chip run (--tp) splits the GEMMs it names (DESIGN.md section 14)."""

    name: Name = "default"
    default: TilingSpec = TilingSpec()
    layer_types: dict[Name, TilingSpec] = {}
    operators: dict[Name, TilingSpec] = {}
    row_parallel: list[Name] = Field(
        default=[], description="GEMMs split by rows (K) under --tp, each followed by "
        "an all-reduce of its output; the others are column-parallel (N)")
    fusion: Literal["none", "epilogue", "auto"] | None = Field(
        default=None, description="the fusion planner's mode (DESIGN.md section 15); "
        "unset: the default, or --fusion")
    orientation: Literal["auto", "normal", "transposed"] | None = Field(
        default=None, description="operand orientation of every GEMM the plan leaves "
        "open (DESIGN.md section 19): auto weighs both; unset: auto, or --orientation")

    @model_serializer(mode="wrap")
    def _leave_out_unset_modes(self, handler):
        # Absent rather than null, so plans dump as they did before the fields existed.
        fields = handler(self)
        for name in ("fusion", "orientation"):
            if fields.get(name, 0) is None:
                fields.pop(name)
        return fields

    @field_validator("row_parallel")
    @classmethod
    def _once_each(cls, names: list[str]) -> list[str]:
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"names {', '.join(repeated)} more than once")
        return names


@dataclass(frozen=True)
class EpilogueMember:
    """A vector operator run as a GEMM or conv's epilogue (DESIGN.md section 15):
    `streamed`: it reads a second operand from off chip (a residual, a gate), loaded
    with each finished C tile; `prologue`: instead a row norm applied to the GEMM's A
    tiles as they load (its output never goes off chip)."""

    op: object
    streamed: bool = False
    prologue: bool = False


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
    orientation: str | None = "normal"  # model.loop_nest.ORIENTATIONS (section 19);
    # None: an attention on the vector unit, where no operand is held
    unit: str | None = None          # attention: array | vector
    groups: int | None = None        # attention: K/V head groups per program

    def sort_key(self) -> tuple:
        """The canonical order of tilings (the mapper's last tie-break): tile sizes,
        then loop order, dataflow, depth, fusion, orientation (normal first), unit and
        groups; the heuristic name is not part of a tiling's identity."""
        return (self.tm, self.tn, self.tk, self.loop_order, self.dataflow, self.depth,
                self.fuse or "", self.orientation or "", self.unit or "", self.groups or 0)

    def record(self) -> dict:
        """This tiling as a result records it: orientation where it says something (a
        transposed run, or an attention on the array), unit and groups where set; so
        results of normal GEMM runs read as before these fields existed."""
        record = asdict(self)
        if record["orientation"] is None or (self.orientation == "normal"
                                             and self.unit is None):
            del record["orientation"]
        return without_unset(record)

    @classmethod
    def from_record(cls, record: dict) -> Tiling:
        """The tiling `record()` wrote: no orientation is normal, or none on the vector
        unit."""
        held = None if record.get("unit") == "vector" else "normal"
        return cls(**{**record, "orientation": record.get("orientation", held)})

    def spec(self, *, vector: bool = False, attention: bool = False) -> TilingSpec:
        """This tiling as a plan entry (every field the operator's kind takes)."""
        if vector:
            return TilingSpec(rows_per_tile=self.tm, depth=self.depth)
        if attention:
            return TilingSpec(tm=self.tm, tn=self.tn, dataflow=self.dataflow,
                              depth=self.depth, fuse=self.fuse,
                              orientation=self.orientation, unit=self.unit,
                              groups=self.groups)
        return TilingSpec(tm=self.tm, tn=self.tn, tk=self.tk, loop_order=self.loop_order,
                          dataflow=self.dataflow, depth=self.depth, fuse=self.fuse,
                          orientation=self.orientation)

    def describe(self, *, vector: bool = False) -> str:
        """One short line, e.g. `256x64x576 mnk ws d2` (` T` marks a transposed one:
        Cᵀ = Bᵀ.Aᵀ)."""
        if vector:
            return f"{self.tm} rows d{self.depth}"
        fused = f" +{self.fuse}" if self.fuse else ""
        turned = " T" if self.orientation == "transposed" and self.unit is None else ""
        where = "".join(f" {part}" for part in (
            self.orientation if self.unit == "array" else None,
            "on vector" if self.unit == "vector" else None,
            f"x{self.groups} groups" if self.groups else None) if part)
        return (f"{self.tm}x{self.tn}x{self.tk} {self.loop_order} {self.dataflow}{turned} "
                f"d{self.depth}{fused}{where}")



def merged_spec(mapping: Mapping, op) -> TilingSpec:
    """Default, then the layer_type's spec, then the operator's own, field by field.

    Fields of the other operator family are dropped from the default and layer_type
    specs (a default tm is not a row count) but are an error on the operator's own spec.
    """
    if is_attention(op):
        own_fields = ATTENTION_FIELDS
    else:
        own_fields = COMPUTE_FIELDS if is_compute(op) else VECTOR_FIELDS
    foreign = _FOREIGN[own_fields]
    own = mapping.operators.get(op.name, _NO_SPEC)
    wrong = [f for f in foreign if getattr(own, f) is not None]
    if wrong:
        raise AccsimError(f"{', '.join(wrong)} do not apply to a {op.kind} operator "
                          f"(it takes {', '.join(own_fields)}, depth, heuristic)",
                          field=f"operators.{op.name}")
    merged: dict = {}
    for spec in (mapping.default, mapping.layer_types.get(op.layer_type), own):
        if spec is None:
            continue
        for key in SPEC_FIELDS:  # the spec's set fields (its dump without None)
            value = getattr(spec, key)
            if value is not None and (spec is own or key not in foreign):
                merged[key] = value
    if (is_compute(op) or is_attention(op)) and mapping.orientation in ORIENTATIONS:
        merged.setdefault("orientation", mapping.orientation)   # --orientation fixed
    return TilingSpec(**merged)


def fully_specified(op, spec: TilingSpec) -> bool:
    """Whether the spec sets every tiling field of the operator (a GEMM's fuse aside;
    attention's fuse, which picks its lowering, included)."""
    if is_attention(op):
        own = ATTENTION_FIELDS
    else:
        own = ("tm", "tn", "tk", "loop_order", "dataflow") if is_compute(op) \
            else ("rows_per_tile",)
    return spec.depth is not None and all(getattr(spec, f) is not None for f in own)



def with_heuristic(mapping: Mapping, name: str | None) -> Mapping:
    """The plan with `name` as the heuristic of every field it leaves open (its
    default's heuristic; entries naming their own heuristic keep it)."""
    if name is None:
        return mapping
    return mapping.model_copy(update={
        "default": mapping.default.model_copy(update={"heuristic": name})})


def with_fusion(mapping: Mapping, mode: str | None) -> Mapping:
    """The plan under fusion `mode` (None: as it is; DESIGN.md section 15)."""
    return mapping if mode is None else mapping.model_copy(update={"fusion": mode})


def with_orientation(mapping: Mapping, mode: str | None) -> Mapping:
    """The plan under orientation `mode` (None: as it is; DESIGN.md section 19)."""
    return mapping if mode is None else mapping.model_copy(update={"orientation": mode})



def describe_mapping(mapping: Mapping, source: str | None = None) -> str:
    """Which mapping a run used, in a few words: the searched default, a heuristic, or
    a plan (whose open fields the search or its heuristic fills)."""
    default = mapping.default.heuristic
    entries = bool(mapping.operators or mapping.layer_types
                   or mapping.default.model_dump(exclude_none=True, exclude={"heuristic"}))
    fill = f"heuristic {default}" if default else \
        "searched default (the mapper's best tiling per distinct operator, by cycles)"
    if not entries:
        return fill
    return f"plan {mapping.name}" + (f" ({source})" if source else "") + \
        f"; open fields: {fill}"



def check_mapping_names(mapping: Mapping, workload: Workload, *, file: str | None) -> None:
    """Operator names in a plan must exist in the workload."""
    known = {op.name: op for op in workload.operators}
    for name in mapping.operators:
        if name not in known:
            raise AccsimError(f"no operator named {name!r} in workload {workload.name!r}",
                              file=file, field=f"operators.{name}")
    for name in mapping.row_parallel:
        if name not in known:
            raise AccsimError(f"no operator named {name!r} in workload {workload.name!r}",
                              file=file, field="row_parallel")
        if known[name].kind != "gemm":
            raise AccsimError(f"{name!r} is a {known[name].kind} operator; only a gemm "
                              "splits by rows", file=file, field="row_parallel")


def fusion_error(op, fuse: str, following) -> str | None:
    """Why `fuse` cannot absorb `following` as `op`'s epilogue (None: it can): the
    fused operator is the next one, a vector operator over exactly op's outputs."""
    if following is None or following.name != fuse:
        return f"fuse: {fuse!r} must name the operator right after it"
    if is_compute(following) or is_attention(following) or is_collective(following):
        return f"fuse: {fuse!r} is a {following.kind}, not a vector operator"
    shape, g = following.vector(), op.gemm()
    if shape.rows * shape.cols != g.m * g.n * g.instances:
        return (f"fuse: {fuse!r} works on {shape.rows * shape.cols} elements, the output "
                f"has {g.m * g.n * g.instances}")
    return None
