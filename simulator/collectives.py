"""Collective communication priced by the ring algorithms of shared/reference/
llm-serving.md on the ports a topology gives one collective (DESIGN.md section 14).

Pure functions of the platform's `interconnect` table, so the formulas are written once
and the tests check them directly. A collective over p chips of B bytes (each chip's
buffer) sends volume(p) x B bytes out of every chip in steps(p) ring steps:

    time = volume(p) x B / (ports x link bandwidth x efficiency) + steps(p) x latency

all-reduce volume 2 (p-1)/p in 2 (p-1) steps; reduce-scatter, all-gather and all-to-all
(p-1)/p in p-1 steps; point-to-point sends all B in one step, over the one link to the
neighbour (ring, torus2d) or striped over every port (switch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.inputs.platform import Interconnect, Platform

# Per collective kind: (volume factor, step factor). Each chip sends
# factor x (p-1)/p x B bytes in factor x (p-1) steps.
RING_FACTORS: dict[str, int] = {
    "all_reduce": 2,
    "reduce_scatter": 1,
    "all_gather": 1,
    "all_to_all": 1,
}
COLLECTIVE_KINDS = (*RING_FACTORS, "point_to_point")


def collective_ports(interconnect: Interconnect) -> int:
    """Ports one collective drives at once: a ring uses its two neighbours, a 2-D torus
    one ring per dimension over all its ports, a switch every port."""
    return 2 if interconnect.topology == "ring" else interconnect.ports_per_chip


@dataclass(frozen=True)
class CollectiveCost:
    """One collective's price. Bytes are per chip unless named `total`."""

    kind: str
    chips: int
    payload_bytes: int          # B: each chip's buffer (the sender's, for point-to-point)
    sent_bytes_per_chip: float  # what leaves each participating chip
    ports: int                  # links each chip drives at once
    steps: int                  # ring steps, each paying the per-hop latency
    time_s: float
    cycles: int                 # latency + transfer cycles rounded up
    energy_j_per_chip: float    # link energy of the bytes each chip sends

    @property
    def bytes_per_link(self) -> float:
        """Bytes each driven link carries in one direction."""
        return self.sent_bytes_per_chip / self.ports if self.ports else 0.0

    @property
    def senders(self) -> int:
        return 1 if self.kind == "point_to_point" else self.chips

    @property
    def total_sent_bytes(self) -> float:
        return self.sent_bytes_per_chip * self.senders

    @property
    def energy_j(self) -> float:
        """Link energy of the whole collective, all chips."""
        return self.energy_j_per_chip * self.senders


def collective_cost(kind: str, payload_bytes: int, chips: int,
                    platform: Platform) -> CollectiveCost:
    """Price one collective of `payload_bytes` per chip over `chips` chips of `platform`
    (point-to-point: one chip sends to one other; `chips` counts both, so 2)."""
    if kind not in COLLECTIVE_KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: "
                         f"{', '.join(COLLECTIVE_KINDS)}")
    if payload_bytes < 0 or chips < 1:
        raise ValueError(f"a collective needs bytes >= 0 and chips >= 1, "
                         f"found {payload_bytes} bytes over {chips} chips")
    interconnect = platform.interconnect
    if chips == 1 or payload_bytes == 0:
        return CollectiveCost(kind, chips, payload_bytes, 0.0, 0, 0, 0.0, 0, 0.0)
    if interconnect is None:
        raise ValueError(f"platform {platform.name} has no interconnect table")
    if kind == "point_to_point":
        ports = interconnect.ports_per_chip if interconnect.topology == "switch" else 1
        steps, sent = 1, float(payload_bytes)
    else:
        factor = RING_FACTORS[kind]
        ports, steps = collective_ports(interconnect), factor * (chips - 1)
        sent = factor * (chips - 1) / chips * payload_bytes
    bandwidth = ports * interconnect.link_bandwidth_gbps * 1e9 * interconnect.efficiency
    clock_hz = platform.clock_hz
    latency = steps * interconnect.link_latency_cycles
    time_s = sent / bandwidth + latency / clock_hz
    cycles = math.ceil(sent * clock_hz / bandwidth) + latency
    return CollectiveCost(kind, chips, payload_bytes, sent, ports, steps, time_s, cycles,
                          sent * interconnect.pj_per_byte * 1e-12)


def bus_bandwidth(cost: CollectiveCost) -> float:
    """nccl-tests' busbw in bytes/s: algbw = B / t, scaled by the collective's volume
    factor (2 (p-1)/p for all-reduce, (p-1)/p for the others), so that it compares with
    the link bandwidth whatever p is."""
    if cost.time_s == 0:
        return 0.0
    algbw = cost.payload_bytes / cost.time_s
    p = cost.chips
    factor = RING_FACTORS.get(cost.kind)
    return algbw * factor * (p - 1) / p if factor else algbw
