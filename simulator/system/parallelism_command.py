"""The multi-chip plan of `accsim run` and `accsim compare` (DESIGN.md sections 14 and
22) from their options `--chips N --tp T --pp P --ep E --overlap MODE --collectives MODE
--mesh AxB` (declared in simulator.options.catalog). `--chips 1` (the default) is
today's single-chip run, unchanged; more chips shard the workload
(simulator.system.shard) and run it through simulator.system.sharded_run. Options are validated
before anything is simulated."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from simulator.collectives.cost import with_collectives
from simulator.errors import AccsimError
from simulator.inputs.loader import excerpt
from simulator.numbers import decimal_int
from simulator.options.catalog import OPTIONS
from simulator.simulate import Inputs
from simulator.system.parallelism import MAX_CHIPS, SystemPlan, system_plan
from simulator.collectives.wiring import dimensions, group_shape


def plan_from_args(args: argparse.Namespace) -> SystemPlan:
    """The plan the options name; each a chip count by its option's rule."""
    for name in ("chips", "tp", "pp", "ep"):
        if getattr(args, name) is not None:
            OPTIONS[f"--{name}"].check(getattr(args, name))
    return system_plan(args.chips, args.tp, args.pp, args.ep, args.overlap)


# The most dimensions a wiring has (simulator.inputs.platform.Interconnect.dimensions).
MAX_DIMENSIONS = 8


def parse_mesh(text: str | None) -> list[int] | None:
    """`--mesh 4x4` as [4, 4]: ASCII digits only (str.isdigit also takes '²', which
    int() refuses, and other scripts' digits, issue 42), at most a wiring's
    MAX_DIMENSIONS sizes."""
    if text is None:
        return None
    parts = text.lower().split("x", MAX_DIMENSIONS)
    try:
        sizes = [decimal_int(part) if part.isdigit() else -1 for part in parts]
    except ValueError:
        sizes = []
    if not 1 <= len(sizes) <= MAX_DIMENSIONS or not all(1 <= s <= MAX_CHIPS
                                                         for s in sizes):
        raise AccsimError(f"a mesh is chips per dimension joined by x (e.g. 4x4): 1 to "
                          f"{MAX_DIMENSIONS} sizes of 1 to {MAX_CHIPS}, found "
                          f"{excerpt(text)}", field="--mesh")
    return sizes


def applied_collectives(args: argparse.Namespace, inputs: Inputs,
                        plan: SystemPlan) -> Inputs:
    """The inputs whose platform runs collectives as --collectives and --mesh say."""
    mesh = parse_mesh(getattr(args, "mesh", None))
    mode = getattr(args, "collectives", None)
    if mesh is not None and math.prod(mesh) != plan.tp:
        raise AccsimError(f"mesh {'x'.join(map(str, mesh))} holds {math.prod(mesh)} chips; "
                          f"the tensor-"
                          f"parallel group has T = {plan.tp}", field="--mesh")
    if (mesh is not None or mode is not None) and inputs.platform.interconnect is None:
        raise AccsimError(f"--collectives and --mesh need the platform's interconnect "
                          f"table: {inputs.platform.name} has none",
                          field="--mesh" if mesh is not None else "--collectives")
    platform = with_collectives(inputs.platform, mode, mesh)
    if mesh is not None:  # the shape must fit the wiring: said now, not mid-run
        group_shape(plan.tp, dimensions(platform.interconnect), mesh)
    return replace(inputs, platform=platform)
