"""The `accsim` command. Bad input ends in one line naming file, field and rule, and
exit status 1; results already computed are printed before any output file is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from simulator.config import Platform
from simulator.engines import ENGINE_CHOICES
from simulator.errors import AccsimError
from simulator.loader import load_model, locate, shipped_names
from simulator.mapping import Mapping
from simulator.plots import write_breakdown_plot
from simulator.report import compare_table, print_report, write_csv, write_json
from simulator.simulate import Inputs, simulate
from simulator.trace import write_trace
from simulator.verify import verify
from simulator.workload import Workload

SCHEMAS = {"platform": Platform, "workload": Workload, "mapping": Mapping}

DEFAULT_ARCH = "tpu_v1"
DEFAULT_WORKLOAD = "resnet50_b1"


def load_inputs(arch: str, workload: str, mapping: str | None) -> Inputs:
    """Load the three inputs by shipped name or path."""
    platform, platform_source = load_model(locate(arch, "platform"), Platform)
    trace, workload_source = load_model(locate(workload, "workload"), Workload)
    if mapping is None:
        return Inputs(platform, trace, Mapping(), platform_source, workload_source)
    plan, mapping_source = load_model(locate(mapping, "mapping"), Mapping)
    return Inputs(platform, trace, plan, platform_source, workload_source, mapping_source)


def _run(args: argparse.Namespace) -> int:
    inputs = load_inputs(args.arch, args.workload, args.mapping)
    stderr = Console(stderr=True)
    started = time.perf_counter()
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), console=stderr, transient=True,
                  disable=not stderr.is_terminal) as bar:
        task = bar.add_task("simulating", total=None)

        def progress(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=f"simulating {name}")

        result = simulate(inputs, engine=args.engine, progress=progress)
    elapsed = time.perf_counter() - started
    print_report(result, Console(width=max(Console().width, 180)))
    print(f"simulated {len(result.operators)} operators in {elapsed:.2f} s wall")
    for path, writer in ((args.json, write_json), (args.csv, write_csv),
                         (args.trace, write_trace), (args.plot, write_breakdown_plot)):
        if path:
            try:
                writer(result, path)
            except OSError as exc:
                raise AccsimError(f"cannot write: {exc.strerror}", file=path) from None
            print(f"wrote {path}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    results = []
    for arch in args.arch:
        results.append(simulate(load_inputs(arch, args.workload, args.mapping),
                                engine=args.engine))
    Console(width=max(Console().width, 140)).print(compare_table(results))
    return 0


def _verify(args: argparse.Namespace) -> int:
    outcome = verify(args.result)
    for change in outcome.changed_sources:
        print(f"changed input: {change}")
    for difference in outcome.differences:
        print(f"differs on rerun: {difference}")
    if outcome.ok:
        print(f"{args.result}: verified (inputs unchanged, rerun identical)")
        return 0
    print(f"{args.result}: NOT verified", file=sys.stderr)
    return 1


def _check(args: argparse.Namespace) -> int:
    """Validate a platform, workload or mapping file, told apart by its top-level keys."""
    from simulator.loader import parse_model, read_source
    source = read_source(args.file)
    kind = args.kind or _guess_kind(source.text)
    model = parse_model(source.text, SCHEMAS[kind], file=source.path)
    if isinstance(model, Platform):
        array = model.systolic_array
        detail = (f"{array.rows}x{array.cols} {'/'.join(array.input_dtypes)} at "
                  f"{model.clock_ghz} GHz, {model.peak_flops / 1e12:,.2f} TFLOP/s peak, "
                  f"{model.offchip.bandwidth_gbps:g} GB/s")
    elif isinstance(model, Workload):
        detail = f"{len(model.operators)} operators"
    else:
        detail = (f"{len(model.operators)} operator and {len(model.layer_types)} "
                  "layer_type entries")
    print(f"{source.path}: valid {kind} ({detail})")
    return 0


def _guess_kind(text: str) -> str:
    import yaml
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError:
        return "workload"  # parse_model reports the YAML error with its line
    if isinstance(raw, dict) and "systolic_array" in raw:
        return "platform"
    if isinstance(raw, dict) and isinstance(raw.get("operators"), list):
        return "workload"
    return "mapping"


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(SCHEMAS[args.kind].model_json_schema(), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accsim", description="Cycle-approximate simulator of systolic-array ML "
        "accelerators.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="simulate a workload on a platform and print per-operator and "
        "per-layer_type tables")
    run.add_argument("--arch", default=DEFAULT_ARCH,
                     help=f"platform YAML, or a shipped name ({', '.join(shipped_names('platform'))}); "
                     f"default {DEFAULT_ARCH}")
    run.add_argument("--workload", default=DEFAULT_WORKLOAD,
                     help=f"workload YAML, or a shipped name ({', '.join(shipped_names('workload'))}); "
                     f"default {DEFAULT_WORKLOAD}")
    run.add_argument("--mapping", help="tiling plan YAML, or a shipped name "
                     f"({', '.join(shipped_names('mapping'))}); default: the array_aligned "
                     "heuristic for every operator")
    run.add_argument("--engine", choices=ENGINE_CHOICES, default="auto")
    run.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    run.add_argument("--csv", metavar="PATH", help="write one row per operator as CSV")
    run.add_argument("--trace", metavar="PATH", help="write a Chrome/Perfetto timeline "
                     "(JSON) of every tile transfer and computation")
    run.add_argument("--plot", metavar="PATH", help="write a PNG of cycles by layer_type")
    run.set_defaults(handler=_run)

    compare = commands.add_parser(
        "compare", help="one workload on several platforms side by side")
    compare.add_argument("--arch", action="append", required=True,
                         help="platform YAML or shipped name; repeat for each platform")
    compare.add_argument("--workload", default=DEFAULT_WORKLOAD)
    compare.add_argument("--mapping")
    compare.add_argument("--engine", choices=ENGINE_CHOICES, default="auto")
    compare.set_defaults(handler=_compare)

    check = commands.add_parser(
        "check", help="validate a platform, workload or mapping file")
    check.add_argument("file")
    check.add_argument("--kind", choices=sorted(SCHEMAS),
                       help="default: told apart by the file's top-level keys")
    check.set_defaults(handler=_check)

    verify_cmd = commands.add_parser(
        "verify", help="check a result JSON: changed inputs, and a rerun from its "
        "embedded inputs")
    verify_cmd.add_argument("result")
    verify_cmd.set_defaults(handler=_verify)

    schema = commands.add_parser("schema", help="print the JSON Schema of an input kind")
    schema.add_argument("kind", choices=sorted(SCHEMAS))
    schema.set_defaults(handler=_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except AccsimError as exc:
        print(f"accsim: error: {exc.message()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("accsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
