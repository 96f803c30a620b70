"""Collective algorithms per wiring dimension and their chaining across dimensions
(DESIGN.md section 22), as NCCL's tuning model, the Neuron runtime and ASTRA-sim's
astraccl price them (shared/reference/collectives.md).

A phase is one collective part on one dimension of k chips; it costs
hops x hop latency + bytes on the busiest port / (ports x sustained bandwidth):

    ring      a bidirectional ring where the dimension wraps (ceil((k-1)/2) hops, both
              ports), a line otherwise (k-1 hops, half the ports: the end link carries
              every shard); through a switch k-1 steps over every port
    direct    one step to every peer: fully connected (over the k-1 peers' ports) or
              through a switch
    halving_doubling  log2 k steps to partners k/2, k/4 ... 1 away (k a power of two);
              on a ring each step crosses that many links, which its flows share; an
              all-reduce is recursive doubling of the whole message, or halving then
              doubling, whichever is cheaper
    tree      all-reduce only: reduce up and broadcast down a binary tree, 2 ceil(log2 k)
              levels, each chip sending about twice the message

Across dimensions (inner first): a reduce-scatter runs up them, an all-gather down, an
all-reduce reduce-scatters up, all-reduces in the last, all-gathers down; an all-to-all
runs on each in turn with the whole buffer. Over D dimensions of one box the buffer is
cut into D parts whose chains start on different dimensions and run at once, so every
dimension's links are busy together (XLA on a TPU mesh: bandwidth x number of axes;
ASTRA-sim pipelines chunks likewise); a scale-out level stays last (hierarchical, as
the Neuron runtime and HCCL run it). `auto` takes the cheapest algorithm of each phase;
a pinned algorithm is used wherever it applies, ring elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.collectives.wiring import PlacedDimension

ALGORITHMS = ("ring", "direct", "halving_doubling", "tree")


@dataclass(frozen=True)
class Phase:
    """One collective part on one dimension, priced."""

    dimension: str
    part: str            # reduce_scatter | all_gather | all_reduce | all_to_all | ...
    algorithm: str
    steps: int
    hops: int            # link hops paid at the hop latency
    sent_bytes: float    # leaving each chip
    link_bytes: float    # sent bytes x links each crosses (the energy's count)
    ports: float         # links each chip drives at once
    wire_s: float        # bytes on the busiest port / its sustained bandwidth
    latency_cycles: int  # hops x the dimension's hop latency
    latency_s: float

    @property
    def seconds(self) -> float:
        return self.wire_s + self.latency_s


def _ring_ports(dim: PlacedDimension) -> float:
    """Links a ring (or line) phase drives per chip on this dimension."""
    return {"ring": dim.ports, "line": dim.ports / 2, "switch": dim.ports,
            "fully_connected": dim.ports * min(2, dim.chips - 1)}[dim.kind]


def _priced(dim, part, algorithm, steps, hops, sent, link_bytes, ports, busiest) -> Phase:
    return Phase(dim.name, part, algorithm, steps, hops, sent, link_bytes, ports,
                 busiest / (ports * dim.bandwidth_bps), hops * dim.latency_cycles,
                 hops * dim.hop_s)


def ring(dim: PlacedDimension, part: str, m: float) -> Phase | None:
    k = dim.chips
    if part == "all_reduce":
        return _combined(dim, part, "ring", ring(dim, "reduce_scatter", m),
                         ring(dim, "all_gather", m))
    sent = (k - 1) / k * m
    hops = k - 1 if dim.kind in ("line", "switch") else math.ceil((k - 1) / 2)
    if part != "all_to_all":
        return _priced(dim, part, "ring", hops, hops, sent, sent, _ring_ports(dim), sent)
    if dim.kind not in ("ring", "line"):
        return None
    # Every chip's k - 1 shares cross the links: the middle cut carries k/2 x k/2 of
    # them one way, over both crossings of a ring, the one of a line.
    cut = (k // 2) * (k - k // 2) * m / k
    mean_hops = k / 4 if dim.kind == "ring" else k / 3
    return _priced(dim, part, "ring", hops, hops, sent, sent * mean_hops,
                   _ring_ports(dim), cut)


def direct(dim: PlacedDimension, part: str, m: float) -> Phase | None:
    if dim.kind not in ("fully_connected", "switch"):
        return None
    if part == "all_reduce":
        return _combined(dim, part, "direct", direct(dim, "reduce_scatter", m),
                         direct(dim, "all_gather", m))
    k = dim.chips
    ports = dim.ports * (k - 1) if dim.kind == "fully_connected" else dim.ports
    sent = (k - 1) / k * m
    return _priced(dim, part, "direct", 1, 1, sent, sent, ports, sent)


def _distances(dim: PlacedDimension) -> list[int]:
    """Partner distance of each halving step (k/2 first), in links crossed."""
    k = dim.chips
    far = [k >> step for step in range(1, k.bit_length())]
    return far if dim.kind in ("ring", "line") else [1] * len(far)


def halving_doubling(dim: PlacedDimension, part: str, m: float) -> Phase | None:
    k = dim.chips
    if k & (k - 1) or part == "all_to_all":
        return None
    ports = dim.ports / 2 if dim.kind in ("ring", "line") else dim.ports
    distances = _distances(dim)
    if part == "all_reduce":  # recursive doubling of the whole message, or halve+double
        whole = _priced(dim, part, "halving_doubling", len(distances), sum(distances),
                        m * len(distances), m * sum(distances), ports,
                        m * sum(distances))
        split = _combined(dim, part, "halving_doubling",
                          halving_doubling(dim, "reduce_scatter", m),
                          halving_doubling(dim, "all_gather", m))
        return min((whole, split), key=lambda phase: phase.seconds)
    shares = [m / 2 ** (i + 1) for i in range(len(distances))]
    busiest = sum(d * share for d, share in zip(distances, shares))
    return _priced(dim, part, "halving_doubling", len(distances), sum(distances),
                   sum(shares), busiest, ports, busiest)


def tree(dim: PlacedDimension, part: str, m: float) -> Phase | None:
    if part != "all_reduce" or (dim.kind in ("ring", "line")
                                and dim.chips & (dim.chips - 1)):
        return None
    levels = math.ceil(math.log2(dim.chips))
    distances = _distances(dim) if dim.kind in ("ring", "line") else [1] * levels
    return _priced(dim, part, "tree", 2 * levels, 2 * sum(distances), 2 * m,
                   m * sum(distances), _ring_ports(dim), 2 * m)


def _combined(dim, part, algorithm, down: Phase | None, up: Phase | None) -> Phase | None:
    """Two phases run one after the other on the same dimension, as one."""
    if down is None or up is None:
        return None
    return Phase(dim.name, part, algorithm, down.steps + up.steps, down.hops + up.hops,
                 down.sent_bytes + up.sent_bytes, down.link_bytes + up.link_bytes,
                 max(down.ports, up.ports), down.wire_s + up.wire_s,
                 down.latency_cycles + up.latency_cycles, down.latency_s + up.latency_s)


PRICERS = {"ring": ring, "direct": direct, "halving_doubling": halving_doubling,
           "tree": tree}


def best_phase(dim: PlacedDimension, part: str, m: float, mode: str) -> Phase:
    """The phase `mode` runs: the cheapest for `m` bytes (auto), else the pinned
    algorithm where it applies and ring where it does not."""
    names = ALGORITHMS if mode == "auto" else (mode,)
    options = [phase for name in names
               if (phase := PRICERS[name](dim, part, m)) is not None]
    if not options:
        options = [ring(dim, part, m) or direct(dim, part, m)]
    return min(options, key=lambda phase: phase.seconds)


def point_to_point(dim: PlacedDimension, m: float) -> Phase:
    """One send to the next chip along the dimension: the links to that neighbour (all
    switch ports)."""
    ports = {"ring": dim.ports / 2, "line": dim.ports / 2, "switch": dim.ports,
             "fully_connected": dim.ports}[dim.kind]
    return _priced(dim, "point_to_point", "direct", 1, 1, m, m, ports, m)


def chained(kind: str, m: float, placed: list[PlacedDimension],
            mode: str) -> list[Phase]:
    """The phases of one collective of `m` bytes per chip over the placed dimensions
    (for an all-gather, `m` is the gathered output)."""
    if kind == "point_to_point":
        return [point_to_point(placed[0], m)]
    if kind == "all_to_all":
        return [best_phase(dim, kind, m, mode) for dim in placed]
    sizes, share = [], m
    for dim in placed:  # the bytes each dimension works on, inner first
        sizes.append(share)
        share /= dim.chips
    if kind == "all_reduce":
        last = len(placed) - 1
        down = [best_phase(dim, "reduce_scatter", size, mode)
                for dim, size in zip(placed[:last], sizes)]
        middle = [best_phase(placed[last], "all_reduce", sizes[last], mode)]
        up = [best_phase(dim, "all_gather", size, mode)
              for dim, size in zip(placed[:last], sizes)][::-1]
        return down + middle + up
    phases = [best_phase(dim, kind, size, mode)
              for dim, size in zip(placed, sizes)]
    return phases if kind == "reduce_scatter" else phases[::-1]


def concurrent(kind: str, m: float, placed: list[PlacedDimension],
               mode: str) -> list[list[Phase]]:
    """The chains one collective runs at once: one per box dimension, each on its share
    of the buffer and starting on that dimension (the scale-out level stays last)."""
    box = [dim for dim in placed if not dim.scale_out]
    outer = [dim for dim in placed if dim.scale_out]
    if kind == "point_to_point" or len(box) < 2:
        return [chained(kind, m, placed, mode)]
    return [chained(kind, m / len(box), box[first:] + box[:first] + outer, mode)
            for first in range(len(box))]
