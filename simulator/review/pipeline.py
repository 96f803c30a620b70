"""A study reviewed: every check before any simulation (`prepare`), then every run the
study needs simulated or reused and the packet's data assembled (`review_runs`).
`accsim review` writes what this makes; `accsim verify` of a packet makes it again in a
scratch folder and compares (review.packet_verification), so a packet.json whose
verdicts or tables were edited does not verify."""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.code_version import code_version
from simulator.output import progress
from simulator.output.files import OutputFolder
from simulator.review.assumption_study import assumption_study
from simulator.review.deployment_search import check_search, run_search
from simulator.review.packet import assemble
from simulator.review.providers import (NotEvaluated, design_sweep, model_step,
                                        model_workload, serving_runs)
from simulator.review.runs import RunRecord, RunSpec, checked, run_all
from simulator.review.sections import Context
from simulator.review.study import ResolvedStudy, load_study, with_study_fusion, write_variants
from simulator.review.variants import (VariantRecord, VariantSpec, apply_variants,
                                       pair_records, variant_specs)
from simulator.sweep.jobs import make_plan
from simulator.system.parallelism import SystemPlan

INPUTS_FOLDER = "inputs"  # what-if platform variants the study defines


@dataclass(frozen=True)
class ReviewOptions:
    """The options of `accsim review` that change what a packet says; packet.json
    records them, so that verify rebuilds the packet under the same."""

    fusion: str | None = None      # --fusion: every run's and serving point's mode
    ignore_capacity: bool = False  # --ignore-capacity

    def record(self) -> dict:
        return {"fusion": self.fusion, "ignore_capacity": self.ignore_capacity}


@dataclass(frozen=True)
class Prepared:
    """A study loaded and checked, nothing simulated or written yet."""

    study: ResolvedStudy
    models: list      # (scope.models entry, its loaded workload)
    applied: dict     # review.variants.apply_variants: each precision plan applied
    options: ReviewOptions


@dataclass(frozen=True)
class Reviewed:
    """What a review made: the packet's data (figures still as SVG text,
    review.packet.assemble) and the records its terminal summary counts."""

    packet: dict
    study: ResolvedStudy  # as run: its variant platforms written into the packet
    records: list[RunRecord]
    varied: list[VariantRecord]
    served: list | NotEvaluated   # review.serving_runs.ServingRecord
    swept: object                 # review.sweep.SweepRecord or NotEvaluated


def prepare(study_path: str, options: ReviewOptions) -> Prepared:
    """Load and check the study under the options (every error before any run)."""
    study = with_study_fusion(load_study(study_path), options.fusion)
    if options.ignore_capacity and study.sweep is not None:  # its points' keys say so
        study = replace(study, sweep=make_plan(study.sweep.sweep, ignore_capacity=True))
    models = [(model, model_workload(model, study)) for model in study.study.scope.models]
    applied = apply_variants(study, models)
    check_search(study)
    return Prepared(study, models, applied, options)


def run_specs(study: ResolvedStudy, models: list, *,
              ignore_capacity: bool = False) -> list[RunSpec]:
    """Every platform x workload (and model) x mapping, each checked here (capacity;
    on the study's system, sharded and its plan checked too), before any simulation."""
    workloads = [(w, None) for w in study.workloads] + [(loaded, model)
                                                         for model, loaded in models]
    specs = [(RunSpec(platform, workload, mapping), model)
             for platform in study.platforms for workload, model in workloads
             for mapping in study.mappings]
    system = study.study.scope.system
    plan = SystemPlan() if system is None else system.plan
    steps = {id(model): model_step(model, study) for model, _ in models}
    return [checked(spec, plan, steps[id(model)] if model else None,
                    study_file=study.source.path, ignore_capacity=ignore_capacity)
            for spec, model in specs]


def checked_variants(study: ResolvedStudy, variants: list[VariantSpec], models: list, *,
                     ignore_capacity: bool = False) -> list[VariantSpec]:
    """Each precision variant's capacity checked at its plan's formats (a model's
    weights and KV as the plan stores them), as `accsim run --precision` checks it;
    the run is otherwise its baseline's (its system and shard)."""
    system = study.study.scope.system
    plan = SystemPlan() if system is None else system.plan
    steps = {loaded.label: model_step(model, study) for model, loaded in models}
    found = []
    for variant in variants:
        again = checked(variant.spec, plan, steps.get(variant.baseline.workload.label),
                        study_file=study.source.path, ignore_capacity=ignore_capacity)
        found.append(replace(variant, spec=replace(variant.spec,
                                                   capacity=again.capacity)))
    return found


def review_runs(prepared: Prepared, out: OutputFolder, *, cache: OutputFolder | None,
                engine: str, executor, first: str = "reviewing",
                check_serving=None) -> Reviewed:
    """Write the study's variant inputs into `out`, simulate (or reuse from `cache`)
    every run, serving point, sweep point, sensitivity and search the study asks for,
    each result file written into `out`, and assemble the packet's data; `first`: the
    progress line's opening word; `check_serving(spec, loads)`: sees each serving run
    before it is simulated (review.serving_runs.run_serving)."""
    models, ignore = prepared.models, prepared.options.ignore_capacity
    study = write_variants(prepared.study, out, INPUTS_FOLDER)
    specs = run_specs(study, models, ignore_capacity=ignore)
    variants = checked_variants(
        study, variant_specs(study, specs, prepared.applied, out, INPUTS_FOLDER), models,
        ignore_capacity=ignore)
    code = code_version()  # what the cache keys results by, read once
    with progress.operators(first=first, total=len(specs) + len(variants)) as report:
        records = run_all(specs, out, cache=cache, code=code, engine=engine,
                          progress=report)
        varied = pair_records(variants, records, run_all(
            [v.spec for v in variants], out, cache=cache, code=code, engine=engine,
            progress=report))
        served = serving_runs(study, out, cache=cache, code=code, progress=report,
                              check=check_serving)
        swept = design_sweep(study, out, cache=cache, executor=executor, progress=report)
        assumed = assumption_study(study, records, out, engine=engine,
                                   served=not isinstance(served, NotEvaluated),
                                   cache=cache, code=code, progress=report)
        searched = NotEvaluated("the study asks for no deployment search "
                                "(scope.deployment_search)")
        if study.study.scope.deployment_search is not None:
            searched = run_search(study, out, cache=cache, code=code)
    packet = assemble(Context(study, records, prepared.models, served, swept, varied,
                              assumptions=assumed, deployment=searched),
                      options=prepared.options.record())
    return Reviewed(packet, study, records, varied, served, swept)
