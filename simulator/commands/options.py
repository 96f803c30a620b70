"""Options several verbs share: the platform, workload and mapping a simulation reads,
the engine and its memory budget, and --plugin."""

from __future__ import annotations

import argparse

from simulator.inputs.resolve import DEFAULT_ARCH, DEFAULT_WORKLOAD
from simulator.engines import ENGINE_CHOICES
from simulator.limits import MemoryBudget, parse_size
from simulator.inputs.loader import shipped_names
from simulator.mapping.heuristics import load_plugin
from simulator.mapping.plan import FUSION_MODES
from simulator.search.fusion import DEFAULT_FUSION


def add_inputs(parser: argparse.ArgumentParser, *, several_archs: bool = False,
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
    parser.add_argument("--fusion", choices=FUSION_MODES, help="the fusion planner "
                        "(DESIGN.md section 15): auto groups vector operators into their "
                        "producer's epilogue as a compiler would; epilogue only what the "
                        "plan's `fuse:` asks; none runs operator at a time (default: the "
                        f"plan's `fusion`, else {DEFAULT_FUSION})")
    if heuristic_option:
        parser.add_argument("--heuristic", metavar="NAME", help="fill what the plan "
                            "leaves open with this heuristic instead of the search (a "
                            "built-in name or one a --plugin file registers)")
    if engine:
        parser.add_argument("--engine", choices=ENGINE_CHOICES, default="auto")
        parser.add_argument("--max-memory", metavar="SIZE", help="memory the tile "
                            "programs may take, e.g. 8G or 512M (default: a quarter of "
                            "RAM); with the fast engine a GEMM program longer than a "
                            "block (a quarter of it) is generated and replayed block by "
                            "block; a run needing more is refused before it starts, with "
                            "a tiling that fits")
    add_plugin(parser)


def add_plugin(parser: argparse.ArgumentParser) -> None:
    """--plugin, and the loader the CLI runs each given file with before the handler."""
    parser.add_argument("--plugin", action="append", metavar="FILE.py", default=[],
                        help="a Python file of your own heuristics, executed once "
                        "before anything else; its @simulator.mapping.register(NAME) "
                        "functions become names a plan's `heuristic` may use "
                        "(repeatable; the only way user code is loaded)")
    parser.set_defaults(load_plugin=load_plugin)


def budget(args: argparse.Namespace, *, trace: bool = False) -> MemoryBudget:
    """The memory the tile programs may take: --max-memory, or the engine's default."""
    engine = "simpy" if getattr(args, "engine", "auto") == "simpy" else "fast"
    max_bytes = parse_size(args.max_memory) if args.max_memory else None
    return MemoryBudget.default(engine, trace=trace, max_bytes=max_bytes)
