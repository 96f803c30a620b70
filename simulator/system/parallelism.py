"""The parallelism plan of a multi-chip run (DESIGN.md section 14): N chips split T
ways by tensor and P ways by pipeline (T x P = N), experts spread E ways, and the
plans the capacity check (simulator.system.capacity) searches for the smallest that fits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from simulator.inputs.platform import Platform, Strict
from simulator.inputs.workload import MAX_CHIPS
from simulator.errors import AccsimError
from simulator.system.padding import buildable_near, head_layout
from simulator.collectives.devices import devices_spanned
from simulator.collectives.wiring import dimensions, group_shape

# Largest system the capacity search proposes (a TPU v5e pod is 256 chips).
MAX_SEARCH_CHIPS = 4096


class SystemPlan(Strict):
    """chips = tp x pp; ep spreads experts over the same chips (E divides N); overlap
    says whether collectives overlap compute (simulator.system.overlap)."""

    chips: int = Field(default=1, ge=1, le=MAX_CHIPS)
    tp: int = Field(default=1, ge=1, le=MAX_CHIPS)
    pp: int = Field(default=1, ge=1, le=MAX_CHIPS)
    ep: int = Field(default=1, ge=1, le=MAX_CHIPS)
    overlap: Literal["none", "independent", "decomposed"] = "none"

    @property
    def single_chip(self) -> bool:
        return self.chips == 1

    def flags(self) -> str:
        """The command-line spelling of this plan."""
        return f"--chips {self.chips} --tp {self.tp} --pp {self.pp} --ep {self.ep}" + (
            f" --overlap {self.overlap}" if self.overlap != "none" else "")


@dataclass(frozen=True)
class ModelLimits:
    """What a model's shape allows a plan to split (None: no such limit)."""

    heads: int | None = None
    kv_heads: int | None = None  # None: one per query head (simulator.system.padding)
    experts: int | None = None   # None: a dense model
    layers: int | None = None


def tp_splits_kv(tp: int, kv_heads: int) -> bool:
    """KV heads split evenly T ways, or each KV head replicated on T / kv_heads chips."""
    return kv_heads % tp == 0 or tp % kv_heads == 0


def check_heads(tp: int, heads: int, kv_heads: int, field: str) -> None:
    """Heads need not divide by T (they are padded, simulator.system.padding); refuse
    only a layout one chip's grouped-query attention cannot run."""
    layout = head_layout(heads, kv_heads, tp)
    if layout.buildable:
        return
    near = " or ".join(str(t) for t in buildable_near(heads, kv_heads, tp) if t)
    raise AccsimError(
        f"tensor parallelism {tp} cannot be built: the {heads} query heads padded to "
        f"{layout.padded_heads} give each chip {layout.per_chip}, which read "
        f"{layout.kv_per_chip} of the {kv_heads} KV heads: not a whole number of query "
        f"heads per KV head" + (f" (T buildable near it: {near})" if near else ""),
        field=field)


def flag(name: str) -> str:
    return f"--{name}"


def check_plan(plan: SystemPlan, platform: Platform, limits: ModelLimits, *,
               platform_file: str | None = None,
               field: Callable[[str], str] = flag) -> None:
    """Raise one AccsimError for the first rule the plan breaks. `field` names a plan
    field as the user wrote it (a flag by default; a spec key from sweeps)."""
    if plan.tp * plan.pp != plan.chips:
        raise AccsimError(f"T x P = {plan.tp} x {plan.pp} = {plan.tp * plan.pp} must "
                          f"equal the chips ({plan.chips})", field=field("chips"))
    if plan.chips > 1 and platform.interconnect is None:
        raise AccsimError(f"{plan.chips} chips need links between them: platform "
                          f"{platform.name} has no interconnect table",
                          file=platform_file, field="interconnect")
    if plan.chips > 1:  # each group sits on the wiring (DESIGN.md section 22)
        for group in sorted({plan.tp, plan.ep, 2 if plan.pp > 1 else 1} - {1}):
            try:
                group_shape(devices_spanned(group, platform.interconnect),
                            dimensions(platform.interconnect))
            except AccsimError as exc:
                raise AccsimError(exc.rule, file=platform_file, field=exc.field) from None
    if limits.heads is not None:
        check_heads(plan.tp, limits.heads, limits.kv_heads or limits.heads, field("tp"))
    if limits.layers is not None and plan.pp > limits.layers:
        raise AccsimError(f"pipeline parallelism {plan.pp} exceeds the layers "
                          f"({limits.layers}): a stage needs at least one layer",
                          field=field("pp"))
    if plan.ep > 1 and limits.experts is None:
        raise AccsimError(f"expert parallelism {plan.ep} needs a mixture-of-experts model",
                          field=field("ep"))
    if limits.experts is not None and limits.experts % plan.ep:
        raise AccsimError(f"expert parallelism {plan.ep} must divide the experts "
                          f"({limits.experts})", field=field("ep"))
    if plan.chips % plan.ep:
        raise AccsimError(f"expert parallelism {plan.ep} must divide the chips "
                          f"({plan.chips})", field=field("ep"))
    if plan.tp % plan.ep:
        raise AccsimError(f"expert parallelism {plan.ep} must divide the tensor "
                          f"parallelism ({plan.tp}): a stage's experts are spread over "
                          "its T chips", field=field("ep"))


def candidate_plans(plan: SystemPlan, limits: ModelLimits) -> Iterator[SystemPlan]:
    """Plans the capacity search tries, fewest chips first, then the fewest pipeline
    stages (tensor parallelism stays within a host's fast links); E kept."""
    for chips in range(plan.ep, MAX_SEARCH_CHIPS + 1, plan.ep):
        for pp in range(1, chips + 1):
            tp, rest = divmod(chips, pp)
            if rest or tp % plan.ep or (limits.layers is not None and pp > limits.layers):
                continue
            if limits.heads is not None and limits.heads % tp:
                continue
            if limits.kv_heads is None or tp_splits_kv(tp, limits.kv_heads):
                yield SystemPlan(chips=chips, tp=tp, pp=pp, ep=plan.ep)


def system_plan(chips: int | None, tp: int = 1, pp: int = 1, ep: int = 1,
                overlap: str = "none") -> SystemPlan:
    """The plan `--chips N --tp T --pp P --ep E --overlap MODE` name (chips default
    T x P), refused where it cannot be one: more chips than MAX_CHIPS, or expert
    parallelism on one chip (no plan check runs there). Each count's own rule is its
    option's (simulator.options)."""
    chips = chips if chips is not None else tp * pp
    if chips > MAX_CHIPS:
        raise AccsimError(f"T x P = {chips:,} chips is more than the {MAX_CHIPS:,} a "
                          "plan may have", field="--chips")
    if chips == 1 and ep > 1:  # one chip runs no plan check: say it here
        raise AccsimError(f"expert parallelism {ep} must divide the chips ({chips})",
                          field="--ep")
    return SystemPlan(chips=chips, tp=tp, pp=pp, ep=ep, overlap=overlap)
