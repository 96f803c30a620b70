"""`accsim serve --precision PLAN.yaml`: the precision plan `accsim run --precision`
takes (simulator.precision), applied to every workload serving costs (each LLM
iteration's, each plain batch's) before it is costed, so a served iteration is priced
as a run of the same step under the plan. What a replica stores changes with it: the
weights and the KV cache at the plan's formats (stored_bytes), which the capacity rule
(simulator.system.capacity.planned_sizing) and the KV cache's size take."""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.system.capacity import StoredShare, stored_share
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import Source, load_model
from simulator.precision.precision_plan import PrecisionPlan
from simulator.precision.format_choice import AppliedPlan, apply_plan
from simulator.inputs.workload import Workload, unmatched_layer_types
from simulator.output.terminal import warn


@dataclass
class ServingPrecision:
    """One plan on one platform; GEMM emulations are kept across the workloads it is
    applied to (a grid of iterations has many operators of equal shape)."""

    plan: PrecisionPlan
    source: Source
    platform: Platform
    emulations: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str, platform: Platform) -> ServingPrecision:
        plan, source = load_model(path, PrecisionPlan)
        return cls(plan, source, platform)

    def applied(self, workload: Workload) -> AppliedPlan:
        return apply_plan(self.plan, workload, self.platform, file=self.source.path,
                          emulations=self.emulations)

    def warn_unmatched(self, workload: Workload) -> None:
        """A warning per layer_types entry that selects no operator of `workload` (an
        iteration or batch every served one is like), as `run --precision` warns."""
        for warning in unmatched_layer_types(self.plan.layer_types, workload):
            warn(self.source.path, warning)

    def apply(self, workload: Workload) -> Workload:
        return self.applied(workload).workload

    def record(self, workload: Workload) -> dict:
        """What the plan chose for `workload`'s operators: the result's `precision`
        block, less the plan's path (the manifest records it with its sha256, relative
        to the result's folder, so the block is the same wherever it is served again)."""
        return {key: value for key, value in self.applied(workload).record().items()
                if key != "file"}

    def identity(self) -> dict:
        """What costs under the plan depend on: its content (never its path)."""
        return self.plan.model_dump(mode="json")

    def stored_bytes(self, workload: Workload, default_bytes: int) -> StoredShare:
        """How the plan scales what a replica stores, from one iteration of the whole
        model (`workload`, before the plan): simulator.system.capacity.stored_share of its
        operators before and under the plan. `default_bytes`: an operator's element
        size where it names no dtype."""
        applied = self.apply(workload)
        if any(old.name != new.name for old, new in
               zip(workload.operators, applied.operators, strict=True)):
            raise AccsimError("the plan reordered the workload's operators",
                              file=self.source.path)
        return stored_share(workload.operators, applied.operators, default_bytes)
