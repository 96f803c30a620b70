"""`accsim sweep run` and `accsim sweep report`: their parsers and handlers. Every
option and the whole spec are checked before the first point is simulated."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import simulator
from simulator.output import progress
from simulator.system.capacity import FLAG
from simulator.errors import AccsimError
from simulator.options.catalog import add_options
from simulator.options.rules import whole
from simulator.output.files import check_output_options, check_output_path, writing
from simulator.output.terminal import console as report_console, echo
from simulator.mapping.heuristics import heuristic
from simulator.mapping.plan import Mapping, with_fusion, with_heuristic
from simulator.sweep.coordinator import Summary, missing_jobs, run_sweep
from simulator.sweep.deploy_store import stored_points
from simulator.sweep.executors import executor_for
from simulator.sweep.jobs import Plan, make_plan
from simulator.sweep.serving_sweep import run_serving_sweep, serving_front
from simulator.sweep.report import (PLOT_SUFFIXES, best_by, build_report,
                                    failed_table, front_table, import_pyarrow,
                                    parse_objectives, points_table, shown_metrics,
                                    write_csv, write_parquet, write_plot)
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store
from simulator.sweep.task import METRICS

EXIT_INTERRUPTED = 130


def describe_plan(plan: Plan) -> str:
    sweep = plan.sweep
    excluded = f", {plan.excluded} ruled out by constraints" if plan.excluded else ""
    return (f"sweep {sweep.spec.name}: {plan.samples} {sweep.spec.sampling.method} "
            f"points{excluded}; {plan.points} platforms x {len(sweep.workloads)} "
            f"workloads = {len(plan.jobs)} jobs")


def describe_summary(summary: Summary, store: str) -> str:
    rate = summary.computed / summary.elapsed_s if summary.elapsed_s else 0.0
    failed = f" ({summary.failed} failed)" if summary.failed else ""
    return (f"{summary.already_stored} already stored, {summary.computed} computed"
            f"{failed} in {summary.elapsed_s:.1f} s ({rate:.1f} points/s); store {store}")


def _run(args: argparse.Namespace) -> int:
    executor = executor_for(args.scheduler, args.workers)
    if args.heuristic is not None:
        try:  # an unknown name ('' too) errors here, naming the known ones
            heuristic(args.heuristic)
        except AccsimError as exc:
            raise AccsimError(exc.rule, field="--heuristic") from None
    check_resumable(args.store)
    sweep = load_sweep(args.spec)
    if sweep.serving is not None:
        return _run_serving(args, sweep)
    plan = make_plan(sweep,
                     with_fusion(with_heuristic(Mapping(), args.heuristic), args.fusion),
                     ignore_capacity=args.ignore_capacity)
    echo(f"{describe_plan(plan)}; on {executor.description}")
    echo(f"mapping: {plan.jobs[0].inputs['mapping'] if plan.jobs else '-'}")
    if args.ignore_capacity:
        echo(f"capacity IGNORED ({FLAG}): points whose chip cannot hold the workload "
             "run as what-ifs, under keys of their own")
    with Store(args.store) as store, executor:
        missing = len(missing_jobs(plan, store, retry_failed=args.retry_failed))
        with progress.Bar("simulating", total=missing, rate="points", eta=True) as bar:
            summary = run_sweep(plan, store, executor, retry_failed=args.retry_failed,
                                on_stored=lambda row: bar.advance())
    echo(describe_summary(summary, args.store))
    if summary.failed:
        echo(f"{summary.failed} points failed; `accsim sweep report {args.store} "
             "--failed` lists why")
    if summary.interrupted:
        print(f"accsim: interrupted: {summary.missing} jobs not computed; rerun the same "
              "command to compute only those", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


def _run_serving(args: argparse.Namespace, sweep) -> int:
    """A serving sweep: each point's SLA capacity searched (simulator.sweep.serving_sweep),
    its figures printed, and the front over the spec's objectives."""
    objectives = sweep.spec.objectives
    echo(f"serving sweep {sweep.spec.name}: SLA {sweep.serving.sla}; objectives "
         + ", ".join(f"{name} ({sense})" for name, sense in objectives.items()))
    with progress.steps("searching deployments", after_s=2.0) as report:
        rows, found, computed = run_serving_sweep(sweep, args.store, progress=report)
    front = {id(row) for row in serving_front(rows, objectives)}
    for row in rows:
        values = ", ".join(f"{name}={value}" for name, value in row["point"].items())
        figures = ", ".join(f"{name} {row.get(name):.4g}" for name in objectives
                            if row.get(name) is not None)
        mark = " [front]" if id(row) in front else ""
        echo(f"  {values}: {row['status']}{mark}"
             + (f"; {figures}" if figures else f"; {row.get('reason') or row.get('note')}"))
    echo(f"{found} already stored, {computed} computed; store {args.store}")
    return 0


