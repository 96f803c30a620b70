"""A precision plan file applied to a run's inputs (`accsim run --precision PLAN.yaml`,
the API's `precision=`): the plan is read and applied to the workload before anything
is simulated (precision.format_choice); what it chose is printed and written to the result's
`precision` block by the caller."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from simulator.errors import AccsimError
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import load_model
from simulator.inputs.workload import unmatched_layer_types
from simulator.output.terminal import warn

if TYPE_CHECKING:
    from simulator.precision.format_choice import AppliedPlan


def applied(plan_file: str | None, inputs: Inputs, *,
            single_chip: bool) -> tuple[Inputs, AppliedPlan | None]:
    """The inputs with the plan in `plan_file` applied, and what it chose (None
    without a plan)."""
    if plan_file is None:
        return inputs, None
    if not plan_file.strip():
        raise AccsimError("is empty: name a precision plan file", field="--precision")
    if not single_chip:
        raise AccsimError("--precision applies to a single-chip run for now",
                          field="--precision")
    # Imported here: the plan's models and the resolver (emulation included) are a
    # few ms of start-up that a run without --precision does not need.
    from simulator.precision.precision_plan import PrecisionPlan
    from simulator.precision.format_choice import apply_plan
    plan, source = load_model(plan_file, PrecisionPlan)
    result = apply_plan(plan, inputs.workload, inputs.platform, file=source.path)
    for warning in unmatched_layer_types(plan.layer_types, inputs.workload):
        warn(source.path, warning)  # as a tiling plan's (named_inputs.warn_unmatched)
    return replace(inputs, workload=result.workload), result
