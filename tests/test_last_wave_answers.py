"""Answers that must agree with their own rows, and names that must stay data (issue 47,
items 3, 6 and 7): points met at every rate tried are summed up as such, a search whose
points are all pruned writes the --json it sends the user to, `sweep report` on a
serving sweep's store gives a hint that works, a measurement file's name cannot put a
key into the calibrated platform, and a guardrail fails on NaN."""

from __future__ import annotations

import json
import math

import yaml
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.precision.precision_plan import Guardrail

SERVE = ["--model", "config.json", "--prompt-tokens", "64", "--output-tokens", "8",
         "--requests", "24"]
PD = ["plan-deployment", "--arch", "tpu_v5e_like", *SERVE, "--budget-chips", "2",
      "--replicas", "1", "--max-batch", "4", "--scheduler", "serial"]


def test_points_met_at_every_rate_are_not_summed_up_as_failing(tmp_path, monkeypatch,
                                                               capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    assert main(PD + ["--sla", "ttft_p99_ms=500", "--json", "p.json"]) == 0
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "p.json").read_text())
    unbounded = [row["key"] for row in data["points"] if row["status"] == "unbounded"]
    assert unbounded, "the loose SLA should be met at every rate tried"
    assert "no deployment meets the SLA" not in out
    assert f"{len(unbounded)} deployments meet the SLA at every rate tried" in out
    assert "Pareto front over the front objectives: empty" in out
    assert sorted(data["unbounded"]["tpu_v5e_like"]) == sorted(unbounded)


def test_an_all_pruned_search_writes_the_json_it_points_to(tmp_path, monkeypatch,
                                                          capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    assert main(PD + ["--sla", "ttft_p99_ms=0.0001", "--json", "p.json",
                      "--csv", "p.csv"]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("error:") == 1 and "were pruned" in captured.err
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["points"] and all(row["status"] == "pruned" and row["reason"]
                                  for row in data["points"])
    assert data["points"][0]["reason"] in captured.err
    assert len((tmp_path / "p.csv").read_text().splitlines()) == len(data["points"]) + 1


def test_sweep_report_of_a_serving_store_names_a_command_that_works(tmp_path,
                                                                  monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({
        "name": "tiny", "platform": "tpu_v5e_like",
        "serving": {"model": "config.json", "prompt_tokens": 64, "output_tokens": 8,
                    "requests": 24, "sla": {"ttft_p99_ms": 0.15, "tpot_p99_ms": 0.06}},
        "axes": {"system.tp": [1, 2]},
        "objectives": {"tokens_per_s_per_chip": "max", "ttft_p99_ms": "min"}}))
    run = ["sweep", "run", "s.yaml", "--store", "s.sqlite", "--scheduler", "serial"]
    assert main(run) == 0
    capsys.readouterr()
    assert main(["sweep", "report", "s.sqlite"]) == 1
    err = capsys.readouterr().err
    assert "accsim sweep run SPEC.yaml --store s.sqlite" in err
    assert main(run) == 0  # the hint: every point read back, the front printed
    out = capsys.readouterr().out
    assert "2 already stored, 0 computed" in out and "[front]" in out


def test_a_newline_in_a_measurement_file_name_stays_in_the_comment(tmp_path,
                                                                   monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    name = "x\nclock_ghz: 99\n#.csv"
    (tmp_path / name).write_text(
        "operator,shape,dtype,measured_s\ngemm,m=8 n=1024 k=2048,bf16,1e-5\n"
        "gemm,m=8 n=2048 k=2048,bf16,2e-5\nsoftmax,rows=256 cols=512,bf16,1e-6\n"
        "softmax,rows=512 cols=512,bf16,2e-6\n")
    assert main(["calibrate", "--arch", "tpu_v5e_like", "--measured", name, "-o",
                 "out.yaml", "--fit", "offchip.efficiency", "--folds", "2"]) == 0
    capsys.readouterr()
    text = (tmp_path / "out.yaml").read_text()
    written = yaml.safe_load(text)
    assert written["clock_ghz"] == 1.5  # the shipped value, not the name's 99
    assert written["provenance"]["offchip.efficiency"]["source"] == name
    assert all(line.startswith("#") for line in text.splitlines()[:1])
    assert not any(line.startswith("clock_ghz: 99") for line in text.splitlines())


def test_a_guardrail_fails_on_nan():
    assert Guardrail(min_sqnr_db=10).failure(0.01, math.nan) is not None
    assert Guardrail(max_rel_error=0.1).failure(math.nan, None) is not None
    assert Guardrail(min_sqnr_db=10, max_rel_error=0.1).failure(0.01, 40.0) is None
