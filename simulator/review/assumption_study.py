"""The data of the packet's "Assumptions and sensitivity" section (DESIGN.md section 16),
computed when a study asks for it (`assumptions:`): for one workload or model and the
first mapping, each platform's tornado of the headline metric over its assumed values
and its best and worst corners, every pair's ranking across the ranges
(simulator.calibrate.robust), and, for a serving study, each platform served at its
two corners at the load the SLA is judged at (the corner platforms written into the
packet as inputs/corners/NAME.END.yaml, since a serving spec names its platform file).

It is one result file, results/assumptions.LABEL.json, embedding every input it was
computed from (platforms with their provenance tables), so `accsim verify` computes it
again and compares (`rerun_differences`). Bounded work: one tornado per platform, not
per run; distinct platforms run once (the robust evaluator's memo); the tornadoes,
corners and verdicts are kept in the run cache keyed by the content they come from
(as runs are: a second review computes them no more), the corners' serving is not.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

import simulator
from simulator.inputs.anchors import anchored
from simulator.calibrate.robust import BETTER, robust_ranking
from simulator.engines import ENGINE_CHOICES
from simulator.errors import AccsimError
from simulator.calibrate.sensitivity import assumed_ranges, with_values
from simulator.inputs.platform import Platform
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import decode_text, read_json, validate_model
from simulator.inputs.platform_file import load_platform
from simulator.mapping.plan import Mapping
from simulator.output.files import OutputFolder
from simulator.review.providers import NotEvaluated, model_config_path
from simulator.review.runs import (RESULTS_FOLDER, RunRecord, cache_read, cache_write,
                                   placed)
from simulator.review.serving_runs import (ServingResultFile, ServingRun, serve_points,
                                           serve_spec)
from simulator.review.study import Loaded, ResolvedStudy
from simulator.serving.spec import ServeSpec
from simulator.verification.rerun import comparable, differences
from simulator.inputs.workload import Workload

FORMAT = "accsim-assumptions"
# The most platforms verify computes the section of again without --allow-long: 100x
# the shipped study's 2 (each a tornado of about 0.5 s, and every pair a verdict).
MAX_VERIFY_PLATFORMS = 200
CORNERS_FOLDER = "inputs/corners"
ENDS = ("best", "worst")


@dataclass(frozen=True)
class AssumptionsRecord:
    """The section's result file inside the packet and what it holds."""

    file: str
    sha256: str
    data: dict


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text)


def subject_runs(study: ResolvedStudy, records: list[RunRecord]
                 ) -> list[RunRecord] | NotEvaluated:
    """The runs the section perturbs: the chosen workload (default the first in scope)
    under the first mapping, one per platform."""
    chosen = study.study.assumptions
    if chosen is None:
        return NotEvaluated("the study asks for no sensitivity study (assumptions:)")
    if study.study.scope.system is not None:
        return NotEvaluated("sensitivity perturbs one chip's run; this study's runs are "
                            "on a multi-chip system (scope.system)")
    labels = [w.label for w in study.workloads] + \
        [m.label for m in study.study.scope.models]
    label = chosen.workload or labels[0]
    mapping = study.mappings[0].label
    return [r for r in records
            if r.spec.workload.label == label and r.spec.mapping.label == mapping]


def _platform_raw(platform: Platform) -> dict:
    """The platform as a file holds it, provenance included."""
    return with_values(platform, {})


def _fields(platform: Platform, wanted: list[str]) -> list[str] | None:
    """The study's field list as this platform assumes it (None: every field)."""
    if not wanted:
        return None
    ranges = assumed_ranges(platform)
    return [name for name in wanted if name in ranges]


