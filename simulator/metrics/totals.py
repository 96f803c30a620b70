"""Results and their derivations (DESIGN.md section 4): MFU, the stall breakdown,
array-busy split, bytes per level and refetch ratio, energy and power, and the
bottleneck class, per operator and aggregated per layer_type and for the workload.

Per-run engine figures are scaled by the operator's runs (repeat x instances), so every
cycle or byte figure here is for the whole operator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, field, fields, make_dataclass
from functools import cached_property

from simulator.metrics.bottleneck import BALANCED, CLASSES, Verdict, classify
from simulator.inputs.platform import Platform
from simulator.metrics.energy import run_energy, static_power_w
from simulator.engines.outcome import OPTIONAL_TERMS, Breakdown
from simulator.lowering import LoweredOperator

# Totals' cycle terms are the run's (engines.outcome.Breakdown, where each is declared
# once) scaled to all runs: `cycles` is the run's total_cycles, the rest keep their names.
RUN_TERMS = tuple(f.name for f in fields(Breakdown) if f.name != "total_cycles")
ScaledRunTerms = make_dataclass(
    "ScaledRunTerms",
    [("cycles", int), *((f.name, f.type, field(default=f.default, metadata=f.metadata))
                        if f.default is not MISSING else (f.name, f.type)
                        for f in fields(Breakdown) if f.name != "total_cycles")],
    frozen=True, kw_only=True)


@dataclass(frozen=True, kw_only=True)
class Totals(ScaledRunTerms):
    """Additive figures: cycles and bytes summed over runs, operators or layer types:
    the run's cycle terms (ScaledRunTerms) and the figures below."""

    vector_unit_busy_cycles: int     # epilogues and vector operators' own compute
    collective_sent_bytes: float     # bytes this chip sends over its links
    model_flops: int
    useful_array_cycles: float
    padding_array_cycles: float
    fill_array_cycles: float
    stationary_load_array_cycles: float
    skew_array_cycles: float
    offchip_read_bytes: int
    offchip_write_bytes: int
    compulsory_bytes: int
    roofline_bound_cycles: float
    energy_mac_pj: float
    energy_sram_pj: float
    energy_offchip_pj: float
    energy_vector_pj: float
    energy_static_pj: float
    energy_ici_pj: float
    # The peak MFU is relative to: the input dtype of the fastest MAC rate among the
    # operators summed and that rate (DESIGN.md section 17); not additive, not written
    # unless the rate differs from the platform's default dtype's.
    peak_dtype: str = ""
    peak_rate: int = 0

    def peak(self, platform: Platform) -> tuple[str, int]:
        """(dtype, MACs per PE per cycle) of the peak: the platform's default where
        nothing set one."""
        default = platform.systolic_array.input_dtypes[0]
        if not self.peak_rate:
            return default, platform.systolic_array.rate(default)
        return self.peak_dtype, self.peak_rate

    @property
    def memory_stall_cycles(self) -> int:
        """Fill, input stall, memory-caused output stall and the store tail."""
        return (self.fill_cycles + self.input_stall_cycles + self.output_stall_cycles
                - self.output_stall_vector_cycles + self.store_tail_cycles)

    @property
    def offchip_bytes(self) -> int:
        return self.offchip_read_bytes + self.offchip_write_bytes

    @property
    def energy_pj(self) -> float:
        return (self.energy_mac_pj + self.energy_sram_pj + self.energy_offchip_pj
                + self.energy_vector_pj + self.energy_static_pj + self.energy_ici_pj)

    def derived(self, platform: Platform) -> dict[str, float]:
        """Ratios of the totals: MFU, stall fractions, refetch ratio, time."""
        cycles = max(self.cycles, 1)
        peak_dtype, rate = self.peak(platform)
        time_s = platform.seconds(self.cycles)
        energy_j = self.energy_pj * 1e-12
        area = platform.area_mm2
        per_area = {} if area is None else {
            "area_mm2": area,
            "flops_per_s_per_mm2": self.model_flops / time_s / area if time_s else 0.0}
        return {
            "time_s": time_s,
            "mfu": self.model_flops / (2 * platform.pes * rate * cycles),
            "overhead_fraction": self.overhead_cycles / cycles,
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
            "stationary_load_fraction": self.stationary_load_array_cycles / cycles,
            "skew_fraction": self.skew_array_cycles / cycles,
            "array_setup_fraction": (self.fill_array_cycles
                                     + self.stationary_load_array_cycles
                                     + self.skew_array_cycles) / cycles,
            "refetch_ratio": self.offchip_bytes / self.compulsory_bytes
            if self.compulsory_bytes else 0.0,
            "arithmetic_intensity": self.model_flops / self.compulsory_bytes
            if self.compulsory_bytes else 0.0,
            "machine_balance": platform.peak_flops_for(peak_dtype)
            / (platform.offchip.bandwidth_gbps * 1e9),
            "offchip_bandwidth_fraction": self.offchip_bytes
            / (cycles * platform.rated_bytes_per_cycle),
            "roofline_fraction": self.roofline_bound_cycles / cycles,
            "offchip_busy_fraction": self.offchip_busy_cycles / cycles,
            "vector_busy_fraction": self.vector_unit_busy_cycles / cycles,
            "collective_fraction": self.collective_cycles / cycles,
            **{term.replace("_cycles", "_fraction"): getattr(self, term) / cycles
               for term in OPTIONAL_TERMS if getattr(self, term)},
            "energy_j": energy_j,
            "average_power_w": energy_j / time_s if time_s else 0.0,
            "flops_per_joule": self.model_flops / energy_j if energy_j else 0.0,
            "energy_per_mac_pj": 2 * self.energy_pj / self.model_flops
            if self.model_flops else 0.0,
            **per_area,
        }

    def as_dict(self, platform: Platform) -> dict:
        """The written record: the additive figures, two sums, the ratios, and the peak's
        dtype only where its rate differs from the platform default dtype's."""
        additive = {k: v for k, v in asdict(self).items()
                    if k not in PEAK_FIELDS and (k not in OPTIONAL_TERMS or v)}
        peak_dtype, rate = self.peak(platform)
        array = platform.systolic_array
        differs = rate != array.rate(array.input_dtypes[0])
        return {**additive, "memory_stall_cycles": self.memory_stall_cycles,
                "energy_pj": self.energy_pj, **self.derived(platform),
                **({"peak_dtype": peak_dtype} if differs else {})}


