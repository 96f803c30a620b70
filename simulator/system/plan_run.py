"""A SystemPlan checked and run: the plan's rules and the capacity rule first, for one
chip of the plan running an LLM step or a plain workload, then the sharded run. What
`accsim run --chips`, the Python API and the sweeps call."""

from __future__ import annotations

from simulator.mapping.plan import check_mapping_names
from simulator.simulate import Inputs, Progress
from simulator.system.capacity import Capacity, check
from simulator.system.parallelism import SystemPlan, check_plan
from simulator.system.sharded_run import SystemRun, simulate_system
from simulator.system.shard import model_sizing, plain_sizing, shard_model, shard_plain


def check_fit(inputs: Inputs, plan: SystemPlan, llm=None, *,
              ignore: bool = False, planned: bool = False) -> Capacity:
    """The capacity rule (simulator.system.capacity) for one chip of `plan` running the LLM
    step or the plain workload, before any simulation: the plan's own rules first.
    `planned`: a precision plan made inputs.workload, so an LLM step's weights and KV
    are sized at its formats (a plain workload's operators carry them already)."""
    platform_file = inputs.platform_source.path if inputs.platform_source else None
    if llm is None:  # the plan's row_parallel names are checked before they are used
        check_mapping_names(inputs.mapping, inputs.workload,
                            file=inputs.mapping_source.path if inputs.mapping_source
                            else None)
    sizing = model_sizing(llm, inputs.platform, inputs.workload if planned else None,
                          platform_file) \
        if llm is not None else \
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
