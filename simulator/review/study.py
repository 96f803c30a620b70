"""The study spec (`accsim review STUDY.yaml`): what is reviewed, against which SLA, by
whom, and what would make the team roll back; and its resolution into loaded inputs.

Every name in a study is checked before any simulation: platforms, workloads and plans
exist, the baseline is in scope, expected bottleneck classes name real layer types or
operators, heuristics are registered ones. Paths are relative to the study file. A study
is data: it names heuristics from the registry only, never a module to import.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (Field, PositiveFloat, ValidationError,
                      field_validator, model_validator)

from simulator.metrics.bottleneck import CLASSES
from simulator.inputs.platform import Dtype, Name, Platform, Strict, Text
from simulator.errors import AccsimError
from simulator.inputs.loader import (Source, decode_text, load_model, locate, parse_model,
                                     read_source, SHIPPED_FOLDERS, shipped_names,
                                     validation_error)
from simulator.inputs.platform_file import as_file, load_platform, nested, overridden
from simulator.output.files import OutputFolder
from simulator.mapping.heuristics import known_heuristics
from simulator.mapping.plan import Mapping, check_mapping_names
from simulator.mapping.plan import with_fusion, with_heuristic
from simulator.precision.precision_plan import PrecisionPlan
from simulator.review.deployment_scope import DeploymentSearch
from simulator.serving.spec import MAX_BATCH, MAX_LOADS, MAX_REQUESTS, MAX_TOKENS
from simulator.sweep.jobs import Plan, make_plan
from simulator.sweep.sweep_spec import load_sweep
from simulator.system.parallelism import MAX_CHIPS
from simulator.inputs.workload import Workload
from simulator.system.parallelism import SystemPlan

BottleneckClass = Literal[CLASSES]

# Metrics of one run's workload totals (the `workload` of a results.RunResultFile) that
# an SLA or a rollback trigger can name: (unit, how it is read from those totals).
WORKLOAD_METRICS = {
    "latency_ms": ("ms", lambda w: w.time_s * 1e3),
    "throughput_per_s": ("workload runs per second, one at a time",
                         lambda w: 1.0 / w.time_s if w.time_s else 0.0),
    "mfu": ("fraction of peak FLOP/s", lambda w: w.mfu),
    "memory_stall_fraction": ("fraction of cycles", lambda w: w.memory_stall_fraction),
    "average_power_w": ("W", lambda w: w.average_power_w),
    "energy_mj": ("mJ per workload run", lambda w: w.energy_j * 1e3),
    "tflops_per_joule": ("TFLOP/J", lambda w: w.flops_per_joule / 1e12),
    "refetch_ratio": ("off-chip / compulsory bytes", lambda w: w.refetch_ratio),
}


class ModelUnderReview(Strict):
    """A Hugging Face model (its config.json) in one phase (DESIGN.md section 9)."""

    config: str = Field(min_length=1, description="config.json (relative to the study) "
                        "or a shipped model name")
    phase: Literal["prefill", "decode"]
    batch: int = Field(default=1, ge=1, le=MAX_REQUESTS)
    seq: int | None = Field(default=None, ge=1, le=MAX_TOKENS,
                            description="prefill: prompt tokens")
    context: int | None = Field(default=None, ge=1, le=MAX_TOKENS,
                                description="decode: KV length")
    dtype: Dtype | None = Field(default=None, description="default: the platform's")
    weight_dtype: Dtype | None = None
    kv_dtype: Dtype | None = None

    @model_validator(mode="after")
    def _phase_has_its_length(self) -> ModelUnderReview:
        needed = "seq" if self.phase == "prefill" else "context"
        if getattr(self, needed) is None:
            raise ValueError(f"phase {self.phase} needs {needed}")
        return self

    @property
    def label(self) -> str:
        """e.g. `llama_3_1_8b_decode_b16_c2048`."""
        path = Path(self.config)
        name = path.parent.name if path.stem == "config" and path.parent.name \
            else path.stem
        length = f"s{self.seq}" if self.phase == "prefill" else f"c{self.context}"
        return f"{name}_{self.phase}_b{self.batch}_{length}"


class ServingLoad(Strict):
    """The offered load of a serving study (DESIGN.md section 10): the SLA is judged at
    rate_per_s; the latency-throughput curve also covers curve_rates_per_s."""

    arrival: Literal["poisson", "gamma", "trace"] = "poisson"
    cv: PositiveFloat = Field(default=1.0, description="gamma: CV of the gaps")
    arrival_trace: Text | None = Field(
        default=None, description="trace: a CSV beside the study or a shipped trace "
        "name; its prompts and outputs replace prompt_tokens and output_tokens")
    rate_per_s: PositiveFloat = Field(description="requests/s the SLA must hold at "
                                      "(a trace is scaled to it)")
    curve_rates_per_s: list[PositiveFloat] = Field(default=[], max_length=MAX_LOADS,
                                                   description="more loads")
    requests: int = Field(default=1000, ge=1, le=MAX_REQUESTS)
    prompt_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS, description="LLMs")
    output_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS, description="LLMs")
    batching: Literal["static", "dynamic", "continuous"] | None = Field(
        default=None, description="default: continuous for LLMs, dynamic otherwise")
    max_batch: int | None = Field(default=None, ge=1, le=MAX_BATCH)
    replicas: int = Field(default=1, ge=1, le=MAX_CHIPS)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _trace_with_trace_arrivals(self):
        if (self.arrival == "trace") != (self.arrival_trace is not None):
            raise ValueError("arrival trace and arrival_trace go together: give both, "
                             "or neither")
        return self

    @property
    def rates(self) -> list[float]:
        """Every offered load, ascending."""
        return sorted({*self.curve_rates_per_s, self.rate_per_s})


class PlatformVariant(Strict):
    """A what-if variant of a platform: its fields with some set anew, by dotted path
    (`offchip.bandwidth_gbps: 1638`). The packet writes it out as inputs/NAME.yaml, so
    it tracks its base file and is still a file every result can point to."""

    base: str = Field(min_length=1, description="shipped name or YAML path")
    name: Name = Field(description="the variant's platform name")
    set: dict[str, int | float | str | bool | list | None] = Field(min_length=1)


class SystemUnderReview(Strict):
    """The multi-chip system every run of the study uses (DESIGN.md section 14): each
    run simulates one chip's shard, its result carries the `system` block."""

    chips: int | None = Field(default=None, ge=1, le=MAX_CHIPS,
                              description="default tp x pp")
    tp: int = Field(default=1, ge=1, le=MAX_CHIPS, description="tensor parallelism")
    pp: int = Field(default=1, ge=1, le=MAX_CHIPS, description="pipeline stages")
    ep: int = Field(default=1, ge=1, le=MAX_CHIPS,
                    description="expert parallelism (MoE models)")
    overlap: Literal["none", "independent", "decomposed"] = Field(
        default="none", description="collectives overlapping compute, as `accsim run "
        "--overlap` (DESIGN.md section 14)")

    @property
    def plan(self):
        return SystemPlan(chips=self.chips or self.tp * self.pp, tp=self.tp, pp=self.pp,
                          ep=self.ep, overlap=self.overlap)


