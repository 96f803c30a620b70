"""`accsim regress` takes run's inputs and outputs (issue 29 item 4): a baseline
recorded with --model, --onnx, --kineto or --precision is `run --json` of the same
flags, a rerun with the same flags compares against it operator by operator, and
--json, --csv and --plot write what `run` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "workloads" / "examples"
PLAN = str(ROOT / "experiments" / "studies" / "precision" / "int8_weights.yaml")
MODEL = ["--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--phase", "decode",
         "--context", "64"]
# Each workload source regress takes, as flags (the same for run).
SOURCES = {
    "model": MODEL,
    "onnx": ["--arch", "tpu_v1", "--onnx", str(EXAMPLES / "resnet18.onnx")],
    "kineto": ["--arch", "tpu_v1", "--kineto", str(EXAMPLES / "decoder_trace.json")],
    "precision": MODEL + ["--precision", PLAN],
}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_a_recorded_baseline_is_run_json_and_a_rerun_compares_unchanged(
        tmp_path, monkeypatch, capsys, source):
    monkeypatch.chdir(tmp_path)
    flags = SOURCES[source]
    assert main(["regress", "--baseline", "base.json", "--update-baseline", *flags]) == 0
    assert main(["run", *flags, "--json", "run.json"]) == 0
    assert Path("base.json").read_bytes() == Path("run.json").read_bytes()
    capsys.readouterr()
    assert main(["regress", "--baseline", "base.json", *flags]) == 0
    out = capsys.readouterr().out
    assert "OK: no operator regressed" in out and "REGRESSED" not in out
    operators = len(json.loads(Path("base.json").read_text())["operators"])
    assert f"unchanged within the threshold: {operators} operators" in out


def test_a_model_baseline_catches_a_regressed_operator(tmp_path, monkeypatch, capsys):
    """The baseline says one GEMM took half its cycles: the rerun with --model names it
    and exits 1."""
    monkeypatch.chdir(tmp_path)
    assert main(["regress", "--baseline", "base.json", "--update-baseline", *MODEL]) == 0
    data = json.loads(Path("base.json").read_text())
    op = next(op for op in data["operators"] if op["kind"] == "gemm")
    op["totals"]["cycles"] //= 2
    Path("base.json").write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["regress", "--baseline", "base.json", *MODEL]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED (1):" in out and f"  {op['name']} (" in out
    assert "FAIL: 1 operator regressed" in out


def test_a_model_baseline_refuses_another_step(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["regress", "--baseline", "base.json", "--update-baseline", *MODEL]) == 0
    capsys.readouterr()
    other = MODEL[:-1] + ["65"]
    assert main(["regress", "--baseline", "base.json", *other]) == 2
    err = capsys.readouterr().err
    assert "baseline is for workload 'llama_3_1_8b_decode_b1_c64', this run for " \
        "'llama_3_1_8b_decode_b1_c65'" in err


def test_json_csv_and_plot_are_what_run_writes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flags = SOURCES["precision"]
    assert main(["regress", "--baseline", "base.json", "--update-baseline", *flags,
                 "--json", "r.json", "--csv", "r.csv", "--plot", "r.png"]) == 0
    assert main(["run", *flags, "--json", "run.json", "--csv", "run.csv"]) == 0
    assert Path("r.json").read_bytes() == Path("run.json").read_bytes()
    assert Path("r.csv").read_bytes() == Path("run.csv").read_bytes()
    assert json.loads(Path("r.json").read_text())["precision"]["plan"] == "int8_weights"
    assert "llm" in json.loads(Path("r.json").read_text())
    assert Path("r.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, fragment", [
    (["--plot", "r.txt"], "--plot"),
    (["--model", "llama_3_1_8b", "--phase", "decode", "--context", "8",
      "--workload", "gemm_4096"], "--model replaces --workload"),
    (["--phase", "decode"], "only with --model"),
])
def test_bad_flags_are_one_clear_error_before_any_run(tmp_path, monkeypatch, capsys, argv,
                                                      fragment):
    monkeypatch.chdir(tmp_path)
    assert main(["regress", "--baseline", "base.json", "--update-baseline", "--arch",
                 "tpu_v1", *argv]) == 1
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not Path("base.json").exists()
