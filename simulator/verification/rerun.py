"""Re-checking a result file (DESIGN.md section 6): have its source files changed, do
the inputs embedded in it still match those files, and does a rerun from the embedded
inputs give the same result? This is the core every kind of result shares (the
Verification, the comparison, the model-version note, the rerun of a run result);
`accsim verify` (simulator.commands.verify) tells the kinds apart.

Environment fields (library versions, accsim version, git commit) are not compared: a
different numpy must not fail a verification, a different MODEL_VERSION must. A result
file is data: nothing named in it is imported or executed (a heuristic it names must be
in the registry).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import simulator
from simulator.inputs.platform import Platform
from simulator.engines import ENGINE_CHOICES
from simulator.errors import AccsimError
from simulator.inputs.loader import Source, file_sha256, load_model, read_json, validate_model
from simulator.mapping.plan import Mapping
from simulator.inputs.platform_file import load_platform, platform_sha256
from simulator.present.run_report import result_dict
from simulator.simulate import Inputs, RunResult, simulate
from simulator.inputs.workload import Workload

IGNORED_MANIFEST_FIELDS = ("environment", "accsim_version", "git_commit")
INPUT_MODELS = {"platform": Platform, "workload": Workload, "mapping": Mapping}
# Largest source file a result may name that verify hashes: the largest input any
# reader takes (an ONNX model, frontends/onnx/graph.py MAX_MODEL_BYTES); a larger file,
# a FIFO or a device is "no longer readable", never read (issue 42).
MAX_SOURCE_BYTES = 2 * 2**30


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


def read_input(kind: str, path: str):
    """The model an input file gives today, read as a YAML input (a platform with its
    bases resolved)."""
    if kind == "platform":
        return load_platform(path)[0]
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


@dataclass(frozen=True)
class RunKind:
    """How a kind of run result differs from a plain run when it is verified (the
    command layer builds one for a SCALE-Sim validation run or a multi-chip shard)."""

    # (kind, path) -> the model a run reads from that file today
    reread: Callable[[str, str], object] = read_input
    # the models read again -> the models the run simulated (a shard, say)
    as_run: Callable[[dict], dict] = dict
    # embedded inputs the run made itself: not compared with their file
    made_by_run: frozenset[str] = frozenset()
    # top-level blocks beside the result, recomputed from the rerun (or None)
    extra: Callable[[RunResult], dict] | None = None


PLAIN_RUN = RunKind()


def source_changes(embedded: dict, models: dict, kind: RunKind = PLAIN_RUN) -> list[str]:
    """Sources whose file changed, and sources whose file is unchanged but whose
    embedded canonical input differs from what the file gives (an edited result)."""
    changed, reread = [], {}
    for name in INPUT_MODELS:
        path, sha = embedded[name].get("path"), embedded[name].get("sha256")
        if path is None:
            continue
        try:
            now = platform_sha256(path) if name == "platform" else \
                file_sha256(path, max_bytes=MAX_SOURCE_BYTES)
        except AccsimError as exc:
            changed.append(f"{name}: {path} (no longer readable: {exc.rule})")
            continue
        if now != sha:
            changed.append(f"{name}: {path} (sha256 changed since the run)")
            continue
        if name == "workload" and _is_imported(path):
            continue
        try:
            reread[name] = kind.reread(name, path)
        except AccsimError as exc:
            changed.append(f"{name}: {path} (no longer loads: {exc.message()})")
    for name, model in kind.as_run(reread).items():
        if embedded_form(model) != embedded_form(models[name]) \
                and name not in kind.made_by_run:
            changed.append(f"{name}: {embedded[name]['path']} (the embedded input "
                           "differs from this file, whose sha256 is unchanged: the "
                           "result was edited)")
    return changed


def embedded_form(model) -> tuple:
    """What a result embeds of an input: its canonical form and, for a platform, the
    assumed values its manifest lists (the rest of its provenance is not recorded)."""
    listed = model.assumptions() if isinstance(model, Platform) else None
    return model.model_dump(mode="json"), listed


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
        if kind == "platform" and "assumptions" in manifest:
            canonical = with_assumptions(canonical, need(manifest, "assumptions",
                                                         "manifest.assumptions"))
        try:
            models[kind] = validate_model(canonical, model, file=file)
        except AccsimError as exc:
            raise AccsimError(exc.rule, file=file, field=f"manifest.inputs.{kind}."
                              f"canonical.{exc.field}") from None
    return models


def with_assumptions(canonical: dict, listed: dict) -> dict:
    """An embedded platform with the provenance its manifest lists (the canonical form
    leaves provenance out), so that the rerun lists the same assumed values."""
    provenance = {path: {key: value for key, value in entry.items() if key != "value"}
                  if isinstance(entry, dict) else entry for path, entry in listed.items()}
    return {**canonical, "provenance": provenance}


def verify_run(file: str, recorded: dict, models: dict,
               kind: RunKind = PLAIN_RUN) -> Verification:
    """Check a decoded run result (`models`: its embedded inputs, embedded_models):
    changed or contradicted sources, and a rerun from its embedded inputs."""
    manifest = recorded["manifest"]
    embedded = manifest["inputs"]
    changed = source_changes(embedded, models, kind)
    model_changed = model_change(manifest, "rerun")
    if model_changed:
        return Verification(changed, [], model_changed)
    sources = {name: Source(entry["path"], entry["sha256"], "") if entry.get("path")
               else None for name, entry in embedded.items()}
    inputs = Inputs(models["platform"], models["workload"], models["mapping"],
                    sources.get("platform"), sources.get("workload"),
                    sources.get("mapping"))
    engine = manifest["engine"] if manifest["engine_reason"] == "requested" else "auto"
    if engine not in ENGINE_CHOICES:
        raise AccsimError(f"unknown engine {engine!r}", file=file,
                          field="manifest.engine")
    result = simulate(inputs, engine=engine)
    rerun = json.loads(json.dumps(result_dict(result)))
    if kind.extra is not None:
        rerun.update(kind.extra(result))
    found = differences(comparable(recorded), comparable(rerun))
    return Verification(changed, [text for _, text in found])
