"""`accsim compare`: one workload on several platforms, side by side in one table;
with --robust, whether each pair's ranking holds across the platforms' assumed ranges
(simulator.calibrate.robust)."""

from __future__ import annotations

import argparse

from rich.table import Table

from simulator.output import progress
from simulator.api import Comparison, Result, platform_labels
from simulator.calibrate.robust import Corners, Verdict, robust_ranking
from simulator.calibrate.sensitivity import METRICS
from simulator.options.rules import requires
from simulator.inputs.named_inputs import (DEFAULT_WORKLOAD, budget,
                                           check_distinct_platforms, load_inputs,
                                           warn_unmatched)
from simulator.commands.run import simulate_shown, simulate_system_shown
from simulator.errors import AccsimError
from simulator.output.escape import csv_text
from simulator.frontends import import_command
from simulator.frontends.hf import llm_command as hf_command
from simulator.inputs.loader import dump_json
from simulator.options.catalog import add_options
from simulator.output.files import (check_distinct_outputs, check_output_options,
                                     check_output_path, write_file, writing)
from simulator.present.plots import write_compare_plot
from simulator.precision.applied import applied as applied_precision
from simulator.simulate import Inputs
from simulator.system import parallelism_command as system_command
from simulator.system.plan_run import check_fit
from simulator.output.terminal import console as report_console, echo


def compared_inputs(args: argparse.Namespace) -> tuple[list[Inputs], object]:
    """The inputs on every platform (the workload, or the LLM step of --model) and the
    LLM step (None for a workload)."""
    llm, model_source = hf_command.run_step(args)
    if llm is None:
        imported = import_command.run_workload(args)  # read once, run on every platform
        every = [load_inputs(arch, args.workload, args.mapping,
                             heuristic_name=args.heuristic, fusion=args.fusion,
                             orientation=args.orientation, imported=imported)
                 for arch in args.arch]
    elif args.workload is not None or import_command.run_shortcut(args):
        raise AccsimError("--model replaces --workload (and takes no --onnx or "
                          "--kineto)", field="--model")
    else:
        every = []
        for arch in args.arch:
            base = load_inputs(arch, DEFAULT_WORKLOAD, args.mapping,
                               heuristic_name=args.heuristic, fusion=args.fusion,
                               orientation=args.orientation)
            every.append(Inputs(base.platform, llm.on(base.platform).workload(),
                                base.mapping, base.platform_source, model_source,
                                base.mapping_source))
    check_distinct_platforms(every, args.arch, field="--arch")
    warn_unmatched(every[0])  # one plan, one workload: said once
    return every, llm


# Output options and the suffixes each accepts (None: any).
OUTPUT_SUFFIXES = {"json": None, "csv": None, "plot": (".png", ".pdf", ".svg")}


def handle(args: argparse.Namespace) -> int:
    check_output_options(args, OUTPUT_SUFFIXES)
    plan = system_command.plan_from_args(args)
    memory = budget(args.engine, args.max_memory)
    if args.robust and not plan.single_chip:
        raise AccsimError("--robust compares single chips (no --chips, --tp, --pp, "
                          "--dp)", field="--robust")
    requires(args, "--robust-json", "--robust")
    requires(args, "--metric", "--robust")
    args.metric = args.metric or "time_s"
    if args.robust_json is not None and args.robust_json != "-":
        check_output_path(args.robust_json, "robust-json", (".json",))
        check_distinct_outputs(args, (*OUTPUT_SUFFIXES, "robust_json"))
    every, llm = compared_inputs(args)
    chosen = [applied_precision(args.precision, inputs, single_chip=plan.single_chip)
              for inputs in every]
    every = [system_command.applied_collectives(args, inputs, plan)
             for inputs, _ in chosen]
    labels = platform_labels([inputs.platform.name for inputs in every], args.arch)
    fits = [check_fit(inputs, plan, llm, ignore=args.ignore_capacity,
                      planned=precision is not None)
            for inputs, (_, precision) in zip(every, chosen)]  # all before any work
    results, lines = [], []
    for inputs, label, fit, (_, precision) in zip(every, labels, fits, chosen):
        lines += [f"{label}: {fit.note()}"] if fit.note() else []
        lines += [f"{label}: {line}" for line in precision.lines()] if precision else []
        if plan.single_chip:  # each platform's blocks as `run --json` writes them
            run = simulate_shown(inputs, args.engine, memory, label)
            results.append(Result(run, llm, fit, precision=precision.record()
                                  if precision else None))
            continue
        system = simulate_system_shown(inputs, plan, llm, args.engine, label,
                                       ignore_capacity=args.ignore_capacity)
        results.append(Result(system.result, llm, fit, system=system.figures()))
        lines += [f"{label}: {line}" for line in system.summary_lines()]
    compared = Comparison(results, labels)
    console = report_console(wide=args.wide)
    console.print(compared.table())
    console.print(f"mapping (every platform): {results[0].run.mapping_mode}")
    for line in lines:
        console.print(line, markup=False, highlight=False)
    _write_outputs(args, compared)
    if args.robust:
        show_robust(args, every, labels, memory, console)
    return 0


