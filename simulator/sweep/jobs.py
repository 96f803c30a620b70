"""From a loaded sweep to its jobs: the sampled points, those the constraints keep,
each point's platform validated, and one job per point x workload keyed by content.

A job's key is the sha256 of the canonical platform, the workload, the mapping mode and
MODEL_VERSION (and, only for a sweep run with --ignore-capacity, that flag: a what-if
never shares a key with a checked point, and every other key stays as it was), so the same design point has the same key in any sweep, any order and
any store: that is what lets a sweep resume and never compute a point twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

import simulator
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import validation_error
from simulator.sweep.sampling import sample
from simulator.mapping.plan import Mapping
from simulator.sweep.sweep_spec import SYSTEM_AXES, Sweep, with_values
from simulator.sweep.task import mapping_mode
from simulator.system.parallelism import MAX_CHIPS, SystemPlan
from simulator.inputs.workload import Workload


# The key input a sweep run with --ignore-capacity adds (absent otherwise).
IGNORE_CAPACITY = "ignore_capacity"


@dataclass(frozen=True)
class Job:
    """One point x workload: its key, its axis values and inputs, and, for a point
    whose platform is invalid, the reason instead of a platform."""

    key: str
    point: dict[str, Any]          # axis path -> value
    workload: Workload
    mapping: Mapping
    platform: Platform | None
    error: str | None
    inputs: dict                   # what the key hashes, as stored (workload by hash)
    system: SystemPlan | None = None   # the point's multi-chip plan (system.* axes)
    ignore_capacity: bool = False      # --ignore-capacity: a chip too small still runs


@dataclass(frozen=True)
class Plan:
    """Every job of a sweep, in sampling order, each key once."""

    sweep: Sweep
    samples: int                   # points drawn by the sampling method
    excluded: int                  # of those, points the constraints ruled out
    jobs: tuple[Job, ...]

    @property
    def points(self) -> int:
        """Distinct platform points kept."""
        return len({json.dumps(job.point, sort_keys=True) for job in self.jobs})


def canonical_json(value: Any) -> str:
    """The one JSON spelling hashed for keys: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def point_values(sweep: Sweep, indices) -> dict[str, Any]:
    """Axis path -> value for one row of dimension indices."""
    return {axis.path: axis.values[int(index)]
            for dimension, index in zip(sweep.dimensions, indices) for axis in dimension}


def system_plan(point: dict[str, Any]) -> SystemPlan | None:
    """The plan the point's system.* axes name (chips default to tp x pp), or None."""
    named = {path.removeprefix("system."): value for path, value in point.items()
             if path in SYSTEM_AXES}
    if not named:
        return None
    tp, pp = named.get("tp", 1), named.get("pp", 1)
    chips = named.get("chips", tp * pp)
    if chips > MAX_CHIPS:  # each axis value is bounded (spec); their product may not be
        raise AccsimError(f"T x P = {tp:,} x {pp:,} chips is more than the {MAX_CHIPS:,} a "
                          "plan may have", field="axes.system.tp")
    return SystemPlan(chips=chips, tp=tp, pp=pp, ep=named.get("ep", 1),
                      overlap=named.get("overlap", "none"))


def sampled_rows(sweep: Sweep):
    """The sweep's sampled points as rows of axis-value indices (its sampling method);
    a sampling error names the sweep's file."""
    sampling = sweep.spec.sampling
    lengths = [len(dimension[0].values) for dimension in sweep.dimensions]
    try:
        return sample(sampling.method, lengths, sampling.n, sampling.seed)
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=sweep.file, field=exc.field) from None


def make_plan(sweep: Sweep, mapping: Mapping | None = None, *,
              ignore_capacity: bool = False) -> Plan:
    """Sample, filter by the constraints, validate each platform, key each job; every
    job maps its workload with `mapping` (default `Mapping()`, the default mapping)
    and, with `ignore_capacity`, runs where its chip cannot hold it (in its key)."""
    mapping = Mapping() if mapping is None else mapping
    mode = mapping_mode(mapping)
    rows = sampled_rows(sweep)
    workload_hashes = [sha256(canonical_json(w.model_dump(mode="json")))
                       for w in sweep.workloads]
    jobs: dict[str, Job] = {}
    excluded = 0
    for indices in rows:
        point = point_values(sweep, indices)
        raw = with_values(sweep.base, point)
        if not all(holds(constraint, raw, point, sweep.file)
                   for constraint in sweep.constraints):
            excluded += 1
            continue
        platform, error = validated(raw)
        system = system_plan(point)
        canonical = platform.model_dump(mode="json") if platform else raw
        for workload, workload_hash in zip(sweep.workloads, workload_hashes):
            inputs = {"platform": canonical,
                      "workload": {"name": workload.name, "sha256": workload_hash},
                      "mapping": mode,
                      "model_version": simulator.MODEL_VERSION}
            if system is not None:
                inputs["system"] = system.model_dump()
            if ignore_capacity:
                inputs[IGNORE_CAPACITY] = True
            key = sha256(canonical_json(inputs))
            jobs.setdefault(key, Job(key, point, workload, mapping, platform, error,
                                     inputs, system, ignore_capacity))
    return Plan(sweep, len(rows), excluded, tuple(jobs.values()))


def holds(constraint, raw: dict, point: dict, file: str) -> bool:
    try:
        return constraint.holds(raw)
    except (TypeError, ZeroDivisionError, OverflowError) as exc:
        raise AccsimError(f"constraint {constraint.text!r} cannot be evaluated at point "
                          f"{point} ({exc})", file=file, field="constraints") from None


def validated(raw: dict) -> tuple[Platform | None, str | None]:
    """The platform of a point, or why its combination of values is not one."""
    try:
        return Platform.model_validate(raw), None
    except ValidationError as exc:
        return None, f"invalid platform: {validation_error(exc, raw, file='').message()}"
