"""The one capacity rule (DESIGN.md sections 14 and 19), applied on every path (run,
compare, serve, sweep points, review, the deployment search) before any work: what a
chip holds - the weights of the operators it runs, the KV cache its attention reads,
and the activations live at once - must fit `offchip.capacity_bytes`, at the formats a
precision plan chooses (planned_sizing). A chip that cannot is refused, naming the
bytes needed, the bytes available and the smallest chip count and T x P split that
would fit; `--ignore-capacity` lets a deliberate what-if go on, stamped on what it
writes. A platform that gives no capacity is not checked, and the run says so.

A plain workload may leave two things unsaid (DESIGN.md section 19): whether an
operator's `repeat` calls other layers' weights or the same ones (`weights: distinct |
shared`), and whether an attention's K and V are a cache held across steps (`kv_cache`;
the HF frontend says both). The rule reads an unsaid workload both ways: it refuses only
what fits under neither reading, and where the reading decides, it warns with both
figures and runs (Capacity.note).

The footprint of a plan comes from a Sizing: for a Hugging Face model from its config
(system.shard.model_sizing: all experts and the embedding table counted), for any
other workload from its operators (operators_footprint, system.shard.plain_sizing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.model.formats import packed_bytes
from simulator.system.parallelism import (MAX_SEARCH_CHIPS, ModelLimits, SystemPlan,
                                   candidate_plans)
from simulator.inputs.workload import Attention, Conv2d, Gemm, is_collective

# The option that lets a deliberate what-if past the check, stamped on what it writes.
FLAG = "--ignore-capacity"
# The two readings of what a workload leaves unsaid: the largest (an unmarked repeat
# holds its own layer's weights, an unmarked attention's K/V are a cache) and the
# smallest (the same weights called again; K/V live only while the operator runs).
LARGEST, SMALLEST = "largest", "smallest"


@dataclass(frozen=True)
class Footprint:
    """Off-chip bytes one chip holds for a plan: its weight shard, its KV cache and
    the activations live at once."""

    weight_bytes: int
    kv_bytes: int
    activation_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes


@dataclass(frozen=True)
class Sizing:
    """What a workload allows a plan to split, and the footprint of any plan under the
    largest reading of the workload; `least`, where the workload leaves its reading
    open, the footprint under the smallest."""

    limits: ModelLimits
    footprint: Callable[[SystemPlan], Footprint]
    least: Callable[[SystemPlan], Footprint] | None = None


def gb(count: int) -> str:
    return f"{count / 1e9:.2f} GB"


def _stored_bytes(dtype: str | None, elements: int, default: int) -> int:
    """Bytes of `elements` stored in `dtype` (packed formats included, simulator.model.formats),
    or at `default` bytes each where no dtype is given."""
    return packed_bytes(dtype, elements) if dtype else elements * default


def operator_weight_bytes(op, default_bytes: int) -> int:
    """One copy of a GEMM's B operand (every batch instance's) or a conv's kernel, at
    the operator's weight dtype: what the chip keeps in HBM for it."""
    dtype = getattr(op, "weight_dtype", None) or op.dtype
    if isinstance(op, Gemm):
        return _stored_bytes(dtype, op.batch * op.k * op.n, default_bytes)
    if isinstance(op, Conv2d):
        return _stored_bytes(dtype, op.kh * op.kw * op.cin // op.groups * op.cout,
                             default_bytes)
    return 0


def operator_kv_bytes(op, default_bytes: int) -> int:
    """One copy of the K and V an attention operator reads (its KV cache)."""
    if not isinstance(op, Attention):
        return 0
    per_key = op.kv_latent or 2 * op.head_dim   # one latent serves as K and V (MLA)
    return _stored_bytes(op.kv_dtype or op.dtype,
                         op.batch * op.kv_heads * op.kv_len * per_key, default_bytes)


def operator_output_bytes(op, size: int) -> int:
    """The bytes an operator's output holds at `size` bytes an element (what crosses a
    pipeline boundary, what an activation takes)."""
    if isinstance(op, Gemm):
        return op.batch * op.m * op.n * size
    if isinstance(op, Conv2d):
        return op.batch * op.ho * op.wo * op.cout * size
    if is_collective(op):
        return op.payload_bytes
    if hasattr(op, "vector"):
        return op.vector().output_elements * size
    return op.batch * op.heads * op.q_len * op.head_dim * size  # attention


def weight_copies(op, reading: str = LARGEST) -> int:
    """The copies of an operator's weights a chip holds: one per repeat, or one where
    the repeats call the same weights (`weights: shared`, or unsaid under SMALLEST)."""
    said = getattr(op, "weights", None)
    return 1 if said == "shared" or (said is None and reading == SMALLEST) else op.repeat


