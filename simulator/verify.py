"""Re-checking a result file (DESIGN.md section 6): have its source files changed, do
the inputs embedded in it still match those files, and does a rerun from the embedded
inputs give the same result?

Environment fields (library versions, accsim version, git commit) are not compared: a
different numpy must not fail a verification, a different MODEL_VERSION must. A result
file is data: nothing named in it is imported or executed (a heuristic it names must be
in the registry).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import simulator
from simulator.config import Platform
from simulator.engines import ENGINE_CHOICES
from simulator.errors import AccsimError
from simulator.loader import Source, load_model, read_json, validate_model
from simulator.mapping.plan import Mapping
from simulator.report import result_dict
from simulator.simulate import Inputs, simulate
from simulator.workload import Workload

IGNORED_MANIFEST_FIELDS = ("environment", "accsim_version", "git_commit")
INPUT_MODELS = {"platform": Platform, "workload": Workload, "mapping": Mapping}
# Differences the CLI prints before it counts the rest.
SHOWN_DIFFERENCES = 20


@dataclass(frozen=True)
class Verification:
    """What verifying a result found."""

    changed_sources: list[str]   # "kind: path (reason)"
    differences: list[str]       # every JSON path whose value differs on rerun, with both
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
    """Every (JSON path, what differs there) where two decoded JSON values differ, the
    text naming the path too. List items that have a name are shown with it:
    `.operators[3](conv1).totals.cycles`."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            where = f"{path}.{key}"
            if key not in old or key not in new:
                found.append((where, f"{where} (present on one side only)"))
            else:
                found += differences(old[key], new[key], where)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []
        for index, (a, b) in enumerate(zip(old, new)):
            name = a.get("name") if isinstance(a, dict) else None
            label = f"({name})" if isinstance(name, str) else ""
            found += differences(a, b, f"{path}[{index}]{label}")
        return found
    where = path or "(root)"
    return [] if old == new else [(where, f"{where}: {old!r} != {new!r}")]


def _reread(kind: str, path: str):
    """The model a source file gives today, read as `accsim run` reads it."""
    from simulator import scalesim
    if kind == "platform" and scalesim.is_scalesim_config(path):
        return scalesim.load_config(path)[0]
    if kind == "workload" and scalesim.is_scalesim_topology(path):
        return scalesim.load_topology(path)[0]
    return load_model(path, INPUT_MODELS[kind])[0]


def _is_imported(path: str) -> bool:
    """A workload source an importer read (an ONNX graph, a Kineto trace, a Hugging Face
    config.json): it gives the workload only with the import's options, which a result
    does not hold, so its sha256 alone is checked against it."""
    if Path(path).suffix in {".onnx", ".gz"}:
        return True
    if Path(path).suffix != ".json":
        return False
    try:
        data = read_json(path)[0]
    except AccsimError:
        return False
    return isinstance(data, dict) and "operators" not in data


def _source_changes(embedded: dict, models: dict, system: dict | None = None) -> list[str]:
    """Sources whose file changed, and sources whose file is unchanged but whose
    embedded canonical input differs from what the file gives (an edited result). A
    multi-chip result embeds one chip's shard of its workload file: the file is
    sharded again under the recorded plan before the comparison."""
    from simulator import scalesim
    changed, reread = [], {}
    for kind in INPUT_MODELS:
        path, sha = embedded[kind].get("path"), embedded[kind].get("sha256")
        if path is None:
            continue
        try:
            now = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            changed.append(f"{kind}: {path} (no longer readable)")
            continue
        if now != sha:
            changed.append(f"{kind}: {path} (sha256 changed since the run)")
            continue
        if kind == "workload" and _is_imported(path):
            continue
        try:
            reread[kind] = _reread(kind, path)
        except AccsimError as exc:
            changed.append(f"{kind}: {path} (no longer loads: {exc.message()})")
    validate = models["mapping"].name == scalesim.VALIDATE_MAPPING_NAME
    if validate and {"platform", "workload"} <= set(reread):
        reread["platform"] = scalesim.validate_platform(reread["platform"],
                                                        reread["workload"])
    if system is not None and "workload" in reread:
        reread["workload"] = _shard_of(reread["workload"], system, models)
    for kind, model in reread.items():
        if model != models[kind] and not (validate and kind == "mapping"):
            changed.append(f"{kind}: {embedded[kind]['path']} (the embedded input "
                           "differs from this file, whose sha256 is unchanged: the "
                           "result was edited)")
    return changed