def _write_outputs(args: argparse.Namespace, compared: Comparison) -> None:
    """--json (every platform's full result), --csv (one row per platform), --plot."""
    rows = compared.rows()
    for path, write in (
            (args.json, compared.save_json),
            (args.csv, lambda p: write_file(p, csv_text(list(rows[0]), rows))),
            (args.plot, lambda p: write_compare_plot([r.run for r in compared.results],
                                                     compared.labels, p))):
        if path:
            with writing(path):
                write(path)
            print(f"wrote {path}")


def show_robust(args: argparse.Namespace, every: list[Inputs], labels: list[str], memory,
                console) -> None:
    """Each platform's corners and each pair's verdict (DESIGN.md section 16)."""
    with progress.operators("robust") as report:
        found, verdicts = robust_ranking(every, labels, args.metric, engine=args.engine,
                                         budget=memory, progress=report)
    console.print(corners_table(found, args.metric))
    for verdict in verdicts:
        console.print(verdict.line(), markup=False, highlight=False)
    if args.robust_json:
        text = dump_json(robust_dict(found, verdicts), indent=1)
        if args.robust_json == "-":
            echo(text)
        else:
            write_file(args.robust_json, text + "\n", field="--robust-json")


def corners_table(found: list[Corners], metric: str) -> Table:
    unit = METRICS[metric][0]
    table = Table(title=f"{metric} ({unit}) at each platform's assumed values as given "
                  "and at its best and worst corners (every assumed field at the end "
                  "of its range that lowers, resp. raises, it)")
    for column in ("platform", "as given", "best corner", "worst corner",
                   "fields that move it"):
        table.add_column(column, justify="left" if column == "platform" else "right")
    for corner in found:
        table.add_row(corner.label, f"{corner.base:.6g}", f"{corner.best:.6g}",
                      f"{corner.worst:.6g}", str(len(corner.best_values)))
    return table


def robust_dict(found: list[Corners], verdicts: list[Verdict]) -> dict:
    return {"platforms": [c.as_dict() for c in found],
            "pairs": [v.as_dict() for v in verdicts]}


def add_arguments(compare: argparse.ArgumentParser) -> None:
    add_options(compare, "compare", "inputs", "import", "llm", "precision", "system",
                "collectives",
                "capacity", "outputs")
    compare.add_argument("--robust", action="store_true", help="also say for each pair "
                         "whether its ranking holds across the platforms' assumed "
                         "ranges, or which assumption flips it (single chip)")
    compare.add_argument("--metric", choices=sorted(METRICS),
                         help="the figure --robust ranks by (default time_s)")
    compare.add_argument("--robust-json", metavar="PATH", help="with --robust: write "
                         "the corners and verdicts as JSON ('-': print it)")
    add_options(compare, "compare", "table")
    compare.set_defaults(handler=handle)
