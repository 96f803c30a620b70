"""The interconnect table and the collectives priced on it (DESIGN.md section 14): the
formulas per topology, nccl-tests' busbw of a large all-reduce, and bad link figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import load_model, locate
from simulator.platform_file import load_platform
from simulator.collectives import (COLLECTIVE_KINDS, bus_bandwidth,
                                          collective_cost)
from platforms import make_platform

LINK = {"ports_per_chip": 4, "link_bandwidth_gbps": 50.0, "link_latency_cycles": 1000,
        "efficiency": 0.8, "pj_per_byte": 10.0}


def platform_with(topology: str, **link) -> Platform:
    return make_platform(interconnect={"topology": topology, **LINK, **link})


# Ports one collective drives per topology, as DESIGN.md section 14 states them.
PORTS = {"ring": 2, "torus2d": 4, "switch": 4}


@pytest.mark.parametrize("topology", sorted(PORTS))
@pytest.mark.parametrize("chips", [2, 3, 8, 16])
def test_ring_collectives_equal_the_formulas(topology, chips):
    platform = platform_with(topology)
    bandwidth = PORTS[topology] * 50e9 * 0.8  # bytes/s
    latency_s = 1000 / 1e9                    # 1000 cycles at 1 GHz
    payload = 3 * 2**20
    expected = {
        "all_reduce": 2 * (chips - 1) / chips * payload / bandwidth
        + 2 * (chips - 1) * latency_s,
        "reduce_scatter": (chips - 1) / chips * payload / bandwidth
        + (chips - 1) * latency_s,
        "all_gather": (chips - 1) / chips * payload / bandwidth + (chips - 1) * latency_s,
        "all_to_all": (chips - 1) / chips * payload / bandwidth + (chips - 1) * latency_s,
    }
    for kind, time_s in expected.items():
        cost = collective_cost(kind, payload, chips, platform)
        assert cost.time_s == pytest.approx(time_s, rel=1e-12), kind
        assert cost.ports == PORTS[topology]
        assert time_s * 1e9 <= cost.cycles <= time_s * 1e9 + 1
        assert cost.bytes_per_link * cost.ports == pytest.approx(cost.sent_bytes_per_chip)
        # ICI energy: every byte sent crosses one link at pj_per_byte.
        assert cost.energy_j == pytest.approx(
            chips * cost.sent_bytes_per_chip * 10.0e-12, rel=1e-12)


@pytest.mark.parametrize("topology, ports", [("ring", 1), ("torus2d", 1), ("switch", 4)])
def test_point_to_point_is_one_hop_on_the_neighbour_link_or_every_switch_port(topology,
                                                                              ports):
    cost = collective_cost("point_to_point", 10**6, 2, platform_with(topology))
    assert cost.time_s == pytest.approx(10**6 / (ports * 50e9 * 0.8) + 1000 / 1e9,
                                        rel=1e-12)
    assert (cost.ports, cost.steps, cost.bytes_per_link) == (ports, 1, 10**6 / ports)
    assert cost.energy_j == pytest.approx(10**6 * 10e-12)


def test_ring_uses_two_ports_whatever_the_chip_has():
    many = platform_with("ring", ports_per_chip=6)
    assert collective_cost("all_reduce", 2**20, 4, many).ports == 2


def test_one_chip_or_no_bytes_costs_nothing():
    platform = platform_with("torus2d")
    for kind in COLLECTIVE_KINDS:
        for payload, chips in ((2**20, 1), (0, 8)):
            cost = collective_cost(kind, payload, chips, platform)
            assert (cost.time_s, cost.cycles, cost.energy_j) == (0.0, 0, 0.0)


@pytest.mark.parametrize("topology", sorted(PORTS))
def test_large_all_reduce_busbw_approaches_ports_bandwidth_times_efficiency(topology):
    """nccl-tests: busbw = B / t x 2 (p-1)/p; for large B the latency term vanishes."""
    platform = platform_with(topology)
    target = PORTS[topology] * 50e9 * 0.8
    small = bus_bandwidth(collective_cost("all_reduce", 2**20, 8, platform))
    large = bus_bandwidth(collective_cost("all_reduce", 2**34, 8, platform))
    assert small < 0.9 * target          # latency-bound: far below the links' rate
    assert large == pytest.approx(target, rel=1e-3)
    assert large < target                # never above it


def test_v5e_all_reduce_busbw_is_its_four_ports_at_efficiency():
    platform = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    ici = platform.interconnect
    assert (ici.topology, ici.ports_per_chip) == ("torus2d", 4)
    # Cited: 400 GB/s bidirectional per chip = 4 ports x 2 directions x 50 GB/s.
    assert 2 * ici.ports_per_chip * ici.link_bandwidth_gbps == pytest.approx(400.0)
    busbw = bus_bandwidth(collective_cost("all_reduce", 2**34, 16, platform))
    assert busbw == pytest.approx(4 * 50e9 * ici.efficiency, rel=1e-3)


def test_switch_whatif_variant_loads():
    path = locate("whatif/tpu_v5e_switch", "platform")
    platform = load_platform(path)[0]
    base = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    assert platform.interconnect.topology == "switch"
    # Only the interconnect (and the names) differ from the chip it varies.
    strip = {"name", "description", "interconnect"}
    assert platform.model_dump(exclude=strip) == base.model_dump(exclude=strip)


def interconnect_error(tmp_path, **fields) -> str:
    raw = yaml.safe_load(open(locate("edge_32x32", "platform")))
    raw["interconnect"] = {"topology": "ring", **LINK, **fields}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(AccsimError) as info:
        load_model(path, Platform)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message


@pytest.mark.parametrize("fields, where, rule", [
    ({"topology": "mesh"}, "interconnect.topology", "'ring', 'torus2d' or 'switch'"),
    ({"link_bandwidth_gbps": 0}, "interconnect.link_bandwidth_gbps", "greater than 0"),
    ({"link_bandwidth_gbps": float("inf")}, "interconnect.link_bandwidth_gbps", "finite"),
    ({"link_bandwidth_gbps": float("nan")}, "interconnect.link_bandwidth_gbps", "finite"),
    ({"pj_per_byte": float("inf")}, "interconnect.pj_per_byte", "finite"),
    ({"efficiency": 0}, "interconnect.efficiency", "greater than 0"),
    ({"efficiency": 1.5}, "interconnect.efficiency", "less than or equal to 1"),
    ({"efficiency": float("nan")}, "interconnect.efficiency", "finite"),
    ({"link_latency_cycles": -1}, "interconnect.link_latency_cycles", "greater than"),
    ({"ports_per_chip": 0}, "interconnect.ports_per_chip", "greater than 0"),
    ({"ports_per_chip": 1}, "interconnect", "a ring needs at least 2 ports"),
    ({"topology": "torus2d", "ports_per_chip": 6, "bogus": 1}, "interconnect.bogus",
     "unknown field"),
    ({"topology": "torus2d", "ports_per_chip": 5}, "interconnect", "must be even"),
])
def test_bad_interconnect_names_field_and_rule(tmp_path, fields, where, rule):
    message = interconnect_error(tmp_path, **fields)
    assert f": {where}: " in message and rule in message, message


def test_schema_export_has_the_interconnect():
    out = subprocess.run([sys.executable, "-m", "simulator.cli", "schema", "platform"],
                         capture_output=True, text=True, check=True)
    schema = json.loads(out.stdout)
    assert "interconnect" in schema["properties"]
    fields = schema["$defs"]["Interconnect"]["properties"]
    assert fields["topology"]["enum"] == ["ring", "torus2d", "switch"]
    assert {"ports_per_chip", "link_bandwidth_gbps", "link_latency_cycles", "efficiency",
            "pj_per_byte"} <= set(fields)
