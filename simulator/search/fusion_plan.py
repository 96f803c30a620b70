"""The fusion plan a run used (DESIGN.md section 15) and what it saved: each group's
members (a GEMM's prologue norm, its epilogue; a vector run's), the members its
producer's tiling could not keep (with why), and the off-chip bytes and cycles the group
saves against running its members one at a time (each member lowered on its own under
its own tiling and replayed on the same engine). A norm recomputed in several GEMMs'
prologues is counted alone once, in its first consumer's group."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator.inputs.platform import Platform
from simulator.lowering import LoweredOperator, lower_compute, lower_vector
from simulator.program.streamed import DEFAULT_BLOCK_STEPS
from simulator.mapping.plan import Mapping, merged_spec
from simulator.search.default import SearchCache
from simulator.search.resolve import Resolved, resolve_tiling
from simulator.inputs.workload import is_compute


@dataclass(frozen=True)
class FusionGroup:
    """One group (a GEMM or conv's epilogue and a GEMM's prologue, or a vector run), all
    its runs together."""

    producer: str
    members: tuple[str, ...]                  # the epilogue (or the vector run)
    dropped: tuple[tuple[str, str], ...]      # (member, reason) the capacity check gave back
    offchip_bytes_saved: int
    cycles_saved: int
    prologue: tuple[str, ...] = ()            # norms applied to the A tiles as they load

    def as_dict(self) -> dict:
        record = {"producer": self.producer, "members": list(self.members),
                  "dropped": [{"name": n, "reason": r} for n, r in self.dropped],
                  "offchip_bytes_saved": self.offchip_bytes_saved,
                  "cycles_saved": self.cycles_saved}
        return record | ({"prologue": list(self.prologue)} if self.prologue else {})

    @property
    def shown(self) -> tuple[str, ...]:
        """Every member as the plan lists it: prologue norms first, marked."""
        return tuple(f"{name} (prologue)" for name in self.prologue) + self.members


def _cost(lowered: LoweredOperator, replay: Callable[[LoweredOperator], int]) -> tuple:
    return lowered.counters.offchip_bytes * lowered.runs, replay(lowered) * lowered.repeat


def fusion_groups(resolved: list[Resolved], lowered: list[LoweredOperator],
                  mapping: Mapping, platform: Platform,
                  replay: Callable[[LoweredOperator], int],
                  searches: SearchCache | None = None) -> list[FusionGroup]:
    """Every group of the run (and every producer whose members were all dropped), with
    its savings; `replay(lowered)` gives one run's cycles (all instances). Groups whose
    fusion a plan's `fuse:` asked are listed too. `searches`: the run's default-search
    cache, for the members resolved alone."""
    by_name = {op.name: op for op in lowered}
    counted: set[str] = set()    # prologue norms already costed alone
    groups = []
    for entry in resolved:
        if not entry.fused and not entry.dropped:
            continue
        fused = by_name[entry.op.name]
        bytes_fused, cycles_fused = _cost(fused, replay)
        alone = lower_compute(entry.op, entry.tiling, platform, fused=(),
                              block_steps=DEFAULT_BLOCK_STEPS) \
            if is_compute(entry.op) else lower_vector(entry.op, entry.tiling, platform,
                                                      block_steps=DEFAULT_BLOCK_STEPS)
        bytes_alone, cycles_alone = _cost(alone, replay)
        for member in entry.fused:
            if member.op.name in counted:
                continue
            counted.update([member.op.name] if member.prologue else [])
            tiling = resolve_tiling(member.op, merged_spec(mapping, member.op), platform,
                                    searches=searches)
            b, c = _cost(lower_vector(member.op, tiling, platform,
                                      block_steps=DEFAULT_BLOCK_STEPS), replay)
            bytes_alone, cycles_alone = bytes_alone + b, cycles_alone + c
        groups.append(FusionGroup(
            entry.op.name, tuple(m.op.name for m in entry.fused if not m.prologue),
            tuple((d.name, d.reason) for d in entry.dropped), bytes_alone - bytes_fused,
            cycles_alone - cycles_fused,
            tuple(m.op.name for m in entry.fused if m.prologue)))
    return groups
