"""The sweep spec: its YAML schema and its axes, each checked against the base platform
so a misspelt field or an impossible value is an error before any simulation.

Axes are dotted platform fields (`systolic_array.rows`, `energy.mac_pj.int8`), each a
list of values, `{range: [lo, hi, step]}` (hi included when a step lands on it) or
`{log2_range: [lo, hi]}` (every power of two from lo to hi, both powers of two).
`link: [a, b]` (or a list of such lists) makes axes move together: one dimension of
the design space whose i-th point takes the i-th value of each linked axis.

A sweep's workload is either workload files (`workloads`, each point one run) or one
serving workload (`serving`: serve's spec with an SLA; DESIGN.md section 18), whose
points are deployments searched for their SLA capacity (simulator.sweep.serving_sweep),
with deployment axes (`system.*`, `serving.*`) beside the platform fields and the
deployment figures (simulator.sweep.deploy.POINT_METRICS) as objectives.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (Field, PositiveInt, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from simulator.inputs.platform import Name, Platform, Strict
from simulator.errors import AccsimError
from simulator.inputs.loader import load_model, locate, parse_model, read_source, validation_error
from simulator.inputs.platform_file import load_platform, nested, overridden
from simulator.precision.precision_plan import PrecisionPlan
from simulator.serving.spec import ServeSpec
from simulator.system.overlap import OVERLAP_MODES
from simulator.system.parallelism import MAX_CHIPS
from simulator.sweep.constraints import Constraint, parse_constraint
from simulator.sweep.deploy import POINT_METRICS
from simulator.sweep.sampling import MAX_JOBS, MAX_SEED, check_size
from simulator.sweep.task import METRICS
from simulator.inputs.workload import Workload

LINK_KEY = "link"
# Axes that name the multi-chip plan of a point (simulator.system), not a platform field.
SYSTEM_AXES = {"system.chips", "system.tp", "system.pp", "system.ep", "system.overlap"}
# Axes of a serving sweep's deployment (serve's fields of the same meaning).
SERVING_AXES = {"serving.replicas": "replicas", "serving.batching": "batching",
                "serving.max_batch": "max_batch", "serving.chunk_tokens": "max_tokens",
                "serving.precision": "precision"}
# A serving.precision value naming the model's own formats (no plan); any other value
# is a precision plan file, relative to the sweep file.
NO_PLAN = "none"
POINT_AXES = SYSTEM_AXES | set(SERVING_AXES)
BATCHING = ("static", "dynamic", "continuous")
# Serve's fields a serving sweep's axes and platform set, not its `serving` table.
DEPLOYMENT_FIELDS = ("arch", "replicas", "chips", "tp", "pp", "ep", "find_max_rate",
                     "sweep_rate")
# More values than this on one axis, or over all axes, is a typo in a range, not a
# study; each value is validated on the base platform (about 0.3 ms), so this bounds
# the checks before planning to a few seconds.
MAX_AXIS_VALUES = 10_000
# Each axis is a dimension of the grid; a spec with more is a mistake (the platform
# has fewer numeric fields than this that a study would vary together).
MAX_AXES = 32
# Workload files and constraints a spec may list.
MAX_WORKLOADS = 100
MAX_CONSTRAINTS = 100


class Sampling(Strict):
    """How points are drawn from the axes' grid: all of it, or n of them by seed."""

    method: Literal["grid", "random", "lhs"] = "grid"
    n: PositiveInt | None = Field(default=None, le=MAX_JOBS,
                                  description="points, random and lhs only")
    seed: int = Field(default=0, ge=0, le=MAX_SEED, description="of numpy's generator")

    @model_validator(mode="after")
    def _n_matches_method(self) -> Sampling:
        if self.method == "grid" and self.n is not None:
            raise ValueError("n applies to random and lhs sampling; grid takes every point")
        if self.method != "grid" and self.n is None:
            raise ValueError(f"{self.method} sampling needs n (the number of points)")
        return self


