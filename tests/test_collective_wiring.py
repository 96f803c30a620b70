"""Collectives as the runtimes run them (DESIGN.md section 22): wiring as data, where a
group sits on it, the algorithm per dimension by message size, the flat ring of
section 14 reproduced exactly under `--collectives ring`, and the acceptance figures
of issue 49."""

from __future__ import annotations

import json
import math

import pytest

from experiments.validate_collectives import main as validate_main
from platforms import make_platform
from tiny_llama import TINY_LLAMA
from simulator.api import load_platform
from simulator.cli import main
from simulator.collectives.cost import RING_FACTORS, collective_cost, with_collectives
from simulator.inputs.platform import COLLECTIVE_MODES, Interconnect, LinkDimension
from simulator.errors import AccsimError
from simulator.inputs.loader import shipped_names
from simulator.collectives.wiring import group_shape, place

KINDS = (*RING_FACTORS, "point_to_point")


def gaudi_box(**fields):
    """Eight cards all-to-all, 3 ports per peer, RoCE between boxes (docs.habana.ai)."""
    return make_platform(interconnect={
        "topology": "switch", "ports_per_chip": 21, "link_bandwidth_gbps": 25.0,
        "link_latency_cycles": 1000, "efficiency": 0.9, "pj_per_byte": 10.0,
        "collective_fixed_us": 2.0, "dimensions": [
            {"kind": "fully_connected", "size": 8, "ports": 3},
            {"kind": "switch", "ports": 3, "scale_out": True,
             "link_latency_cycles": 15000}], **fields})


def legacy(kind: str, payload: int, chips: int, platform) -> tuple[float, int, float]:
    """Section 14's flat ring, written out again: time, cycles, energy per chip."""
    ici = platform.interconnect
    if kind == "point_to_point":
        ports = ici.ports_per_chip if ici.topology == "switch" else 1
        steps, sent = 1, float(payload)
    else:
        ports = 2 if ici.topology == "ring" else ici.ports_per_chip
        steps = RING_FACTORS[kind] * (chips - 1)
        sent = RING_FACTORS[kind] * (chips - 1) / chips * payload
    bandwidth = ports * ici.link_bandwidth_gbps * 1e9 * ici.efficiency
    clock = platform.clock_ghz * 1e9
    latency = steps * ici.link_latency_cycles
    return (sent / bandwidth + latency / clock,
            math.ceil(sent * clock / bandwidth) + latency, sent * ici.pj_per_byte * 1e-12)


LINKED = [name for name in shipped_names("platform")
          if load_platform(name).interconnect is not None]


@pytest.mark.parametrize("name", LINKED)
def test_ring_mode_reproduces_the_flat_ring_on_every_shipped_platform(name):
    platform = with_collectives(load_platform(name), "ring")
    for kind in KINDS:
        for chips in ((2,) if kind == "point_to_point" else (2, 3, 4, 8, 16, 64, 256)):
            for payload in (1, 8192, 3 * 2**20, 2**31):
                cost = collective_cost(kind, payload, chips, platform)
                time_s, cycles, energy = legacy(kind, payload, chips, platform)
                assert (cost.time_s, cost.cycles) == (time_s, cycles), (kind, chips)
                assert cost.energy_j_per_chip == energy
                assert (cost.algorithm, cost.hops) == ("ring", cost.steps)


def test_shipped_v5e_has_a_16x16_pod_that_wraps_only_whole_axes():
    platform = load_platform("tpu_v5e_like")
    clock = platform.clock_ghz * 1e9
    assert [d.kind for d in place(16, platform.interconnect, clock)] == ["line", "line"]
    assert [(d.kind, d.chips) for d in place(256, platform.interconnect, clock)] == \
        [("ring", 16), ("ring", 16)]
    assert [(d.kind, d.chips) for d in place(16, platform.interconnect, clock, [16])] \
        == [("ring", 16)]
    assert [(d.kind, d.chips) for d in place(32, platform.interconnect, clock)] == \
        [("line", 8), ("line", 4)]
    with pytest.raises(AccsimError, match="does not fit the wiring"):
        place(17, platform.interconnect, clock)  # 17 is prime and above 16
    with pytest.raises(AccsimError, match="does not hold"):
        place(32, platform.interconnect, clock, [32])


def test_shorthands_stand_for_their_dimensions():
    def kinds(topology, chips, ports=4):
        platform = make_platform(interconnect={
            "topology": topology, "ports_per_chip": ports, "link_bandwidth_gbps": 10.0,
            "link_latency_cycles": 10, "efficiency": 1.0, "pj_per_byte": 1.0})
        return [(d.kind, d.chips, d.ports) for d in place(chips, platform.interconnect,
                                                            1e9)]
    assert kinds("ring", 8) == [("ring", 8, 2)]
    assert kinds("torus2d", 16) == [("ring", 4, 2), ("ring", 4, 2)]
    assert kinds("switch", 8, ports=6) == [("switch", 8, 6)]


