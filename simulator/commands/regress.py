"""`accsim regress`: one run compared operator by operator with a baseline result
(simulator.verification.regression); exit 1 on a regression, 2 on a refused baseline. The baseline is
read before the run, so a refused one costs no simulation. The run reads its inputs
as `accsim run` does (a workload, --model, --onnx or --kineto; --mapping, --heuristic,
--fusion, --precision) and writes --json, --csv and --plot as `run` writes them."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from simulator import MODEL_VERSION
from simulator.commands.compare import compared_inputs
from simulator.inputs.named_inputs import budget
from simulator.commands.run import simulate_shown
from simulator.errors import AccsimError
from simulator.options.catalog import add_options
from simulator.options.rules import number
from simulator.output.files import (check_output_options, check_output_path, write_file,
                                     writing)
from simulator.mapping.heuristics import heuristic
from simulator.present.plots import write_breakdown_plot
from simulator.precision.applied import applied as applied_precision
from simulator.verification.regression import (EXIT_REFUSED, BaselineRefused, admit_names,
                                                compare, junit_xml, read_baseline,
                                                report_lines)
from simulator.present.run_report import result_dict, write_csv, write_json
from simulator.system.plan_run import check_fit
from simulator.system.parallelism import SystemPlan
from simulator.output.terminal import echo, plain

# The run's outputs, as `accsim run` writes them, and the suffixes each accepts.
OUTPUT_SUFFIXES = {"json": None, "csv": None, "plot": (".png", ".pdf", ".svg")}


def handle(args: argparse.Namespace) -> int:
    for option in ("tolerance", "floor_cycles", "floor_energy_pj"):
        value = getattr(args, option)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise AccsimError(f"{value} is not a finite number >= 0",
                              field=f"--{option.replace('_', '-')}")
    check_output_options(args, {"junit": None, **OUTPUT_SUFFIXES})
    if args.heuristic:
        heuristic(args.heuristic)  # an unknown name errors here, naming the known ones

    def write(path: str | None, text: str) -> None:
        if path:
            write_file(path, text)

    def refuse(exc: BaselineRefused) -> int:
        print(f"accsim: error: {plain(exc.message())}", file=sys.stderr)
        write(args.junit, junit_xml(None, refused=exc.message()))
        if args.junit:
            print(f"wrote {args.junit}")
        return EXIT_REFUSED

    if args.update_baseline:
        try:  # a baseline that cannot be written is refused as one that cannot be read
            check_output_path(args.baseline, "baseline", None)
        except AccsimError as exc:
            return refuse(BaselineRefused(exc.rule, file=exc.file, field=exc.field))

    # The baseline is read before the run: a refused one costs no simulation (unless
    # it is about to be replaced).
    baseline = refused = None
    if not (args.update_baseline and not Path(args.baseline).exists()):
        try:
            baseline = read_baseline(args.baseline)
        except BaselineRefused as exc:
            if not args.update_baseline:
                return refuse(exc)
            refused = exc
    (inputs,), llm = compared_inputs(argparse.Namespace(**{**vars(args),
                                                          "arch": [args.arch]}))
    inputs, precision = applied_precision(args.precision, inputs, single_chip=True)
    if baseline is not None and not args.update_baseline:
        try:  # a baseline of another platform or workload costs no simulation
            admit_names(baseline, MODEL_VERSION, {"platform": inputs.platform.name,
                                                  "workload": inputs.workload.name},
                        path=args.baseline)
        except BaselineRefused as exc:
            return refuse(exc)
    fit = check_fit(inputs, SystemPlan(), llm, ignore=args.ignore_capacity)
    result = simulate_shown(inputs, args.engine, budget(args.engine, args.max_memory))
    # the optional blocks `run --json` writes: the LLM step's figures, the capacity
    # check when ignored, what the precision plan chose
    blocks = {"llm": llm.record(result) if llm is not None else None,
              "capacity": fit.record(),
              "precision": precision.record() if precision else None}
    current = json.loads(json.dumps(result_dict(result, **blocks)))

    code = 0
    try:
        if refused is not None:
            raise refused
        if baseline is None:
            echo(f"regress: no baseline at {args.baseline} yet")
        else:
            regression = compare(baseline, current,
                                 path=args.baseline, platform=inputs.platform,
                                 tolerance=args.tolerance, floor_cycles=args.floor_cycles,
                                 floor_energy_pj=args.floor_energy_pj)
            for line in report_lines(regression):
                echo(plain(line))
            write(args.junit, junit_xml(regression))
            code = regression.exit_code
    except BaselineRefused as exc:
        code = refuse(exc)
    else:
        if args.junit:
            print(f"wrote {args.junit}")
    for path, writer in ((args.json, write_json), (args.csv, write_csv),
                         (args.plot, write_breakdown_plot)):
        if path:
            with writing(path):
                if writer is write_json:
                    write_json(result, path, **blocks)
                else:
                    writer(result, path)
            print(f"wrote {path}")
    if args.update_baseline:
        with writing(args.baseline):
            write_json(result, args.baseline, **blocks)
        print(f"updated baseline {args.baseline}")
        return 0
    return code


def add_arguments(regress: argparse.ArgumentParser) -> None:
    regress.add_argument("--baseline", required=True, metavar="BASE.json",
                         help="a result JSON written by `accsim run --json`")
    add_options(regress, "regress", "inputs", "import", "llm", "precision", "capacity",
                "outputs")
    regress.add_argument("--tolerance", type=number, default=0.01,
                         help="relative change that counts (default 0.01 = 1%%)")
    regress.add_argument("--floor-cycles", type=number, default=100,
                         help="absolute cycle change that counts (default 100)")
    regress.add_argument("--floor-energy-pj", type=number,
                         help="absolute energy change that counts (default: the static "
                         "energy of --floor-cycles on the platform)")
    regress.add_argument("--junit", metavar="PATH", help="write JUnit XML, one test case "
                         "per operator")
    regress.add_argument("--update-baseline", action="store_true",
                         help="write this run's result to --baseline (exit 0)")
    regress.set_defaults(handler=handle)
