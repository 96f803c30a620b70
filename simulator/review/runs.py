"""The runs a study needs (platform x workload x mapping), each simulated once through
`simulator.simulate` and kept as the result file `accsim run --json` writes. On a
multi-chip system (scope.system) a run simulates one chip's shard through
simulator.system.sharded_run, as `accsim run --chips N --tp T ...` does, and its file carries
the `system` block.

Results are reused by content hash: the key is the sha256 of the canonical inputs, their
source files' hashes, the engine asked for, MODEL_VERSION and the code's own digest
(simulator.code_version), so a cached result is
exactly what a rerun would write. A cache entry whose embedded inputs do not match its
key, or whose bytes do not match the digest written beside it (KEY.json.sha256), is
recomputed, never trusted. What a cache can guarantee: an entry is used only for the
inputs it was computed from, and damage or an edit of the entry alone (a forged number)
is caught. What it cannot: someone able to write the cache can rewrite an entry and its
digest together; `accsim verify` of the packet reruns every result and catches that,
and `--no-cache` skips the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import simulator
from simulator.inputs.anchors import relocated
from simulator.errors import AccsimError
from simulator.inputs.loader import MAX_INPUT_BYTES, decode_text, parse_json
from simulator.output.cache_home import (VARIABLE, cache_home, checked_cache_home,
                                         given_cache_home)
from simulator.output.files import OutputFolder
from simulator.present.run_report import result_dict
from simulator.present.results import RunResultFile, read_result
from simulator.review.study import Loaded
from simulator.simulate import Inputs, simulate
from simulator.system.capacity import Capacity, check
from simulator.system.parallelism import SystemPlan
from simulator.system.sharded_run import simulate_system, system_dict
from simulator.system.shard import (Sharded, model_sizing, plain_sizing, plan_label,
                                    shard_model, shard_plain)

RESULTS_FOLDER = "results"


@dataclass(frozen=True)
class RunSpec:
    """One simulation of the study: a platform, a workload and a mapping."""

    platform: Loaded
    workload: Loaded
    mapping: Loaded
    system: SystemPlan | None = None  # a multi-chip system: `sharded` is one chip's
    sharded: Sharded | None = None    # share, checked (plan, capacity) before any run
    capacity: Capacity | None = None  # the capacity check, made before any run
    precision: dict | None = None     # a precision variant: what its plan chose

    @property
    def name(self) -> str:
        """File-name-safe id, e.g. `tpu_v1.resnet50_b1.default` (`.tp4_pp1` appended
        on a system)."""
        parts = (self.platform.label, self.workload.label, self.mapping.label) \
            + ((plan_label(self.system),) if self.system else ())
        return ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", part) for part in parts)

    def embedded(self) -> dict:
        """The inputs the result file embeds: on a system, the shard's workload."""
        workload = self.workload if self.sharded is None else \
            Loaded(self.workload.label, self.sharded.workload, self.workload.source)
        return {"platform": _embedded(self.platform), "workload": _embedded(workload),
                "mapping": _embedded(self.mapping)}

    def simulate(self, engine: str) -> str:
        """Simulate the run: the text of its result file."""
        if self.sharded is None:
            content = result_dict(simulate(self.inputs(), engine=engine),
                                  capacity=self.capacity.record() if self.capacity else None,
                                  precision=self.precision)
        else:
            content = system_dict(simulate_system(self.inputs(), self.system,
                                                  self.sharded, engine=engine,
                                                  ignore_capacity=self.ignore_capacity))
        return json.dumps(content, indent=1) + "\n"

    @property
    def ignore_capacity(self) -> bool:
        return self.capacity is not None and self.capacity.asked

    def inputs(self) -> Inputs:
        return Inputs(self.platform.model, self.workload.model, self.mapping.model,
                      self.platform.source, self.workload.source, self.mapping.source)


@dataclass(frozen=True)
class RunRecord:
    """A finished run: its result file inside the packet and the result it holds."""

    spec: RunSpec
    file: str          # path inside the packet folder, e.g. results/x.json
    sha256: str
    result: RunResultFile
    reused: bool       # taken from the cache (said on the terminal, not in the packet)


def checked(spec: RunSpec, plan: SystemPlan, step=None, *, study_file: str,
            ignore_capacity: bool = False) -> RunSpec:
    """The run with its capacity checked (simulator.system.capacity) before any simulation; on
    a multi-chip system one chip's shard (of the LLM step, for a model) built and the
    plan checked too. An error names the run and the study's field."""
    platform = spec.platform.model
    platform_file = spec.platform.source.path if spec.platform.source else study_file
    row_parallel = frozenset(spec.mapping.model.row_parallel)
    # a precision variant's model step: its weights and KV at the plan's formats
    planned = spec.workload.model if spec.precision is not None else None
    try:
        sharded = None
        if plan.single_chip:
            sizing = model_sizing(step, platform, planned, platform_file) \
                if step is not None else \
                plain_sizing(spec.workload.model, platform, row_parallel)
        elif step is None:
            sharded = shard_plain(spec.workload.model, plan, platform,
                                  platform_file=platform_file, row_parallel=row_parallel)
        else:
            sharded = shard_model(step, plan, platform, platform_file=platform_file,
                                  planned=planned)
        fit = check(plan, sharded.sizing if sharded else sizing, platform,
                    ignore=ignore_capacity, platform_file=platform_file)
    except AccsimError as exc:
        field = exc.field or "system"
        field = f"scope.system.{field[2:]}" if field.startswith("--") else field
        raise AccsimError(f"{exc.rule} (run {spec.name})", file=exc.file or study_file,
                          field=field) from None
    if sharded is None:
        return replace(spec, capacity=fit)
    return replace(spec, system=plan, sharded=sharded, capacity=fit)