class SweepSpec(Strict):
    """The sweep file, with exactly these top-level keys so specs stay portable."""

    name: Name
    platform: str = Field(min_length=1, description="base platform: file or shipped name")
    workloads: list[str] = Field(default=[], max_length=MAX_WORKLOADS,
                                 description="files or shipped names")
    serving: dict[str, Any] | None = Field(default=None, description="a serving "
                                           "workload (serve's spec with an SLA) instead")
    axes: dict[str, Any] = Field(min_length=1, description="dotted platform field -> "
                                 "values, range or log2_range; link ties axes")
    sampling: Sampling = Sampling()
    constraints: list[str] = Field(default=[], max_length=MAX_CONSTRAINTS,
                                   description="comparisons over fields")
    objectives: dict[str, Literal["min", "max"]] = {"time_s": "min"}

    @field_validator("objectives")
    @classmethod
    def _objectives_are_metrics(cls, objectives: dict[str, str],
                                info: ValidationInfo) -> dict[str, str]:
        known = POINT_METRICS if info.data.get("serving") is not None else METRICS
        unknown = [name for name in objectives if name not in known]
        if unknown:
            raise ValueError(f"unknown objective {unknown[0]!r} (known: "
                             f"{', '.join(known)})")
        if not objectives:
            raise ValueError("name at least one objective")
        return objectives

    @model_validator(mode="after")
    def _one_workload_kind(self) -> SweepSpec:
        if bool(self.workloads) == (self.serving is not None):
            raise ValueError("name workloads (files) or serving (one serving workload), "
                             "exactly one of them")
        if self.serving is not None and "objectives" not in self.model_fields_set:
            raise ValueError("a serving sweep names its objectives (known: "
                             f"{', '.join(POINT_METRICS)})")
        return self


@dataclass(frozen=True)
class Axis:
    """One platform field and the values it takes."""

    path: str
    values: tuple


@dataclass(frozen=True)
class Sweep:
    """A loaded spec: the base platform, the workloads and the axes, all checked.

    `dimensions` are the independent directions of the grid: a single axis, or linked
    axes that move together (equal lengths)."""

    spec: SweepSpec
    file: str
    base: dict                      # the base platform, canonical JSON form
    workloads: tuple[Workload, ...]
    dimensions: tuple[tuple[Axis, ...], ...]
    constraints: tuple[Constraint, ...]
    serving: ServeSpec | None = None  # a serving sweep's workload (its SLA searched)

    @property
    def axes(self) -> tuple[Axis, ...]:
        return tuple(axis for dimension in self.dimensions for axis in dimension)


def load_sweep(path: str | Path) -> Sweep:
    """Read a spec and check everything in it against the base platform. Sizes come
    first: the axes' values are counted, and the jobs the sampling would make bounded
    (simulator.sweep.sampling.check_size), before any value is validated or any
    workload read, so an oversized spec is refused at once."""
    source = read_source(path)
    spec = parse_model(source.text, SweepSpec, file=source.path)
    folder = Path(source.path).parent
    base_platform, _ = load_platform(input_path(spec.platform, folder, "platform"))
    base = base_platform.model_dump(mode="json")
    named = {path: raw for path, raw in spec.axes.items() if path != LINK_KEY}
    if len(named) > MAX_AXES:
        raise AccsimError(f"{len(named)} axes (at most {MAX_AXES})", file=source.path,
                          field="axes")
    axes = {path: Axis(path, expanded_axis(path, raw, base, file=source.path))
            for path, raw in named.items()}
    total = sum(len(axis.values) for axis in axes.values())
    if total > MAX_AXIS_VALUES:
        raise AccsimError(f"{total:,} values over all axes (at most {MAX_AXIS_VALUES:,})",
                          file=source.path, field="axes")
    dimensions = link_dimensions(axes, spec.axes.get(LINK_KEY), file=source.path)
    try:
        check_size(spec.sampling.method, [len(d[0].values) for d in dimensions],
                   spec.sampling.n, max(len(spec.workloads), 1))
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=source.path, field=exc.field) from None
    for axis in axes.values():
        check_values(axis, base, file=source.path)
    for dimension in dimensions:
        check_distinct(dimension, file=source.path)
    workloads = tuple(load_model(input_path(name, folder, "workload"), Workload)[0]
                      for name in spec.workloads)
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        raise AccsimError("two workloads have the same name", file=source.path,
                          field="workloads")
    constraints = tuple(parse_constraint(text, base, file=source.path,
                                         field=f"constraints[{index}]")
                        for index, text in enumerate(spec.constraints))
    serving = serving_spec(spec.serving, folder, source.path) if spec.serving else None
    if serving is not None and any(axis.path == "system.overlap"
                                   for dimension in dimensions for axis in dimension):
        raise AccsimError("a serving sweep takes its overlap from the serving workload "
                          "(serving: {overlap: ...}), not from an axis", file=source.path,
                          field="axes.system.overlap")
    return Sweep(spec, source.path, base, workloads, dimensions, constraints, serving)


