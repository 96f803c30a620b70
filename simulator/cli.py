"""The `accsim` command. Bad input ends in one line naming file, field and rule, and
exit status 1; results already computed are printed before any output file is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import contextmanager, nullcontext

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from simulator import scalesim
from simulator.config import Platform
from simulator.engines import ENGINE_CHOICES
from simulator.errors import AccsimError
from simulator.frontends import command as import_command
from simulator.frontends.hf import command as hf_command
from simulator.limits import MemoryBudget, parse_size
from simulator.loader import (Source, check_output_path, load_model, locate, shipped_names,
                              writing)
from simulator.search.operator import OBJECTIVES
from simulator.mapping.heuristics import heuristic, load_plugin
from simulator.mapping.plan import Mapping, with_heuristic
from simulator.report import compare_table, print_report, write_csv, write_json
from simulator.review.command import add_parser as add_review_parser
from simulator.serving.command import add_parser as add_serve_parser
from simulator.simulate import Inputs, simulate
from simulator.system import command as system_command
from simulator.system.run import write_system_json
from simulator.sweep import command as sweep_command
from simulator.trace import write_trace
from simulator.terminal import console as report_console
from simulator.terminal import markup_safe, plain
from simulator.verify import SHOWN_DIFFERENCES, verify
from simulator.workload import Workload

SCHEMAS = {"platform": Platform, "workload": Workload, "mapping": Mapping}

DEFAULT_ARCH = "tpu_v1"
DEFAULT_WORKLOAD = "resnet50_b1"


def load_inputs(arch: str, workload: str | None, mapping: str | None, *,
                validate: str | None = None, workload_format: str | None = None,
                heuristic_name: str | None = None,
                imported: tuple[Workload, Source] | None = None) -> Inputs:
    """Load the three inputs by shipped name or path. SCALE-Sim files are read unchanged:
    a `.cfg` platform, a `.csv` topology (conv or GEMM by its header, or as
    `workload_format` says); what they hold that accsim does not honour is printed.
    `validate="scalesim"`: unbounded buffers and one tile per GEMM (simulator.scalesim).
    `heuristic_name` fills the fields the plan leaves open (default: the search).
    `imported`: a workload already read by a frontend (`run --onnx`), used as is."""
    if heuristic_name is not None:
        if validate is not None:
            raise AccsimError("--validate scalesim makes its own plan (one tile per "
                              "GEMM); drop --heuristic", field="--heuristic")
        heuristic(heuristic_name)  # an unknown name errors here, naming the known ones
    notes: list[str] = []
    workload = workload or DEFAULT_WORKLOAD
    if scalesim.is_scalesim_config(arch):
        platform, platform_source, config = scalesim.load_config(arch)
        notes += config.notes
    else:
        platform, platform_source = load_model(locate(arch, "platform"), Platform)
    if imported is not None:
        trace, workload_source = imported
    elif workload_format is not None or scalesim.is_scalesim_topology(workload):
        trace, workload_source, topology = scalesim.load_topology(workload, workload_format)
        notes += [f"SCALE-Sim {topology.kind} topology {workload_source.path}: {note}"
                  for note in topology.notes]
    else:
        trace, workload_source = load_model(locate(workload, "workload"), Workload)
    if validate is not None:
        if mapping is not None:
            raise AccsimError("--validate scalesim makes its own plan (one tile per GEMM); "
                              "drop --mapping", file=mapping, field="--mapping")
        platform = scalesim.validate_platform(platform, trace)
        notes += scalesim.validate_notes(platform)
        mapping_plan = scalesim.validate_mapping(trace, platform)
    for note in notes:
        print(f"scalesim: {plain(note)}")
    if validate is not None:
        return Inputs(platform, trace, mapping_plan, platform_source, workload_source)
    if mapping is None:
        return Inputs(platform, trace, with_heuristic(Mapping(), heuristic_name),
                      platform_source, workload_source)
    plan, mapping_source = load_model(locate(mapping, "mapping"), Mapping)
    return Inputs(platform, trace, with_heuristic(plan, heuristic_name), platform_source,
                  workload_source, mapping_source)


# Output options and the suffixes each accepts (None: any).
OUTPUT_SUFFIXES = {"json": None, "csv": None, "trace": None,
                   "plot": (".png", ".pdf", ".svg"), "sheet": (".md", ".csv")}


def _check_run_options(args: argparse.Namespace) -> None:
    """Every option of `run` that could fail after the simulation, checked before it."""
    for option, suffixes in OUTPUT_SUFFIXES.items():
        if getattr(args, option):
            check_output_path(getattr(args, option), option, suffixes)
    if (args.sheet_best or args.sheet_search) and not args.sheet:
        given = "--sheet-best" if args.sheet_best else "--sheet-search"
        raise AccsimError(f"{given} only applies with --sheet PATH", field=given)
    if args.sheet_best and args.sheet_search:
        raise AccsimError("give --sheet-best or --sheet-search, not both",
                          field="--sheet-search")


def _budget(args: argparse.Namespace, *, trace: bool = False) -> MemoryBudget:
    engine = "simpy" if getattr(args, "engine", "auto") == "simpy" else "fast"
    max_bytes = parse_size(args.max_memory) if args.max_memory else None
    return MemoryBudget.default(engine, trace=trace, max_bytes=max_bytes)


@contextmanager
def _progress(label: str = ""):
    """A progress callback for simulate(), drawing a bar on stderr when it is a
    terminal (nothing otherwise): it pulses while the kernels load and the operators
    lower, then counts operators."""
    stderr = Console(stderr=True)
    prefix = f"{markup_safe(label)}: " if label else ""
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), console=stderr, transient=True,
                  disable=not stderr.is_terminal) as bar:
        task = bar.add_task(f"{prefix}lowering", total=None)

        def progress(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total,
                       description=f"{prefix}simulating {markup_safe(name)}")

        yield progress


def _simulate(inputs: Inputs, engine: str, budget: MemoryBudget, label: str = ""):
    """simulate() with its progress bar."""
    with _progress(label) as progress:
        return simulate(inputs, engine=engine, progress=progress, budget=budget)


def _simulate_system(inputs: Inputs, plan, llm, engine: str, label: str = ""):
    """One chip's shard of a multi-chip run (simulator.system) with its progress bar."""
    with _progress(label) as progress:
        return system_command.run_plan(inputs, plan, llm, engine=engine,
                                       progress=progress)