@pytest.mark.parametrize("chips, limit_us", [(16, 15.0), (64, 45.0)])
def test_llama_8b_decode_all_reduce_on_v5e(chips, limit_us, tmp_path):
    """Issue 49: one TP all-reduce of Llama-3.1-8B decode (batch 1, context 1024) was
    30.1 us at 16 chips and 126 us at 64 on the flat ring."""
    out = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--phase",
                 "decode", "--context", "1024", "--chips", str(chips), "--tp",
                 str(chips), "--json", str(out)]) == 0
    records = [op["collective"] for op in json.loads(out.read_text())["operators"]
               if op.get("collective")]
    assert records and {r["kind"] for r in records} == {"all_reduce"}
    for record in records:
        assert record["payload_bytes"] == 4096 * 2  # hidden x bf16, one token
        assert record["time_s"] * 1e6 <= limit_us
        assert record["algorithm"] and record["hops"] > 0 and record["group"]
    flat = collective_cost("all_reduce", 8192, chips,
                           with_collectives(load_platform("tpu_v5e_like"), "ring"))
    assert flat.time_s * 1e6 > 30  # what the flat ring charged


@pytest.mark.parametrize("cards, ports", [(2, 3), (4, 9), (8, 21)])
def test_a_group_inside_a_gaudi_box_drives_only_the_ports_to_its_peers(cards, ports):
    platform = gaudi_box()
    cost = collective_cost("all_reduce", 2**26, cards, platform)
    assert cost.ports == ports and cost.group == f"{cards} fully_connected"
    # Bandwidth-bound: 2 (k-1)/k of the buffer over 3 (k-1) ports of 25 GB/s at 90%,
    # the fixed 2 us and one or two hops of 1 us (direct; two cards: one exchange).
    wire = 2 * (cards - 1) / cards * 2**26 / (ports * 25e9 * 0.9)
    assert cost.time_s == pytest.approx(wire + 2e-6 + cost.hops * 1e-6)
    assert cost.algorithm == ("x:halving_doubling" if cards == 2 else "x:direct")


def test_a_group_over_two_boxes_pays_the_scale_out_level():
    platform = gaudi_box()
    one_box = collective_cost("all_reduce", 2**20, 8, platform)
    two = collective_cost("all_reduce", 2**20, 16, platform)
    assert two.group == "8 fully_connected x 2 switch"
    assert "scale-out:" in two.algorithm
    # Reduce-scatter in the box, all-reduce over the NICs, all-gather in the box: the
    # scale-out hop latency (15,000 cycles) is paid, and its 3 ports are the bottleneck.
    assert two.time_s > one_box.time_s + 15e-6
    small = group_shape(4, [LinkDimension(kind="fully_connected", size=8, ports=3),
                            LinkDimension(kind="switch", ports=3, scale_out=True)])
    assert small == (4, 1)  # a group that fits a box never crosses the NICs


def test_auto_takes_the_cheapest_algorithm_for_the_size():
    platform = load_platform("tpu_v5e_like")
    for payload in (8, 8192, 2**20, 2**27):
        auto = collective_cost("all_reduce", payload, 16, platform)
        for mode in COLLECTIVE_MODES[2:]:
            pinned = collective_cost("all_reduce", payload, 16,
                                     with_collectives(platform, mode))
            assert auto.time_s <= pinned.time_s * (1 + 1e-12), (payload, mode)
    small = collective_cost("all_reduce", 8192, 16, platform)
    large = collective_cost("all_reduce", 2**27, 16, platform)
    assert "halving_doubling" in small.algorithm and small.hops == 9
    assert large.algorithm == "x:ring y:ring" and large.hops == 12


def test_two_axes_carry_a_large_all_reduce_at_once():
    """XLA: over several axes every axis's links work together, so a 2x2 all-reduce of
    V bytes moves 3/4 V over each chip's 2 axis links, not 3/2 V over one."""
    platform = load_platform("tpu_v5e_like")
    big = 2**30
    cost = collective_cost("all_reduce", big, 4, platform)
    wire = 3 / 4 * big / (50e9 * 0.9)
    assert cost.time_s == pytest.approx(wire, rel=0.01)


def test_fixed_cost_is_its_own_field_with_a_range():
    platform = load_platform("tpu_v5e_like")
    assert platform.interconnect.collective_fixed_us == 4.5
    entry = platform.provenance["interconnect.collective_fixed_us"]
    assert entry.kind == "assumed" and entry.range[0] < 4.5 < entry.range[1]
    zero = platform.model_copy(update={"interconnect": platform.interconnect.model_copy(
        update={"collective_fixed_us": 0.0})})
    base = collective_cost("all_gather", 2**16, 16, platform)
    assert base.time_s - collective_cost("all_gather", 2**16, 16, zero).time_s == \
        pytest.approx(4.5e-6)


