"""A study's precision variants as runs (DESIGN.md section 17): each variant's plan is
applied to every workload of the study on every platform, as `accsim run --precision`
applies it (simulator.precision.format_choice), before any output or simulation, so a plan that cannot hold (an unknown operator, a chain that never
reaches a format the platform runs, a tensor file of the wrong shape) stops the review
with one error naming the study or plan field. Each variant run is then simulated
like any other and carries the plan's `precision` block; its baseline is the run it
was made from.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

import yaml

from simulator.errors import AccsimError
from simulator.inputs.loader import decode_text
from simulator.output.files import OutputFolder
from simulator.precision.format_choice import AppliedPlan, apply_plan
from simulator.review.runs import RunRecord, RunSpec
from simulator.review.study import Loaded, PrecisionVariant, ResolvedStudy


@dataclass(frozen=True)
class VariantSpec:
    """A variant's run and the baseline run it is compared with."""

    variant: PrecisionVariant
    baseline: RunSpec
    spec: RunSpec


@dataclass(frozen=True)
class VariantRecord:
    """A finished variant run beside its finished baseline."""

    variant: PrecisionVariant
    baseline: RunRecord
    run: RunRecord


def _applied(study: ResolvedStudy, index: int, plan: Loaded, platform: Loaded,
             workload: Loaded) -> AppliedPlan:
    """The plan applied to a workload on a platform; an error names the plan file, or
    for an inline plan the study's field, and where it was applied."""
    inline = plan.source is None
    file = study.source.path if inline else plan.source.path
    try:
        return apply_plan(plan.model, workload.model, platform.model, file=file)
    except AccsimError as exc:
        field = exc.field or ""
        if inline:
            field = f"precision_variants[{index}]({plan.label}).inline" + (
                f".{field}" if field else "")
        raise AccsimError(f"{exc.rule} (variant {plan.label}, {workload.label} on "
                          f"{platform.label})", file=exc.file or file,
                          field=field or None) from None


def apply_variants(study: ResolvedStudy, models: list) -> dict[tuple, AppliedPlan]:
    """Every variant's plan applied to every workload and model of the study on every
    platform, keyed (variant index, platform, workload label): made before any output
    or simulation, so a plan that cannot hold stops the review first."""
    workloads = list(study.workloads) + [loaded for _, loaded in models]
    return {(index, platform.label, workload.label):
            _applied(study, index, plan, platform, workload)
            for index, plan in enumerate(study.precision)
            for platform in study.platforms for workload in workloads}


def _written(study: ResolvedStudy, base: RunSpec, out: OutputFolder, folder: str,
             variant: str, applied) -> Loaded:
    """The variant's workload, labelled WORKLOAD+VARIANT: written beside the platform
    variants (FOLDER/WORKLOAD+VARIANT.PLATFORM.yaml, as a plan may choose differently on
    each platform) when its base is a workload file, so the result points to a file
    that gives it; a model's stays with its config.json, which verify checks by sha256
    alone."""
    workload = base.workload
    label = f"{workload.label}+{variant}"
    if workload.label not in {w.label for w in study.workloads}:
        return Loaded(label, applied, workload.source)
    stem = f"{label}.{base.platform.label}"
    file = f"{folder}/{re.sub(r'[^A-Za-z0-9_.+-]+', '_', stem)}.yaml"
    data = out.write(file, "# Precision variant written by `accsim review` from "
                     f"{json.dumps(study.source.path)}; do not edit.\n"
                     + yaml.safe_dump(applied.model_dump(mode="json"), sort_keys=False))
    return Loaded(label, applied, decode_text(data, file=out.shown(file)))


def variant_specs(study: ResolvedStudy, specs: list[RunSpec],
                  applied: dict[tuple, AppliedPlan], out: OutputFolder,
                  folder: str) -> list[VariantSpec]:
    """Every precision variant x every baseline run (platform x workload x mapping)."""
    found: list[VariantSpec] = []
    for index, variant in enumerate(study.study.precision_variants):
        made: dict[tuple[str, str], Loaded] = {}
        for base in specs:
            key = (index, base.platform.label, base.workload.label)
            plan = applied[key]
            if key not in made:
                made[key] = _written(study, base, out, folder, variant.name,
                                     plan.workload)
            found.append(VariantSpec(variant, base, replace(
                base, workload=made[key], precision=plan.record())))
    return found


def pair_records(variants: list[VariantSpec], baselines: list[RunRecord],
                 runs: list[RunRecord]) -> tuple[VariantRecord, ...]:
    """The finished variant runs, each beside its finished baseline."""
    by_name = {record.spec.name: record for record in baselines}
    return tuple(VariantRecord(v.variant, by_name[v.baseline.name], run)
                 for v, run in zip(variants, runs))
