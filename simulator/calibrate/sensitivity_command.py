"""`accsim sensitivity`: the tornado of one metric over the platform's assumed values
(simulator.calibrate.sensitivity): a table widest swing first, --json for machines,
--csv for a spreadsheet (swing as a fraction), --plot for the figure."""

from __future__ import annotations

import argparse

from rich.table import Table

from simulator.output import progress
from simulator.calibrate.sensitivity import METRICS, Sensitivity, sensitivity
from simulator.calibrate.tornado import draw_tornado, tornado_height
from simulator.commands.compare import compared_inputs
from simulator.inputs.named_inputs import budget
from simulator.output.escape import csv_text
from simulator.output.figure import pyplot, save_figure
from simulator.inputs.loader import dump_json
from simulator.options.catalog import add_options
from simulator.output.files import check_distinct_outputs, check_output_path, write_file
from simulator.precision.applied import applied as applied_precision
from simulator.output.terminal import console as report_console

PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def handle(args: argparse.Namespace) -> int:
    for path, option, suffixes in ((args.json, "json", (".json",)),
                                   (args.csv, "csv", (".csv",)),
                                   (args.plot, "plot", PLOT_SUFFIXES)):
        if path is not None and not (option == "json" and path == "-"):  # --json -: printed
            check_output_path(path, option, suffixes)
    check_distinct_outputs(args, ("json", "csv", "plot"))
    args.arch = [args.arch]
    (inputs,), _ = compared_inputs(args)
    inputs, _ = applied_precision(args.precision, inputs, single_chip=True)
    with progress.operators("sensitivity") as report:
        study = sensitivity(inputs, args.metric, engine=args.engine,
                            fields=args.field or None, progress=report,
                            budget=budget(args.engine, args.max_memory))
    if args.json == "-":
        print(dump_json(study.as_dict(), indent=1))
    else:
        report_console(wide=args.wide).print(tornado_table(study, inputs.platform.name))
    if args.json is not None and args.json != "-":
        write_file(args.json, dump_json(study.as_dict(), indent=1) + "\n", field="--json")
    if args.csv is not None:
        write_file(args.csv, tornado_csv(study), field="--csv")
    if args.plot is not None:
        write_tornado(study, inputs.platform.name, args.plot)
    return 0


def tornado_table(study: Sensitivity, name: str) -> Table:
    table = Table(title=f"{study.metric} on {name}: {study.base:.6g} {study.unit} at the "
                  "values as given; each assumed field at the ends of its range")
    for column in ("field", "value", "range", f"{study.metric} low", f"{study.metric} high",
                   "swing %", "elasticity"):
        table.add_column(column, justify="left" if column == "field" else "right")
    for swing in study.swings:
        elasticity = swing.elasticity(study.base)
        table.add_row(swing.field, f"{swing.value:g}", f"[{swing.low:g}, {swing.high:g}]",
                      f"{swing.metric_low:.6g}", f"{swing.metric_high:.6g}",
                      f"{100 * swing.spread / study.base:.3g}" if study.base else "-",
                      "-" if elasticity is None else f"{elasticity:+.3g}")
    return table


# The CSV's columns: the table's, the range as its two ends, the swing as a fraction.
CSV_COLUMNS = ("field", "value", "range_low", "range_high", "metric_low", "metric_high",
               "swing_fraction", "elasticity")


def tornado_csv(study: Sensitivity) -> str:
    """The table as CSV, one row per field, widest swing first; each row also names the
    metric, its unit and its value as given (the table's title)."""
    rows = [dict(zip(CSV_COLUMNS, (
        swing.field, swing.value, swing.low, swing.high, swing.metric_low,
        swing.metric_high, swing.spread / study.base if study.base else None,
        swing.elasticity(study.base)))) | {"metric": study.metric, "unit": study.unit,
                                            "base": study.base}
        for swing in study.swings]
    return csv_text(["metric", "unit", "base", *CSV_COLUMNS], rows)


def write_tornado(study: Sensitivity, name: str, path: str) -> None:
    """Bars from the metric at each field's low end to its high end, around the base."""
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, tornado_height(study)))
    draw_tornado(axes, study, name)
    figure.tight_layout()
    save_figure(figure, path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, "sensitivity", "inputs", "import", "precision", "llm", "outputs")
    parser.add_argument("--metric", choices=sorted(METRICS), default="time_s",
                        help="the figure perturbed (default time_s)")
    parser.add_argument("--field", action="append", metavar="PATH",
                        help="only this assumed field (repeatable; default: all)")
    add_options(parser, "sensitivity", "table")
    parser.set_defaults(handler=handle)
