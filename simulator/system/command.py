"""The multi-chip options of `accsim run` and `accsim compare` (DESIGN.md sections 14
and 22): `--chips N --tp T --pp P --ep E --overlap MODE --collectives MODE --mesh AxB`.
`--chips 1` (the default) is today's single-chip run, unchanged; more chips shard the workload (simulator.system.shard) and run it through
simulator.system.run. Options are validated before anything is simulated."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from simulator.system.capacity import FLAG
from simulator.collectives import with_collectives
from simulator.inputs.platform import COLLECTIVE_MODES
from simulator.errors import AccsimError
from simulator.simulate import Inputs
from simulator.system.overlap import OVERLAP_MODES
from simulator.system.plan import MAX_CHIPS, SystemPlan
from simulator.wiring import dimensions, group_shape


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "multi-chip system (the platform needs an interconnect table)")
    group.add_argument("--chips", type=int, help="chips N = T x P (default: T x P, "
                       "which is 1 without --tp and --pp: one chip, unchanged)")
    group.add_argument("--tp", type=int, default=1, help="tensor parallelism T "
                       "(Megatron for --model; column-parallel GEMM/conv otherwise, row-parallel "
                       "for the GEMMs a plan's row_parallel names)")
    group.add_argument("--pp", type=int, default=1,
                       help="pipeline parallelism P: contiguous stages of layers")
    group.add_argument("--ep", type=int, default=1,
                       help="expert parallelism E (MoE models): divides experts and N")
    group.add_argument("--overlap", choices=OVERLAP_MODES, default="none",
                       help="collectives overlap compute: none (default: they "
                       "serialise), independent (with compute that does not read them) "
                       "or decomposed (also all-gathers / reduce-scatters split into ring "
                       "steps under the GEMM they feed or follow)")
    add_collectives(group)
    group.add_argument("--mesh", metavar="AxB", help="the shape of the tensor-parallel "
                       "group on the wiring's dimensions, inner first (e.g. 4x4; "
                       "default: the squarest that fits; A x B = T)")
    add_ignore_capacity(parser)


def add_collectives(parser) -> None:
    """`--collectives MODE` (run, compare, serve, plan-deployment)."""
    parser.add_argument("--collectives", choices=COLLECTIVE_MODES,
                        help="how collectives run (DESIGN.md section 22): auto (the "
                        "platform's default unless it pins one: the cheapest algorithm "
                        "per wiring dimension for the message size), ring (the flat ring "
                        "of section 14), or one algorithm wherever it applies")


def parse_mesh(text: str | None) -> list[int] | None:
    """`--mesh 4x4` as [4, 4]."""
    if text is None:
        return None
    parts = text.lower().split("x")
    if not all(part.isdigit() and 1 <= int(part) <= MAX_CHIPS for part in parts):
        raise AccsimError(f"a mesh is chips per dimension joined by x (e.g. 4x4), found "
                          f"{text!r}", field="--mesh")
    return [int(part) for part in parts]


def applied_collectives(args: argparse.Namespace, inputs: Inputs,
                        plan: SystemPlan) -> Inputs:
    """The inputs whose platform runs collectives as --collectives and --mesh say."""
    mesh = parse_mesh(getattr(args, "mesh", None))
    mode = getattr(args, "collectives", None)
    if mesh is not None and math.prod(mesh) != plan.tp:
        raise AccsimError(f"mesh {args.mesh} holds {math.prod(mesh)} chips; the tensor-"
                          f"parallel group has T = {plan.tp}", field="--mesh")
    if (mesh is not None or mode is not None) and inputs.platform.interconnect is None:
        raise AccsimError(f"--collectives and --mesh need the platform's interconnect "
                          f"table: {inputs.platform.name} has none",
                          field="--mesh" if mesh is not None else "--collectives")
    platform = with_collectives(inputs.platform, mode, mesh)
    if mesh is not None:  # the shape must fit the wiring: said now, not mid-run
        group_shape(plan.tp, dimensions(platform.interconnect), mesh)
    return replace(inputs, platform=platform)


def add_ignore_capacity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(FLAG, action="store_true", dest="ignore_capacity",
                        help="run even where a chip cannot hold its weights + KV cache + "
                        "activations (offchip.capacity_bytes): a deliberate what-if, "
                        "stamped on the result")


def plan_from_args(args: argparse.Namespace) -> SystemPlan:
    """The plan the options name; each must be a positive whole number."""
    for name in ("chips", "tp", "pp", "ep"):
        value = getattr(args, name)
        if value is not None and not 1 <= value <= MAX_CHIPS:
            raise AccsimError(f"must be a whole number from 1 to {MAX_CHIPS:,}, found "
                              f"{value:,}", field=f"--{name}")
    chips = args.chips if args.chips is not None else args.tp * args.pp
    if chips > MAX_CHIPS:
        raise AccsimError(f"T x P = {chips:,} chips is more than the {MAX_CHIPS:,} a "
                          "plan may have", field="--chips")
    if chips == 1 and args.ep > 1:  # one chip runs no plan check: say it here
        raise AccsimError(f"expert parallelism {args.ep} must divide the chips ({chips})",
                          field="--ep")
    return SystemPlan(chips=chips, tp=args.tp, pp=args.pp, ep=args.ep,
                      overlap=args.overlap)
