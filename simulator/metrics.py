"""Results and their derivations (DESIGN.md section 4): MFU, the stall breakdown,
array-busy split, bytes per level and refetch ratio, per operator and aggregated per
layer_type and for the whole workload.

Per-run engine figures are scaled by the operator's runs (repeat x instances), so every
cycle or byte figure here is for the whole operator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from simulator.config import Platform
from simulator.engines.outcome import Breakdown
from simulator.lowering import LoweredOperator

# Breakdown fields that add up to the total (drain split into its two tails).
STALL_PARTS = ("busy_cycles", "fill_cycles", "input_stall_cycles", "output_stall_cycles",
               "drain_cycles")


@dataclass(frozen=True)
class Totals:
    """Additive figures: cycles and bytes summed over runs, operators or layer types."""

    cycles: int
    busy_cycles: int
    fill_cycles: int
    input_stall_cycles: int
    output_stall_cycles: int
    output_stall_vector_cycles: int
    drain_cycles: int
    vector_tail_cycles: int
    store_tail_cycles: int
    offchip_busy_cycles: int
    vector_busy_cycles: int
    model_flops: int
    useful_array_cycles: float
    padding_array_cycles: float
    fill_array_cycles: float
    offchip_read_bytes: int
    offchip_write_bytes: int
    compulsory_bytes: int
    roofline_bound_cycles: float

    @property
    def memory_stall_cycles(self) -> int:
        """Fill, input stall, memory-caused output stall and the store tail."""
        return (self.fill_cycles + self.input_stall_cycles + self.output_stall_cycles
                - self.output_stall_vector_cycles + self.store_tail_cycles)

    @property
    def offchip_bytes(self) -> int:
        return self.offchip_read_bytes + self.offchip_write_bytes

    def derived(self, platform: Platform) -> dict[str, float]:
        """Ratios of the totals: MFU, stall fractions, refetch ratio, time."""
        cycles = max(self.cycles, 1)
        pes = platform.systolic_array.rows * platform.systolic_array.cols
        return {
            "time_s": self.cycles / (platform.clock_ghz * 1e9),
            "mfu": self.model_flops / (2 * pes * cycles),
            "memory_stall_fraction": self.memory_stall_cycles / cycles,
            "vector_stall_fraction": (self.output_stall_vector_cycles
                                      + self.vector_tail_cycles) / cycles,
            "fill_fraction": self.fill_cycles / cycles,
            "input_stall_fraction": self.input_stall_cycles / cycles,
            "output_stall_fraction": self.output_stall_cycles / cycles,
            "drain_fraction": self.drain_cycles / cycles,
            "useful_fraction": self.useful_array_cycles / cycles,
            "padding_fraction": self.padding_array_cycles / cycles,
            "array_fill_fraction": self.fill_array_cycles / cycles,
            "refetch_ratio": self.offchip_bytes / self.compulsory_bytes
            if self.compulsory_bytes else 0.0,
        }

    def as_dict(self, platform: Platform) -> dict:
        return {**asdict(self), "memory_stall_cycles": self.memory_stall_cycles,
                **self.derived(platform)}


def add_totals(parts: Iterable[Totals]) -> Totals:
    parts = list(parts)
    names = Totals.__dataclass_fields__
    return Totals(**{name: sum(getattr(p, name) for p in parts) for name in names})


def roofline_bound_cycles(lowered: LoweredOperator, platform: Platform) -> float:
    """Cycles no schedule can beat: the compute floor or the compulsory-bytes floor."""
    c = lowered.counters
    if lowered.unit == "array":
        compute = c.macs / (platform.systolic_array.rows * platform.systolic_array.cols)
    else:  # the vector unit's own busy time is its floor
        compute = float(lowered.program.compute_cycles.sum())
    return max(compute, c.compulsory_bytes / platform.bytes_per_cycle)


def operator_totals(lowered: LoweredOperator, run: Breakdown, platform: Platform) -> Totals:
    """One run's engine breakdown and lowering counters, scaled to all runs."""
    n = lowered.runs
    c = lowered.counters
    return Totals(
        cycles=run.total_cycles * n,
        busy_cycles=run.busy_cycles * n,
        fill_cycles=run.fill_cycles * n,
        input_stall_cycles=run.input_stall_cycles * n,
        output_stall_cycles=run.output_stall_cycles * n,
        output_stall_vector_cycles=run.output_stall_vector_cycles * n,
        drain_cycles=run.drain_cycles * n,
        vector_tail_cycles=run.vector_tail_cycles * n,
        store_tail_cycles=run.store_tail_cycles * n,
        offchip_busy_cycles=run.offchip_busy_cycles * n,
        vector_busy_cycles=run.vector_busy_cycles * n,
        model_flops=2 * c.macs * n,
        useful_array_cycles=c.useful_array_cycles * n,
        padding_array_cycles=c.padding_array_cycles * n,
        fill_array_cycles=c.fill_array_cycles * n,
        offchip_read_bytes=sum(c.offchip_read.values()) * n,
        offchip_write_bytes=c.offchip_write * n,
        compulsory_bytes=c.compulsory_bytes * n,
        roofline_bound_cycles=roofline_bound_cycles(lowered, platform) * n,
    )


@dataclass(frozen=True)
class OperatorResult:
    """Everything reported about one operator."""

    lowered: LoweredOperator
    run: Breakdown          # one run, as the engine returned it
    totals: Totals          # all runs
    engine: str


def group_totals(results: Iterable[OperatorResult], key) -> dict[str, Totals]:
    """Totals per group (e.g. layer_type), groups in order of first appearance."""
    groups: dict[str, list[Totals]] = {}
    for result in results:
        groups.setdefault(key(result), []).append(result.totals)
    return {name: add_totals(parts) for name, parts in groups.items()}