def _status(text: str):
    """A spinner on stderr while a long step runs, only on a terminal."""
    stderr = Console(stderr=True)
    return stderr.status(markup_safe(text)) if stderr.is_terminal else nullcontext()


def _run_inputs(args: argparse.Namespace):
    """The inputs of `run` (a workload file, an imported ONNX/Kineto file, or an LLM
    step from --model) and the LLM step, None for other workloads."""
    llm, model_source = hf_command.run_step(args)
    if llm is None:
        return load_inputs(args.arch, args.workload, args.mapping, validate=args.validate,
                           workload_format=args.format, heuristic_name=args.heuristic,
                           imported=import_command.run_workload(args)), None
    if args.workload is not None or import_command.run_shortcut(args) or \
            args.validate or args.format:
        raise AccsimError("--model replaces --workload (and takes no --onnx, "
                          "--kineto, --validate or --format)", field="--model")
    base = load_inputs(args.arch, DEFAULT_WORKLOAD, args.mapping,
                       heuristic_name=args.heuristic)
    return Inputs(base.platform, llm.workload(), base.mapping, base.platform_source,
                  model_source, base.mapping_source), llm


def _run(args: argparse.Namespace) -> int:
    _check_run_options(args)
    plan = system_command.plan_from_args(args)
    if args.validate and not plan.single_chip:
        raise AccsimError("--validate scalesim models one chip", field="--chips")
    budget = _budget(args, trace=bool(args.trace))
    best = None
    if args.sheet_best:
        from simulator.search.workload import read_map_json
        best = read_map_json(args.sheet_best)
    inputs, llm = _run_inputs(args)
    if best is not None:
        from simulator.sheet import check_mapper_inputs
        check_mapper_inputs(best, inputs.platform.name, inputs.workload.name,
                            file=args.sheet_best)
    started = time.perf_counter()
    system = None if plan.single_chip else _simulate_system(inputs, plan, llm, args.engine)
    result = _simulate(inputs, args.engine, budget) if system is None else system.result
    elapsed = time.perf_counter() - started
    console = report_console(min_width=200)
    print_report(result, console)
    if llm is not None:
        console.print()
        console.print(llm.table(result))
    for line in system.summary_lines() if system else []:
        console.print(line)
    if args.validate == "scalesim":
        console.print()
        console.print(scalesim.scalesim_table(result))
    print(f"simulated {len(result.operators)} operators in {elapsed:.2f} s wall")
    for path, writer in ((args.json, write_json), (args.csv, write_csv),
                         (args.trace, write_trace), (args.plot, _write_plot)):
        if path:
            with writing(path), _status(f"writing {path}"):
                if writer is write_json and system is not None:
                    write_system_json(system, path)
                else:
                    writer(result, path)
            print(f"wrote {path}")
    if args.sheet:
        _write_sheet(args, result.inputs, result, best)
    return 0


