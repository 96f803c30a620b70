"""The wiring a group of chips really has (DESIGN.md section 22): the platform's link
dimensions (or those its ring / torus2d / switch shorthand stands for) and where a
group of p chips sits on them.

Placement: a group fills the dimensions of one box before it crosses the scale-out
level (the fewest boxes), and takes the squarest sub-mesh of the box dimensions unless
the run names its shape (`--mesh AxB`, tensor-parallel groups only). A ring dimension
wraps for the group only where the group spans it whole; a fully connected box gives
a group of k only the ports to its own k - 1 peers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.inputs.platform import Interconnect, LinkDimension
from simulator.errors import AccsimError


@dataclass(frozen=True)
class PlacedDimension:
    """One dimension as a group sees it: `chips` of the group along it, and the link
    figures of that dimension (per port, per direction)."""

    name: str
    kind: str          # ring | line | fully_connected | switch
    chips: int
    ports: int         # ring/line: links per chip along it; fully_connected: per peer
    bandwidth_bps: float  # one port, one direction, sustained (efficiency applied)
    latency_cycles: int
    hop_s: float       # the hop latency in seconds
    pj_per_byte: float
    scale_out: bool = False


def dimensions(interconnect: Interconnect) -> list[LinkDimension]:
    """The wiring as data: the platform's own dimensions, or its shorthand's (a ring of
    2 ports; a torus2d of two rings splitting the ports; one switch), each sized to
    whatever group uses it."""
    if interconnect.dimensions:
        return list(interconnect.dimensions)
    ports = interconnect.ports_per_chip
    return {"ring": [LinkDimension(kind="ring", ports=2)],
            "torus2d": [LinkDimension(kind="ring", ports=ports // 2)] * 2,
            "switch": [LinkDimension(kind="switch", ports=ports)],
            }[interconnect.topology]


def _names(count: int, wiring: list[LinkDimension]) -> list[str]:
    return ["scale-out" if dim.scale_out else "xyzwuvst"[index]
            for index, dim in enumerate(wiring[:count])]


def _shapes(chips: int, limits: list[int | None]):
    """Every split of `chips` over dimensions of those sizes (None: unbounded)."""
    if not limits:
        if chips == 1:
            yield ()
        return
    first, rest = limits[0], limits[1:]
    for k in range(1, chips + 1):
        if chips % k == 0 and (first is None or k <= first):
            for tail in _shapes(chips // k, rest):
                yield (k, *tail)


def group_shape(chips: int, wiring: list[LinkDimension],
                mesh: list[int] | None = None) -> tuple[int, ...]:
    """Chips of the group along each dimension: the named `mesh`, or the fewest boxes
    and the squarest sub-mesh inside one (ties: the larger extent inner)."""
    limits = [dim.size for dim in wiring]
    if mesh is not None:
        if len(mesh) > len(wiring):
            raise AccsimError(f"a mesh of {len(mesh)} dimensions on a wiring of "
                              f"{len(wiring)}", field="--mesh")
        shape = tuple(mesh) + (1,) * (len(wiring) - len(mesh))
        if math.prod(shape) != chips or any(
                limit is not None and k > limit for k, limit in zip(shape, limits)):
            raise AccsimError(f"mesh {'x'.join(map(str, mesh))} does not hold the group "
                              f"of {chips} chips on dimensions of "
                              f"{'x'.join(str(s or 'any') for s in limits)}",
                              field="--mesh")
        return shape
    shapes = list(_shapes(chips, limits))
    if not shapes:
        raise AccsimError(f"a group of {chips} chips does not fit the wiring "
                          f"({'x'.join(str(s or 'any') for s in limits)} chips)",
                          field="interconnect.dimensions")
    outer = len(wiring) - 1 if wiring[-1].scale_out else None

    def rank(shape):
        boxes = shape[outer] if outer is not None else 1
        inner = [k for index, k in enumerate(shape) if index != outer]
        return boxes, max(inner, default=1), [-k for k in inner]
    return min(shapes, key=rank)


def place(chips: int, interconnect: Interconnect, clock_hz: float,
          mesh: list[int] | None = None) -> list[PlacedDimension]:
    """The dimensions a group of `chips` spans (those it has more than one chip on),
    inner first, each with the links the group may drive on it."""
    wiring = dimensions(interconnect)
    shape = group_shape(chips, wiring, mesh)
    placed = []
    for name, dim, k in zip(_names(len(wiring), wiring), wiring, shape):
        if k == 1:
            continue
        kind = dim.kind
        if kind == "ring" and not (dim.wraparound and dim.size in (None, k)):
            kind = "line"  # a part of a ring, or a ring without its closing link
        bandwidth = dim.link_bandwidth_gbps or interconnect.link_bandwidth_gbps
        efficiency = dim.efficiency or interconnect.efficiency
        latency = interconnect.link_latency_cycles if dim.link_latency_cycles is None \
            else dim.link_latency_cycles
        pj = interconnect.pj_per_byte if dim.pj_per_byte is None else dim.pj_per_byte
        placed.append(PlacedDimension(name, kind, k, dim.ports,
                                      bandwidth * 1e9 * efficiency, latency,
                                      latency / clock_hz, pj,
                                      dim.scale_out))
    return placed


def shape_text(placed: list[PlacedDimension]) -> str:
    """The group as the report names it, e.g. `4x4 line` or `8 fully_connected`."""
    return " x ".join(f"{d.chips} {d.kind}" for d in placed)

