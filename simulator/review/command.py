"""`accsim review STUDY.yaml --out DIR`: check the study and the output folder, run (or
reuse) every simulation it needs, and write the packet."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from simulator import progress
from simulator.engines import ENGINE_CHOICES
from simulator.errors import AccsimError
from simulator.review.providers import (NotEvaluated, design_sweep, model_step,
                                        model_workload, serving_runs)
from simulator.review.runs import RunSpec, default_cache_dir, on_system, run_all
from simulator.review.study import ResolvedStudy, load_study, write_variants
from simulator.sweep.command import add_executor_arguments
from simulator.sweep.executors import executor_for
from simulator.review.packet import assemble, write_packet
from simulator.review.sections import Context

PACKET_FILES = ("index.html", "packet.md", "packet.json")
PACKET_MARKER = ".accsim-review"  # written first: the folder is a packet's, even half done
INPUTS_FOLDER = "inputs"  # what-if platform variants the study defines


def _check_out_dir(path: str) -> Path:
    """DIR must be new, empty, or a packet folder written before, finished or not (it
    holds packet.json or the marker a review leaves first): then it is replaced."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise AccsimError("not a folder", file=path, field="--out")
    if out.is_dir() and any(out.iterdir()) and not (out / "packet.json").is_file() \
            and not (out / PACKET_MARKER).is_file():
        raise AccsimError("folder is not empty and holds no packet.json; give a new or "
                          "empty folder", file=path, field="--out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / PACKET_MARKER).write_text("a folder accsim review writes its packet in\n")
    except OSError as exc:
        raise AccsimError(f"cannot write: {exc.strerror}", file=path,
                          field="--out") from None
    return out


def _check_cache_dir(path: Path) -> Path:
    """The run cache must be a folder accsim can create and write in, checked before
    any simulation so that no result is lost to it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AccsimError(f"cannot create: {exc.strerror}", file=str(path),
                          field="--cache") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise AccsimError("cannot write: permission denied", file=str(path),
                          field="--cache")
    return path


def _remove_stale(out: Path, packet: dict) -> None:
    """Drop result and figure files a previous packet in this folder left behind."""
    kept = {r["path"] for r in packet["results"]}
    kept |= {f["file"] for s in packet["sections"] for f in s["figures"]}
    for folder in ("results", "figures"):
        for old in (out / folder).glob("*"):
            if f"{folder}/{old.name}" not in kept:
                old.unlink()


def run_specs(study: ResolvedStudy, models: list) -> list[RunSpec]:
    """Every platform x workload (and model) x mapping; on the study's system, each
    sharded and checked here, before any simulation."""
    workloads = [(w, None) for w in study.workloads] + [(loaded, model)
                                                         for model, loaded in models]
    specs = [(RunSpec(platform, workload, mapping), model)
             for platform in study.platforms for workload, model in workloads
             for mapping in study.mappings]
    system = study.study.scope.system
    if system is None or system.plan.single_chip:
        return [spec for spec, _ in specs]
    steps = {id(model): model_step(model, study) for model, _ in models}
    return [on_system(spec, system.plan, steps[id(model)] if model else None,
                      study_file=study.source.path) for spec, model in specs]


def review(args: argparse.Namespace) -> int:
    """The handler: every check before any simulation, then runs, then the packet."""
    executor = executor_for(args.scheduler, args.workers)
    study = load_study(args.study)
    models = [(model, model_workload(model, study)) for model in study.study.scope.models]
    out = _check_out_dir(args.out)
    study = write_variants(study, out / INPUTS_FOLDER)
    cache = None if args.no_cache else _check_cache_dir(
        Path(args.cache) if args.cache else default_cache_dir())
    specs = run_specs(study, models)
    started = time.perf_counter()
    with progress.operators(first="reviewing", total=len(specs)) as report:
        records = run_all(specs, out, cache_dir=cache, engine=args.engine,
                          progress=report)
        served = serving_runs(study, out, cache_dir=cache, progress=report)
        swept = design_sweep(study, out, cache_dir=cache, executor=executor,
                             progress=report)
    reused = sum(r.reused for r in records)
    packet = write_packet(assemble(Context(study, records, models, served, swept)), out)
    _remove_stale(out, packet)
    elapsed = time.perf_counter() - started
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"{escape(packet['title'])}: verdict {packet['verdict']}")
    for line in packet["first_screen"]:
        console.print(f"  {line['label']}: {line['status']} - {escape(line['text'])}")
    serving = [] if isinstance(served, NotEvaluated) else \
        [s for s in served if s.data is not None]
    console.print(f"{len(records)} runs and {len(serving)} serving results "
                  f"({reused + sum(s.reused for s in serving)} reused from "
                  f"{escape(str(cache)) if cache else 'no cache'}) in {elapsed:.1f} s wall")
    if not isinstance(swept, NotEvaluated):
        summary = swept.summary
        console.print(f"sweep {escape(study.sweep.sweep.spec.name)}: {summary.jobs} "
                      f"point x workload jobs, {summary.already_stored} already stored, "
                      f"{summary.computed} computed ({summary.failed} failed); store "
                      f"{escape(swept.store)}")
    for name in PACKET_FILES:
        console.print(f"wrote {escape(str(out / name))}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `accsim review`."""
    parser.add_argument("study", help="study spec YAML (see experiments/studies/)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="folder for the packet (new, empty, or a previous packet)")
    parser.add_argument("--cache", metavar="DIR", help="result cache keyed by content "
                        f"hash (default {default_cache_dir()})")
    parser.add_argument("--no-cache", action="store_true",
                        help="simulate every run, read and write no cache")
    parser.add_argument("--engine", choices=ENGINE_CHOICES, default="auto")
    add_executor_arguments(parser, "where the points of the study's sweep (scope.sweep) "
                           "run: ")
    parser.set_defaults(handler=review)