class Scope(Strict):
    """What is reviewed: platforms x (workloads and models), optionally on a
    multi-chip system, and optionally a serving load and a design-space sweep."""

    platforms: list[str | PlatformVariant] = Field(
        min_length=1, description="shipped names, YAML paths, or what-if variants")
    workloads: list[str] = Field(default=[], description="shipped names or YAML paths")
    models: list[ModelUnderReview] = []
    system: SystemUnderReview | None = Field(
        default=None, description="every run on N chips split T x P (E for experts); "
        "the platforms need an interconnect table")
    serving: ServingLoad | None = None
    sweep: str | None = Field(default=None, min_length=1, description="a sweep spec "
                              "file (simulator.sweep), relative to the study")
    deployment_search: DeploymentSearch | None = None

    @model_validator(mode="after")
    def _has_work(self) -> Scope:
        if not self.workloads and not self.models:
            raise ValueError("scope names no workloads and no models")
        if self.serving is not None and self.serving.batching == "continuous" \
                and self.workloads:
            raise ValueError("serving.batching continuous serves LLMs (scope.models); "
                             "scope.workloads are served with static or dynamic batching")
        return self


class Percentiles(Strict):
    """Upper bounds on percentiles of a latency, milliseconds."""

    p50: PositiveFloat | None = None
    p90: PositiveFloat | None = None
    p95: PositiveFloat | None = None
    p99: PositiveFloat | None = None

    def bounds(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Sla(Strict):
    """Service-level targets. Latency percentiles of a workload run without serving are
    all the simulated latency (one request at a time, no queueing); TTFT, TPOT and
    tokens per second need a serving simulation."""

    latency_ms: Percentiles | None = None
    ttft_ms: Percentiles | None = None
    tpot_ms: Percentiles | None = None
    min_throughput_per_s: PositiveFloat | None = None
    min_tokens_per_s: PositiveFloat | None = None
    power_cap_w: PositiveFloat | None = None


class Targets(Strict):
    """Utilisation targets for the MFU and memory-stall section (optional)."""

    min_mfu: float | None = Field(default=None, gt=0, le=1)
    max_memory_stall_fraction: float | None = Field(default=None, ge=0, le=1)


class MappingUnderReview(Strict):
    """A tiling plan file, a registered heuristic, or both (the heuristic fills what the
    plan leaves open); neither is the default mapping."""

    name: Name | None = Field(default=None, description="label")
    plan: str | None = Field(default=None, description="plan YAML or shipped name")
    heuristic: str | None = Field(default=None, description="a registered heuristic")

    @property
    def label(self) -> str:
        return self.name or (Path(self.plan).stem if self.plan else None) \
            or self.heuristic or "default"


class ExpectedBottlenecks(Strict):
    """The class the team expects, by operator name or layer_type (name wins)."""

    operators: dict[str, BottleneckClass] = {}
    layer_types: dict[str, BottleneckClass] = {}


class PrecisionChange(Strict):
    """A precision change under review and the quality guardrail that covers it."""

    what: Text = Field(min_length=1)
    layer_types: list[str] = []
    operators: list[str] = []
    from_dtype: Dtype | None = None
    to_dtype: Dtype
    guardrail: Text | None = Field(default=None, min_length=1,
                                  description="the quality check; absent = flagged")


class QualityFigure(Strict):
    """A quality figure from the team's own evaluation of a precision variant (an
    accuracy delta, a perplexity): recorded beside the emulated error, never computed."""

    metric: Text = Field(min_length=1)
    value: float = Field(allow_inf_nan=False)
    unit: Text = ""
    source: Text = Field(min_length=1, description="where the figure comes from")

    @field_validator("*", mode="after")
    @classmethod
    def _physical_floats(cls, value):
        """Not a physical value: a delta may be negative (finite all the same)."""
        return value


class PrecisionVariant(Strict):
    """A precision what-if simulated against the baseline: a precision plan (a file
    relative to the study, or inline) applied to every run of the study as
    `accsim run --precision` applies it (DESIGN.md section 17)."""

    name: Name
    plan: str | None = Field(default=None, min_length=1,
                             description="precision plan YAML, relative to the study")
    inline: PrecisionPlan | None = Field(default=None, description="the plan itself")
    quality: list[QualityFigure] = []

    @model_validator(mode="after")
    def _one_plan(self) -> PrecisionVariant:
        if (self.plan is None) == (self.inline is None):
            raise ValueError("a precision variant names a plan file or an inline plan, "
                             "exactly one")
        return self


class Risk(Strict):
    """A named risk and the person who owns it."""

    risk: Text = Field(min_length=1)
    owner: Name
    mitigation: Text | None = None


class Rollback(Strict):
    """Roll back when a metric crosses a threshold on any run of the named platforms."""

    metric: Literal[tuple(WORKLOAD_METRICS)]
    fires_when: Literal["above", "below"]
    threshold: float
    platforms: list[str] = Field(default=[], description="default: every platform")


class AssumptionsUnderReview(Strict):
    """The "Assumptions and sensitivity" section (DESIGN.md section 16): the tornado of
    the headline metric for one workload (or model) on each platform, and whether the
    ranking and the SLA verdict hold across the platforms' assumed ranges."""

    metric: Literal["time_s", "cycles", "energy_j", "edp_js"] = Field(
        default="time_s", description="the headline metric (time_s: the latency the "
        "SLA's latency and throughput targets judge)")
    workload: str | None = Field(default=None, min_length=1, description="a workload "
                                 "or model label in scope (default: the first)")
    fields: list[str] = Field(default=[], description="only these assumed fields "
                              "(default: every assumed field of each platform)")


class Study(Strict):
    """One review study, loaded from STUDY.yaml."""

    title: Name
    objective: Text = Field(min_length=1)
    owners: list[Name] = Field(min_length=1)
    scope: Scope
    baseline: str = Field(min_length=1, description="a platform of scope.platforms")
    sla: Sla = Sla()
    targets: Targets = Targets()
    mappings: list[MappingUnderReview] = Field(default=[MappingUnderReview()],
                                               min_length=1)
    expected_bottlenecks: ExpectedBottlenecks = ExpectedBottlenecks()
    precision_changes: list[PrecisionChange] = []
    precision_variants: list[PrecisionVariant] = []
    risks: list[Risk] = []
    rollback: Rollback | None = None
    assumptions: AssumptionsUnderReview | None = None

    @model_validator(mode="after")
    def _owners_named(self) -> Study:
        if any(not owner.strip() for owner in self.owners):
            raise ValueError("every owner needs a name")
        return self


@dataclass(frozen=True)
class Loaded:
    """One loaded input and where it came from (None: built from the study)."""

    label: str
    model: object
    source: Source | None


@dataclass(frozen=True)
class ResolvedStudy:
    """A study with every input it names loaded and checked."""

    study: Study
    source: Source
    platforms: list[Loaded]
    workloads: list[Loaded]
    mappings: list[Loaded]
    sweep: Plan | None = None   # scope.sweep's jobs, planned before any simulation
    precision: tuple[Loaded, ...] = ()  # precision_variants' plans, in study order
    fusion: str | None = None   # --fusion: every run's and serving point's mode

    @property
    def baseline(self) -> str:
        return self.study.baseline

    def platform(self, name: str) -> Platform:
        return next(p.model for p in self.platforms if p.label == name)


def _find(entry: str, kind: str, study: Source, field: str) -> Path:
    """A path relative to the study file's folder, or a shipped name (what-if platforms
    as whatif/NAME, as the error for an unknown name lists them)."""
    folder = Path(study.path).parent
    path = Path(entry)
    candidate = path if path.is_absolute() else folder / path
    shipped = kind in SHIPPED_FOLDERS and not path.suffix and entry in shipped_names(kind)
    try:
        exists = candidate.exists()
    except OSError as exc:  # a name the system refuses (longer than it allows, ...)
        raise AccsimError(f"{entry!r}: {exc.strerror}", file=study.path,
                          field=field) from None
    if exists or (not shipped and (path.suffix or "/" in entry)):
        if not candidate.is_file():
            raise AccsimError(f"{entry!r}: no such {kind} file (looked for {candidate})",
                              file=study.path, field=field)
        return candidate
    try:
        return locate(entry, kind)
    except AccsimError as exc:
        raise AccsimError(f"{entry!r}: {exc.rule}", file=study.path, field=field) from None


def _variant(entry: PlatformVariant, study: Source, field: str) -> Platform:
    """The base platform with the variant's fields set, by the rule a platform file
    over a base follows (simulator.inputs.platform_file.overridden: the base's provenance of a
    set field is dropped, a what-if is not sourced); errors name the study field."""
    base, _ = load_platform(_find(entry.base, "platform", study, f"{field}.base"))
    raw = as_file(base)
    for key in entry.set:
        node, parts = raw, key.split(".")
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node:
            raise AccsimError(f"{entry.base} has no field {key!r}", file=study.path,
                              field=f"{field}.set.{key}")
    changes = ", ".join(f"{k} = {v}" for k, v in entry.set.items())
    raw = overridden(raw, {**nested(entry.set), "name": entry.name, "description":
                           f"What-if variant of {base.name}: {changes}. "
                           f"{base.description}"})
    try:
        return Platform.model_validate(raw)
    except ValidationError as exc:
        error = validation_error(exc, raw, file=study.path, model=Platform)
        raise AccsimError(error.rule, file=study.path,
                          field=f"{field}.set ({error.field})") from None


def _sweep(entry: str, study: Source) -> Plan:
    """The plan of the sweep spec scope.sweep names (a file relative to the study),
    made as `accsim sweep run` makes it, so a bad spec is refused before any
    simulation; errors inside the spec name the spec file and its field."""
    folder = Path(study.path).parent
    path = Path(entry) if Path(entry).is_absolute() else folder / entry
    if not path.is_file():
        raise AccsimError(f"{entry!r}: no such sweep spec file (looked for {path})",
                          file=study.path, field="scope.sweep")
    sweep = load_sweep(path)
    if "area_mm2" in sweep.spec.objectives and \
            Platform.model_validate(sweep.base).area_mm2 is None and \
            not any(axis.path.startswith("area.") for axis in sweep.axes):
        raise AccsimError("objective area_mm2 has no values: the base platform has no "
                          "area table", file=sweep.file, field="objectives.area_mm2")
    return make_plan(sweep)


def write_variants(resolved: ResolvedStudy, out: OutputFolder, folder: str
                   ) -> ResolvedStudy:
    """Write each what-if variant as FOLDER/NAME.yaml in the packet and make that its
    source."""
    platforms = []
    for loaded in resolved.platforms:
        if loaded.source is not None:
            platforms.append(loaded)
            continue
        file = f"{folder}/{re.sub(r'[^A-Za-z0-9_-]+', '_', loaded.label)}.yaml"
        raw = loaded.model.model_dump(mode="json")
        raw["provenance"] = {path: item.dump()
                             for path, item in loaded.model.provenance.items()}
        data = out.write(file, "# What-if variant written by `accsim review` from "
                         f"{json.dumps(resolved.source.path)}; do not edit.\n"
                         + yaml.safe_dump(raw, sort_keys=False))
        platforms.append(Loaded(loaded.label, loaded.model,
                                decode_text(data, file=out.shown(file))))
    return replace(resolved, platforms=platforms)


def _unique(items: list[Loaded], kind: str, study: Source, field: str) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        if item.label in seen:
            raise AccsimError(f"two {kind}s are named {item.label!r}; a packet names each "
                              "once", file=study.path, field=f"{field}[{index}]")
        seen.add(item.label)


def _mapping(entry: MappingUnderReview, study: Source, field: str) -> Loaded:
    if entry.heuristic is not None and entry.heuristic not in known_heuristics():
        raise AccsimError(f"unknown heuristic {entry.heuristic!r} (a study names "
                          f"registered ones: {', '.join(known_heuristics())})",
                          file=study.path, field=f"{field}.heuristic")
    plan, source = Mapping(), None
    if entry.plan is not None:
        plan, source = load_model(_find(entry.plan, "mapping", study, f"{field}.plan"),
                                  Mapping)
    return Loaded(entry.label, with_heuristic(plan, entry.heuristic), source)


def _check_names(study: Study, workloads: list[Loaded], file: str) -> None:
    """Expected classes, precision changes and plans must name what the workloads hold."""
    names = {op.name for w in workloads for op in w.model.operators}
    layer_types = {op.layer_type for w in workloads for op in w.model.operators}
    if not workloads:  # models only: their operators exist once a frontend builds them
        return
    checks = [("expected_bottlenecks.operators", study.expected_bottlenecks.operators,
               names, "operator"),
              ("expected_bottlenecks.layer_types", study.expected_bottlenecks.layer_types,
               layer_types, "layer_type")]
    for index, change in enumerate(study.precision_changes):
        checks += [(f"precision_changes[{index}].operators", change.operators, names,
                    "operator"),
                   (f"precision_changes[{index}].layer_types", change.layer_types,
                    layer_types, "layer_type")]
    for field, given, known, what in checks:
        for name in given:
            if name not in known:
                raise AccsimError(f"no workload in scope has a {what} named {name!r}",
                                  file=file, field=f"{field}.{name}")


def _check_assumptions(study: Study, platforms: list[Loaded], workloads: list[Loaded],
                       file: str) -> None:
    """The section's workload must be in scope, and each field it names assumed by a
    platform in scope."""
    if study.assumptions is None:
        return
    chosen = study.assumptions.workload
    labels = [w.label for w in workloads] + [m.label for m in study.scope.models]
    if chosen is not None and chosen not in labels:
        raise AccsimError(f"{chosen!r} is no workload or model in scope "
                          f"({', '.join(labels)})", file=file, field="assumptions.workload")
    for index, name in enumerate(study.assumptions.fields):
        if not any(name in p.model.provenance and p.model.provenance[name].kind ==
                   "assumed" for p in platforms):
            raise AccsimError(f"{name!r} is assumed by no platform in scope",
                              file=file, field=f"assumptions.fields[{index}]")


def load_study(path: str) -> ResolvedStudy:
    """Read, validate and resolve a study; every error names the study file and field."""
    source = read_source(path)
    study = parse_model(source.text, Study, file=source.path)
    platforms = []
    for index, entry in enumerate(study.scope.platforms):
        field = f"scope.platforms[{index}]"
        if isinstance(entry, PlatformVariant):  # its file is written with the packet
            platforms.append(Loaded(entry.name, _variant(entry, source, field), None))
            continue
        model, platform_source = load_platform(_find(entry, "platform", source,
                                                                field))
        platforms.append(Loaded(model.name, model, platform_source))
    _unique(platforms, "platform", source, "scope.platforms")
    workloads = []
    for index, entry in enumerate(study.scope.workloads):
        model, workload_source = load_model(
            _find(entry, "workload", source, f"scope.workloads[{index}]"), Workload)
        workloads.append(Loaded(model.name, model, workload_source))
    _unique(workloads, "workload", source, "scope.workloads")
    for index, model in enumerate(study.scope.models):
        if Path(model.config).suffix or "/" in model.config:  # a path, not a name
            _find(model.config, "model config", source, f"scope.models[{index}].config")
    mappings = [_mapping(entry, source, f"mappings[{index}]")
                for index, entry in enumerate(study.mappings)]
    _unique(mappings, "mapping", source, "mappings")
    for mapping in mappings:
        for workload in workloads:
            check_mapping_names(mapping.model, workload.model,
                                file=mapping.source.path if mapping.source else None)
    labels = [p.label for p in platforms]
    if study.baseline not in labels:
        raise AccsimError(f"baseline {study.baseline!r} is not a platform in scope "
                          f"({', '.join(labels)})", file=source.path, field="baseline")
    if study.rollback is not None:
        for index, name in enumerate(study.rollback.platforms):
            if name not in labels:
                raise AccsimError(f"{name!r} is not a platform in scope "
                                  f"({', '.join(labels)})", file=source.path,
                                  field=f"rollback.platforms[{index}]")
    _check_names(study, workloads, source.path)
    _check_assumptions(study, platforms, workloads, source.path)
    sweep = None if study.scope.sweep is None else _sweep(study.scope.sweep, source)
    return ResolvedStudy(study, source, platforms, workloads, mappings, sweep,
                         _precision_plans(study, source))


def _precision_plans(study: Study, source: Source) -> tuple[Loaded, ...]:
    """Each precision variant's plan, read (a file relative to the study) or taken
    inline; a variant is a single-chip what-if, as `accsim run --precision` is."""
    plans = []
    for index, variant in enumerate(study.precision_variants):
        field = f"precision_variants[{index}]({variant.name})"
        if study.scope.system is not None:
            raise AccsimError("precision variants apply to single-chip studies for now "
                              "(scope.system is set)", file=source.path, field=field)
        if variant.inline is not None:
            plans.append(Loaded(variant.name, variant.inline, None))
            continue
        path = Path(variant.plan) if Path(variant.plan).is_absolute() else \
            Path(source.path).parent / variant.plan
        if not path.is_file():
            raise AccsimError(f"{variant.plan!r}: no such precision plan file (looked "
                              f"for {path})", file=source.path, field=f"{field}.plan")
        plan, plan_source = load_model(path, PrecisionPlan)
        plans.append(Loaded(variant.name, plan, plan_source))
    _unique(plans, "precision variant", source, "precision_variants")
    return tuple(plans)


def with_study_fusion(study: ResolvedStudy, mode: str | None) -> ResolvedStudy:
    """The study with every plan (and its serving points) under fusion `mode` (None:
    as the plans say)."""
    if mode is None:
        return study
    mappings = [replace(m, model=with_fusion(m.model, mode)) for m in study.mappings]
    return replace(study, mappings=mappings, fusion=mode)
