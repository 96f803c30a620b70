"""The review packet's "Assumptions and sensitivity" section (issue 27 item 5, DESIGN.md
section 16): the assumed values behind each platform, the tornado of the headline
metric (equal to reruns of the perturbed platform), whether the ranking and the SLA
verdicts (one request at a time and served) hold across the ranges, a verdict that can
flip as a finding, and `accsim verify` recomputing the section's file."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from simulator.calibrate.sensitivity import with_values
from simulator.cli import main
from simulator.review import assumption_study as assumptions_module
from simulator.inputs.named_inputs import load_inputs
from simulator.simulate import simulate

# A memory-bound probe: its time is the weights' stream, so bandwidth decides it.
WORKLOAD = {"name": "stream", "operators": [
    {"name": "gemv", "layer_type": "gemv", "kind": "gemm", "m": 8, "n": 2048,
     "k": 2048}]}

STUDY = """\
title: a ranking resting on one assumption
objective: check that the packet names the flip
owners: [a tester]
scope:
  platforms: [A.yaml, B.yaml]
  workloads: [stream.yaml]
  serving: {{rate_per_s: 20, requests: 30}}
baseline: A
sla:
  latency_ms: {{p99: {limit}}}
risks:
  - {{risk: none really, owner: a tester}}
assumptions: {{}}
"""


def _platform(folder, name: str, values: dict, provenance: dict | None) -> None:
    raw = with_values(load_inputs("tpu_v1", "gemm_4096", None).platform,
                      {"name": name, **values})
    if provenance is not None:
        raw["provenance"] = provenance
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(raw))


def _time_s(platform: str, workload: str) -> float:
    result = simulate(load_inputs(platform, workload, None), engine="fast")
    return result.total.cycles / (result.platform.clock_ghz * 1e9)


@pytest.fixture(scope="module")
def flipping(tmp_path_factory):
    """A has no assumptions; B has 1.2x A's bandwidth and an efficiency guessed in
    [0.3, 1]: B is faster as given, slower at the low end. The latency limit lies
    between B's best and worst corner, so B's SLA verdict can flip too."""
    folder = tmp_path_factory.mktemp("flip")
    (folder / "stream.yaml").write_text(yaml.safe_dump(WORKLOAD))
    _platform(folder, "A", {}, {})
    _platform(folder, "B", {"offchip.bandwidth_gbps": 40.8},
              {"offchip.efficiency": {"kind": "assumed", "range": [0.3, 1.0]}})
    given = _time_s(str(folder / "B.yaml"), str(folder / "stream.yaml"))
    study = folder / "study.yaml"
    study.write_text(STUDY.format(limit=f"{given * 1e3 * 1.1:.6g}"))
    out = folder / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 0
    return folder, out, json.loads((out / "packet.json").read_text())


def _section(packet: dict) -> dict:
    return next(s for s in packet["sections"] if s["id"] == "assumptions")


def test_assumed_values_and_tornado_equal_reruns(flipping):
    folder, out, packet = flipping
    section = _section(packet)
    tables = {t["id"]: t for t in section["tables"]}
    assert tables["assumed"]["rows"] == [["B", "offchip.efficiency", "assumed", 0.9,
                                          0.3, 1.0, None]]
    (row,) = tables["tornado"]["rows"]
    assert row[:5] == ["B", "offchip.efficiency", 0.9, 0.3, 1.0]
    for end, figure in ((0.3, row[5]), (1.0, row[6])):
        moved = folder / f"B_{end}.yaml"
        moved.write_text(yaml.safe_dump(with_values(
            load_inputs(str(folder / "B.yaml"), "gemm_4096", None).platform,
            {"offchip.efficiency": end})))
        assert figure == _time_s(str(moved), str(folder / "stream.yaml"))
    assert [f["file"] for f in section["figures"]] == ["figures/tornado-B.svg"]
    entry = next(r for r in packet["results"] if r["kind"] == "assumptions")
    data = (out / entry["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    recorded = json.loads(data)["platforms"][1]
    run = json.loads((out / "results" / "B.stream.default.json").read_text())
    assert recorded["tornado"]["base"] == pytest.approx(run["workload"]["time_s"],
                                                         rel=1e-12)


def test_a_verdict_that_can_flip_is_a_finding(flipping):
    _, out, packet = flipping
    section = _section(packet)
    assert section["verdict"] == "fail"
    tables = {t["id"]: t for t in section["tables"]}
    (pair,) = tables["robust-ranking"]["rows"]
    assert pair[:4] == ["A", "B", "B", "CAN FLIP"]
    assert "B faster unless B.offchip.efficiency < " in pair[4]
    sla = {(row[0], row[1]): row for row in tables["robust-sla"]["rows"]}
    run_b = sla[("B", "one request at a time")]
    assert run_b[8] == "met" and run_b[9] == "CAN FLIP"
    assert run_b[6] <= run_b[5] <= run_b[4] < run_b[7]  # best <= given <= limit < worst
    assert sla[("A", "one request at a time")][9] == "holds"  # nothing assumed
    assert ("B", "serving at 20/s") in sla
    flips = [f for f in packet["findings"] if f["kind"] == "verdict can flip"]
    assert any(f["text"].startswith("ranking can flip: A vs B") for f in flips)
    assert any("latency_ms p99 (one request at a time) on B" in f["text"] for f in flips)
    html = (out / "index.html").read_text()
    assert '<section id="s-assumptions">' in html and "CAN FLIP" in html
    assert "## Assumptions and sensitivity (fail)" in (out / "packet.md").read_text()


def test_corners_are_served_from_files_holding_them(flipping):
    _, out, packet = flipping
    data = json.loads((out / "results" / "assumptions.stream.json").read_text())
    b = data["platforms"][1]
    for end in ("best", "worst"):
        corner = yaml.safe_load((out / "inputs" / "corners" / f"B.{end}.yaml").read_text())
        assert corner["offchip"]["efficiency"] == b["corners"][f"{end}_corner"][
            "offchip.efficiency"]
        assert b["serving"][end]["serving"]["rates_per_s"] == [20]
    assert b["corners"]["best_corner"] == {"offchip.efficiency": 1.0}
    assert b["corners"]["worst_corner"] == {"offchip.efficiency": 0.3}


def test_verify_recomputes_the_section(flipping, capsys):
    _, out, _ = flipping
    assert main(["verify", str(out / "packet.json")]) == 0
    capsys.readouterr()
    path = out / "results" / "assumptions.stream.json"
    original = path.read_text()
    try:
        data = json.loads(original)
        data["platforms"][1]["tornado"]["fields"][0]["metric_low"] *= 0.5
        path.write_text(json.dumps(data, indent=1) + "\n")
        packet = json.loads((out / "packet.json").read_text())
        for entry in packet["results"]:
            entry["sha256"] = hashlib.sha256((out / entry["path"]).read_bytes()).hexdigest()
        (out / "packet.json").write_text(json.dumps(packet))
        assert main(["verify", str(out / "packet.json")]) == 1
        assert "differs on rerun: results/assumptions.stream.json: " \
            ".platforms[1].tornado.fields[0].metric_low" in capsys.readouterr().out
    finally:
        path.write_text(original)


def test_a_pair_3x_apart_holds_and_passes(tmp_path):
    (tmp_path / "stream.yaml").write_text(yaml.safe_dump(WORKLOAD))
    _platform(tmp_path, "A", {}, None)  # tpu_v1's whole provenance table
    _platform(tmp_path, "B", {"offchip.bandwidth_gbps": 102.0}, None)
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.replace("  serving: {{rate_per_s: 20, requests: 30}}\n", "")
                     .format(limit=1000))
    out = tmp_path / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 0
    packet = json.loads((out / "packet.json").read_text())
    section = _section(packet)
    assert section["verdict"] == "pass", section["reason"]
    tables = {t["id"]: t for t in section["tables"]}
    assert tables["robust-ranking"]["rows"][0][2:4] == ["B", "holds"]
    assert {row[0] for row in tables["assumed"]["rows"]} == {"A", "B"}
    assert len(section["figures"]) == 2
    assert not [f for f in packet["findings"] if f["kind"] == "verdict can flip"]


def test_a_study_without_assumptions_says_not_evaluated(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.replace("assumptions: {{}}\n", "")
                     .replace("  serving: {{rate_per_s: 20, requests: 30}}\n", "")
                     .replace("[A.yaml, B.yaml]", "[tpu_v1]").replace("baseline: A",
                                                                   "baseline: tpu_v1")
                     .replace("[stream.yaml]", "[gemm_4096]").format(limit=5))
    assert main(["review", str(study), "--out", str(tmp_path / "p"), "--no-cache"]) == 0
    packet = json.loads((tmp_path / "p" / "packet.json").read_text())
    section = _section(packet)
    assert section["verdict"] == "not evaluated"
    assert "assumptions:" in section["reason"]
    assert "assumptions" not in [r["kind"] for r in packet["results"]]


@pytest.mark.parametrize("given, expected", [
    ("{{workload: nope}}", "assumptions.workload: 'nope' is no workload"),
    ("{{fields: [dma.setup_cycles, offchip.bandwidth_gbps]}}",
     "assumptions.fields[1]: 'offchip.bandwidth_gbps' is assumed by no platform"),
    ("{{metric: watts}}", "assumptions.metric"),
])
def test_a_bad_assumptions_entry_is_one_clear_error(tmp_path, capsys, given, expected):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.replace("assumptions: {{}}", f"assumptions: {given}")
                     .replace("[A.yaml, B.yaml]", "[tpu_v1]").replace("baseline: A",
                                                                   "baseline: tpu_v1")
                     .replace("[stream.yaml]", "[gemm_4096]").format(limit=5))
    assert main(["review", str(study), "--out", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err
    assert f"{study}: {expected}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p" / "results").exists()


def _shipped_pair_study(tmp_path):
    """The study on tpu_v1 and tpu_v5e_like with gemm_4096, no serving, its tornado
    bounded to offchip.efficiency."""
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.replace("assumptions: {{}}",
                                   "assumptions: {{fields: [offchip.efficiency]}}")
                     .replace("  serving: {{rate_per_s: 20, requests: 30}}\n", "")
                     .replace("[A.yaml, B.yaml]", "[tpu_v1, tpu_v5e_like]")
                     .replace("baseline: A", "baseline: tpu_v1")
                     .replace("[stream.yaml]", "[gemm_4096]").format(limit=5))
    return study


def test_fields_bound_the_perturbations(tmp_path):
    study = _shipped_pair_study(tmp_path)
    assert main(["review", str(study), "--out", str(tmp_path / "p"), "--no-cache"]) == 0
    packet = json.loads((tmp_path / "p" / "packet.json").read_text())
    tables = {t["id"]: t for t in _section(packet)["tables"]}
    assert [row[:2] for row in tables["tornado"]["rows"]] == [
        ["tpu_v1", "offchip.efficiency"], ["tpu_v5e_like", "offchip.efficiency"]]
    assert len(tables["assumed"]["rows"]) > 2  # every assumed value is still listed


def test_a_second_review_takes_the_section_from_the_cache(tmp_path, monkeypatch):
    study = _shipped_pair_study(tmp_path)
    cache = tmp_path / "cache"
    assert main(["review", str(study), "--out", str(tmp_path / "a"),
                 "--cache", str(cache)]) == 0
    (entry,) = cache.glob("assumptions-*.json")

    def computed_again(*args, **kwargs):
        raise AssertionError("the section was computed again")

    monkeypatch.setattr(assumptions_module, "compute", computed_again)
    assert main(["review", str(study), "--out", str(tmp_path / "b"),
                 "--cache", str(cache)]) == 0
    for name in ("packet.json", "index.html", "results/assumptions.gemm_4096.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    entry.write_text(entry.read_text().replace('"metric_low": ', '"metric_low": 1'))
    with pytest.raises(AssertionError, match="computed again"):  # damaged: not trusted
        main(["review", str(study), "--out", str(tmp_path / "c"), "--cache", str(cache)])
