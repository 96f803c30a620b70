"""`accsim compare`: one workload on several platforms, side by side in one table."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from simulator.commands.inputs import load_inputs
from simulator.commands.options import add_inputs, budget
from simulator.commands.run import simulate_shown, simulate_system_shown
from simulator.report import compare_table
from simulator.system import command as system_command
from simulator.terminal import console as report_console
from simulator.terminal import plain


def handle(args: argparse.Namespace) -> int:
    plan = system_command.plan_from_args(args)
    memory = budget(args)
    every = [load_inputs(arch, args.workload, args.mapping, heuristic_name=args.heuristic)
             for arch in args.arch]
    labels = platform_labels([inputs.platform.name for inputs in every], args.arch)
    results, lines = [], []
    for inputs, label in zip(every, labels):
        if plan.single_chip:
            results.append(simulate_shown(inputs, args.engine, memory, label))
            continue
        system = simulate_system_shown(inputs, plan, None, args.engine, label)
        results.append(system.result)
        lines += [f"{label}: {line}" for line in system.summary_lines()]
    console = report_console(min_width=140)
    console.print(compare_table(results, labels))
    console.print(f"mapping (every platform): {results[0].mapping_mode}")
    for line in lines:
        console.print(line)
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
    compare.set_defaults(handler=handle)
