"""`accsim regress` (the mapping issue): exit 0 on its own baseline, a 2% regression
named with both numbers and a 0.5% one ignored, improvements, added and removed
operators listed, exit 2 on a baseline from another platform, workload or MODEL_VERSION
(naming which) or on one that is not a result, a warning for another package version,
JUnit XML that parses, and --update-baseline."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from simulator.cli import main

# Operator at a time (--fusion none): the cases name operators the planner would fuse.
ARGS = ["--arch", "tpu_v5e_like", "--workload", "bert_base_s128", "--fusion", "none"]


@pytest.fixture(scope="module")
def baseline_json(tmp_path_factory):
    path = tmp_path_factory.mktemp("regress") / "base.json"
    assert main(["run", *ARGS, "--json", str(path)]) == 0
    return path.read_text()


@pytest.fixture()
def baseline(tmp_path, baseline_json):
    path = tmp_path / "base.json"
    path.write_text(baseline_json)
    return path


def edit(path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def op_record(data: dict, name: str) -> dict:
    return next(op for op in data["operators"] if op["name"] == name)


def regress(baseline, capsys, *extra: str) -> tuple[int, str, str]:
    code = main(["regress", "--baseline", str(baseline), *ARGS, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_exit_0_on_its_own_baseline(baseline, capsys):
    code, out, _ = regress(baseline, capsys)
    assert code == 0
    assert "unchanged within the threshold: 12 operators" in out
    assert "OK: no operator regressed" in out


def test_names_a_two_percent_regression_and_ignores_half_a_percent(baseline, capsys):
    # The baseline says the operators used to be faster: now 2% and 0.5% slower.
    def change(data):
        up = op_record(data, "layer0_mlp_up")["totals"]
        down = op_record(data, "layer0_mlp_down")["totals"]
        up["cycles"] = round(up["cycles"] / 1.02)
        down["cycles"] = round(down["cycles"] / 1.005)
    edit(baseline, change)
    old = op_record(json.loads(baseline.read_text()), "layer0_mlp_up")["totals"]["cycles"]
    code, out, _ = regress(baseline, capsys)
    assert code == 1
    regressed = out.split("REGRESSED (1):")[1].splitlines()[1]
    assert regressed.startswith("  layer0_mlp_up (mlp.up): cycles ")
    new = round(old * 1.02)
    assert f"cycles {old:,} -> " in regressed and "+2.0" in regressed
    assert abs(int(regressed.split("-> ")[1].split(" ")[0].replace(",", "")) - new) <= 1
    assert "layer0_mlp_down" not in out
    assert "FAIL: 1 operator regressed" in out


def test_floor_ignores_small_absolute_changes_and_improvements_are_listed(baseline,
                                                                          capsys):
    def change(data):
        # 5% slower but fewer than 100 cycles: below the floor.
        add = op_record(data, "layer0_attn_add")["totals"]
        add["cycles"] = add["cycles"] - min(99, int(add["cycles"] * 0.05))
        # 10% faster now: an improvement.
        qk = op_record(data, "layer0_attn_qk")["totals"]
        qk["cycles"] = round(qk["cycles"] * 1.10)
    edit(baseline, change)
    code, out, _ = regress(baseline, capsys)
    assert code == 0
    assert "IMPROVED (1):" in out and "layer0_attn_qk (attention.qk): cycles" in out
    assert "layer0_attn_add" not in out
    # With no floor the same 99 cycles are a regression.
    code, out, _ = regress(baseline, capsys, "--floor-cycles", "0")
    assert code == 1 and "layer0_attn_add" in out.split("REGRESSED")[1]


def test_added_and_removed_operators_are_listed(baseline, capsys):
    # Fusing the GELU removes it from the run; a baseline operator absent now is
    # removed, one new now is added.
    def change(data):
        extra = dict(op_record(data, "layer0_attn_add"), name="layer0_old_op")
        data["operators"].append(extra)
        data["operators"] = [op for op in data["operators"]
                             if op["name"] != "layer0_mlp_norm"]
    edit(baseline, change)
    code, out, _ = regress(baseline, capsys, "--mapping", "bert_base_fuse_gelu")
    assert "ADDED (1):\n  layer0_mlp_norm (norm)" in out
    removed = out.split("REMOVED (2):")[1]
    assert "layer0_mlp_gelu (mlp.gelu)" in removed and "layer0_old_op" in removed
    assert code in (0, 1)


@pytest.mark.parametrize("field, value, message", [
    (("manifest", "inputs", "platform", "canonical", "name"), "tpu_v1",
     "baseline is for platform 'tpu_v1', this run for 'tpu_v5e_like'"),
    (("manifest", "inputs", "platform", "canonical", "clock_ghz"), 1.0,
     "platform 'tpu_v5e_like' differs from the baseline's in clock_ghz"),
    (("manifest", "inputs", "workload", "canonical", "name"), "bert_base_s512",
     "baseline is for workload 'bert_base_s512', this run for 'bert_base_s128'"),
    (("manifest", "model_version"), -1, "baseline has MODEL_VERSION -1"),
])
def test_exit_2_on_a_baseline_from_elsewhere(baseline, capsys, tmp_path, field, value,
                                             message):
    def change(data):
        node = data
        for key in field[:-1]:
            node = node[key]
        node[field[-1]] = value
    edit(baseline, change)
    junit = tmp_path / "junit.xml"
    code, _, err = regress(baseline, capsys, "--junit", str(junit))
    assert code == 2
    assert message in err
    suite = ET.parse(junit).getroot().find("testsuite")
    (case,) = suite.findall("testcase")
    assert message in case.find("error").get("message")


def test_exit_2_on_a_baseline_from_another_platform_run(tmp_path, capsys):
    other = tmp_path / "v1.json"
    assert main(["run", "--arch", "tpu_v1", "--workload", "bert_base_s128", "--json",
                 str(other)]) == 0
    capsys.readouterr()
    code, _, err = regress(other, capsys)
    assert code == 2 and "platform 'tpu_v1'" in err


@pytest.mark.parametrize("text, message", [
    ("not json", "not JSON"),
    ('{"operators": []}', "not an accsim result file (missing 'manifest')"),
])
def test_exit_2_on_an_invalid_baseline(tmp_path, capsys, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    code, _, err = regress(path, capsys)
    assert code == 2 and message in err
    code, _, err = regress(tmp_path / "missing.json", capsys)
    assert code == 2 and "baseline not found" in err


def test_another_package_version_is_only_a_warning(baseline, capsys):
    edit(baseline, lambda data: data["manifest"].update(accsim_version="0.0.1"))
    code, out, _ = regress(baseline, capsys)
    assert code == 0
    assert "warning: baseline written by accsim 0.0.1" in out


def test_junit_xml_parses_with_one_case_per_operator(baseline, capsys, tmp_path):
    def change(data):
        up = op_record(data, "layer0_mlp_up")["totals"]
        up["cycles"] = round(up["cycles"] / 1.05)
        data["operators"] = [op for op in data["operators"]
                             if op["name"] != "layer0_attn_norm"]
        data["operators"].append(dict(op_record(data, "layer0_attn_add"), name="gone"))
    edit(baseline, change)
    junit = tmp_path / "junit.xml"
    code, _, _ = regress(baseline, capsys, "--junit", str(junit))
    assert code == 1
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert len(cases) == 13                 # 12 operators now, and one removed
    assert int(suite.get("tests")) == 13 and int(suite.get("failures")) == 1
    assert "cycles" in cases["layer0_mlp_up"].find("failure").get("message")
    assert cases["gone"].find("skipped") is not None
    assert cases["layer0_attn_norm"].find("system-out").text.startswith("added")
    assert cases["layer0_attn_qk"].find("failure") is None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["tolerance"] == "0.01"


def test_update_baseline_writes_what_run_json_writes(tmp_path, capsys, baseline_json):
    path = tmp_path / "new.json"
    assert main(["regress", "--baseline", str(path), *ARGS, "--update-baseline"]) == 0
    assert path.read_text() == baseline_json
    edit(path, lambda data: op_record(data, "layer0_mlp_up")["totals"].update(cycles=1))
    assert main(["regress", "--baseline", str(path), *ARGS, "--update-baseline"]) == 0
    assert "REGRESSED" in capsys.readouterr().out
    assert path.read_text() == baseline_json


def test_heuristic_switch_is_compared_per_operator(baseline, capsys):
    code, out, _ = regress(baseline, capsys, "--heuristic", "min_offchip")
    assert "mapping default (heuristic min_offchip) against baseline" in out
    assert code in (0, 1)
    assert main(["regress", "--baseline", str(baseline), *ARGS, "--heuristic",
                 "nope"]) == 1
    assert "unknown heuristic 'nope'" in capsys.readouterr().err
