"""`accsim run --precision PLAN.yaml`: the plan is read, applied to the run's workload
before anything is simulated (precision.resolve), and what it chose is printed and
written to the result's `precision` block."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from simulator.errors import AccsimError
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import load_model

if TYPE_CHECKING:
    from simulator.precision.resolve import AppliedPlan


def applied(args: argparse.Namespace, inputs: Inputs, *,
            single_chip: bool) -> tuple[Inputs, AppliedPlan | None]:
    """The inputs with the plan of --precision applied, and what it chose (None
    without --precision)."""
    if not args.precision:
        return inputs, None
    if not single_chip:
        raise AccsimError("--precision applies to a single-chip run for now",
                          field="--precision")
    # Imported here: the plan's models and the resolver (emulation included) are a
    # few ms of start-up that a run without --precision does not need.
    from simulator.precision.plan import PrecisionPlan
    from simulator.precision.resolve import apply_plan
    plan, source = load_model(args.precision, PrecisionPlan)
    result = apply_plan(plan, inputs.workload, inputs.platform, file=source.path)
    return replace(inputs, workload=result.workload), result
