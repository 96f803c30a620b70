"""The multi-chip plan of `accsim run` and `accsim compare` (DESIGN.md section 14) from
their options `--chips N --tp T --pp P --ep E --overlap MODE` (declared in
simulator.options.catalog). `--chips 1` (the default) is today's single-chip run,
unchanged; more chips shard the workload (simulator.system.shard) and run it through
simulator.system.run. Options are validated before anything is simulated."""

from __future__ import annotations

import argparse

from simulator.system.capacity import Capacity, check
from simulator.errors import AccsimError
from simulator.mapping.plan import check_mapping_names
from simulator.options.catalog import OPTIONS
from simulator.simulate import Inputs, Progress
from simulator.system.plan import MAX_CHIPS, SystemPlan, check_plan
from simulator.system.run import SystemRun, simulate_system
from simulator.system.shard import model_sizing, plain_sizing, shard_model, shard_plain


def plan_from_args(args: argparse.Namespace) -> SystemPlan:
    """The plan the options name; each a chip count by its option's rule."""
    for name in ("chips", "tp", "pp", "ep"):
        if getattr(args, name) is not None:
            OPTIONS[f"--{name}"].check(getattr(args, name))
    chips = args.chips if args.chips is not None else args.tp * args.pp
    if chips > MAX_CHIPS:
        raise AccsimError(f"T x P = {chips:,} chips is more than the {MAX_CHIPS:,} a "
                          "plan may have", field="--chips")
    if chips == 1 and args.ep > 1:  # one chip runs no plan check: say it here
        raise AccsimError(f"expert parallelism {args.ep} must divide the chips ({chips})",
                          field="--ep")
    return SystemPlan(chips=chips, tp=args.tp, pp=args.pp, ep=args.ep,
                      overlap=args.overlap)


def check_fit(inputs: Inputs, plan: SystemPlan, llm=None, *,
              ignore: bool = False) -> Capacity:
    """The capacity rule (simulator.system.capacity) for one chip of `plan` running the LLM
    step or the plain workload, before any simulation: the plan's own rules first."""
    platform_file = inputs.platform_source.path if inputs.platform_source else None
    if llm is None:  # the plan's row_parallel names are checked before they are used
        check_mapping_names(inputs.mapping, inputs.workload,
                            file=inputs.mapping_source.path if inputs.mapping_source
                            else None)
    sizing = model_sizing(llm, inputs.platform) if llm is not None else \
        plain_sizing(inputs.workload, inputs.platform,
                     frozenset(inputs.mapping.row_parallel))
    check_plan(plan, inputs.platform, sizing.limits, platform_file=platform_file)
    return check(plan, sizing, inputs.platform, ignore=ignore,
                 platform_file=platform_file)


def run_plan(inputs: Inputs, plan: SystemPlan, llm=None, *, engine: str = "auto",
             progress: Progress | None = None, ignore_capacity: bool = False
             ) -> SystemRun:
    """Shard the workload (an LLM step of --model, or the plain workload) and simulate
    one chip's share."""
    platform_file = inputs.platform_source.path if inputs.platform_source else None
    if llm is not None:
        sharded = shard_model(llm, plan, inputs.platform, platform_file=platform_file)
    else:  # the plan's names are the workload's, not its shard's
        check_mapping_names(inputs.mapping, inputs.workload,
                            file=inputs.mapping_source.path if inputs.mapping_source
                            else None)
        sharded = shard_plain(inputs.workload, plan, inputs.platform,
                              platform_file=platform_file,
                              row_parallel=frozenset(inputs.mapping.row_parallel))
    return simulate_system(inputs, plan, sharded, engine=engine, progress=progress,
                           ignore_capacity=ignore_capacity)
