"""`accsim compare`: one workload on several platforms, side by side in one table."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from simulator.commands.inputs import DEFAULT_WORKLOAD, load_inputs
from simulator.commands.options import add_inputs, budget
from simulator.commands.run import simulate_shown, simulate_system_shown
from simulator.errors import AccsimError
from simulator.frontends.hf import command as hf_command
from simulator.report import compare_table
from simulator.simulate import Inputs
from simulator.system import command as system_command
from simulator.terminal import console as report_console
from simulator.terminal import plain


def compared_inputs(args: argparse.Namespace) -> tuple[list[Inputs], object]:
    """The inputs on every platform (the workload, or the LLM step of --model) and the
    LLM step (None for a workload)."""
    llm, model_source = hf_command.run_step(args)
    if llm is None:
        return [load_inputs(arch, args.workload, args.mapping,
                            heuristic_name=args.heuristic, fusion=args.fusion)
                for arch in args.arch], None
    if args.workload is not None:
        raise AccsimError("--model replaces --workload", field="--model")
    every = []
    for arch in args.arch:
        base = load_inputs(arch, DEFAULT_WORKLOAD, args.mapping,
                           heuristic_name=args.heuristic, fusion=args.fusion)
        every.append(Inputs(base.platform, llm.workload(), base.mapping,
                            base.platform_source, model_source, base.mapping_source))
    return every, llm


def handle(args: argparse.Namespace) -> int:
    plan = system_command.plan_from_args(args)
    memory = budget(args)
    every, llm = compared_inputs(args)
    labels = platform_labels([inputs.platform.name for inputs in every], args.arch)
    fits = [system_command.check_fit(inputs, plan, llm, ignore=args.ignore_capacity)
            for inputs in every]  # every platform checked before any simulation
    results, lines = [], []
    for inputs, label, fit in zip(every, labels, fits):
        lines += [f"{label}: {fit.note()}"] if fit.note() else []
        if plan.single_chip:
            results.append(simulate_shown(inputs, args.engine, memory, label))
            continue
        system = simulate_system_shown(inputs, plan, llm, args.engine, label,
                                       ignore_capacity=args.ignore_capacity)
        results.append(system.result)
        lines += [f"{label}: {line}" for line in system.summary_lines()]
    console = report_console(min_width=140)
    console.print(compare_table(results, labels))
    console.print(f"mapping (every platform): {results[0].mapping_mode}")
    for line in lines:
        console.print(line, markup=False, highlight=False)
    return 0


def platform_labels(names: list[str], given: list[str]) -> list[str]:
    """A distinct label per compared platform: its name, or where names clash (a copied
    file, say) the name with the file stem (or the path as given), with a warning."""
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


def add_arguments(compare: argparse.ArgumentParser) -> None:
    add_inputs(compare, several_archs=True, heuristic_option=True)
    system_command.add_arguments(compare)
    hf_command.add_run_arguments(compare)
    compare.set_defaults(handler=handle)