def serving_spec(raw: dict, folder: Path, file: str) -> ServeSpec:
    """A serving sweep's workload: serve's spec (model and trace paths relative to the
    sweep file) with an SLA, whose deployment the axes and platform set."""
    named = [name for name in DEPLOYMENT_FIELDS if name in raw]
    if named:
        raise AccsimError(f"{named[0]} is set by the sweep's platform and axes, not its "
                          "serving workload", file=file, field=f"serving.{named[0]}")
    if not raw.get("model") or not raw.get("sla"):
        raise AccsimError("a serving sweep serves an LLM (model) against an SLA (sla: "
                          "{ttft_p99_ms: ..., ...})", file=file, field="serving")
    raw = dict(raw)
    for name in ("model", "arrival_trace", "precision"):
        value = raw.get(name)
        if isinstance(value, str) and ("/" in value or Path(value).suffix):
            raw[name] = str(folder / value)
    try:
        return ServeSpec.model_validate(raw | {"find_max_rate": True}).resolved()
    except ValidationError as exc:
        error = validation_error(exc, raw, file=file)
    except AccsimError as exc:
        error = exc
    field = "serving" + (f".{error.field}" if error.field else "")
    raise AccsimError(error.rule, file=file, field=field) from None


def precision_path(value: str, folder: Path) -> str | None:
    """A serving.precision value: None for `none`, else the plan file's path."""
    return None if value == NO_PLAN else str(folder / value)


def check_precision(axis: Axis, *, file: str) -> None:
    """Each serving.precision value is `none` or a precision plan file that loads."""
    for index, value in enumerate(axis.values):
        field = f"axes.{axis.path}[{index}]"
        if not isinstance(value, str):
            raise AccsimError(f"value {value!r}: name a precision plan file or "
                              f"{NO_PLAN}", file=file, field=field)
        path = precision_path(value, Path(file).parent)
        if path is None:
            continue
        try:
            load_model(path, PrecisionPlan)
        except AccsimError as exc:
            raise AccsimError(f"value {value!r}: {exc.rule}", file=file,
                              field=field) from None


def input_path(name: str, folder: Path, kind: str) -> Path:
    """A spec names inputs as paths relative to its own folder, or shipped names."""
    looks_like_path = "/" in name or Path(name).suffix in {".yaml", ".yml", ".json"}
    return locate(str(folder / name) if looks_like_path else name, kind)


def expanded_axis(path: str, raw: Any, base: dict, *, file: str) -> tuple:
    """An axis's values, its path checked (a misspelt field is a spec error naming
    `axes.PATH`) but its values not yet (check_values)."""
    field = f"axes.{path}"
    for kind, known in (("system", SYSTEM_AXES), ("serving", set(SERVING_AXES))):
        if path.startswith(f"{kind}.") and path not in known:
            raise AccsimError(f"no such {kind} field (known: {', '.join(sorted(known))})",
                              file=file, field=field)
    if not path.startswith(("system.", "serving.")):
        check_field_path(path, base, file=file)
    return expand_values(raw, file=file, field=field)


