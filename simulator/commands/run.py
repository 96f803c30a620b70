"""`accsim run`: simulate one workload on one platform (or one chip's shard of a
multi-chip system), print its tables, then write the outputs asked for. Every option
that could fail after the simulation is checked before it."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from simulator.kernels import ahead
from simulator.output import progress
from simulator.frontends import scalesim
from simulator.inputs.named_inputs import (DEFAULT_WORKLOAD, budget, load_inputs,
                                           warn_unmatched)
from simulator.errors import AccsimError
from simulator.frontends import import_command
from simulator.frontends.hf import llm_command as hf_command
from simulator.limits import MemoryBudget
from simulator.options.catalog import add_options
from simulator.metrics.power_cap import average_power_w, cap_in_force, capped
from simulator.output.files import check_output_options, writing
from simulator.precision.applied import applied as applied_precision
from simulator.search.operator import OBJECTIVES
from simulator.search.workload_search import map_workload, read_map_json
from simulator.present.plots import write_breakdown_plot
from simulator.present.run_report import print_report, write_csv, write_json
from simulator.present.sheet import check_mapper_inputs, check_mapper_result, write_sheet
from simulator.simulate import Inputs, simulate
from simulator.system import parallelism_command as system_command
from simulator.system.plan_run import check_fit, run_plan
from simulator.system.sharded_run import collective_lines
from simulator.system.sharded_run import write_system_json
from simulator.output.terminal import console as report_console
from simulator.present.timeline import write_trace
from simulator.output.wording import counted

# Output options and the suffixes each accepts (None: any).
OUTPUT_SUFFIXES = {"json": None, "csv": None, "trace": None,
                   "plot": (".png", ".pdf", ".svg"), "sheet": (".md", ".csv")}


def simulate_shown(inputs: Inputs, engine: str, memory: MemoryBudget, label: str = ""):
    """simulate() with its progress bar."""
    with progress.operators(label) as report:
        return simulate(inputs, engine=engine, progress=report, budget=memory)


def simulate_system_shown(inputs: Inputs, plan, llm, engine: str, label: str = "", *,
                          ignore_capacity: bool = False):
    """One chip's shard of a multi-chip run (simulator.system) with its progress bar."""
    with progress.operators(label) as report:
        return run_plan(inputs, plan, llm, engine=engine, progress=report,
                                       ignore_capacity=ignore_capacity)


def _check_run_options(args: argparse.Namespace) -> None:
    """Every option of `run` that could fail after the simulation, checked before it."""
    check_output_options(args, OUTPUT_SUFFIXES)
    if (args.sheet_best or args.sheet_search) and not args.sheet:
        given = "--sheet-best" if args.sheet_best else "--sheet-search"
        raise AccsimError(f"{given} only applies with --sheet PATH", field=given)
    if args.sheet_best and args.sheet_search:
        raise AccsimError("give --sheet-best or --sheet-search, not both",
                          field="--sheet-search")


def run_inputs(args: argparse.Namespace):
    """The inputs of `run` (a workload file, an imported ONNX/Kineto file, or an LLM
    step from --model) and the LLM step, None for other workloads."""
    llm, model_source = hf_command.run_step(args)
    if llm is None:
        return load_inputs(args.arch, args.workload, args.mapping, validate=args.validate,
                           workload_format=args.format, heuristic_name=args.heuristic,
                           fusion=args.fusion, orientation=args.orientation,
                           imported=import_command.run_workload(args)), None
    if args.workload is not None or import_command.run_shortcut(args) or \
            args.validate or args.format:
        raise AccsimError("--model replaces --workload (and takes no --onnx, "
                          "--kineto, --validate or --format)", field="--model")
    base = load_inputs(args.arch, DEFAULT_WORKLOAD, args.mapping,
                       heuristic_name=args.heuristic, fusion=args.fusion,
                       orientation=args.orientation)
    llm = llm.on(base.platform)
    return Inputs(base.platform, llm.workload(), base.mapping, base.platform_source,
                  model_source, base.mapping_source), llm


