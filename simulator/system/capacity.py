"""The one capacity rule (DESIGN.md section 14), applied on every path before any work:
what a chip holds - the weights of the operators it runs (an operator with `repeat: n`
holds n copies), the KV cache its attention reads, and the activations live at once -
must fit `offchip.capacity_bytes`. A chip that cannot is refused, naming the bytes
needed, the bytes available and the smallest chip count and T x P split that would fit;
`--ignore-capacity` lets a deliberate what-if go on, stamped on what it writes. A
platform that gives no capacity is not checked, and the run says so.

The footprint of a plan comes from a Sizing: for a Hugging Face model from its config
(system.shard.model_sizing: all experts and the embedding table counted), for any
other workload from its operators (operators_footprint, system.shard.plain_sizing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.model.formats import packed_bytes
from simulator.system.plan import (MAX_SEARCH_CHIPS, ModelLimits, SystemPlan,
                                   candidate_plans)
from simulator.inputs.workload import Attention, Conv2d, Gemm, is_collective

# The option that lets a deliberate what-if past the check, stamped on what it writes.
FLAG = "--ignore-capacity"


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
    """What a workload allows a plan to split, and the footprint of any plan."""

    limits: ModelLimits
    footprint: Callable[[SystemPlan], Footprint]


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
    return _stored_bytes(op.kv_dtype or op.dtype,
                         2 * op.batch * op.kv_heads * op.kv_len * op.head_dim, default_bytes)


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


def operators_footprint(operators: Iterable, default_bytes: int) -> Footprint:
    """The footprint of a chip running these operators: weights and KV of every
    operator times its repeat (each repeat is another layer's copy), and activations as
    twice the largest output (an operator's input and output live at once)."""
    ops = list(operators)
    return Footprint(
        sum(operator_weight_bytes(op, default_bytes) * op.repeat for op in ops),
        sum(operator_kv_bytes(op, default_bytes) * op.repeat for op in ops),
        2 * max((operator_output_bytes(op, default_bytes) for op in ops), default=0))


def smallest_fitting(plan: SystemPlan, limits: ModelLimits, capacity_bytes: int,
                     footprint: Callable[[SystemPlan], Footprint]) -> SystemPlan | None:
    """The plan with the fewest chips (then fewest stages) whose footprint fits."""
    for candidate in candidate_plans(plan, limits):
        if footprint(candidate).total_bytes <= capacity_bytes:
            return candidate
    return None


def refusal(plan: SystemPlan, limits: ModelLimits, capacity_bytes: int,
            footprint: Callable[[SystemPlan], Footprint], need: Footprint, *,
            platform_file: str | None = None, linked: bool = True) -> AccsimError:
    """The one-line refusal: bytes needed, bytes available, the smallest fit."""
    fit = smallest_fitting(plan, limits, capacity_bytes, footprint)
    links = "" if linked else "; more chips need the platform's interconnect table"
    advice = (f"smallest fitting T x P: {fit.tp} x {fit.pp} ({fit.flags()}, "
              f"{gb(footprint(fit).total_bytes)} per chip{links})" if fit else
              f"no plan of up to {MAX_SEARCH_CHIPS} chips fits")
    return AccsimError(
        f"does not fit {plan.chips} chip{'s' if plan.chips > 1 else ''} "
        f"(T x P = {plan.tp} x {plan.pp}): each chip needs {need.total_bytes:,} bytes "
        f"({gb(need.total_bytes)}: weights {gb(need.weight_bytes)} + KV "
        f"{gb(need.kv_bytes)} + activations {gb(need.activation_bytes)}) of "
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
        return None


def check(plan: SystemPlan, sizing: Sizing, platform: Platform, *,
          ignore: bool = False, platform_file: str | None = None) -> Capacity:
    """Apply the rule to one chip of `plan` before any work: a Capacity, or the refusal
    (unless `ignore`)."""
    need = sizing.footprint(plan)
    capacity = platform.offchip.capacity_bytes
    outcome = Capacity(need, capacity, ignore)
    if outcome.fits is False and not ignore:
        raise refusal(plan, sizing.limits, capacity, sizing.footprint, need,
                      platform_file=platform_file,
                      linked=platform.interconnect is not None)
    return outcome