def check_resumable(path: str) -> None:
    """A new store's path can be written; an existing store is a writable sweep store
    whose every row this MODEL_VERSION computed (a resume of an older store would put
    rows of two timing models side by side). Checked before the spec is planned."""
    if not Path(path).exists():
        check_output_path(path, "store")
        return
    try:
        with Store(path) as store:
            versions = store.model_versions()
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=path, field=exc.field or "--store") from None
    other = {v: n for v, n in versions.items() if v != simulator.MODEL_VERSION}
    if other:
        held = " and ".join(f"MODEL_VERSION {version} ({count} rows)"
                            for version, count in versions.items())
        raise AccsimError(f"holds rows of {held}; this accsim is MODEL_VERSION "
                          f"{simulator.MODEL_VERSION}: resuming would mix two timing models "
                          "in one store; run into a new --store (`accsim sweep report "
                          f"--model-version {min(other)}` still reads the old rows)",
                          file=path, field="--store")


def _report(args: argparse.Namespace) -> int:
    check_output_options(args, {"csv": (".csv",), "parquet": (".parquet",),
                                "plot": PLOT_SUFFIXES})
    if args.best_by:  # an unknown name is an option error before the store is read
        parse_objectives(args.best_by, None, "--best-by")
    if args.parquet:
        import_pyarrow()
    with Store(args.store, create=False) as store:
        refuse_deployment_store(store)
        objectives = parse_objectives(args.pareto, store)
        best = parse_objectives(args.best_by, store, "--best-by") if args.best_by else ()
        if len(best) > 1:
            raise AccsimError("--best-by takes one objective", field="--best-by")
        if args.plot and len(objectives) < 2:
            raise AccsimError("a plot needs two objectives (--pareto A,B)", field="--plot")
        report = build_report(store, objectives, args.workload,
                              model_version=args.model_version)
    console = report_console(wide=args.wide)
    if not report.rows:
        echo(f"{args.store}: no results yet")
        return 0
    if report.model_version != simulator.MODEL_VERSION:
        echo(f"{args.store}: rows of MODEL_VERSION {report.model_version}; this accsim is "
             f"MODEL_VERSION {simulator.MODEL_VERSION} (its timing model differs: rerun "
             "the sweep into a new store to compare with current results)")
    console.print(front_table(report, args.top))
    for objective in best:
        console.print()
        console.print(points_table(report, best_by(report, objective),
                                   f"Best by {objective.name} ({objective.sense})",
                                   shown_metrics((objective,))))
    failed = sum(row["status"] == "failed" for row in report.rows)
    if args.failed and failed:
        console.print()
        console.print(failed_table(report))
    elif failed:
        echo(f"{failed} failed points (--failed lists why)")
    for path, writer in ((args.csv, write_csv), (args.parquet, write_parquet),
                         (args.plot, write_plot)):
        if path:
            with writing(path):
                writer(report, path)
            print(f"wrote {path}")
    return 0


def refuse_deployment_store(store: Store) -> None:
    """A store of deployment points only (a serving sweep's or plan-deployment's) is
    read back by the command that wrote it, which prints its points and front."""
    points = stored_points(store)
    if points and not store.keys():
        raise AccsimError(
            f"holds {points} deployment points and no operator sweep results: `sweep "
            "report` reads operator sweeps; rerun the command that wrote it with this "
            f"--store (`accsim sweep run SPEC.yaml --store {store.path}` for a serving "
            "sweep, `accsim plan-deployment ... --store` for a search): every point is "
            "read back, none computed, and the front printed", file=store.path)


def positive_int(text: str) -> int:
    value = whole(text)  # ASCII digits (int() also takes '1_0' and '٣')
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_arguments(sweep: argparse.ArgumentParser) -> None:
    """The arguments of `accsim sweep`."""
    verbs = sweep.add_subparsers(dest="sweep_command", required=True)
    run = verbs.add_parser("run", help="compute every point of a spec the store lacks")
    run.add_argument("spec", help="sweep spec YAML (experiments/sweeps/ has examples)")
    add_options(run, "sweep run", "store", "executor", "inputs")
    run.add_argument("--retry-failed", action="store_true",
                     help="also recompute the points stored as failed")
    add_options(run, "sweep run", "capacity")
    run.set_defaults(handler=_run)

    report = verbs.add_parser("report", help="Pareto front, best points, plot and "
                              "export of a store")
    report.add_argument("store", metavar="FILE.sqlite")
    report.add_argument("--pareto", metavar="OBJ[:min|max],...",
                        help=f"objectives of the front (default: the spec's); known: "
                        f"{', '.join(METRICS)}")
    report.add_argument("--best-by", metavar="OBJECTIVE",
                        help="also print the best point of each workload by this metric")
    add_options(report, "sweep report", "inputs")
    report.add_argument("--model-version", type=whole, metavar="N", help="only rows "
                        "computed by this MODEL_VERSION (needed when a store holds "
                        "several: a front never mixes timing models)")
    report.add_argument("--top", type=positive_int, default=20, metavar="N",
                        help="front points shown per workload, best first by the first "
                        "objective (default 20; the exports hold them all)")
    report.add_argument("--failed", action="store_true", help="list the failed points "
                        "and why")
    add_options(report, "sweep report", "outputs")
    report.add_argument("--parquet", metavar="PATH", help="write every row as Parquet "
                        "(needs pyarrow: pip install 'accsim[parquet]')")
    add_options(report, "sweep report", "table")
    report.set_defaults(handler=_report)
    # a usage error names the subcommands, as the usage line does (not the dest)
    verbs.metavar = "{" + ",".join(verbs.choices) + "}"