def _compare(args: argparse.Namespace) -> int:
    plan = system_command.plan_from_args(args)
    budget = _budget(args)
    every = [load_inputs(arch, args.workload, args.mapping, heuristic_name=args.heuristic)
             for arch in args.arch]
    labels = _platform_labels([inputs.platform.name for inputs in every], args.arch)
    results, lines = [], []
    for inputs, label in zip(every, labels):
        if plan.single_chip:
            results.append(_simulate(inputs, args.engine, budget, label))
            continue
        system = _simulate_system(inputs, plan, None, args.engine, label)
        results.append(system.result)
        lines += [f"{label}: {line}" for line in system.summary_lines()]
    console = report_console(min_width=140)
    console.print(compare_table(results, labels))
    console.print(f"mapping (every platform): {results[0].mapping_mode}")
    for line in lines:
        console.print(line)
    return 0


def _platform_labels(names: list[str], given: list[str]) -> list[str]:
    """A distinct label per compared platform: its name, or where names clash (a copied
    file, say) the name with the file stem (or the path as given), with a warning."""
    from collections import Counter
    from pathlib import Path
    clashing = {name for name, count in Counter(names).items() if count > 1}
    labels = [f"{name} ({Path(arg).stem})" if name in clashing else name
              for name, arg in zip(names, given)]
    if len(set(labels)) < len(labels):
        labels = [f"{name} ({arg})" if name in clashing else name
                  for name, arg in zip(names, given)]
    for name in sorted(clashing):
        print(f"accsim: warning: several platforms are named {plain(name)!r}; labelled "
              "by file", file=sys.stderr)
    return labels


def _verify(args: argparse.Namespace) -> int:
    with _status(f"verifying {args.result} (rerunning its inputs)"):
        outcome = verify(args.result)
    for change in outcome.changed_sources:
        print(f"changed input: {plain(change)}")
    if outcome.model_changed:
        print(f"model version changed: {plain(outcome.model_changed)}")
    shown = outcome.differences if args.all else outcome.differences[:SHOWN_DIFFERENCES]
    for difference in shown:
        print(f"differs on rerun: {plain(difference)}")
    if len(shown) < len(outcome.differences):
        print(f"... and {len(outcome.differences) - len(shown)} more differences "
              f"(accsim verify --all {args.result} lists them)")
    if outcome.ok:
        print(f"{args.result}: verified (inputs unchanged, rerun identical)")
        return 0
    print(f"{args.result}: NOT verified", file=sys.stderr)
    return 1


def _check(args: argparse.Namespace) -> int:
    """Validate a platform, workload or mapping file, told apart by its top-level keys;
    with --arch or --workload, check a plan against them."""
    from simulator.loader import parse_yaml, read_source, validate_model
    if args.arch or args.workload:
        return _check_plan(args)
    if scalesim.is_scalesim_config(args.file):
        model, source, _ = scalesim.load_config(args.file)
        kind = "platform (SCALE-Sim config)"
    elif scalesim.is_scalesim_topology(args.file):
        model, source, topology = scalesim.load_topology(args.file)
        kind = f"workload (SCALE-Sim {topology.kind} topology)"
    else:
        source = read_source(_locate_any(args.file, args.kind))
        raw = parse_yaml(source.text, file=source.path)
        kind = args.kind or _guess_kind(raw)
        model = validate_model(raw, SCHEMAS[kind], file=source.path)
    if isinstance(model, Platform):
        array = model.systolic_array
        arrays = f"{array.count} x " if array.count > 1 else ""
        detail = (f"{arrays}{array.rows}x{array.cols} {'/'.join(array.input_dtypes)} "
                  f"({array.fold_model} folds) at {model.clock_ghz} GHz, "
                  f"{model.peak_flops / 1e12:,.2f} TFLOP/s peak, "
                  f"{model.offchip.bandwidth_gbps:g} GB/s")
    elif isinstance(model, Workload):
        detail = f"{len(model.operators)} operators"
    else:
        detail = (f"{len(model.operators)} operator and {len(model.layer_types)} "
                  "layer_type entries")
    print(f"{source.path}: valid {kind} ({detail})")
    return 0


