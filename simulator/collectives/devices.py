"""Collectives over devices that hold several ranks (DESIGN.md section 22).

On a Neuron device every NeuronCore is a collective rank, and the ranks of one device
share its memory and its links. Where a group holds every rank of each of its devices
(a tensor-parallel group over whole devices), the Neuron runtime runs KangaRing, not
the flat Ring: one rank per device joins the cycle, reads its co-located ranks' chunks
from their shared memory and writes what they receive, so the cycle has one hop per
device instead of one per rank ("the per-hop latency is cut by half when compared with
Ring"; "KangaRing is better than Ring at all sizes"; Ring is the fallback, used where
a replica group holds one rank per device). Source: aws-neuron/aws-neuron-sdk,
neuron-runtime/explore/intranode-collective-comm.rst (commit 81ce03ae), sections
"KangaRing Algorithm" and "Algorithm Summary".

So a collective over `chips` ranks of a platform with `interconnect.ranks_per_device`
r > 1 is priced as the same collective over chips / r devices, each device's ports
carrying its r ranks' link bandwidth (a rank's ports are its share of the device's
links), when r divides the group and the group spans more than one device; otherwise over
its ranks by the flat ring (the runtime's fallback). The figures are then given back
per rank. The wiring (`dimensions`) of such a platform joins devices.
"""

from __future__ import annotations

from simulator.inputs.platform import Interconnect, Platform


def device_ranks(interconnect: Interconnect) -> int:
    """The chips (ranks) one device holds: 1 unless the platform says."""
    return interconnect.ranks_per_device or 1


def device_platform(platform: Platform, chips: int) -> tuple[Platform, int] | None:
    """The platform whose chips are whole devices and the group's device count, when a
    group of `chips` ranks runs over devices; None when it runs over its ranks."""
    interconnect = platform.interconnect
    ranks = device_ranks(interconnect)
    if ranks == 1 or chips % ranks or chips == ranks:
        return None
    pooled = interconnect.model_copy(update={
        "ranks_per_device": None, "mesh": None,  # `--mesh` shapes ranks, not devices
        "link_bandwidth_gbps": interconnect.link_bandwidth_gbps * ranks,
        "dimensions": None if interconnect.dimensions is None else [
            dim.model_copy(update={"link_bandwidth_gbps": dim.link_bandwidth_gbps * ranks})
            if dim.link_bandwidth_gbps else dim for dim in interconnect.dimensions]})
    return platform.model_copy(update={"interconnect": pooled}), chips // ranks


def devices_spanned(chips: int, interconnect: Interconnect) -> int:
    """The devices a group of `chips` ranks occupies: what the wiring must hold."""
    return -(-chips // device_ranks(interconnect))


def group_text(devices: int, ranks: int, device_group: str) -> str:
    """The group as a report names it, e.g. `16 devices x 2 ranks (16 flat ring)`."""
    return f"{devices} devices x {ranks} ranks ({device_group})"
