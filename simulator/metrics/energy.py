"""Energy: event counts times the platform's energy table, plus static power times time
(DESIGN.md section 4). Components: MAC, SRAM, off-chip memory, vector unit, static.

Counts: model MACs on the array (padded PEs draw static power only; structured sparsity
run sparse skips MACs by its speedup; an attention on the vector unit counts its MACs
among the vector element-ops), SRAM bytes read and written per buffer as lowering counts
them, off-chip bytes, vector element-ops over all passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.inputs.platform import Platform
from simulator.lowering import LoweredOperator

COMPONENTS = ("mac", "sram", "offchip", "vector", "static", "ici")


@dataclass(frozen=True)
class Energy:
    """Picojoules per component for one run of an operator."""

    mac_pj: float
    sram_pj: float
    offchip_pj: float
    vector_pj: float
    static_pj: float
    ici_pj: float = 0.0     # chip-to-chip links: the bytes this chip sends

    @property
    def total_pj(self) -> float:
        return (self.mac_pj + self.sram_pj + self.offchip_pj + self.vector_pj
                + self.static_pj + self.ici_pj)


def static_power_w(platform: Platform) -> float:
    """Static power of all components, watts."""
    p = platform.energy.static_power
    return p.array_w + p.sram_w + p.offchip_w + p.vector_w + p.other_w


def run_energy(lowered: LoweredOperator, cycles: int, platform: Platform) -> Energy:
    """Energy of one run (one instance, one repeat) lasting `cycles`."""
    table = platform.energy
    counters = lowered.counters
    dtype = lowered.dtype
    # structured sparsity run sparse skips that fraction of the MACs
    mac_speedup = lowered.precision.speedup if lowered.precision else 1.0
    seconds = platform.seconds(cycles)
    # an attention run on the vector unit does its MACs there, as vector element-ops
    on_array = lowered.tiling is None or lowered.tiling.unit != "vector"
    return Energy(
        mac_pj=counters.macs * table.mac_pj[dtype] / mac_speedup
        if counters.macs and on_array else 0.0,
        sram_pj=sum(counters.sram_read.values()) * table.sram_read_pj_per_byte
        + sum(counters.sram_write.values()) * table.sram_write_pj_per_byte,
        offchip_pj=counters.offchip_bytes * table.offchip_pj_per_byte,
        vector_pj=counters.vector_elements * table.vector_op_pj,
        static_pj=static_power_w(platform) * seconds * 1e12,
        ici_pj=lowered.collective.energy_j_per_chip * 1e12 if lowered.collective else 0.0,
    )