def check_values(axis: Axis, base: dict, *, file: str) -> None:
    """Each value of an axis checked alone on the base platform: a value the field can
    never take is a spec error naming `axes.PATH[i]`. System axes (SYSTEM_AXES) take
    positive whole numbers, system.overlap an overlap mode."""
    field = f"axes.{axis.path}"
    if axis.path == "serving.precision":
        check_precision(axis, file=file)
        return
    for index, value in enumerate(axis.values):
        for path, known, what in (("serving.batching", BATCHING, "a batching policy"),
                                  ("system.overlap", OVERLAP_MODES, "an overlap mode")):
            if axis.path == path and value not in known:
                raise AccsimError(f"value {value!r}: not {what} (known: "
                                  f"{', '.join(known)})", file=file,
                                  field=f"{field}[{index}]")
        if axis.path in ("serving.batching", "system.overlap"):
            continue
        if axis.path in POINT_AXES:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AccsimError(f"value {value!r}: must be a positive whole number",
                                  file=file, field=f"{field}[{index}]")
            if axis.path in SYSTEM_AXES and value > MAX_CHIPS:
                raise AccsimError(f"value {value:,}: more than the {MAX_CHIPS:,} chips a "
                                  "plan may have", file=file, field=f"{field}[{index}]")
            continue
        if isinstance(value, int) and not -2**63 <= value < 2**63:
            raise AccsimError(f"value {value!r}: outside the int64 range", file=file,
                              field=f"{field}[{index}]")
        error = platform_error(with_values(base, {axis.path: value}))
        if error is not None and error.field == axis.path:
            raise AccsimError(f"value {value!r}: {error.rule}", file=file,
                              field=f"{field}[{index}]")


def check_field_path(path: str, base: dict, *, file: str) -> None:
    """A dotted path must end at a value of the platform, naming the field it missed."""
    node: Any = base
    walked: list[str] = []
    for part in path.split("."):
        where = ".".join(walked) or "the platform"
        if not isinstance(node, dict):
            raise AccsimError(f"no such platform field: {where} is a value, not a table",
                              file=file, field=f"axes.{path}")
        if part not in node:
            raise AccsimError(f"no such platform field: {where} has no {part!r} (it has: "
                              f"{', '.join(node)})", file=file, field=f"axes.{path}")
        node = node[part]
        walked.append(part)
    if isinstance(node, dict):
        raise AccsimError(f"{path} is a table; name one of its fields ({', '.join(node)})",
                          file=file, field=f"axes.{path}")


def expand_values(raw: Any, *, file: str, field: str) -> tuple:
    """A list as given, or the values of a range or log2_range."""
    if isinstance(raw, list):
        values = tuple(raw)
    elif isinstance(raw, dict) and set(raw) == {"range"}:
        values = linear_range(raw["range"], file=file, field=f"{field}.range")
    elif isinstance(raw, dict) and set(raw) == {"log2_range"}:
        values = log2_range(raw["log2_range"], file=file, field=f"{field}.log2_range")
    else:
        raise AccsimError("an axis is a list of values, {range: [lo, hi, step]} or "
                          "{log2_range: [lo, hi]}", file=file, field=field)
    if not values:
        raise AccsimError("an axis needs at least one value", file=file, field=field)
    if len(values) > MAX_AXIS_VALUES:
        raise AccsimError(f"{len(values):,} values (at most {MAX_AXIS_VALUES:,} per axis)",
                          file=file, field=field)
    return values