# --- mapping: plan check, mapper, regression test, mapping sheet (simulator.mapper,
# simulator.regress, simulator.sheet) ---

class _SearchProgress:
    """A rich progress bar on stderr (shown only on a terminal) for
    mapper.map_workload. Its refresh thread starts at the first report, which the
    mapper sends once its worker processes exist, so they never fork a threaded
    process."""

    def __init__(self, description: str) -> None:
        stderr = Console(stderr=True)
        self.description = description
        self.bar = Progress(TextColumn("[progress.description]{task.description}"),
                            BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[candidates]:,} candidates"),
                            console=stderr, transient=True,
                            disable=not stderr.is_terminal)
        self.task = self.bar.add_task(description, total=None, candidates=0)
        self.candidates = 0
        self.started = False

    def __call__(self, done: int, total: int, name: str, candidates: int) -> None:
        self.candidates += candidates
        self.bar.update(self.task, completed=done, total=total, candidates=self.candidates,
                        description=f"{self.description} {markup_safe(name)}".rstrip())
        if not self.started:
            self.bar.start()
            self.started = True

    def __enter__(self) -> _SearchProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.started:
            self.bar.stop()


def _check_plan(args: argparse.Namespace) -> int:
    from simulator.plan_check import check_plan, plan_check_table
    inputs = load_inputs(args.arch or DEFAULT_ARCH, args.workload or DEFAULT_WORKLOAD,
                         args.file)
    report = check_plan(inputs)
    report_console(min_width=250).print(plan_check_table(report))
    for warning in report.warnings:
        print(f"accsim: warning: {args.file}: {plain(warning)}", file=sys.stderr)
    for where, rule in report.errors:
        print(f"accsim: error: {args.file}: {plain(where)}: {plain(rule)}",
              file=sys.stderr)
    checked = sum(1 for op in report.operators if op.fused_into is None)
    if report.ok:
        print(f"{args.file}: plan fits {report.workload} on {report.platform} "
              f"({checked} operators)")
        return 0
    print(f"{args.file}: plan REJECTED for {report.workload} on {report.platform}: "
          f"{len(report.errors)} errors", file=sys.stderr)
    return 1


def _map(args: argparse.Namespace) -> int:
    from simulator.search.tables import gap_table, operator_search_table
    from simulator.search.workload import map_workload, write_map_json
    if args.workers is not None and args.workers < 1:
        raise AccsimError(f"{args.workers} is not a number of processes >= 1",
                          field="--workers")
    for option in ("json", "write_plan"):
        if getattr(args, option):
            check_output_path(getattr(args, option), option, None)
    inputs = load_inputs(args.arch, args.workload, args.mapping)
    started = time.perf_counter()
    with _SearchProgress("mapping") as progress:
        result = map_workload(inputs, objective=args.objective, heuristics=args.heuristic,
                              workers=args.workers, exhaustive=args.exhaustive,
                              progress=progress)
    elapsed = time.perf_counter() - started
    console = report_console(min_width=200)
    if not args.quiet:
        console.print(operator_search_table(result))
        console.print()
    console.print(gap_table(result))
    stats = result.stats
    searched = sum(1 for op in result.operators if op.same_as is None)
    print(f"searched {searched} distinct operators of {len(result.operators)}: "
          f"{stats.candidates:,} candidates ({stats.unfit:,} do not fit, "
          f"{stats.duplicates:,} duplicate programs, {stats.bound_pruned:,} pruned by the "
          f"bound, {stats.simulated:,} simulated) in {elapsed:.1f} s wall, "
          f"{stats.candidates / max(elapsed, 1e-9):,.0f} candidates/s")
    for path, writer in ((args.json, write_map_json), (args.write_plan, _write_plan)):
        if path:
            with writing(path):
                writer(result, path)
            print(f"wrote {path}")
    return 0


