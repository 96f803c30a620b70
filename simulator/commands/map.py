"""`accsim map`: search every operator's best tiling (simulator.search), print each
heuristic's gap to it, and write the result (JSON, CSV, a figure) or the best plan."""

from __future__ import annotations

import argparse
import time

import yaml

from simulator.kernels import ahead
from simulator.output import progress
from simulator.commands.compare import compared_inputs
from simulator.errors import AccsimError
from simulator.options.catalog import add_options
from simulator.output.files import check_output_options, write_file, writing
from simulator.precision.applied import applied as applied_precision
from simulator.search.operator import OBJECTIVES
from simulator.present.map_outputs import map_csv, write_map_plot
from simulator.search.map_tables import gap_table, operator_search_table
from simulator.search.workload_search import map_workload, write_map_json
from simulator.output.terminal import console as report_console, echo


# Output options and the suffixes each accepts (None: any).
OUTPUT_SUFFIXES = {"json": None, "csv": None, "plot": (".png", ".pdf", ".svg"),
                   "write_plan": None}


def handle(args: argparse.Namespace) -> int:
    if args.workers is not None and args.workers < 1:
        raise AccsimError(f"{args.workers} is not a number of processes >= 1",
                          field="--workers")
    check_output_options(args, OUTPUT_SUFFIXES)
    # the workload, an imported file or an LLM step, read as `compare` reads it (the
    # mapper's --heuristic names the heuristics compared, not a mapping)
    (inputs,), _ = compared_inputs(argparse.Namespace(**{**vars(args), "arch": [args.arch],
                                                         "heuristic": None}))
    inputs, _ = applied_precision(args.precision, inputs, single_chip=True)
    started = time.perf_counter()
    with ahead.compiled_ahead(), progress.search("mapping") as report:  # first run
        result = map_workload(inputs, objective=args.objective, heuristics=args.heuristic,
                              workers=args.workers, exhaustive=args.exhaustive,
                              progress=report)
    elapsed = time.perf_counter() - started
    console = report_console(wide=args.wide)
    if not args.quiet:
        console.print(operator_search_table(result))
        console.print()
    console.print(gap_table(result))
    stats = result.stats
    searched = sum(1 for op in result.operators if op.same_as is None)
    echo(f"searched {searched} distinct operators of {len(result.operators)}: "
         f"{stats.candidates:,} candidates ({stats.unfit:,} do not fit, "
         f"{stats.duplicates:,} duplicate programs, {stats.bound_pruned:,} pruned by the "
         f"bound, {stats.simulated:,} simulated) in {elapsed:.1f} s wall, "
         f"{stats.candidates / max(elapsed, 1e-9):,.0f} candidates/s")
    for path, writer in ((args.json, write_map_json), (args.csv, _write_csv),
                         (args.plot, write_map_plot), (args.write_plan, _write_plan)):
        if path:
            with writing(path):
                writer(result, path)
            print(f"wrote {path}")
    return 0


def _write_csv(result, path: str) -> None:
    write_file(path, map_csv(result))


def _write_plan(result, path: str) -> None:
    plan = result.plan().model_dump(mode="json", exclude_none=True,
                                    exclude_defaults=True)
    write_file(path, f"# Best tilings by {result.objective} of {result.workload} on "
                          f"{result.platform}, written by `accsim map`.\n"
                          + yaml.safe_dump(plan, sort_keys=False))


def add_arguments(map_cmd: argparse.ArgumentParser) -> None:
    add_options(map_cmd, "map", "inputs", "import", "llm", "precision", "executor",
                "outputs")
    map_cmd.add_argument("--objective", choices=OBJECTIVES, default="cycles")
    map_cmd.add_argument("--exhaustive", action="store_true",
                         help="simulate every fitting candidate (no pruning)")
    map_cmd.add_argument("--write-plan", metavar="PATH",
                         help="write the best tilings as a plan YAML for --mapping")
    map_cmd.add_argument("--quiet", action="store_true",
                         help="print only the heuristics' gap table")
    add_options(map_cmd, "map", "table")
    map_cmd.set_defaults(handler=handle)