def compute(entries: list[dict], metric: str, fields: list[str], engine: str,
            progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Tornadoes, corners and pair verdicts of the embedded inputs (entries: label,
    platform file content with provenance, workload and mapping canonical)."""
    every = [Inputs(validate_model(e["platform"], Platform, file=e["label"]),
                    Workload.model_validate(e["workload"]),
                    Mapping.model_validate(e["mapping"])) for e in entries]
    labels = [e["label"] for e in entries]
    chosen = {label: _fields(inputs.platform, fields)
              for label, inputs in zip(labels, every)}
    corners, verdicts = robust_ranking(every, labels, metric, engine=engine,
                                       fields=chosen, progress=progress)
    platforms = []
    for entry, inputs, found in zip(entries, every, corners):
        assumed = [{"field": path, "kind": item["kind"], "value": item["value"],
                    "range": item.get("range"), "source": item.get("source")}
                   for path, item in inputs.platform.assumptions().items()]
        platforms.append({"platform": entry["label"], "assumed": assumed,
                          "tornado": found.study.as_dict(), "corners": found.as_dict()})
    return {"platforms": platforms, "pairs": [v.as_dict() for v in verdicts]}


def _computed(entries: list[dict], metric: str, fields: list[str], engine: str,
              cache: OutputFolder | None, code: str,
              progress: Callable[[int, int, str], None] | None) -> dict:
    """`compute`, or its result from the run cache when computed before from the same
    inputs, metric, fields, engine, MODEL_VERSION and code (simulator.code_version; a
    damaged or foreign entry is computed again, never trusted)."""
    identity = {"model_version": simulator.MODEL_VERSION, "code": code, "format": FORMAT,
                "engine": engine, "metric": metric, "fields": fields,
                "inputs": [{key: e[key] for key in ("label", "platform", "workload",
                                                     "mapping")} for e in entries]}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    entry = f"assumptions-{hashlib.sha256(text.encode()).hexdigest()}.json"
    data = cache_read(cache, entry)
    if data is not None:
        try:
            stored = json.loads(data)
        except ValueError:
            stored = None
        if isinstance(stored, dict) and stored.get("identity") == identity:
            return stored["computed"]
    computed = compute(entries, metric, fields, engine, progress)
    cache_write(cache, entry, (json.dumps({"identity": identity, "computed": computed},
                                          indent=1) + "\n").encode())
    return computed


def _serve_corners(study: ResolvedStudy, record: RunRecord, corners: dict,
                   out: OutputFolder) -> dict:
    """The subject served on the platform at each corner, at the SLA's load."""
    model = next((m for m in study.study.scope.models
                  if m.label == record.spec.workload.label), None)
    subject = model_config_path(model, study) if model else record.spec.workload.source.path
    rate = study.study.scope.serving.rate_per_s
    platform = record.spec.platform.model
    served = {}
    for end in ENDS:
        raw = with_values(platform, corners[f"{end}_corner"])
        file = f"{CORNERS_FOLDER}/{_safe(record.spec.platform.label)}.{end}.yaml"
        data = out.write(file, f"# The {end} corner of {platform.name}'s assumed values, "
                         "written by `accsim review`; do not edit.\n"
                         + yaml.safe_dump(raw, sort_keys=False))
        source = decode_text(data, file=out.shown(file))
        loaded = Loaded(record.spec.platform.label,
                        validate_model(raw, Platform, file=source.path), source)
        served[end] = serve_points(serve_spec(study, loaded, subject, llm=model is not None),
                                   [rate])
    return served


def assumption_study(study: ResolvedStudy, records: list[RunRecord], out: OutputFolder,
                     *, engine: str, served: bool, cache: OutputFolder | None = None,
                     code: str, progress: Callable[[int, int, str], None] | None = None
                     ) -> AssumptionsRecord | NotEvaluated:
    """Compute the section's data and write it as results/assumptions.LABEL.json;
    `served`: the subject has serving results, so its corners are served too."""
    runs = subject_runs(study, records)
    if isinstance(runs, NotEvaluated):
        return runs
    chosen = study.study.assumptions
    entries = [{"label": r.spec.platform.label,
                "platform": _platform_raw(r.spec.platform.model),
                "platform_source": r.spec.embedded()["platform"],
                "workload": r.spec.workload.model.model_dump(mode="json"),
                "mapping": r.spec.mapping.model.model_dump(mode="json")} for r in runs]
    content = {"assumptions": {"format": FORMAT, "metric": chosen.metric,
                               "fields": chosen.fields, "engine": engine,
                               "workload": runs[0].spec.workload.label,
                               "mapping": runs[0].spec.mapping.label},
               "inputs": entries,
               **_computed(entries, chosen.metric, chosen.fields, engine, cache, code,
                           progress)}
    if served and study.study.scope.serving is not None:
        for platform, record in zip(content["platforms"], runs):
            platform["serving"] = _serve_corners(study, record, platform["corners"], out)
    target = f"{RESULTS_FOLDER}/assumptions.{_safe(content['assumptions']['workload'])}.json"
    data = out.write(target, placed((json.dumps(content, indent=1) + "\n").encode(), out))
    return AssumptionsRecord(target, hashlib.sha256(data).hexdigest(), json.loads(data))


def _serving_comparable(content: dict) -> dict:
    """Serving points without the manifest fields a verification ignores."""
    for platform in content.get("platforms", []):
        for result in platform.get("serving", {}).values():
            result["points"] = [comparable(p) for p in result["points"]]
    return content


class _Read(BaseModel):
    """Only what verify reads of the section's file (it holds more, for people)."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class _Head(_Read):
    metric: Literal[tuple(BETTER)]
    fields: list[str]
    engine: Literal[ENGINE_CHOICES]


class _Entry(_Read):
    label: str
    platform: dict  # validated by compute, with its provenance
    workload: Workload
    mapping: Mapping


class _Corners(_Read):
    best: ServingResultFile
    worst: ServingResultFile


class _Computed(_Read):
    serving: _Corners | None = None


class AssumptionsFile(_Read):
    """The section's result file as verify reads it: every field it computes again
    from checked first, so a forged one is one error naming the field."""

    assumptions: _Head
    inputs: list[_Entry] = Field(min_length=1)
    platforms: list[_Computed]


def read_assumptions(path: Path, *, allow_long: bool) -> tuple[dict, AssumptionsFile]:
    """The section's file (content as recorded, paths anchored; and as checked),
    refused when computing it again means more than MAX_VERIFY_PLATFORMS tornadoes
    unless `allow_long`."""
    content, source = read_json(path)
    content = anchored(content, path.parent)
    recorded = validate_model(content, AssumptionsFile, file=source.path)
    if len(recorded.inputs) > MAX_VERIFY_PLATFORMS and not allow_long:
        raise AccsimError(f"computing it again would take {len(recorded.inputs):,} "
                          f"platforms' tornadoes, over verify's bound of "
                          f"{MAX_VERIFY_PLATFORMS} (100x the shipped study); give "
                          "--allow-long to compute them anyway", file=source.path,
                          field="inputs")
    return content, recorded


def corner_runs(recorded: AssumptionsFile) -> list[tuple[str, ServingRun]]:
    """(field, serving run) of every corner the section's file serves again."""
    return [(f"platforms[{index}].serving.{end}", getattr(computed.serving, end).serving)
            for index, computed in enumerate(recorded.platforms)
            if computed.serving is not None for end in ENDS]


def rerun_differences(content: dict, *, file: str) -> list[str]:
    """What differs when the section's file (read_assumptions) is computed again from
    its embedded inputs, and served again at each corner from the corner file it names
    (which must hold that corner)."""
    head = content["assumptions"]
    again = {"assumptions": head, "inputs": content["inputs"],
             **compute(content["inputs"], head["metric"], head["fields"],
                       head["engine"])}
    found = []
    for old, new, entry in zip(content["platforms"], again["platforms"], content["inputs"]):
        if "serving" not in old:
            continue
        new["serving"] = {}
        base = validate_model(entry["platform"], Platform, file=file)
        for end in ENDS:
            spec = ServeSpec.model_validate(old["serving"][end]["serving"]["spec"])
            corner, _ = load_platform(spec.arch)
            expected = validate_model(with_values(base, new["corners"][f"{end}_corner"]),
                                      Platform, file=file)
            if corner != expected:
                found.append(f"{spec.arch}: not the {end} corner of {entry['label']}")
            new["serving"][end] = serve_points(spec, old["serving"][end]["serving"]
                                               ["rates_per_s"])
    again = json.loads(json.dumps(again))
    found += [text for _, text in differences(_serving_comparable(content),
                                              _serving_comparable(again))]
    return found