def _write_plan(result, path: str) -> None:
    import yaml
    from pathlib import Path
    plan = result.plan().model_dump(mode="json", exclude_none=True,
                                    exclude_defaults=True)
    Path(path).write_text(f"# Best tilings by {result.objective} of {result.workload} on "
                          f"{result.platform}, written by `accsim map`.\n"
                          + yaml.safe_dump(plan, sort_keys=False))


def _regress(args: argparse.Namespace) -> int:
    from pathlib import Path

    from simulator.regress import (EXIT_REFUSED, BaselineRefused, compare, junit_xml,
                                   read_baseline, report_lines)
    from simulator.report import result_dict
    for option in ("tolerance", "floor_cycles", "floor_energy_pj"):
        value = getattr(args, option)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise AccsimError(f"{value} is not a finite number >= 0",
                              field=f"--{option.replace('_', '-')}")
    if args.junit:
        check_output_path(args.junit, "junit", None)
    if args.update_baseline:
        check_output_path(args.baseline, "baseline", None)
    if args.heuristic:
        heuristic(args.heuristic)  # an unknown name errors here, naming the known ones

    def write(path: str | None, text: str) -> None:
        if path:
            with writing(path):
                Path(path).write_text(text)

    def refuse(exc: BaselineRefused) -> int:
        print(f"accsim: error: {plain(exc.message())}", file=sys.stderr)
        write(args.junit, junit_xml(None, refused=exc.message()))
        if args.junit:
            print(f"wrote {args.junit}")
        return EXIT_REFUSED

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
    inputs = load_inputs(args.arch, args.workload, args.mapping,
                         heuristic_name=args.heuristic)
    result = _simulate(inputs, args.engine, _budget(args))
    current = json.loads(json.dumps(result_dict(result)))

    code = 0
    try:
        if refused is not None:
            raise refused
        if baseline is None:
            print(f"regress: no baseline at {args.baseline} yet")
        else:
            regression = compare(baseline, current,
                                 path=args.baseline, platform=inputs.platform,
                                 tolerance=args.tolerance, floor_cycles=args.floor_cycles,
                                 floor_energy_pj=args.floor_energy_pj)
            for line in report_lines(regression):
                print(plain(line))
            write(args.junit, junit_xml(regression))
            code = regression.exit_code
    except BaselineRefused as exc:
        code = refuse(exc)
    else:
        if args.junit:
            print(f"wrote {args.junit}")
    if args.update_baseline:
        with writing(args.baseline):
            write_json(result, args.baseline)
        print(f"updated baseline {args.baseline}")
        return 0
    return code


def _write_sheet(args: argparse.Namespace, inputs: Inputs, result, best) -> None:
    from simulator.search.workload import map_workload
    from simulator.sheet import check_mapper_result, write_sheet
    source = None
    if best is not None:
        source = args.sheet_best
        check_mapper_result(best, result, file=args.sheet_best)
    elif args.sheet_search:
        with _SearchProgress("mapper") as progress:
            best = map_workload(inputs, objective=args.sheet_search, progress=progress)
    write_sheet(result, args.sheet, best, source=source)
    print(f"wrote {args.sheet}")


def _locate_any(name: str, kind: str | None) -> str:
    """A path, or a shipped platform, workload or mapping of that name (as `run` finds
    them); `kind` narrows the search."""
    from pathlib import Path
    if Path(name).exists() or kind is not None:
        return str(locate(name, kind or "platform"))
    for candidate in SCHEMAS:
        if name in shipped_names(candidate):
            return str(locate(name, candidate))
    if Path(name).suffix or "/" in name:
        return name  # a path: read_source names it if it is missing
    shipped = "; ".join(f"{kind}s {', '.join(shipped_names(kind))}" for kind in SCHEMAS)
    raise AccsimError(f"no such file, and nothing shipped of that name ({shipped})",
                      file=name)


def _guess_kind(raw) -> str:
    """platform, workload or mapping by the top-level keys of decoded YAML: a list of
    operators is a workload, else the schema sharing the most keys (a platform missing
    a section is still told apart by the others)."""
    if not isinstance(raw, dict) or isinstance(raw.get("operators"), list):
        return "workload"
    shared = {kind: len(set(raw) & set(model.model_fields) - {"name", "description"})
              for kind, model in SCHEMAS.items()}
    return max(("platform", "mapping", "workload"), key=lambda kind: shared[kind])


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(SCHEMAS[args.kind].model_json_schema(), indent=2))
    return 0


