"""Collectives over devices holding several ranks (the Neuron runtime's KangaRing,
simulator.collectives.devices): a group of whole devices rings over the devices, one
hop per device; any other group keeps the flat ring over its ranks."""

from __future__ import annotations

import math

import pytest

from platforms import make_platform
from simulator.collectives.cost import collective_cost
from simulator.errors import AccsimError
from simulator.inputs.platform import Interconnect
from simulator.system.parallelism import ModelLimits, SystemPlan, check_plan

CLOCK_HZ = 1e9
HOP = 1500           # cycles: 1.5 us at 1 GHz
BANDWIDTH = 50.0     # GB/s per port, per direction


def neuron_like(ranks: int | None, *, mode: str = "ring", dimensions=None):
    """Ranks of 2-rank devices in one directed cycle (the whole-model Neuron platforms'
    form), `ranks` None for the platform without the field."""
    interconnect = {"topology": "ring", "ports_per_chip": 2,
                    "link_bandwidth_gbps": BANDWIDTH, "link_latency_cycles": HOP,
                    "efficiency": 1.0, "pj_per_byte": 10.0, "collectives": mode}
    if ranks is not None:
        interconnect["ranks_per_device"] = ranks
    if dimensions is not None:
        interconnect["dimensions"] = dimensions
    return make_platform(interconnect=interconnect)


@pytest.mark.parametrize("chips, devices", [(32, 16), (24, 12), (4, 2)])
def test_a_group_of_whole_devices_rings_over_the_devices(chips, devices):
    payload = 8192
    flat = collective_cost("all_reduce", payload, chips, neuron_like(None))
    kanga = collective_cost("all_reduce", payload, chips, neuron_like(2))
    assert flat.hops == 2 * (chips - 1)
    assert kanga.hops == kanga.steps == 2 * (devices - 1)
    # Each device's two ports carry both its ranks' bandwidth.
    sent_device = 2 * (devices - 1) / devices * payload
    wire = sent_device / (2 * 2 * BANDWIDTH * 1e9)
    assert kanga.time_s == pytest.approx(wire + kanga.hops * HOP / CLOCK_HZ, rel=1e-12)
    assert kanga.cycles == math.ceil(wire * CLOCK_HZ) + kanga.hops * HOP
    assert kanga.sent_bytes_per_chip == pytest.approx(sent_device / 2)
    assert kanga.group == f"{devices} devices x 2 ranks ({devices} flat ring)"
    assert kanga.time_s < flat.time_s


@pytest.mark.parametrize("chips", [2, 3, 5, 7])
def test_a_group_without_whole_devices_keeps_the_flat_ring(chips):
    """One device's two ranks, or a group holding part of a device: Ring, as before."""
    for mode in ("ring", "auto"):
        cost = collective_cost("all_reduce", 8192, chips, neuron_like(2, mode=mode))
        flat = collective_cost("all_reduce", 8192, chips, neuron_like(None, mode="ring"))
        assert (cost.time_s, cost.hops, cost.group) == (flat.time_s, flat.hops, flat.group)


def test_auto_mode_places_the_devices_on_the_wiring():
    """Under `auto` the devices sit on the wiring (which joins devices) and the cheapest
    algorithm per dimension runs; point-to-point stays rank to rank."""
    platform = neuron_like(2, mode="auto", dimensions=[
        {"kind": "ring", "size": 16, "ports": 2, "wraparound": False}])
    cost = collective_cost("all_reduce", 8192, 32, platform)
    assert cost.group == "16 devices x 2 ranks (16 line)"
    assert cost.hops < 2 * 15
    assert collective_cost("point_to_point", 8192, 2, platform).hops == 1


def test_the_wiring_must_hold_the_devices_not_the_ranks():
    platform = neuron_like(2, dimensions=[
        {"kind": "ring", "size": 16, "ports": 2, "wraparound": False}])
    limits = ModelLimits()
    check_plan(SystemPlan(chips=32, tp=32), platform, limits)
    with pytest.raises(AccsimError, match="does not fit the wiring"):
        check_plan(SystemPlan(chips=34, tp=34), platform, limits)


def test_the_field_leaves_other_platforms_as_they_were():
    ring = {"topology": "ring", "ports_per_chip": 2, "link_bandwidth_gbps": 1.0,
            "link_latency_cycles": 1, "efficiency": 1.0, "pj_per_byte": 0.0}
    assert "ranks_per_device" not in Interconnect(**ring).model_dump()
    assert Interconnect(**ring, ranks_per_device=2).model_dump()["ranks_per_device"] == 2
    with pytest.raises(ValueError):
        Interconnect(**ring, ranks_per_device=0)