PEAK_FIELDS = ("peak_dtype", "peak_rate")


def add_totals(parts: Iterable[Totals]) -> Totals:
    """Field-by-field sum of additive totals; the peak is the fastest part's (the
    first of equal rates)."""
    parts = list(parts)
    names = [name for name in Totals.__dataclass_fields__ if name not in PEAK_FIELDS]
    fastest = max(parts, key=lambda p: p.peak_rate, default=None)
    peak = {} if fastest is None else {"peak_dtype": fastest.peak_dtype,
                                       "peak_rate": fastest.peak_rate}
    return Totals(**{name: sum(getattr(p, name) for p in parts) for name in names}, **peak)


def roofline_bound_cycles(lowered: LoweredOperator, platform: Platform) -> float:
    """Cycles no schedule can beat: the compute floor (all arrays' PEs busy) or the
    compulsory bytes at the sustained bandwidth."""
    c = lowered.counters
    if lowered.collective is not None:  # the links' own time is its floor
        return float(lowered.collective.cycles)
    if lowered.unit == "array":   # at the array's speed in the dtype run
        compute = c.macs / platform.pes / lowered.speed
    else:  # the vector unit's own busy time is its floor
        compute = float(lowered.program.compute_total())
    return max(compute, c.compulsory_bytes / platform.bytes_per_cycle)