def _capped_run(args: argparse.Namespace, inputs: Inputs, plan, llm, memory):
    """The run (and its system run, None on one chip) at the clock the power cap in
    force leaves it (simulator.metrics.power_cap: the highest DVFS point whose average power
    over the run fits), the cap's choice (None without a cap) and the inputs run."""
    def run_on(at: Inputs):
        system = None if plan.single_chip else simulate_system_shown(
            at, plan, llm, args.engine, ignore_capacity=args.ignore_capacity)
        result = simulate_shown(at, args.engine, memory) if system is None else \
            system.result
        return system, result

    cap = cap_in_force(inputs.platform, args.power_cap_w)
    if cap is None:
        return (*run_on(inputs), None, inputs)
    if args.power_cap_w is not None and not 0 < args.power_cap_w <= 1e6:
        raise AccsimError(f"{args.power_cap_w:g} is outside (0, 1,000,000] watts",
                          field="--power-cap-w")

    def power_of(platform):
        system, result = run_on(replace(inputs, platform=platform))
        return average_power_w(result), (system, result)

    source = inputs.platform_source.path if inputs.platform_source else None
    platform, (system, result), choice = capped(inputs.platform, cap, power_of, file=source,
                                                from_option=args.power_cap_w is not None)
    return system, result, choice, replace(inputs, platform=platform)


def handle(args: argparse.Namespace) -> int:
    _check_run_options(args)
    plan = system_command.plan_from_args(args)
    if args.validate and not plan.single_chip:
        raise AccsimError("--validate scalesim models one chip", field="--chips")
    memory = budget(args.engine, args.max_memory, trace=bool(args.trace))
    best = read_map_json(args.sheet_best) if args.sheet_best else None
    inputs, llm = run_inputs(args)
    warn_unmatched(inputs)
    inputs, precision = applied_precision(args.precision, inputs, single_chip=plan.single_chip)
    inputs = system_command.applied_collectives(args, inputs, plan)
    if best is not None:
        check_mapper_inputs(best, inputs.platform.name, inputs.workload.name,
                            file=args.sheet_best)
    fit = check_fit(inputs, plan, llm, ignore=args.ignore_capacity,
                    planned=precision is not None)
    started = time.perf_counter()
    with ahead.compiled_ahead():  # a machine's first run: late kernels on other cores
        system, result, cap, inputs = _capped_run(args, inputs, plan, llm, memory)
    elapsed = time.perf_counter() - started
    console = report_console(wide=args.wide)
    print_report(result, console)
    if llm is not None:
        console.print()
        console.print(llm.table(result))
    for line in (system.summary_lines() if system else []) + collective_lines(result):
        console.print(line)
    if fit.note():
        console.print(fit.note(), markup=False, highlight=False)
    if cap is not None:
        console.print(cap.line(), markup=False, highlight=False)
    for line in precision.lines() if precision else []:
        console.print(line, markup=False, highlight=False)
    if args.validate == "scalesim":
        console.print()
        console.print(scalesim.scalesim_table(result))
    print(f"simulated {counted(len(result.operators), 'operator')} in {elapsed:.2f} s wall")
    llm_record = llm.record(result) if llm is not None else None
    for path, writer in ((args.json, write_json), (args.csv, write_csv),
                         (args.trace, write_trace), (args.plot, write_breakdown_plot)):
        if path:
            with writing(path), progress.status(f"writing {path}"):
                if writer is write_json and system is not None:
                    write_system_json(system, path, llm_record)
                elif writer is write_json:
                    write_json(result, path, llm=llm_record, capacity=fit.record(),
                               precision=precision.record() if precision else None,
                               power_cap=cap.record() if cap else None)
                else:
                    writer(result, path)
            print(f"wrote {path}")
    if args.sheet:
        _write_sheet(args, result.inputs, result, best)
    return 0


def _write_sheet(args: argparse.Namespace, inputs: Inputs, result, best) -> None:
    source = None
    if best is not None:
        source = args.sheet_best
        check_mapper_result(best, result, file=args.sheet_best)
    elif args.sheet_search:
        with progress.search("mapper") as report:
            best = map_workload(inputs, objective=args.sheet_search, progress=report)
    write_sheet(result, args.sheet, best, source=source)
    print(f"wrote {args.sheet}")


def add_arguments(run: argparse.ArgumentParser) -> None:
    add_options(run, "run", "inputs", "import", "llm", "precision", "system", "collectives",
                "power",
                "capacity",
                "outputs")
    run.add_argument("--trace", metavar="PATH", help="write a Chrome/Perfetto timeline "
                     "(JSON) of every tile transfer and computation")
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
    add_options(run, "run", "table")
    run.set_defaults(handler=handle)