def test_interconnect_rules():
    ring = {"topology": "ring", "ports_per_chip": 2, "link_bandwidth_gbps": 1.0,
            "link_latency_cycles": 1, "efficiency": 1.0, "pj_per_byte": 0.0}
    with pytest.raises(ValueError, match="scale_out level is the last"):
        Interconnect(**ring, dimensions=[LinkDimension(kind="switch", ports=1,
                                                       scale_out=True),
                                         LinkDimension(kind="ring", ports=2)])
    with pytest.raises(ValueError):
        Interconnect(**ring, collectives="flat")
    # Adding the fields left every existing platform's canonical form as it was.
    assert set(Interconnect(**ring).model_dump()) == set(ring)


@pytest.mark.parametrize("flags, message", [
    (["--mesh", "4x8"], "mesh 4x8 holds 32 chips; the tensor-parallel group has T = 16"),
    (["--mesh", "4by4"], "a mesh is chips per dimension"),
    (["--mesh", "1x1x16"], "a mesh of 3 dimensions on a wiring of 2"),
    (["--collectives", "fast"], None),
])
def test_bad_collective_options_are_refused(flags, message, capsys):
    try:
        code = main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b",
                     "--phase", "decode", "--context", "16", "--chips", "16", "--tp",
                     "16", *flags])
    except SystemExit as exit_:  # argparse's own refusal of a choice
        code = exit_.code
    assert code not in (0, None)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message:
        assert message in err


def test_validation_meets_its_targets(capsys):
    assert validate_main(["--check"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("collectives: 7 anchors, median |error| ")


# The implementations ASTRA-sim's system-input parser accepts (astra-sim
# system/astraccl/CollectiveImplLookup.cc, generate_collective_impl_from_input).
ASTRA_ACCEPTS = {"ring", "oneRing", "doubleBinaryTree", "direct", "oneDirect",
                 "halvingDoubling", "oneHalvingDoubling"}


def test_astra_system_file_names_the_models_choice_per_dimension(tmp_path):
    out = tmp_path / "chakra"
    assert main(["export", "chakra", "--arch", "tpu_v5e_like", "--model",
                 "llama_3_1_8b", "--tp", "16", "--phase", "decode", "--tokens", "1024",
                 "--output", str(out)]) == 0
    system = json.loads((out / "system.json").read_text())
    keys = {"all-reduce-implementation", "all-gather-implementation",
            "reduce-scatter-implementation", "all-to-all-implementation"}
    assert keys <= set(system)
    for key in keys:
        assert len(system[key]) == 2 and set(system[key]) <= ASTRA_ACCEPTS
    # The decode all-reduce (8 KiB) as the model runs it: x:ring y:halving_doubling.
    cost = collective_cost("all_reduce", 8192, 16, load_platform("tpu_v5e_like"))
    assert cost.algorithm == "x:ring y:halving_doubling"
    assert system["all-reduce-implementation"] == ["ring", "halvingDoubling"]
    ring = tmp_path / "ring.yaml"
    raw = load_platform("tpu_v5e_like").model_dump(mode="json")
    raw["interconnect"]["collectives"] = "ring"
    ring.write_text(json.dumps(raw))
    out2 = tmp_path / "flat"
    assert main(["export", "chakra", "--arch", str(ring), "--model", "llama_3_1_8b",
                 "--tp", "4", "--phase", "decode", "--tokens", "64", "--output",
                 str(out2)]) == 0
    flat = json.loads((out2 / "system.json").read_text())
    assert flat["all-reduce-implementation"] == ["ring"]


def test_serve_prices_iterations_under_the_collectives_named(tmp_path):
    """`serve --collectives` reaches every iteration's collectives and the result's
    spec: the tiny model's 2-chip replica is served at another latency under the flat
    ring (no fixed cost, all 4 ports) than under the wiring's own collectives."""
    model = tmp_path / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    results = {}
    for mode in ("auto", "ring"):
        out = tmp_path / f"{mode}.json"
        assert main(["serve", "--arch", "tpu_v5e_like", "--model", str(model), "--tp",
                     "2", "--rate", "50", "--requests", "6", "--prompt-tokens", "32",
                     "--output-tokens", "4", "--collectives", mode, "--no-cost-cache",
                     "--json", str(out)]) == 0
        results[mode] = json.loads(out.read_text())
    assert results["ring"]["manifest"]["serving"]["spec"]["collectives"] == "ring"
    assert results["auto"]["latency_ms"]["mean"] != results["ring"]["latency_ms"]["mean"]
