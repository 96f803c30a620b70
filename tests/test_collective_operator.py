"""Collectives as operators (DESIGN.md section 14): priced on the links by
system.collectives, a `collective` term in every table, CSV, JSON, the mapping sheet and
their own ICI track of the timeline; no compute, and an error without an interconnect."""

from __future__ import annotations

import csv
import json

import pytest
from rich.console import Console

from platforms import make_platform
from simulator.errors import AccsimError
from simulator.mapping.plan import Mapping
from simulator.present.run_report import print_report, result_dict, write_csv
from simulator.present.sheet import markdown
from simulator.simulate import Inputs, simulate
from simulator.collectives.cost import collective_cost
from simulator.present.timeline import TRACKS, trace_events
from simulator.inputs.workload import Workload

LINKED = make_platform(interconnect={"topology": "torus2d", "ports_per_chip": 4,
                                     "link_bandwidth_gbps": 8.0, "link_latency_cycles": 50,
                                     "efficiency": 0.9, "pj_per_byte": 20.0,
                                     "collectives": "ring"})  # section 14's flat ring
WORKLOAD = Workload.model_validate({"name": "w", "operators": [
    {"name": "up", "layer_type": "mlp.up", "kind": "gemm", "m": 64, "n": 64, "k": 64},
    {"name": "ar", "layer_type": "collective", "kind": "collective",
     "collective": "all_reduce", "payload_bytes": 65536, "chips": 4, "repeat": 3},
    {"name": "act", "layer_type": "act", "kind": "elementwise", "elements": 4096,
     "op": "relu"}]})


@pytest.fixture(scope="module")
def result():
    return simulate(Inputs(LINKED, WORKLOAD, Mapping()))


def test_collective_cycles_and_energy_come_from_the_link_model(result):
    cost = collective_cost("all_reduce", 65536, 4, LINKED)
    ar = result.operators[1]
    assert ar.lowered.unit == "interconnect" and ar.lowered.collective == cost
    assert ar.totals.cycles == ar.totals.collective_cycles == 3 * cost.cycles
    assert ar.totals.busy_cycles == ar.totals.offchip_bytes == ar.totals.model_flops == 0
    assert ar.totals.energy_ici_pj == pytest.approx(3 * cost.energy_j_per_chip * 1e12)
    assert ar.verdict.bottleneck == "interconnect"
    # Not overlapped: the workload's time is the sum of its operators'.
    assert result.total.cycles == sum(op.totals.cycles for op in result.operators)
    assert result.total.derived(LINKED)["collective_fraction"] == pytest.approx(
        3 * cost.cycles / result.total.cycles)


def test_collective_appears_in_tables_json_csv_sheet_and_ici_track(result, tmp_path):
    console = Console(record=True, width=250)
    print_report(result, console)
    text = console.export_text()
    assert "coll%" in text and "interconnect" in text and "collectives " in text
    record = json.loads(json.dumps(result_dict(result)))["operators"][1]
    assert record["tiling"] is None and record["collective"]["kind"] == "all_reduce"
    assert record["collective"]["bytes_per_link"] == pytest.approx(1.5 * 65536 / 4)
    assert record["totals"]["collective_cycles"] == result.operators[1].totals.cycles
    path = tmp_path / "r.csv"
    write_csv(result, path)
    rows = list(csv.DictReader(path.open()))
    assert int(rows[1]["collective_cycles"]) == result.operators[1].totals.cycles
    assert int(rows[0]["collective_cycles"]) == 0
    sheet = markdown(result)
    assert "| ar | collective | links (collective) |" in sheet
    ici = [e for e in trace_events(result)
           if e.get("tid") == TRACKS["ICI (chip-to-chip links)"] and e["ph"] == "X"]
    assert [e["name"] for e in ici] == ["all_reduce"]
    assert ici[0]["dur"] == pytest.approx(result.operators[1].totals.cycles * 1e-3)


def test_collective_without_interconnect_is_refused():
    with pytest.raises(AccsimError, match="operators.ar: collective all_reduce over 4 "
                       "chips needs links: platform test_8x8 has no interconnect"):
        simulate(Inputs(make_platform(), WORKLOAD, Mapping()))


def test_point_to_point_joins_two_chips():
    with pytest.raises(ValueError, match="point_to_point joins 2 chips"):
        Workload.model_validate({"name": "w", "operators": [
            {"name": "p", "layer_type": "x", "kind": "collective",
             "collective": "point_to_point", "payload_bytes": 8, "chips": 4}]})
