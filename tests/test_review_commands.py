"""Reproducibility and review commands: verify, compare, check, schema (DESIGN.md
section 6), and the energy-per-MAC sanity bound."""

from __future__ import annotations

import json
import shutil

import pytest

import simulator
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.loader import locate
from simulator.simulate import simulate


@pytest.fixture()
def recorded(tmp_path):
    """A result file produced from a workload file the test may edit."""
    workload = tmp_path / "mlp.yaml"
    shutil.copy(locate("tpu_v1_mlp_b200", "workload"), workload)
    path = tmp_path / "result.json"
    assert main(["run", "--workload", str(workload), "--json", str(path)]) == 0
    return path, workload


def test_verify_passes_on_an_untouched_result(recorded, capsys):
    path, _ = recorded
    assert main(["verify", str(path)]) == 0
    assert "verified" in capsys.readouterr().out


def test_verify_names_the_edited_input(recorded, capsys):
    path, workload = recorded
    workload.write_text(workload.read_text().replace("m: 200", "m: 100", 1))
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"changed input: workload: {workload} (sha256 changed since the run)" in out
    # The rerun uses the embedded inputs, so the numbers themselves still agree.
    assert "differs on rerun" not in out


def test_verify_ignores_library_versions_but_not_the_model_version(recorded, capsys):
    path, _ = recorded
    data = json.loads(path.read_text())
    data["manifest"]["environment"]["numpy"] = "0.0.1"
    data["manifest"]["accsim_version"] = "0.0.0"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 0
    data["manifest"]["model_version"] = 1
    data["operators"][0]["totals"]["cycles"] += 1   # an old model's figures differ
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"model version changed: the result was written by model version 1, this " \
        f"accsim is model version {simulator.MODEL_VERSION}" in out
    assert "differs on rerun" not in out


def test_verify_catches_a_tampered_number(recorded, capsys):
    path, _ = recorded
    data = json.loads(path.read_text())
    data["operators"][0]["totals"]["cycles"] += 1
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 1
    assert ".operators[0](fc1).totals.cycles: " in capsys.readouterr().out


def test_verify_rejects_a_file_that_is_not_a_result(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    assert main(["verify", str(path)]) == 1
    assert "not an accsim result file" in capsys.readouterr().err


def test_compare_three_platforms_on_bert(capsys):
    assert main(["compare", "--arch", "tpu_v1", "--arch", "tpu_v5e_like", "--arch",
                 "edge_32x32", "--workload", "bert_base_s128"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines()
            if line.split("│")[0].strip() in ("tpu_v1", "tpu_v5e_like", "edge_32x32")]
    assert len(rows) == 3
    # The first platform is the reference: its ratios are 1.00.
    assert rows[0].count("1.00") >= 3


@pytest.mark.parametrize("name, kind", [("tpu_v1", "platform"),
                                        ("bert_base_s512", "workload"),
                                        ("bert_base_fuse_gelu", "mapping")])
def test_check_recognises_each_kind(capsys, name, kind):
    assert main(["check", str(locate(name, kind))]) == 0
    assert f"valid {kind}" in capsys.readouterr().out


def test_check_reports_a_bad_file(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nclock_ghz: -1\nsystolic_array: {}\n")
    assert main(["check", str(path)]) == 1
    assert f"{path}: clock_ghz: " in capsys.readouterr().err


@pytest.mark.parametrize("kind, field", [("platform", "systolic_array"),
                                         ("workload", "operators"),
                                         ("mapping", "layer_types")])
def test_schema_is_json_schema_with_the_fields(capsys, kind, field):
    assert main(["schema", kind]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert field in schema["properties"] and schema["additionalProperties"] is False


def test_energy_per_mac_of_a_big_gemm_is_sane():
    result = simulate(load_inputs("tpu_v5e_like", "gemm_4096", None))
    platform = result.platform
    per_mac = result.total.derived(platform)["energy_per_mac_pj"]
    bare = platform.energy.mac_pj["bf16"]
    print(f"energy per MAC, 4096^3 GEMM on tpu_v5e_like: {per_mac:.3f} pJ "
          f"(bare MAC {bare} pJ, ratio {per_mac / bare:.2f})")
    assert bare < per_mac < 10 * bare
