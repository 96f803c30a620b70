"""accsim compare --robust (DESIGN.md section 16): a pair whose ranking rests on one
assumed value names that value and the break-even found by bisection (checked by
reruns on either side of it); a pair 3x apart in bandwidth holds across the ranges."""

from __future__ import annotations

import json

import yaml

from simulator.calibrate.sensitivity import with_values
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.simulate import simulate

# A memory-bound probe: a matrix-vector-like GEMM streams its 4 MiB of weights once.
WORKLOAD = {"name": "stream", "operators": [
    {"name": "gemv", "layer_type": "gemv", "kind": "gemm", "m": 8, "n": 2048,
     "k": 2048}]}


def _platform(tmp_path, name: str, values: dict, provenance: dict | None) -> str:
    raw = with_values(load_inputs("tpu_v1", "gemm_4096", None).platform,
                      {"name": name, **values})
    if provenance is not None:
        raw["provenance"] = provenance
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def _robust(tmp_path, capsys, a: str, b: str) -> tuple[str, dict]:
    workload = tmp_path / "stream.yaml"
    workload.write_text(yaml.safe_dump(WORKLOAD))
    out = tmp_path / "robust.json"
    assert main(["compare", "--arch", a, "--arch", b, "--workload", str(workload),
                 "--robust", "--robust-json", str(out), "--engine", "fast"]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def test_a_ranking_resting_on_one_assumption_names_the_flip(tmp_path, capsys):
    # B has 1.2x A's bandwidth but its sustained efficiency is a guess in [0.3, 1]: B is
    # faster as given and slower once its efficiency falls far enough below 0.9.
    a = _platform(tmp_path, "A", {}, {})
    b = _platform(tmp_path, "B", {"offchip.bandwidth_gbps": 40.8},
                  {"offchip.efficiency": {"kind": "assumed", "range": [0.3, 1.0]}})
    text, data = _robust(tmp_path, capsys, a, b)
    (pair,) = data["pairs"]
    assert pair["winner"] == "B" and not pair["holds"]
    (flip,) = pair["flips"]
    assert (flip["platform"], flip["field"], flip["sign"]) == ("B", "offchip.efficiency",
                                                               "<")
    assert 0.3 < flip["threshold"] < 0.9
    assert "A vs B: B faster unless B.offchip.efficiency < " in text
    # The break-even is real: reruns just either side of it rank the pair each way.
    stream = str(tmp_path / "stream.yaml")
    time_a = simulate(load_inputs(a, stream, None), engine="fast").total.cycles
    for step, b_faster in ((-0.01, False), (0.01, True)):
        moved = _platform(tmp_path, "B2", {"offchip.bandwidth_gbps": 40.8,
                                           "offchip.efficiency": flip["threshold"] + step},
                          {})
        time_b = simulate(load_inputs(moved, stream, None), engine="fast").total.cycles
        assert (time_b < time_a) == b_faster, step


def test_a_pair_3x_apart_in_bandwidth_holds(tmp_path, capsys):
    # Both keep tpu_v1's whole provenance table (every assumed range); B streams 3x faster.
    a = _platform(tmp_path, "A", {}, None)
    b = _platform(tmp_path, "B", {"offchip.bandwidth_gbps": 102.0}, None)
    text, data = _robust(tmp_path, capsys, a, b)
    (pair,) = data["pairs"]
    assert pair["winner"] == "B" and pair["holds"] and pair["flips"] == []
    slow, fast = data["platforms"]
    assert fast["worst"] < slow["best"]
    assert slow["best"] <= slow["base"] <= slow["worst"] and slow["best"] < slow["worst"]
    assert "A vs B: B faster; holds across the assumed ranges" in text


def test_robust_refuses_a_multi_chip_plan(capsys):
    assert main(["compare", "--arch", "tpu_v1", "--arch", "edge_32x32", "--robust",
                 "--chips", "2", "--tp", "2"]) == 1
    err = capsys.readouterr().err
    assert "--robust" in err and "Traceback" not in err
