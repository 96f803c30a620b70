"""The real-chip platform fields (DESIGN.md section 2): each is validated with an error
naming the file and field, has its documented default, and reaches the results:
sustained bandwidth, dispatch overhead as its own breakdown term, area and perf/mm^2."""

from __future__ import annotations

import copy
import csv
import json

import pytest
import yaml
from platforms import BASE, make_platform

from simulator.cli import main
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import parse_model
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

ONE_GEMM = Workload.model_validate({"name": "w", "operators": [
    {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 32, "n": 32, "k": 64}]})
AREA = {"pe_mm2": {"int8": 0.001}, "sram_mm2_per_mib": 1.5, "vector_lane_mm2": 0.01,
        "fixed_mm2": 2.0}


def platform_text(**changes) -> str:
    data = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = data
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return yaml.safe_dump(data)


@pytest.mark.parametrize("path, value, rule", [
    ("offchip.efficiency", 0.0, "greater than 0"),
    ("offchip.efficiency", 1.5, "less than or equal to 1"),
    ("offchip.efficiency", float("nan"), "finite"),
    ("offchip.capacity_bytes", 0, "greater than 0"),
    ("systolic_array.count", 0, "greater than 0"),
    ("systolic_array.fold_model", "magic", "'pipelined' or 'scalesim'"),
    ("runtime.op_overhead_cycles", -1, "greater than or equal to 0"),
    ("area.pe_mm2", {"int8": 0.0}, "positive and finite"),  # -1: Strict says negative
    ("area.sram_mm2_per_mib", -1.0, "greater than or equal to 0"),
])
def test_bad_value_names_the_file_and_field(path, value, rule):
    changes = {path: value}
    if path.startswith("area.") and path != "area.pe_mm2":
        changes["area.pe_mm2"] = {"int8": 0.001}
    if path.startswith("area."):
        changes.update({f"area.{k}": v for k, v in AREA.items()
                        if f"area.{k}" not in changes})
    with pytest.raises(AccsimError) as caught:
        parse_model(platform_text(**changes), Platform, file="p.yaml")
    message = caught.value.message()
    assert message.startswith(f"p.yaml: {path}") and rule in message, message


def test_area_must_cover_the_input_dtypes():
    area = {**AREA, "pe_mm2": {"bf16": 0.001}}
    with pytest.raises(AccsimError, match="area.pe_mm2 lacks the array's input dtypes"):
        parse_model(platform_text(area=area), Platform, file="p.yaml")


def test_defaults():
    platform = Platform.model_validate(BASE | {"systolic_array": {
        k: v for k, v in BASE["systolic_array"].items() if k != "fold_model"}})
    array = platform.systolic_array
    assert (array.count, array.fold_model) == (1, "pipelined")
    assert platform.offchip.efficiency == 1.0 and platform.offchip.capacity_bytes is None
    assert platform.runtime.op_overhead_cycles == 0 and platform.area_mm2 is None


def test_efficiency_slows_the_off_chip_server():
    full = make_platform()
    half = make_platform(offchip={"efficiency": 0.5})
    assert half.bytes_per_cycle == pytest.approx(full.bytes_per_cycle / 2)
    assert half.rated_bytes_per_cycle == full.rated_bytes_per_cycle
    fast, slow = (simulate(Inputs(p, ONE_GEMM, Mapping())).total for p in (full, half))
    assert slow.offchip_busy_cycles > fast.offchip_busy_cycles


def test_overhead_is_its_own_term_per_run(tmp_path):
    platform = make_platform(runtime={"op_overhead_cycles": 1000})
    workload = Workload.model_validate({"name": "w", "operators": [
        {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 32, "n": 32, "k": 64,
         "repeat": 3}]})
    mapping = Mapping()
    with_overhead = simulate(Inputs(platform, workload, mapping)).operators[0]
    without = simulate(Inputs(make_platform(), workload, mapping)).operators[0]
    assert with_overhead.run.overhead_cycles == 1000
    assert with_overhead.totals.overhead_cycles == 3000
    assert with_overhead.totals.cycles == without.totals.cycles + 3000
    path = tmp_path / "p.yaml"
    path.write_text(platform_text(**{"runtime.op_overhead_cycles": 1000}))
    wl = tmp_path / "w.yaml"
    wl.write_text(yaml.safe_dump(workload.model_dump(mode="json")))
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    assert main(["run", "--arch", str(path), "--workload", str(wl), "--json",
                 str(out_json), "--csv", str(out_csv)]) == 0
    record = json.loads(out_json.read_text())["operators"][0]
    assert record["per_run"]["overhead_cycles"] == 1000
    assert record["totals"]["overhead_cycles"] == 3000
    (row,) = csv.DictReader(out_csv.open())
    assert int(row["overhead_cycles"]) == 3000


def test_area_gives_perf_per_mm2(capsys):
    platform = make_platform(area=AREA)
    # 64 PEs x 0.001 + 12 KiB of buffers x 1.5 / MiB + 8 lanes x 0.01 + 2 fixed.
    expected = 64 * 0.001 + 3 * 4096 / 2**20 * 1.5 + 8 * 0.01 + 2.0
    assert platform.area_mm2 == pytest.approx(expected)
    result = simulate(Inputs(platform, ONE_GEMM, Mapping()))
    derived = result.total.derived(platform)
    assert derived["area_mm2"] == pytest.approx(expected)
    assert derived["flops_per_s_per_mm2"] == pytest.approx(
        result.total.model_flops / derived["time_s"] / expected)
    assert "area_mm2" not in result.total.derived(make_platform())
