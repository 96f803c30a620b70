"""`accsim calibrate --arch A --measured FILE [--fit FIELD,...] -o OUT.yaml`: fit the
platform's assumed values to measured operator times (simulator.calibrate.operator_fit) or to
measured whole-model runs (a file of `measurements:`, simulator.calibrate.whole), print
the fitted values and the error before and after (cross-validated for operators, left
one out per case for whole models), and write the platform with the fitted values
marked `kind: fitted` (the file and its sha256): for whole models a new file over the
platform as written (`base:` and the fitted values only)."""

from __future__ import annotations

import argparse
import json

import yaml
from rich.table import Table

from simulator.calibrate.operator_fit import Calibration, calibrate
from simulator.calibrate.fitted_file import fitted_platform_yaml
from simulator.calibrate.measured import read_measured
from simulator.calibrate.measured_runs import is_runs_file, read_runs
from simulator.calibrate.whole import WholeCalibration, calibrate_runs
from simulator.calibrate.sensitivity import assumed_ranges, with_values
from simulator.options.rules import in_range, names, whole
from simulator.inputs.named_inputs import budget, load_inputs
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import dump_json, refuse_empty_name, validate_model
from simulator.options.catalog import add_options
from simulator.output import progress
from simulator.output.files import check_distinct_outputs, check_output_path, write_file
from simulator.output.terminal import console as report_console

# k of the k-fold cross-validation: each fold a fit of its own (seconds each).
MAX_FOLDS = 100


def handle(args: argparse.Namespace) -> int:
    check_output_path(args.output, "output", (".yaml", ".yml"))
    if args.json is not None and args.json != "-":
        check_output_path(args.json, "json", (".json",))
    check_distinct_outputs(args, ("output", "json"))
    inputs = load_inputs(args.arch, None, None)
    platform = inputs.platform
    file = inputs.platform_source.path if inputs.platform_source else platform.name
    ranges = assumed_ranges(platform)
    if not ranges:  # before any measurement is read or simulated
        raise AccsimError("no value is assumed with a range of some width (provenance: "
                          "kind assumed, range [low, high]): nothing to fit", file=file,
                          field="provenance")
    in_range(args.folds, "--folds", low=2, high=MAX_FOLDS)
    chosen = names(args.fit, "--fit") or list(ranges)
    unknown = [name for name in chosen if name not in ranges]
    if unknown:
        raise AccsimError(f"{unknown} are no assumed fields with a range (assumed: "
                          f"{', '.join(ranges) or 'none'})", file=file, field="--fit")
    refuse_empty_name(args.measured, "measurement file", field="--measured")
    if is_runs_file(args.measured):
        return _handle_runs(args, platform, file, {name: ranges[name] for name in chosen})
    measured = read_measured(args.measured)
    if args.folds > len(measured.operators):
        raise AccsimError(f"{args.folds} folds of {len(measured.operators)} measured "
                          "operators: each fold needs one to hold back", field="--folds")
    result = calibrate(platform, measured, {name: ranges[name] for name in chosen},
                       folds=args.folds, engine=args.engine, budget=budget(args.engine, args.max_memory),
                       file=file)
    if args.json == "-":
        print(dump_json(result.as_dict(), indent=1))
    else:
        console = report_console(wide=args.wide)
        console.print(fit_table(result, ranges))
        for line in summary_lines(result, len(measured.operators)):
            console.print(line, markup=False, highlight=False)
    if args.json is not None and args.json != "-":
        write_file(args.json, dump_json(result.as_dict(), indent=1) + "\n", field="--json")
    write_file(args.output, calibrated_yaml(platform, result, measured.file,
                                            measured.sha256, file), field="--output")
    return 0