def holds_kv_cache(op, reading: str = LARGEST) -> bool:
    """Whether an attention's K and V are a cache the chip holds for every repeat
    (`kv_cache: true`, or unsaid under LARGEST) rather than its live activations."""
    said = getattr(op, "kv_cache", None)
    return said if said is not None else reading == LARGEST


def reading_is_open(operators: Iterable) -> bool:
    """Whether the two readings of these operators can differ: some repeated weights or
    some attention whose reading is unsaid."""
    return any((getattr(op, "weights", 1) is None and op.repeat > 1)
               or (isinstance(op, Attention) and op.kv_cache is None) for op in operators)


def operators_footprint(operators: Iterable, default_bytes: int,
                        reading: str = LARGEST) -> Footprint:
    """The footprint of a chip running these operators under a reading: each
    operator's weights times the copies it holds (weight_copies), the K and V of every
    repeat of an attention that holds a cache, and activations as twice the largest
    output (an operator's input and output live at once) or, where larger, an
    attention's own K and V with its Q and output."""
    ops = list(operators)
    attention = [op for op in ops if isinstance(op, Attention)]
    live = [operator_kv_bytes(op, default_bytes) + 2 * operator_output_bytes(
        op, default_bytes) for op in attention if not holds_kv_cache(op, reading)]
    return Footprint(
        sum(operator_weight_bytes(op, default_bytes) * weight_copies(op, reading)
            for op in ops),
        sum(operator_kv_bytes(op, default_bytes) * op.repeat for op in attention
            if holds_kv_cache(op, reading)),
        max(2 * max((operator_output_bytes(op, default_bytes) for op in ops), default=0),
            max(live, default=0)))


def smallest_fitting(plan: SystemPlan, limits: ModelLimits, capacity_bytes: int,
                     footprint: Callable[[SystemPlan], Footprint]) -> SystemPlan | None:
    """The plan with the fewest chips (then fewest stages) whose footprint fits."""
    for candidate in candidate_plans(plan, limits):
        if footprint(candidate).total_bytes <= capacity_bytes:
            return candidate
    return None


def refusal(plan: SystemPlan, limits: ModelLimits, capacity_bytes: int,
            footprint: Callable[[SystemPlan], Footprint], need: Footprint, *,
            platform_file: str | None = None, linked: bool = True,
            least: bool = False) -> AccsimError:
    """The one-line refusal: bytes needed, bytes available, the smallest fit (`least`:
    the figures are the workload's smallest reading, which says so)."""
    fit = smallest_fitting(plan, limits, capacity_bytes, footprint)
    links = "" if linked else "; more chips need the platform's interconnect table"
    reading = (" even as the smallest reading of the workload (unmarked repeats sharing "
               "their weights, unmarked attention K/V no cache)") if least else ""
    advice = (f"smallest fitting T x P: {fit.tp} x {fit.pp} ({fit.flags()}, "
              f"{gb(footprint(fit).total_bytes)} per chip{links})" if fit else
              f"no plan of up to {MAX_SEARCH_CHIPS} chips fits")
    return AccsimError(
        f"does not fit {plan.chips} chip{'s' if plan.chips > 1 else ''} "
        f"(T x P = {plan.tp} x {plan.pp}): each chip needs {need.total_bytes:,} bytes "
        f"({gb(need.total_bytes)}: weights {gb(need.weight_bytes)} + KV "
        f"{gb(need.kv_bytes)} + activations {gb(need.activation_bytes)}){reading} of "
        f"{capacity_bytes:,} bytes ({gb(capacity_bytes)}); {advice} (or {FLAG} for a "
        "what-if)", file=platform_file, field="offchip.capacity_bytes")


def check_capacity(plan: SystemPlan, limits: ModelLimits, capacity_bytes: int,
                   footprint: Callable[[SystemPlan], Footprint], *,
                   platform_file: str | None = None) -> Footprint:
    """The plan's per-chip footprint, or a refusal naming the bytes needed, the bytes
    available and the smallest T x P that would fit."""
    need = footprint(plan)
    if need.total_bytes <= capacity_bytes:
        return need
    raise refusal(plan, limits, capacity_bytes, footprint, need,
                  platform_file=platform_file)


