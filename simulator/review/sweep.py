"""The study's design-space sweep (scope.sweep, DESIGN.md section 11) in the packet.

The spec's plan runs through simulator.sweep's own coordinator and executors into one
SQLite store per sweep name under the run cache (CACHE/sweeps/NAME.sqlite), so a
second review of the study computes only the points the store lacks (none). The
section does not read the store: the points of this plan are exported with their
Pareto front to results/sweep.NAME.json, whose sha256 the packet records like a
result file's. Front points carry the inputs their key hashes, and the file embeds
the workloads and the mapping once, so `accsim verify` reruns each front point from
the file alone (rerun_differences).
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

import simulator
from simulator.inputs.anchors import relocated
from simulator.inputs.platform import Platform, Strict
from simulator.errors import AccsimError
from simulator.inputs.loader import read_bytes, validate_model
from simulator.output.files import OutputFolder
from simulator.mapping.plan import Mapping
from simulator.review.runs import RESULTS_FOLDER
from simulator.sweep.coordinator import Summary, missing_jobs, run_sweep
from simulator.sweep.pareto import pareto_mask
from simulator.sweep.jobs import IGNORE_CAPACITY, Plan, canonical_json, sha256
from simulator.sweep.report import Objective, Report, build_report
from simulator.sweep.store import Store
from simulator.sweep.task import LABELS, METRICS, evaluate_point, mapping_mode
from simulator.system.parallelism import SystemPlan
from simulator.inputs.workload import Workload

SWEEPS_FOLDER = "sweeps"  # inside the run cache
EXPORT_FORMAT = "accsim-review-sweep"


class ExportedPoint(Strict):
    """One point x workload of the export."""

    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    workload: str
    status: Literal["ok", "failed"]
    error: str | None
    point: dict[str, Any]
    metrics: dict[str, int | float | None]
    labels: dict[str, str | None]
    on_front: bool
    inputs: dict | None = None  # front points: what the key hashes


class ExportedSweep(Strict):
    """Where the points came from: the spec file and its plan."""

    name: str
    platform: str  # the base platform's name
    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    objectives: dict[str, Literal["min", "max"]] = Field(min_length=1)
    mapping: str
    samples: int
    excluded: int
    ignore_capacity: bool = False  # written only when --ignore-capacity was given


class SweepExport(Strict):
    """results/sweep.NAME.json as verify reads it."""

    format: Literal[EXPORT_FORMAT]
    model_version: int
    sweep: ExportedSweep
    workloads: dict[str, dict]   # name -> canonical workload
    mapping: dict                # canonical mapping every point ran with
    points: list[ExportedPoint]


@dataclass(frozen=True)
class SweepRecord:
    """The sweep's export inside the packet, and what this review computed."""

    file: str          # e.g. results/sweep.NAME.json
    sha256: str
    data: SweepExport
    summary: Summary   # stored before / computed now (said on the terminal only)
    store: str         # the store's path (terminal only: the packet is the same anywhere)


def objectives(plan: Plan) -> tuple[Objective, ...]:
    """The spec's objectives, in its order."""
    return tuple(Objective(name, sense)
                 for name, sense in plan.sweep.spec.objectives.items())


def safe_name(plan: Plan) -> str:
    """The sweep's name as a file name (store and export)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", plan.sweep.spec.name)


def export(plan: Plan, report: Report, spec_sha256: str) -> dict:
    """The export's content: every point of the plan, the front flagged."""
    jobs = {job.key: job for job in plan.jobs}
    mapping = plan.jobs[0].mapping if plan.jobs else Mapping()  # one for every job
    points = []
    for row in report.rows:
        front = report.on_front.get(row["key"], False)
        points.append({"key": row["key"], "workload": row["workload"],
                       "status": row["status"], "error": row["error"],
                       "point": row["point"],
                       "metrics": {name: row[name] for name in METRICS},
                       "labels": {name: row[name] for name in LABELS},
                       "on_front": front,
                       **({"inputs": jobs[row["key"]].inputs} if front else {})})
    spec = plan.sweep.spec
    return {"format": EXPORT_FORMAT, "model_version": simulator.MODEL_VERSION,
            "sweep": {"name": spec.name, "platform": plan.sweep.base["name"],
                      "path": plan.sweep.file, "sha256": spec_sha256,
                      "objectives": dict(spec.objectives),
                      "mapping": mapping_mode(mapping), "samples": plan.samples,
                      "excluded": plan.excluded,
                      **({IGNORE_CAPACITY: True} if any(job.ignore_capacity
                                                        for job in plan.jobs) else {})},
            "workloads": {w.name: w.model_dump(mode="json") for w in plan.sweep.workloads},
            "mapping": mapping.model_dump(mode="json"),
            "points": points}


def report_of(data: SweepExport) -> Report:
    """The sweep report an export holds (rows as the store gives them), for figures."""
    rows = [{**p.model_dump(exclude_unset=True), **p.metrics, **p.labels}
            for p in data.points]
    return Report(tuple(Objective(name, sense) for name, sense in
                        data.sweep.objectives.items()), rows,
                  {p.key: p.on_front for p in data.points},
                  tuple(sorted({axis for p in data.points for axis in p.point})))


def _run(plan: Plan, path: Path, executor, progress) -> tuple[Summary, Report]:
    """Compute the plan's missing points into the store at `path`; its report."""
    with Store(path) as store, executor:
        total = len(missing_jobs(plan, store))
        done = []

        def stored(row: dict) -> None:
            done.append(row["key"])
            if progress:
                progress(len(done), total, f"sweep {plan.sweep.spec.name}")

        summary = run_sweep(plan, store, executor, on_stored=stored)
        if summary.interrupted:
            raise KeyboardInterrupt
        return summary, build_report(store, objectives(plan),
                                     keys={job.key for job in plan.jobs})