def _shard_of(workload, system: dict, models: dict):
    """One chip's shard of a plain workload under a recorded `system` block's plan, as
    the run built it (simulator.system.shard); the workload itself where the block is
    not a plan."""
    from simulator.system.plan import SystemPlan
    from simulator.system.shard import shard_plain
    try:
        plan = SystemPlan(**{key: system[key] for key in ("chips", "tp", "pp", "ep")})
        return shard_plain(workload, plan, models["platform"], row_parallel=frozenset(
            models["mapping"].row_parallel)).workload
    except (KeyError, TypeError, ValueError, AccsimError):
        return workload  # the comparison then reports the edit


def model_change(manifest: dict, refresh: str) -> str | None:
    """Why a result from another MODEL_VERSION is not compared figure by figure (timing
    or lowering semantics changed since, so every figure may differ and a list of them
    would say nothing the version does not); None for this version. `refresh`: the
    command that refreshes it."""
    recorded = manifest.get("model_version")
    if recorded == simulator.MODEL_VERSION:
        return None
    return (f"the result was written by model version {recorded}, this accsim is model "
            f"version {simulator.MODEL_VERSION}: the timing model changed, so its "
            f"figures are not comparable ({refresh} to refresh it)")


def read_result(result_path: str) -> tuple[dict, dict]:
    """A result file's decoded JSON and its embedded input models; anything else is an
    AccsimError naming the file and the field."""
    recorded, source = read_json(result_path)
    return recorded, embedded_models(recorded, file=source.path)


def embedded_models(recorded, *, file: str) -> dict:
    """The input models a decoded result embeds, checked field by field."""

    def need(node, key, where: str, kind: type = dict):
        if not isinstance(node, dict) or key not in node:
            raise AccsimError(f"not an accsim result file ({where} is missing)",
                              file=file, field=where)
        if not isinstance(node[key], kind):
            raise AccsimError(f"not an accsim result file ({where} is not a "
                              f"{kind.__name__})", file=file, field=where)
        return node[key]

    manifest = need(recorded, "manifest", "manifest")
    for key in ("engine", "engine_reason"):
        need(manifest, key, f"manifest.{key}", str)
    embedded = need(manifest, "inputs", "manifest.inputs")
    models = {}
    for kind, model in INPUT_MODELS.items():
        entry = need(embedded, kind, f"manifest.inputs.{kind}")
        for key in ("path", "sha256"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise AccsimError("not a string", file=file,
                                  field=f"manifest.inputs.{kind}.{key}")
        canonical = need(entry, "canonical", f"manifest.inputs.{kind}.canonical")
        try:
            models[kind] = validate_model(canonical, model, file=file)
        except AccsimError as exc:
            raise AccsimError(exc.rule, file=file, field=f"manifest.inputs.{kind}."
                              f"canonical.{exc.field}") from None
    return models


def verify(result_path: str) -> Verification:
    """Check a result file: changed or contradicted sources, and a rerun from its
    embedded inputs. A review packet's packet.json is checked result by result
    (review.verification.verify_packet)."""
    recorded, source = read_json(result_path)
    if isinstance(recorded, dict) and isinstance(recorded.get("packet"), dict):
        from simulator.review.verification import verify_packet  # a review packet
        return verify_packet(result_path, recorded)
    from simulator.serving.verification import serving_kind, verify_serving
    if serving_kind(recorded):  # what `accsim serve --json` wrote
        return verify_serving(source.path, recorded)
    models = embedded_models(recorded, file=source.path)
    manifest = recorded["manifest"]
    embedded = manifest["inputs"]
    system = recorded.get("system")
    changed = _source_changes(embedded, models, system if isinstance(system, dict)
                              else None)
    model_changed = model_change(manifest, "rerun")
    if model_changed:
        return Verification(changed, [], model_changed)
    sources = {kind: Source(entry["path"], entry["sha256"], "") if entry.get("path")
               else None for kind, entry in embedded.items()}
    inputs = Inputs(models["platform"], models["workload"], models["mapping"],
                    sources.get("platform"), sources.get("workload"),
                    sources.get("mapping"))
    engine = manifest["engine"] if manifest["engine_reason"] == "requested" else "auto"
    if engine not in ENGINE_CHOICES:
        raise AccsimError(f"unknown engine {engine!r}", file=result_path,
                          field="manifest.engine")
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