def _handle_runs(args: argparse.Namespace, platform: Platform, file: str,
                 fields: dict) -> int:
    """Whole-model measurements: fit, print the per-case table, write the new file."""
    runs = read_runs(args.measured)
    with progress.steps("calibrating (simulating each case across the ranges)",
                        after_s=2.0) as report:
        result = calibrate_runs(platform, runs, args.arch, fields, engine=args.engine,
                                budget=budget(args.engine, args.max_memory), file=file,
                                progress=report)
    if args.json == "-":
        print(dump_json(result.as_dict(), indent=1))
    else:
        console = report_console(wide=args.wide)
        console.print(fit_table(result, fields))
        console.print(cases_table(result))
        for which, label in (("before", "uncalibrated"), ("heldout", "left one out"),
                             ("fitted", "fitted to all")):
            console.print(f"{label}: median |error| {100 * result.median(which):.1f}%, "
                          f"worst {100 * result.worst(which):.1f}%", markup=False,
                          highlight=False)
        if result.unidentifiable:
            console.print("unidentifiable (no measured case depends on them; left "
                          f"unchanged): {', '.join(result.unidentifiable)}",
                          markup=False, highlight=False)
    if args.json is not None and args.json != "-":
        write_file(args.json, dump_json(result.as_dict(), indent=1) + "\n", field="--json")
    write_file(args.output, fitted_platform_yaml(args.arch, platform, result.fitted,
                                                 fields, runs, args.output),
               field="--output")
    return 0


def cases_table(result: WholeCalibration) -> Table:
    table = Table(title="Measured cases: simulated / measured - 1 (left one out: fitted "
                  "to the other cases)")
    for column in ("case", "measured ms", "uncalibrated", "left one out",
                   "fitted to all"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for case in result.cases:
        table.add_row(case.name, f"{case.measured_s * 1e3:.4g}",
                      *(f"{100 * case.error(s):+.1f}%"
                        for s in (case.before_s, case.heldout_s, case.fitted_s)))
    return table


def fit_table(result: Calibration | WholeCalibration, ranges: dict) -> Table:
    table = Table(title="Fitted assumed values (bounded least squares within each range)")
    for column in ("field", "range", "before", "fitted"):
        table.add_column(column, justify="left" if column == "field" else "right")
    for name, value in result.fitted.items():
        _, low, high = ranges[name]
        table.add_row(name, f"[{low:g}, {high:g}]", f"{result.before[name]:g}",
                      f"{value:.6g}")
    for name in result.unidentifiable:
        value, low, high = ranges[name]
        table.add_row(name, f"[{low:g}, {high:g}]", f"{value:g}",
                      "unidentifiable (unchanged)")
    return table


def summary_lines(result: Calibration, count: int) -> list[str]:
    lines = [f"{result.folds}-fold cross-validation over {count} measured operators: "
             f"mean |relative error| on held-back operators {100 * result.heldout_before:.3g}%"
             f" before, {100 * result.heldout_after:.3g}% after fitting the others",
             f"fit to all operators: mean |relative error| {100 * result.train_after:.3g}%"]
    if result.unidentifiable:
        lines.append("unidentifiable (no measured operator depends on them; left "
                     f"unchanged): {', '.join(result.unidentifiable)}")
    return lines


def calibrated_yaml(platform: Platform, result: Calibration, source: str, sha256: str,
                    file: str) -> str:
    """The platform with the fitted values, each marked fitted (range kept)."""
    raw = with_values(platform, result.fitted)
    for name in result.fitted:
        entry = raw["provenance"][name]
        raw["provenance"][name] = {"kind": "fitted", "source": source, "sha256": sha256,
                                   **({"range": entry["range"]} if "range" in entry
                                      else {})}
    validate_model(raw, Platform, file=file)
    # The file name as a JSON string: a newline or '#' in it stays inside the comment.
    header = (f"# {platform.name} calibrated by accsim against {json.dumps(source)} "
              f"(sha256 {sha256}); fitted: {', '.join(result.fitted)}\n")
    return header + yaml.safe_dump(raw, sort_keys=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, "calibrate", "inputs", "outputs")
    parser.add_argument("--measured", required=True, metavar="FILE",
                        help="measured operator times: a CSV (operator, shape, dtype, "
                        "measured_s; docs/calibration.md), a Kineto trace (.json[.gz]) "
                        "or a workload YAML whose operators carry measured_s; or "
                        "measured whole-model runs: a YAML of `measurements:` (accsim "
                        "run arguments, value, unit, source; docs/calibrate-whole.md)")
    parser.add_argument("--fit", action="append", metavar="FIELD,...",
                        help="assumed fields to fit (default: every assumed field)")
    parser.add_argument("--folds", type=whole, default=5,
                        help="k of the k-fold cross-validation (default 5)")
    add_options(parser, "calibrate", "table")
    parser.set_defaults(handler=handle)
