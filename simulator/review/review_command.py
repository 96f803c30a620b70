"""`accsim review STUDY.yaml --out DIR`: check the study and the output folder, run (or
reuse) every simulation it needs, and write the packet."""

from __future__ import annotations

import argparse
import os
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from simulator.code_version import code_version
from simulator.output import progress
from simulator.errors import AccsimError
from simulator.options.catalog import add_options
from simulator.output.files import OutputFolder
from simulator.review.assumption_study import assumption_study
from simulator.review.providers import (NotEvaluated, design_sweep, model_step,
                                        model_workload, serving_runs)
from simulator.review.deployment_search import check_search, run_search
from simulator.review.runs import RunSpec, checked, default_cache_dir, run_all
from simulator.system.parallelism import SystemPlan
from simulator.review.study import (ResolvedStudy, load_study, with_study_fusion,
                                    write_variants)
from simulator.review.variants import VariantSpec
from simulator.review.variants import apply_variants, pair_records, variant_specs
from simulator.sweep.executors import executor_for
from simulator.sweep.jobs import make_plan
from simulator.review.packet import assemble, write_packet
from simulator.review.sections import Context

PACKET_FILES = ("index.html", "packet.md", "packet.json")
# Written first and kept current: the folder is a packet's, even half done, and it lists
# every file a review wrote there (simulator.output.files.OutputFolder.claim).
PACKET_MARKER = ".accsim-review"
INPUTS_FOLDER = "inputs"  # what-if platform variants the study defines


def _cache_folder(args: argparse.Namespace) -> OutputFolder | None:
    """The run cache: a folder accsim can create and write in (not a link), checked
    before any simulation so that no result is lost to it."""
    if args.no_cache:
        return None
    path = Path(args.cache) if args.cache else default_cache_dir()
    cache = OutputFolder.plain(path, field="--cache")
    if not os.access(path, os.W_OK | os.X_OK):
        cache.close()
        raise AccsimError("cannot write: permission denied", file=str(path),
                          field="--cache")
    return cache


def _kept(packet: dict) -> set[str]:
    """The files of the packet just written (results and figures it cites)."""
    return {r["path"] for r in packet["results"]} | \
        {f["file"] for s in packet["sections"] for f in s["figures"]}


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


def default_out(study: str) -> str:
    """The packet folder when --out is not given: `<study stem>-packet` here."""
    return f"{Path(study).name.removesuffix('.yaml').removesuffix('.yml')}-packet"


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


def review(args: argparse.Namespace) -> int:
    """The handler: every check before any simulation, then runs, then the packet."""
    executor = executor_for(args.scheduler, args.workers)
    study = with_study_fusion(load_study(args.study), args.fusion)
    if args.ignore_capacity and study.sweep is not None:  # its points' keys say so
        study = replace(study, sweep=make_plan(study.sweep.sweep, ignore_capacity=True))
    models = [(model, model_workload(model, study)) for model in study.study.scope.models]
    applied = apply_variants(study, models)
    check_search(study)
    args.out = args.out or default_out(args.study)
    with OutputFolder.claim(args.out, PACKET_MARKER, field="--out",
                            signature="packet.json") as out, \
            (_cache_folder(args) or nullcontext()) as cache:
        study = write_variants(study, out, INPUTS_FOLDER)
        specs = run_specs(study, models, ignore_capacity=args.ignore_capacity)
        variants = checked_variants(
            study, variant_specs(study, specs, applied, out, INPUTS_FOLDER), models,
            ignore_capacity=args.ignore_capacity)
        started = time.perf_counter()
        code = code_version()  # what the cache keys results by, read once
        with progress.operators(first="reviewing",
                                total=len(specs) + len(variants)) as report:
            records = run_all(specs, out, cache=cache, code=code, engine=args.engine,
                              progress=report)
            varied = pair_records(variants, records, run_all(
                [v.spec for v in variants], out, cache=cache, code=code,
                engine=args.engine, progress=report))
            served = serving_runs(study, out, cache=cache, code=code, progress=report)
            swept = design_sweep(study, out, cache=cache, executor=executor,
                                 progress=report)
            assumed = assumption_study(study, records, out, engine=args.engine,
                                       served=not isinstance(served, NotEvaluated),
                                       cache=cache, code=code, progress=report)
            searched = NotEvaluated("the study asks for no deployment search "
                                    "(scope.deployment_search)")
            if study.study.scope.deployment_search is not None:
                searched = run_search(study, out, cache=cache, code=code)
        reused = sum(r.reused for r in records + [v.run for v in varied])
        packet = write_packet(assemble(Context(study, records, models, served, swept,
                                               varied, assumptions=assumed,
                                               deployment=searched)), out)
        out.remove_stale(_kept(packet))
    elapsed = time.perf_counter() - started
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"{escape(packet['title'])}: verdict {packet['verdict']}")
    for line in packet["first_screen"]:
        console.print(f"  {line['label']}: {line['status']} - {escape(line['text'])}")
    serving = [] if isinstance(served, NotEvaluated) else \
        [s for s in served if s.data is not None]
    console.print(f"{len(records) + len(varied)} runs and {len(serving)} serving results "
                  f"({reused + sum(s.reused for s in serving)} reused from "
                  f"{escape(str(cache.path)) if cache else 'no cache'}) "
                  f"in {elapsed:.1f} s wall")
    if not isinstance(swept, NotEvaluated):
        summary = swept.summary
        console.print(f"sweep {escape(study.sweep.sweep.spec.name)}: {summary.jobs} "
                      f"point x workload jobs, {summary.already_stored} already stored, "
                      f"{summary.computed} computed ({summary.failed} failed); store "
                      f"{escape(swept.store)}")
    for name in PACKET_FILES:
        console.print(f"wrote {escape(out.shown(name))}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `accsim review`."""
    parser.add_argument("study", help="study spec YAML (see experiments/studies/)")
    parser.add_argument("--out", metavar="DIR",
                        help="folder for the packet (new, empty, or a previous packet; "
                        "default: STUDY-packet in the current folder, STUDY the spec's "
                        "file name without .yaml)")
    parser.add_argument("--cache", metavar="DIR", help="result cache keyed by content "
                        f"hash (default {default_cache_dir()})")
    parser.add_argument("--no-cache", action="store_true",
                        help="simulate every run, read and write no cache")
    add_options(parser, "review", "inputs", "capacity", "executor")
    parser.set_defaults(handler=review)
