"""The runs a study needs (platform x workload x mapping), each simulated once through
`simulator.simulate` and kept as the result file `accsim run --json` writes.

Results are reused by content hash: the key is the sha256 of the canonical inputs, their
source files' hashes, the engine asked for and MODEL_VERSION, so a cached result is
exactly what a rerun would write. A cache entry whose embedded inputs do not match its
key (a damaged file) is recomputed, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import simulator
from simulator.errors import AccsimError
from simulator.loader import read_json
from simulator.report import write_json
from simulator.review.study import Loaded
from simulator.simulate import Inputs, simulate

RESULTS_FOLDER = "results"


@dataclass(frozen=True)
class RunSpec:
    """One simulation of the study: a platform, a workload and a mapping."""

    platform: Loaded
    workload: Loaded
    mapping: Loaded

    @property
    def name(self) -> str:
        """File-name-safe id, e.g. `tpu_v1.resnet50_b1.default`."""
        parts = (self.platform.label, self.workload.label, self.mapping.label)
        return ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", part) for part in parts)

    def inputs(self) -> Inputs:
        return Inputs(self.platform.model, self.workload.model, self.mapping.model,
                      self.platform.source, self.workload.source, self.mapping.source)


@dataclass(frozen=True)
class RunRecord:
    """A finished run: its result file inside the packet and the decoded result."""

    spec: RunSpec
    file: str          # path inside the packet folder, e.g. results/x.json
    sha256: str
    result: dict
    reused: bool       # taken from the cache (said on the terminal, not in the packet)


def _embedded(loaded: Loaded) -> dict:
    source = loaded.source
    return {"path": source.path if source else None,
            "sha256": source.sha256 if source else None,
            "canonical": loaded.model.model_dump(mode="json")}


def cache_key(spec: RunSpec, engine: str) -> str:
    """sha256 of the canonical inputs with their sources, the engine and MODEL_VERSION."""
    identity = {"model_version": simulator.MODEL_VERSION, "engine": engine,
                "platform": _embedded(spec.platform), "workload": _embedded(spec.workload),
                "mapping": _embedded(spec.mapping)}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _cached(path: Path, spec: RunSpec) -> bool:
    """A cache entry is used only if it embeds exactly this run's inputs."""
    try:
        recorded, _ = read_json(path)  # bounded, regular files only: a cache is data
        embedded = recorded["manifest"]["inputs"]
        same_version = recorded["manifest"]["model_version"] == simulator.MODEL_VERSION
    except (AccsimError, KeyError, TypeError):
        return False
    wanted = {"platform": _embedded(spec.platform), "workload": _embedded(spec.workload),
              "mapping": _embedded(spec.mapping)}
    return same_version and embedded == wanted


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/accsim/results, else ~/.cache/accsim/results."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "accsim" / "results"


def run_all(specs: list[RunSpec], out_dir: Path, *, cache_dir: Path | None,
            engine: str = "auto",
            progress: Callable[[int, int, str], None] | None = None) -> list[RunRecord]:
    """Simulate (or reuse) every run and place its result file in out_dir/results."""
    results = out_dir / RESULTS_FOLDER
    results.mkdir(parents=True, exist_ok=True)
    records = []
    for index, spec in enumerate(specs):
        if progress:
            progress(index, len(specs), spec.name)
        target = results / f"{spec.name}.json"
        cached = cache_dir / f"{cache_key(spec, engine)}.json" if cache_dir else None
        reused = cached is not None and _cached(cached, spec)
        if not reused:
            fresh = target.with_suffix(".tmp")
            write_json(simulate(spec.inputs(), engine=engine), fresh)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fresh, cached.with_suffix(".tmp"))
                os.replace(cached.with_suffix(".tmp"), cached)
            os.replace(fresh, target)
        else:
            shutil.copyfile(cached, target)
        data = target.read_bytes()
        records.append(RunRecord(spec, f"{RESULTS_FOLDER}/{target.name}",
                                 hashlib.sha256(data).hexdigest(), json.loads(data),
                                 reused))
    if progress:
        progress(len(specs), len(specs), "")
    return records
