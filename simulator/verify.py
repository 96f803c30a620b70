"""Re-checking a result file (DESIGN.md section 6): have its source files changed, and
does a rerun from the inputs embedded in it give the same result?

Environment fields (library versions, accsim version, git commit) are not compared: a
different numpy must not fail a verification, a different MODEL_VERSION must.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

import simulator
from simulator.config import Platform
from simulator.errors import AccsimError
from simulator.loader import Source
from simulator.mapping import Mapping
from simulator.report import result_dict
from simulator.simulate import Inputs, simulate
from simulator.workload import Workload

IGNORED_MANIFEST_FIELDS = ("environment", "accsim_version", "git_commit")
INPUT_MODELS = {"platform": Platform, "workload": Workload, "mapping": Mapping}


@dataclass(frozen=True)
class Verification:
    """What verifying a result found."""

    changed_sources: list[str]   # "kind: path (reason)"
    differences: list[str]       # JSON paths whose values differ on rerun
    model_changed: str | None = None   # why no rerun was compared: another model version

    @property
    def ok(self) -> bool:
        return not self.changed_sources and not self.differences and not self.model_changed


def comparable(result: dict) -> dict:
    """A decoded result without the manifest fields a verification ignores."""
    manifest = {k: v for k, v in result["manifest"].items()
                if k not in IGNORED_MANIFEST_FIELDS}
    return {**result, "manifest": manifest}


def differences(old, new, path: str = "") -> list[tuple[str, str]]:
    """(JSON path, what differs there) where two decoded JSON values differ, the text
    naming the path too; the first 20 at most."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            where = f"{path}.{key}"
            if key not in old or key not in new:
                found.append((where, f"{where} (present on one side only)"))
            else:
                found += differences(old[key], new[key], where)
        return found[:20]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []
        for index, (a, b) in enumerate(zip(old, new)):
            found += differences(a, b, f"{path}[{index}]")
        return found[:20]
    where = path or "(root)"
    return [] if old == new else [(where, f"{where}: {old!r} != {new!r}")]


def _source_change(kind: str, entry: dict) -> str | None:
    path, sha = entry.get("path"), entry.get("sha256")
    if path is None:
        return None
    try:
        now = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return f"{kind}: {path} (no longer readable)"
    return None if now == sha else f"{kind}: {path} (sha256 changed since the run)"


def verify(result_path: str) -> Verification:
    """Check a result file: changed sources, and a rerun from its embedded inputs."""
    try:
        recorded = json.loads(Path(result_path).read_text())
        manifest = recorded["manifest"]
        embedded = manifest["inputs"]
        models = {kind: model.model_validate(embedded[kind]["canonical"])
                  for kind, model in INPUT_MODELS.items()}
    except OSError as exc:
        raise AccsimError(f"cannot read: {exc.strerror}", file=result_path) from None
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise AccsimError(f"not an accsim result file ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0]})", file=result_path) from None
    changed = [c for kind in INPUT_MODELS if (c := _source_change(kind, embedded[kind]))]
    recorded_version = manifest.get("model_version")
    if recorded_version != simulator.MODEL_VERSION:
        # Timing or lowering semantics changed since: every figure may differ, and a
        # list of them would say nothing the version does not.
        return Verification(changed, [], (
            f"the result was written by model version {recorded_version}, this accsim "
            f"is model version {simulator.MODEL_VERSION}: the timing model changed, so "
            "its figures are not comparable (rerun to refresh it)"))
    sources = {kind: Source(entry["path"], entry["sha256"], "") if entry.get("path")
               else None for kind, entry in embedded.items()}
    inputs = Inputs(models["platform"], models["workload"], models["mapping"],
                    sources["platform"], sources["workload"], sources["mapping"])
    engine = manifest["engine"] if manifest["engine_reason"] == "requested" else "auto"
    result = simulate(inputs, engine=engine)
    rerun = json.loads(json.dumps(result_dict(result)))
    if isinstance(recorded.get("system"), dict):  # a multi-chip run: one chip's shard
        from simulator.system.run import rerun_figures
        try:
            rerun["system"] = rerun_figures(recorded["system"], result)
        except (KeyError, TypeError, ValueError) as exc:
            raise AccsimError(f"not an accsim system block ({type(exc).__name__}: "
                              f"{exc})", file=result_path, field="system") from None
    found = differences(comparable(recorded), comparable(rerun))
    return Verification(changed, [text for _, text in found])