def _embedded(loaded: Loaded) -> dict:
    source = loaded.source
    return {"path": source.path if source else None,
            "sha256": source.sha256 if source else None,
            "canonical": loaded.model.model_dump(mode="json")}


def cache_key(spec: RunSpec, engine: str, code: str) -> str:
    """sha256 of the canonical inputs with their sources, the engine, MODEL_VERSION and
    the code that computes it (simulator.code_version)."""
    identity = {"model_version": simulator.MODEL_VERSION, "engine": engine,
                "code": code, **spec.embedded()}
    if spec.system is not None:  # keyed apart from the same inputs on one chip
        identity["system"] = spec.system.model_dump()
    if spec.ignore_capacity:  # its file carries the capacity stamp
        identity["ignore_capacity"] = True
    if spec.precision is not None:  # and the precision block its plan chose
        identity["precision"] = spec.precision
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _cached(data: bytes | None, spec: RunSpec, file: str) -> bool:
    """A cache entry is used only if it embeds exactly this run's inputs."""
    if data is None:
        return False
    try:
        content = parse_json(decode_text(data, file=file).text, file=file)
        recorded = read_result(content, RunResultFile, file=file)
    except AccsimError:
        return False
    manifest = recorded.manifest
    embedded = {kind: entry.model_dump() for kind, entry in manifest.inputs.items()}
    same_version = manifest.model_version == simulator.MODEL_VERSION
    plan = None if recorded.system is None else recorded.system.plan()
    wanted = None if spec.system is None else spec.system.model_dump()
    return same_version and embedded == spec.embedded() and plan == wanted


def placed(data: bytes, out: OutputFolder) -> bytes:
    """A result file's text as the packet's results folder holds it: the paths it
    records relative to that folder (simulator.inputs.anchors), so the packet verifies from
    any directory. The cache keeps them as given, as its keys do."""
    content = relocated(json.loads(data), out.path / RESULTS_FOLDER)
    return (json.dumps(content, indent=1) + "\n").encode()


def cache_read(cache: OutputFolder | None, entry: str) -> bytes | None:
    """A cache entry's bytes, or None when it is absent or differs from its digest."""
    if cache is None:
        return None
    data = cache.read(entry, MAX_INPUT_BYTES)
    digest = cache.read(f"{entry}.sha256", 128)
    if data is None or digest is None or \
            digest.strip() != hashlib.sha256(data).hexdigest().encode():
        return None
    return data


def cache_write(cache: OutputFolder | None, entry: str, data: bytes) -> None:
    """Write a cache entry and the digest of its bytes beside it."""
    if cache is not None:
        cache.write(entry, data)
        cache.write(f"{entry}.sha256", hashlib.sha256(data).hexdigest() + "\n")


def default_cache_dir() -> Path:
    """accsim/results in the user's cache folder (simulator.output.cache_home)."""
    return cache_home() / "accsim" / "results"


def open_cache(path: str | None, *, no_cache: bool = False) -> OutputFolder | None:
    """The run cache (`path`, default default_cache_dir(); None with `no_cache`): a
    folder accsim can create and write in (not a link), checked before any
    simulation so that no result is lost to it."""
    if no_cache:
        return None
    field = "--cache"   # what a user changes; the variable where it chose the folder
    if path is None:
        checked_cache_home()
        field = VARIABLE if given_cache_home() is not None else field
    cache = OutputFolder.plain(default_cache_dir() if path is None else path,
                               field=field)  # an empty name refused there
    if not os.access(cache.path, os.W_OK | os.X_OK):
        cache.close()
        raise AccsimError("cannot write: permission denied", file=str(cache.path),
                          field=field)
    return cache


def run_all(specs: list[RunSpec], out: OutputFolder, *, cache: OutputFolder | None,
            code: str, engine: str = "auto",
            progress: Callable[[int, int, str], None] | None = None) -> list[RunRecord]:
    """Simulate (or reuse) every run and place its result file in the packet's
    results folder (cache and packet written through their guards); `code`: the
    simulator.code_version the cache is keyed by."""
    records = []
    for index, spec in enumerate(specs):
        if progress:
            progress(index, len(specs), spec.name)
        target = f"{RESULTS_FOLDER}/{spec.name}.json"
        entry = f"{cache_key(spec, engine, code)}.json"
        data = cache_read(cache, entry)
        reused = _cached(data, spec, cache.shown(entry) if cache is not None else "")
        if not reused:
            data = spec.simulate(engine).encode()
            cache_write(cache, entry, data)
        data = out.write(target, placed(data, out))
        records.append(RunRecord(spec, target, hashlib.sha256(data).hexdigest(),
                                 read_result(json.loads(data), RunResultFile,
                                             file=out.shown(target)), reused))
    if progress:
        progress(len(specs), len(specs), "")
    return records
