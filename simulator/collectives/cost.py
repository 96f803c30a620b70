"""Collective communication: the one home where every caller (runs, serving, the
deployment search, the exports) prices a collective (DESIGN.md sections 14 and 22).

By default (`collectives: auto`) a group is placed on the platform's wiring
(simulator.collectives.wiring) and each dimension runs the algorithm that is cheapest for the
message size (simulator.collectives.algorithms): fixed cost + hops x hop latency +
bytes / (ports x bandwidth x efficiency). A pinned algorithm (`--collectives NAME`)
runs wherever it applies. `--collectives ring` is the flat ring of section 14, today's
figures exactly: a collective over p chips of B bytes (each chip's buffer) sends
volume(p) x B bytes out of every chip in steps(p) ring steps:

    time = volume(p) x B / (ports x link bandwidth x efficiency) + steps(p) x latency

all-reduce volume 2 (p-1)/p in 2 (p-1) steps; reduce-scatter, all-gather and all-to-all
(p-1)/p in p-1 steps; point-to-point sends all B in one step, over the one link to the
neighbour (ring, torus2d) or striped over every port (switch).

A platform whose chips are ranks of a larger device (`ranks_per_device`, NeuronCores)
runs a group over whole devices as a collective over the devices (KangaRing,
simulator.collectives.devices), in either mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simulator.collectives.algorithms import Phase, concurrent
from simulator.collectives.devices import device_platform, device_ranks, group_text
from simulator.inputs.platform import Interconnect, Platform
from simulator.collectives.wiring import place, shape_text

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
    algorithm: str = "ring"     # per dimension, e.g. `x:ring y:halving_doubling`
    hops: int = 0               # link hops paid at the hop latency
    group: str = ""             # the group's placement, e.g. `4 line x 4 line`

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
        return CollectiveCost(kind, chips, payload_bytes, 0.0, 0, 0, 0.0, 0, 0.0,
                              "none", 0, "")
    if interconnect is None:
        raise ValueError(f"platform {platform.name} has no interconnect table")
    if kind != "point_to_point" and (ranks := device_ranks(interconnect)) > 1:
        if over := device_platform(platform, chips):
            return per_rank(collective_cost(kind, payload_bytes, over[1], over[0]),
                            chips, ranks)
        return flat_ring(kind, payload_bytes, chips, platform)  # Ring: the fallback
    if interconnect.collectives == "ring":
        return flat_ring(kind, payload_bytes, chips, platform)
    mesh = interconnect.mesh
    clock_hz = platform.clock_ghz * 1e9
    placed = place(chips, interconnect, clock_hz,
                   mesh if mesh and math.prod(mesh) == chips else None)
    chains = concurrent(kind, float(payload_bytes), placed, interconnect.collectives)
    phases = [phase for chain in chains for phase in chain]
    # The chains share a box's links: its busiest dimension's bytes set the wire time;
    # the scale-out level's phases come after (hierarchical); the longest chain sets
    # the hop latency.
    wire = {dim.name: sum(p.wire_s for p in phases if p.dimension == dim.name)
            for dim in placed}
    busiest = max((wire[dim.name] for dim in placed if not dim.scale_out), default=0.0)
    wire_s = interconnect.collective_fixed_us * 1e-6 + busiest + sum(
        wire[dim.name] for dim in placed if dim.scale_out)
    longest = max(chains, key=lambda chain: sum(p.latency_cycles for p in chain))
    latency = sum(phase.latency_cycles for phase in longest)
    sent = sum(phase.sent_bytes for phase in phases)
    energy = sum(phase.link_bytes * dim.pj_per_byte for phase in phases
                 for dim in placed if dim.name == phase.dimension) * 1e-12
    return CollectiveCost(
        kind, chips, payload_bytes, sent, max(math.ceil(p.ports) for p in phases),
        sum(p.steps for p in longest), wire_s + latency / clock_hz,
        math.ceil(wire_s * clock_hz) + latency, energy, algorithm_text(longest),
        sum(p.hops for p in longest), shape_text(placed))


def per_rank(cost: CollectiveCost, chips: int, ranks: int) -> CollectiveCost:
    """A collective priced over whole devices (simulator.collectives.devices) as its
    `chips` ranks see it: each rank sends and spends its share of its device's."""
    return replace(cost, chips=chips, sent_bytes_per_chip=cost.sent_bytes_per_chip / ranks,
                   energy_j_per_chip=cost.energy_j_per_chip / ranks,
                   group=group_text(cost.chips, ranks, cost.group))


def algorithm_text(phases: list[Phase]) -> str:
    """Each dimension's algorithm in order, e.g. `x:ring y:halving_doubling`."""
    named = dict.fromkeys(f"{phase.dimension}:{phase.algorithm}" for phase in phases)
    return " ".join(named)


def flat_ring(kind: str, payload_bytes: int, chips: int,
              platform: Platform) -> CollectiveCost:
    """The flat ring of DESIGN.md section 14 over the ports the shorthand topology
    gives one collective (`--collectives ring`)."""
    interconnect = platform.interconnect
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
                          sent * interconnect.pj_per_byte * 1e-12, "ring", steps,
                          f"{chips} flat ring")


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


def with_collectives(platform: Platform, mode: str | None = None,
                     mesh: list[int] | None = None) -> Platform:
    """The platform whose collectives run as `--collectives MODE` and `--mesh AxB`
    say (None: as its file says); one without links is returned as it is."""
    if platform.interconnect is None or (mode is None and mesh is None):
        return platform
    update = {key: value for key, value in (("collectives", mode), ("mesh", mesh))
              if value is not None}
    return platform.model_copy(update={
        "interconnect": platform.interconnect.model_copy(update=update)})