def is_number(value: Any) -> bool:
    """A finite number (an int of any size: math.isfinite would overflow on 10**400)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or isinstance(value, float) and math.isfinite(value)


def linear_range(bounds: Any, *, file: str, field: str) -> tuple:
    """lo, lo + step, ... up to hi inclusive; integers when all three are integers."""
    if not (isinstance(bounds, list) and len(bounds) == 3 and all(map(is_number, bounds))):
        raise AccsimError("range is [lo, hi, step], three finite numbers", file=file,
                          field=field)
    lo, hi, step = bounds
    if step <= 0 or hi < lo:
        raise AccsimError("range needs step > 0 and hi >= lo", file=file, field=field)
    whole = all(isinstance(b, int) for b in bounds)
    if whole:
        count = (hi - lo) // step + 1
    else:  # floats: count steps with a relative tolerance, so 0.1 steps land on hi
        try:
            span = (hi - lo) / step * (1 + 1e-12) + 1e-9
        except OverflowError:
            span = math.inf
        count = math.floor(span) + 1 if span < 2**62 else 2**62
    if count > MAX_AXIS_VALUES:
        shown = f"{count:,}" if count < 2**62 else "too many"
        raise AccsimError(f"{shown} values (at most {MAX_AXIS_VALUES:,} per axis)",
                          file=file, field=field)
    if whole:
        return tuple(range(lo, hi + 1, step))
    return tuple(round(lo + i * step, 12) for i in range(count))


def log2_range(bounds: Any, *, file: str, field: str) -> tuple:
    """Every power of two from lo to hi, both included."""
    def power_of_two(b: Any) -> bool:
        return isinstance(b, int) and not isinstance(b, bool) and b > 0 and b & (b - 1) == 0

    if not (isinstance(bounds, list) and len(bounds) == 2 and all(map(power_of_two, bounds))):
        raise AccsimError("log2_range is [lo, hi], two powers of two (e.g. [32, 512])",
                          file=file, field=field)
    lo, hi = bounds
    if hi < lo:
        raise AccsimError("log2_range needs hi >= lo", file=file, field=field)
    return tuple(1 << e for e in range(lo.bit_length() - 1, hi.bit_length()))


def link_dimensions(axes: dict[str, Axis], link: Any, *, file: str
                    ) -> tuple[tuple[Axis, ...], ...]:
    """Group linked axes into one dimension each; the rest are a dimension alone.
    Dimensions keep the order in which their first axis appears in the spec."""
    if not axes:
        raise AccsimError("name at least one axis besides link", file=file, field="axes")
    if link is None:
        groups: list[list] = []
    elif isinstance(link, list) and all(isinstance(name, str) for name in link):
        groups = [link]
    elif isinstance(link, list) and all(isinstance(group, list) for group in link):
        groups = link
    else:
        raise AccsimError("link is a list of axis names, or a list of such lists",
                          file=file, field=f"axes.{LINK_KEY}")
    group_of: dict[str, int] = {}
    for index, group in enumerate(groups):
        field = f"axes.{LINK_KEY}" + (f"[{index}]" if len(groups) > 1 else "")
        if len(group) < 2 or not all(isinstance(name, str) for name in group):
            raise AccsimError("a link names two or more axes", file=file, field=field)
        for name in group:
            if name not in axes:
                raise AccsimError(f"{name!r} is not an axis of this spec", file=file,
                                  field=field)
            if name in group_of:
                raise AccsimError(f"{name!r} is linked twice", file=file, field=field)
            group_of[name] = index
        lengths = {len(axes[name].values) for name in group}
        if len(lengths) > 1:
            raise AccsimError("linked axes need the same number of values (they have "
                              f"{', '.join(str(len(axes[n].values)) for n in group)})",
                              file=file, field=field)
    dimensions: list[tuple[Axis, ...]] = []
    placed: set[int] = set()
    for path, axis in axes.items():
        if path not in group_of:
            dimensions.append((axis,))
        elif group_of[path] not in placed:
            placed.add(group_of[path])
            dimensions.append(tuple(axes[name] for name in groups[group_of[path]]))
    return tuple(dimensions)


def check_distinct(dimension: tuple[Axis, ...], *, file: str) -> None:
    """Each point of a dimension once: one given twice (8 and 8, or 16 and 16.0) was
    counted as two points and stored as one. Linked axes may repeat a value where
    their points differ."""
    seen: dict[Any, int] = {}
    for index, point in enumerate(zip(*(axis.values for axis in dimension))):
        key = tuple(value if isinstance(value, Hashable) else repr(value)
                    for value in point)
        first = seen.setdefault(key, index)
        if first == index:
            continue
        if len(dimension) == 1:
            field = f"axes.{dimension[0].path}"
            raise AccsimError(f"value {point[0]!r} repeats {field}[{first}]: each point "
                              "is run once", file=file, field=f"{field}[{index}]")
        values = ", ".join(f"{axis.path} {value!r}" for axis, value in zip(dimension, point))
        raise AccsimError(f"point {index} ({values}) repeats point {first}: each point "
                          "is run once", file=file, field=f"axes.{LINK_KEY}")


def with_values(base: dict, values: dict[str, Any]) -> dict:
    """A copy of the base platform with each dotted field set to its value, by the
    rule a platform file over a base follows (simulator.inputs.platform_file.overridden);
    system axes are the point's plan, not the platform's."""
    return overridden(base, nested({path: value for path, value in values.items()
                                    if path not in POINT_AXES}))


def platform_error(raw: dict) -> AccsimError | None:
    """Why a platform dict is not a valid platform (its first error), or None."""
    try:
        Platform.model_validate(raw)
    except ValidationError as exc:
        return validation_error(exc, raw, file="", model=Platform)
    return None