def run_study_sweep(plan: Plan, out: OutputFolder, *, cache: OutputFolder | None,
                    executor, progress=None) -> SweepRecord:
    """Compute the plan's missing points into the cache's store (a throwaway one
    without a cache) and export them to results/sweep.NAME.json in the packet."""
    if cache is not None:
        path = cache.checked_path(f"{SWEEPS_FOLDER}/{safe_name(plan)}.sqlite")
        summary, report = _run(plan, path, executor, progress)
    else:
        with tempfile.TemporaryDirectory(prefix="accsim-sweep-") as scratch:
            summary, report = _run(plan, Path(scratch) / "sweep.sqlite", executor,
                                   progress)
    spec_sha = hashlib.sha256(read_bytes(plan.sweep.file)).hexdigest()
    target = f"{RESULTS_FOLDER}/sweep.{safe_name(plan)}.json"
    content = relocated(export(plan, report, spec_sha), out.path / RESULTS_FOLDER)
    data = out.write(target, json.dumps(content, indent=1) + "\n")
    return SweepRecord(target, hashlib.sha256(data).hexdigest(),
                       validate_model(json.loads(data), SweepExport, file=out.shown(target)),
                       summary,
                       str(path) if cache is not None else "none kept (--no-cache)")


def rerun_differences(content: dict, *, file: str) -> tuple[list[str], list[str]]:
    """(changed inputs, differences) of an export: its sweep spec file against the
    sha256 it recorded, its front flags against the Pareto front of its own points,
    and each front point's key against its inputs and its metrics against a rerun."""
    recorded = validate_model(content, SweepExport, file=file)
    changed = []
    spec = recorded.sweep
    try:
        if hashlib.sha256(read_bytes(spec.path)).hexdigest() != spec.sha256:
            changed.append(f"sweep spec: {spec.path} (sha256 changed since the packet)")
    except AccsimError:
        changed.append(f"sweep spec: {spec.path} (no longer readable)")
    if recorded.model_version != simulator.MODEL_VERSION:
        return changed, [f"written by model version {recorded.model_version}, this accsim "
                         f"is model version {simulator.MODEL_VERSION}: rerun the review"]
    found = _front_differences(recorded)
    workloads = {name: _model(raw, Workload, file, f"workloads.{name}")
                 for name, raw in recorded.workloads.items()}
    mapping = _model(recorded.mapping, Mapping, file, "mapping")
    for index, point in enumerate(recorded.points):
        if not point.on_front:
            continue
        where = f".points[{index}]"
        problem = _key_problem(point, workloads, mapping)
        if problem:
            found.append(f"{where}: {problem}")
            continue
        inputs = point.inputs
        platform = _model(inputs.get("platform"), Platform, file,
                          f"points[{index}].inputs.platform")
        system = _model(inputs["system"], SystemPlan, file,
                        f"points[{index}].inputs.system") if "system" in inputs else None
        again = evaluate_point(platform, workloads[point.workload], mapping, system,
                               inputs.get(IGNORE_CAPACITY, False))
        for name, old in [("status", point.status), ("error", point.error),
                          *((f"metrics.{m}", point.metrics.get(m)) for m in METRICS),
                          *((f"labels.{m}", point.labels.get(m)) for m in LABELS)]:
            new = again.get(name.rpartition(".")[2])
            if old != new:
                found.append(f"{where}.{name}: {old!r} != {new!r}")
    return changed, found


def _model(raw, model, file: str, field: str):
    """An embedded input validated, an error naming its place in the export."""
    try:
        return validate_model(raw, model, file=file)
    except AccsimError as exc:
        inner = f".{exc.field}" if exc.field else ""
        raise AccsimError(exc.rule, file=file, field=f"{field}{inner}") from None


def _key_problem(point: ExportedPoint, workloads: dict, mapping: Mapping) -> str | None:
    """Why a front point's inputs are not what its key promises, or None."""
    inputs = point.inputs
    if inputs is None:
        return "a front point without its inputs"
    if sha256(canonical_json(inputs)) != point.key:
        return "its inputs do not hash to its key"
    workload = workloads.get(point.workload)
    if workload is None or inputs.get("workload") != {
            "name": point.workload,
            "sha256": sha256(canonical_json(workload.model_dump(mode="json")))}:
        return "its workload is not the embedded one its key names"
    if inputs.get("mapping") != mapping_mode(mapping):
        return "its mapping is not the embedded one its key names"
    if inputs.get(IGNORE_CAPACITY, True) is not True:  # absent, or the flag as set
        return f"its inputs' {IGNORE_CAPACITY} is not true (a key holds it only when set)"
    return None


def _front_differences(recorded: SweepExport) -> list[str]:
    """Front flags that are not the Pareto front of the exported points' metrics."""
    senses = list(recorded.sweep.objectives.values())
    names = list(recorded.sweep.objectives)
    found = []
    for workload in sorted({p.workload for p in recorded.points}):
        group = [(i, p) for i, p in enumerate(recorded.points) if p.workload == workload
                 and p.status == "ok" and all(p.metrics.get(n) is not None for n in names)]
        if not group:
            continue
        mask = pareto_mask(np.array([[p.metrics[n] for n in names] for _, p in group],
                                    dtype=float), senses)
        found += [f".points[{i}].on_front: {p.on_front!r} != {bool(m)!r} (the Pareto "
                  "front of the exported points)" for (i, p), m in zip(group, mask)
                  if p.on_front != bool(m)]
    off_front = [i for i, p in enumerate(recorded.points)
                 if p.on_front and p.status != "ok"]
    found += [f".points[{i}].on_front: a failed point is on the front" for i in off_front]
    return found