def _write_plot(result, path) -> None:
    from simulator.plots import write_breakdown_plot  # matplotlib only when asked for
    write_breakdown_plot(result, path)


def _add_inputs(parser: argparse.ArgumentParser, *, several_archs: bool = False,
                engine: bool = True, mapping_help: str | None = None,
                heuristic_option: bool = False) -> None:
    """The platform, workload and mapping options every simulating command shares."""
    arch_help = (f"platform YAML, SCALE-Sim .cfg, or a shipped name "
                 f"({', '.join(shipped_names('platform'))})")
    if several_archs:
        parser.add_argument("--arch", action="append", required=True,
                            help=f"{arch_help}; repeat for each platform")
    else:
        parser.add_argument("--arch", default=DEFAULT_ARCH,
                            help=f"{arch_help}; default {DEFAULT_ARCH}")
    parser.add_argument("--workload",
                        help=f"workload YAML, SCALE-Sim topology .csv, or a shipped name "
                        f"({', '.join(shipped_names('workload'))}); default "
                        f"{DEFAULT_WORKLOAD}")
    parser.add_argument("--mapping", help=mapping_help or "tiling plan YAML, or a shipped "
                        f"name ({', '.join(shipped_names('mapping'))}); default: every "
                        "operator's best tiling, searched by the mapper (deterministic, "
                        "once per distinct operator)")
    if heuristic_option:
        parser.add_argument("--heuristic", metavar="NAME", help="fill what the plan "
                            "leaves open with this heuristic instead of the search (a "
                            "built-in name or one a --plugin file registers)")
    if engine:
        parser.add_argument("--engine", choices=ENGINE_CHOICES, default="auto")
        parser.add_argument("--max-memory", metavar="SIZE", help="memory the tile "
                            "programs may take, e.g. 8G or 512M (default: a quarter of "
                            "RAM); a run needing more is refused before it starts, with "
                            "a tiling that fits")
    _add_plugin(parser)


def _add_plugin(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plugin", action="append", metavar="FILE.py", default=[],
                        help="a Python file of your own heuristics, executed once "
                        "before anything else; its @simulator.mapping.register(NAME) "
                        "functions become names a plan's `heuristic` may use "
                        "(repeatable; the only way user code is loaded)")