@dataclass(frozen=True)
class Capacity:
    """The outcome of the check for one chip of a plan: its footprint, the capacity
    (None: the platform gives none, nothing was checked) and whether a shortfall was
    let through by --ignore-capacity (`asked`: the flag was given)."""

    footprint: Footprint
    capacity_bytes: int | None
    asked: bool = False
    # the footprint under the largest reading, where only the smallest fits (a warning)
    largest: Footprint | None = None

    @property
    def fits(self) -> bool | None:
        if self.capacity_bytes is None:
            return None
        return self.footprint.total_bytes <= self.capacity_bytes

    @property
    def ignored(self) -> bool:
        return self.asked and self.fits is False

    def record(self) -> dict | None:
        """The result JSON's `capacity` block: only when --ignore-capacity was given."""
        if not self.asked:
            return None
        return {"ignored": self.ignored, "fits": self.fits,
                "needed_bytes_per_chip": self.footprint.total_bytes,
                "weight_bytes_per_chip": self.footprint.weight_bytes,
                "kv_bytes_per_chip": self.footprint.kv_bytes,
                "activation_bytes_per_chip": self.footprint.activation_bytes,
                "capacity_bytes_per_chip": self.capacity_bytes}

    def note(self) -> str | None:
        """A line for the terminal where the check was not the plain 'fits'."""
        need = gb(self.footprint.total_bytes)
        if self.capacity_bytes is None:
            return (f"capacity not checked: the platform gives no offchip.capacity_bytes "
                    f"(each chip needs {need})")
        if self.ignored:
            return (f"capacity IGNORED ({FLAG}): each chip needs {need} of "
                    f"{gb(self.capacity_bytes)}; this what-if cannot run as configured")
        if self.largest is not None:
            return (f"warning: capacity depends on how the workload is read: each chip "
                    f"needs {gb(self.largest.total_bytes)} if its unmarked repeats are "
                    "distinct layers and its unmarked attention K/V a cache (does not "
                    f"fit {gb(self.capacity_bytes)}), {need} if the repeats share their "
                    "weights and K/V are activations (fits); running as the latter. Say "
                    "`weights: distinct|shared` and `kv_cache: true|false` on the "
                    "operators to decide")
        return None


def check(plan: SystemPlan, sizing: Sizing, platform: Platform, *,
          ignore: bool = False, platform_file: str | None = None) -> Capacity:
    """Apply the rule to one chip of `plan` before any work: a Capacity, or the refusal
    (unless `ignore`). Where only the workload's smallest reading fits, it runs under
    that reading and says so (Capacity.note)."""
    need = sizing.footprint(plan)
    capacity = platform.offchip.capacity_bytes
    outcome = Capacity(need, capacity, ignore)
    if outcome.fits is not False:
        return outcome
    least = sizing.least(plan) if sizing.least is not None else None
    if least is not None and least.total_bytes <= capacity:
        return Capacity(least, capacity, ignore, largest=need)
    if not ignore:
        raise refusal(plan, sizing.limits, capacity, sizing.least or sizing.footprint,
                      least or need, platform_file=platform_file,
                      linked=platform.interconnect is not None, least=least is not None)
    return outcome


# --- at a precision plan's formats -------------------------------------------------

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


def stored_share(before: Iterable, after: Iterable, default_bytes: int) -> StoredShare:
    """How a plan scales what a chip stores, from one step of the whole model: the
    operators before the plan and under it (the same operators, in order), their
    weight bytes (each layer's copy counted) and their KV bytes, and the weight bytes
    freed on the operators every layer repeats. `default_bytes`: an operator's element
    size where it names no dtype."""
    pairs = list(zip(before, after, strict=True))

    def total(measure, index: int, among: list) -> int:
        return sum(measure(pair[index], default_bytes) * pair[0].repeat for pair in among)

    layered = [pair for pair in pairs if pair[0].repeat > 1]  # repeated per layer
    return StoredShare(
        total(operator_weight_bytes, 0, pairs), total(operator_weight_bytes, 1, pairs),
        total(operator_kv_bytes, 0, pairs), total(operator_kv_bytes, 1, pairs),
        layers_freed=total(operator_weight_bytes, 0, layered)
        - total(operator_weight_bytes, 1, layered))


def planned_sizing(sizing: Sizing, share: StoredShare, model_weight_bytes: int, *,
                   plan: SystemPlan | None = None,
                   stages: list[tuple[int, int]] | None = None) -> Sizing:
    """The capacity sizing of a model under a precision plan: each chip's weight bytes
    scaled as its shard's are, and its KV bytes as the attention's are; activations as
    they were. A pipelined `plan` gives each stage's (weight bytes, layers) as `stages`:
    its chips hold the busiest stage under the plan (StoredShare.stage_weight_bytes),
    and other plans (the refusal's advice) scale as the stages' sum does."""
    whole = sum(held for held, _ in stages) if stages else model_weight_bytes
    weights = Fraction(share.weight_bytes(whole), whole or 1)

    def footprint(candidate) -> Footprint:
        need = sizing.footprint(candidate)
        held = share.stage_weight_bytes(stages) if stages and candidate == plan else \
            math.ceil(need.weight_bytes * weights)
        return Footprint(held, share.kv_bytes(need.kv_bytes), need.activation_bytes)

    return Sizing(sizing.limits, footprint)