def operator_totals(lowered: LoweredOperator, run: Breakdown, platform: Platform) -> Totals:
    """One run's engine breakdown and lowering counters, scaled to all runs."""
    n = lowered.runs
    c = lowered.counters
    energy = run_energy(lowered, run.total_cycles, platform)
    own_vector = run.busy_cycles if lowered.unit == "vector" else c.vector_compute_cycles
    return Totals(
        cycles=run.total_cycles * n,
        **{term: getattr(run, term) * n for term in RUN_TERMS},
        vector_unit_busy_cycles=(run.vector_busy_cycles + own_vector) * n,
        collective_sent_bytes=lowered.collective.sent_bytes_per_chip * n
        if lowered.collective else 0.0,
        model_flops=2 * c.macs * n,
        useful_array_cycles=c.useful_array_cycles * n,
        padding_array_cycles=c.padding_array_cycles * n,
        fill_array_cycles=c.fill_array_cycles * n,
        stationary_load_array_cycles=c.stationary_load_array_cycles * n,
        skew_array_cycles=c.skew_array_cycles * n,
        offchip_read_bytes=sum(c.offchip_read.values()) * n,
        offchip_write_bytes=c.offchip_write * n,
        compulsory_bytes=c.compulsory_bytes * n,
        roofline_bound_cycles=roofline_bound_cycles(lowered, platform) * n,
        energy_mac_pj=energy.mac_pj * n,
        energy_sram_pj=energy.sram_pj * n,
        energy_offchip_pj=energy.offchip_pj * n,
        energy_vector_pj=energy.vector_pj * n,
        energy_static_pj=energy.static_pj * n,
        energy_ici_pj=energy.ici_pj * n,
        **dict(zip(PEAK_FIELDS, operator_peak(lowered, platform))),
    )


def operator_objectives(lowered: LoweredOperator, run: Breakdown,
                        platform: Platform) -> tuple[int, float]:
    """(cycles, energy in pJ) of all runs: operator_totals' `cycles` and `energy_pj`,
    summed in the same order (so equal to the bit), without its other fields: all the
    search compares its candidates by."""
    n = lowered.runs
    energy = run_energy(lowered, run.total_cycles, platform)
    return run.total_cycles * n, (energy.mac_pj * n + energy.sram_pj * n
                                  + energy.offchip_pj * n + energy.vector_pj * n
                                  + energy.static_pj * n + energy.ici_pj * n)


def operator_peak(lowered: LoweredOperator, platform: Platform) -> tuple[str, int]:
    """(dtype, MAC rate) an operator's MFU is relative to: its run dtype's on the
    array, else the platform default dtype's."""
    if lowered.precision is not None:
        return lowered.precision.run_dtype, lowered.precision.macs_per_cycle
    default = platform.systolic_array.input_dtypes[0]
    return default, platform.systolic_array.rate(default)


@dataclass(frozen=True)
class OperatorResult:
    """Everything reported about one operator (its verdict classified when first read:
    a caller that reads totals alone, as serving's unit costs, pays for none)."""

    lowered: LoweredOperator
    run: Breakdown          # one run, as the engine returned it
    totals: Totals          # all runs
    engine: str
    platform: Platform      # the one it ran on, whose peak and bandwidth the ratios read

    @cached_property
    def verdict(self) -> Verdict:
        """Bottleneck class and its evidence."""
        return classify(self.totals.derived(self.platform))


def operator_result(lowered: LoweredOperator, run: Breakdown, platform: Platform,
                    engine: str) -> OperatorResult:
    return OperatorResult(lowered, run, operator_totals(lowered, run, platform), engine,
                          platform)


def dominant_bottleneck(results: Iterable[OperatorResult]) -> str:
    """The class holding the most cycles (ties: the earlier class in precedence)."""
    cycles: dict[str, int] = {}
    for result in results:
        cycles[result.verdict.bottleneck] = cycles.get(result.verdict.bottleneck, 0) \
            + result.totals.cycles
    ordered = sorted(cycles, key=CLASSES.index)
    return max(ordered, key=cycles.get) if ordered else BALANCED


def invocation_totals(cycles: int, platform: Platform) -> Totals:
    """The call's time as a Totals: its cycles, all of them the invocation term, and
    the chip's static energy over them (nothing else runs)."""
    zero = {name: 0 for name in Totals.__dataclass_fields__ if name not in PEAK_FIELDS}
    seconds = platform.seconds(cycles)
    return Totals(**{**zero, "cycles": cycles, "invocation_cycles": cycles,
                     "collective_sent_bytes": 0.0,
                     "energy_static_pj": static_power_w(platform) * seconds * 1e12})