def build_parser() -> argparse.ArgumentParser:
    """The accsim command line: one subcommand per task."""
    parser = argparse.ArgumentParser(
        prog="accsim", description="Cycle-approximate simulator of systolic-array ML "
        "accelerators.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="simulate a workload on a platform and print per-operator and "
        "per-layer_type tables")
    _add_inputs(run, heuristic_option=True)
    system_command.add_arguments(run)
    run.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    run.add_argument("--csv", metavar="PATH", help="write one row per operator as CSV")
    run.add_argument("--trace", metavar="PATH", help="write a Chrome/Perfetto timeline "
                     "(JSON) of every tile transfer and computation")
    run.add_argument("--plot", metavar="PATH", help="write a PNG of cycles by layer_type")
    run.add_argument("--validate", choices=scalesim.VALIDATE_MODES,
                     help="scalesim: unbounded buffers and one tile per GEMM, so each "
                     "operator's compute cycles equal SCALE-Sim's (Total Cycles - Stall "
                     "Cycles + 1) and its SRAM reads its access report")
    run.add_argument("--format", choices=scalesim.WORKLOAD_FORMATS,
                     help="read --workload as a SCALE-Sim topology CSV of this kind "
                     "(default: a .csv by its header; --arch X.cfg is a SCALE-Sim config)")
    run.add_argument("--sheet", metavar="PATH", help="write the mapping sheet (.md or "
                     ".csv): per operator its tiling, buffer occupancy, fusion, off-chip "
                     "bytes, bottleneck with evidence, and gap to the mapper's best")
    run.add_argument("--sheet-best", metavar="MAP.json",
                     help="the mapper result (`accsim map --json`) the sheet's gap uses")
    run.add_argument("--sheet-search", nargs="?", const="cycles", choices=OBJECTIVES,
                     metavar="OBJECTIVE", help="run the mapper for the sheet's gap "
                     "(objective: cycles (default), energy or edp)")
    import_command.add_run_options(run)
    hf_command.add_run_arguments(run)
    run.set_defaults(handler=_run)

    compare = commands.add_parser(
        "compare", help="one workload on several platforms side by side")
    _add_inputs(compare, several_archs=True, heuristic_option=True)
    system_command.add_arguments(compare)
    compare.set_defaults(handler=_compare)

    check = commands.add_parser(
        "check", help="validate a platform, workload or mapping file")
    check.add_argument("file", help="a YAML file, a SCALE-Sim .cfg or topology .csv, or "
                       "a shipped name")
    check.add_argument("--kind", choices=sorted(SCHEMAS),
                       help="default: told apart by the file's top-level keys")
    check.add_argument("--arch", help="with a plan: check it on this platform (default "
                       f"{DEFAULT_ARCH}): per operator, each buffer's bytes needed and "
                       "available, slots, spills, and unknown operator names")
    check.add_argument("--workload", help="with a plan: check it on this workload "
                       f"(default {DEFAULT_WORKLOAD})")
    _add_plugin(check)
    check.set_defaults(handler=_check)

    map_cmd = commands.add_parser(
        "map", help="search the best tiling of every operator and report each "
        "heuristic's gap to it")
    _add_inputs(map_cmd, engine=False, mapping_help="plan whose fusions (and, for the "
                "heuristics, depth and dataflow) apply; default: none")
    map_cmd.add_argument("--objective", choices=OBJECTIVES, default="cycles")
    map_cmd.add_argument("--heuristic", action="append", metavar="NAME",
                         help="heuristic to compare (repeatable; a built-in name or one "
                         "a --plugin file registers); default: the built-in ones")
    map_cmd.add_argument("--workers", type=int, help="processes (default: the CPUs "
                         "available)")
    map_cmd.add_argument("--exhaustive", action="store_true",
                         help="simulate every fitting candidate (no pruning)")
    map_cmd.add_argument("--json", metavar="PATH", help="write the mapper result as JSON")
    map_cmd.add_argument("--write-plan", metavar="PATH",
                         help="write the best tilings as a plan YAML for --mapping")
    map_cmd.add_argument("--quiet", action="store_true",
                         help="print only the heuristics' gap table")
    map_cmd.set_defaults(handler=_map)

    regress = commands.add_parser(
        "regress", help="compare per-operator cycles and energy with a baseline result "
        "(exit 1 on a regression, 2 on a refused baseline)")
    regress.add_argument("--baseline", required=True, metavar="BASE.json",
                         help="a result JSON written by `accsim run --json`")
    _add_inputs(regress, heuristic_option=True)
    regress.add_argument("--tolerance", type=float, default=0.01,
                         help="relative change that counts (default 0.01 = 1%%)")
    regress.add_argument("--floor-cycles", type=float, default=100,
                         help="absolute cycle change that counts (default 100)")
    regress.add_argument("--floor-energy-pj", type=float,
                         help="absolute energy change that counts (default: the static "
                         "energy of --floor-cycles on the platform)")
    regress.add_argument("--junit", metavar="PATH", help="write JUnit XML, one test case "
                         "per operator")
    regress.add_argument("--update-baseline", action="store_true",
                         help="write this run's result to --baseline (exit 0)")
    regress.set_defaults(handler=_regress)

    verify_cmd = commands.add_parser(
        "verify", help="check a result JSON (or a review packet's packet.json, result "
        "by result): changed inputs, and a rerun from its embedded inputs")
    verify_cmd.add_argument("result")
    verify_cmd.add_argument("--all", action="store_true", help="list every difference "
                            f"(default: the first {SHOWN_DIFFERENCES} and a count)")
    _add_plugin(verify_cmd)
    verify_cmd.set_defaults(handler=_verify)

    add_review_parser(commands)
    add_serve_parser(commands)
    sweep_command.add_parser(commands)

    schema = commands.add_parser("schema", help="print the JSON Schema of an input kind")
    schema.add_argument("kind", choices=sorted(SCHEMAS))
    schema.set_defaults(handler=_schema)

    import_command.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; AccsimError becomes one line on stderr and exit 1."""
    args = build_parser().parse_args(argv)
    try:
        for path in getattr(args, "plugin", []):
            load_plugin(path)
        return args.handler(args)
    except AccsimError as exc:
        print(f"accsim: error: {plain(exc.message())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("accsim: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # a last resort: the limits should refuse such a run up front
        print("accsim: error: out of memory (lower --max-memory so the run is refused up "
              "front with a tiling that fits, or use larger tiles)", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `accsim ... | head`: the reader left; end quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
