"""`accsim serve --precision PLAN.yaml`: the precision plan `accsim run --precision`
takes (simulator.precision), applied to every workload serving costs (each LLM
iteration's, each plain batch's) before it is costed, so a served iteration is priced
as a run of the same step under the plan. What a replica stores changes with it: the
weights and the KV cache at the plan's formats (stored_bytes), which the capacity rule
and the KV cache's size take (planned_sizing)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from simulator.system.capacity import Footprint, Sizing, operator_kv_bytes, operator_weight_bytes
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import Source, load_model
from simulator.precision.plan import PrecisionPlan
from simulator.precision.resolve import AppliedPlan, apply_plan
from simulator.system.plan import SystemPlan
from simulator.inputs.workload import Workload


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
        model (`workload`, before the plan): the weight bytes of its array operators at
        the plan's formats against their own (every layer's copy counted), and the KV
        bytes its attention reads likewise. `default_bytes`: an operator's element size
        where it names no dtype."""
        applied = self.apply(workload)
        pairs = list(zip(workload.operators, applied.operators, strict=True))
        if any(old.name != new.name for old, new in pairs):
            raise AccsimError("the plan reordered the workload's operators",
                              file=self.source.path)
        def total(measure, index: int, among: list) -> int:
            return sum(measure(pair[index], default_bytes) * pair[0].repeat
                       for pair in among)
        layered = [pair for pair in pairs if pair[0].repeat > 1]  # repeated per layer
        return StoredShare(
            total(operator_weight_bytes, 0, pairs), total(operator_weight_bytes, 1, pairs),
            total(operator_kv_bytes, 0, pairs), total(operator_kv_bytes, 1, pairs),
            layers_freed=total(operator_weight_bytes, 0, layered)
            - total(operator_weight_bytes, 1, layered))


@dataclass(frozen=True)
class StoredShare:
    """The weight and KV bytes of a model's array operators before and under a plan,
    and the weight bytes it frees on the operators every layer repeats (the rest, the
    lm_head, sit on the last pipeline stage)."""

    weights_before: int
    weights_after: int
    kv_before: int
    kv_after: int
    layers_freed: int = 0

    def weight_bytes(self, model_weight_bytes: int) -> int:
        """The whole model's weight bytes under the plan: its array operators' weights
        at the plan's formats, the rest (embedding table, norms) as they are."""
        return model_weight_bytes - self.weights_before + self.weights_after

    def stage_weight_bytes(self, stages: list[tuple[int, int]]) -> int:
        """The busiest pipeline stage's weight bytes under the plan, from each stage's
        (weight bytes, layers): a stage's layers free their share of layers_freed, the
        last stage also what the plan frees on the lm_head."""
        layers = sum(count for _, count in stages)
        outer_freed = self.weights_before - self.weights_after - self.layers_freed
        return max(held - math.ceil(Fraction(self.layers_freed * count, layers))
                   - (outer_freed if stage == len(stages) - 1 else 0)
                   for stage, (held, count) in enumerate(stages))

    def kv_ratio(self) -> Fraction:
        return Fraction(self.kv_after, self.kv_before) if self.kv_before else Fraction(1)

    def kv_bytes(self, kv_bytes: int) -> int:
        """KV bytes (per token, or of a whole cache) under the plan."""
        return math.ceil(kv_bytes * self.kv_ratio())


def planned_sizing(sizing: Sizing, share: StoredShare, model_weight_bytes: int, *,
                   plan: SystemPlan | None = None,
                   stages: list[tuple[int, int]] | None = None) -> Sizing:
    """The capacity sizing of a replica under a plan: each chip's weight bytes scaled as
    its shard's are, and its KV bytes as the attention's are; activations as they were.
    A pipelined `plan` gives each stage's (weight bytes, layers) as `stages`: its chips
    hold the busiest stage under the plan (StoredShare.stage_weight_bytes), and other
    plans (the refusal's advice) scale as the stages' sum does."""
    whole = sum(held for held, _ in stages) if stages else model_weight_bytes
    weights = Fraction(share.weight_bytes(whole), whole or 1)

    def footprint(candidate) -> Footprint:
        need = sizing.footprint(candidate)
        held = share.stage_weight_bytes(stages) if stages and candidate == plan else \
            math.ceil(need.weight_bytes * weights)
        return Footprint(held, share.kv_bytes(need.kv_bytes), need.activation_bytes)

    return Sizing(sizing.limits, footprint)
