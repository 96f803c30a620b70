"""`accsim serve`: the result JSON's keys, byte-identical reruns, the YAML spec equal to
the flags, curves and the rate search, and one clear error per bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from simulator.cli import main
from timed_cli import HANG_S

RESULT_KEYS = {"latency_ms", "ttft_ms", "tpot_ms", "service_ms", "throughput_rps",
               "tokens_per_s", "goodput_rps", "utilization", "energy_per_request_j",
               "energy_per_token_j", "requests", "completed", "dropped", "preempted",
               "sla", "bucketing", "manifest"}
PLAIN = ["serve", "--arch", "tpu_v1", "--workload", "tpu_v1_mlp_b200", "--rate", "3000",
         "--requests", "3000", "--max-batch", "4", "--max-wait-ms", "0.5", "--seed", "7"]


def serve_json(tmp_path, name, *args) -> tuple[dict, bytes]:
    path = tmp_path / name
    assert main([*args, "--json", str(path)]) == 0
    return json.loads(path.read_text()), path.read_bytes()


def test_result_keys_and_byte_identical_rerun(tmp_path, capsys):
    first, raw = serve_json(tmp_path, "a.json", *PLAIN, "--sla", "latency_p99_ms=2")
    _, again = serve_json(tmp_path, "b.json", *PLAIN, "--sla", "latency_p99_ms=2")
    assert raw == again
    assert set(first) == RESULT_KEYS
    assert set(first["latency_ms"]) == {"p50", "p90", "p95", "p99", "mean", "max"}
    assert first["requests"] == first["completed"] == 3000
    assert first["tpot_ms"] is None and first["service_ms"] > 0
    assert first["goodput_rps"] <= first["throughput_rps"]
    manifest = first["manifest"]
    assert manifest["inputs"]["platform"]["sha256"] and manifest["model_version"]
    assert manifest["serving"]["spec"]["max_batch"] == 4
    out = capsys.readouterr().out
    assert "Per request (ms)" in out and "SLA" in out


def test_other_seed_other_result(tmp_path):
    a, _ = serve_json(tmp_path, "a.json", *PLAIN)
    b, _ = serve_json(tmp_path, "b.json", *PLAIN[:-1], "8")
    assert a["latency_ms"] != b["latency_ms"]


def test_yaml_spec_gives_the_same_result_as_the_flags(tmp_path):
    spec = tmp_path / "serve.yaml"
    spec.write_text("arch: tpu_v1\nworkload: tpu_v1_mlp_b200\nrate: 3000\nrequests: 3000\n"
                    "max_batch: 4\nmax_wait_ms: 0.5\nseed: 7\n")
    _, from_flags = serve_json(tmp_path, "flags.json", *PLAIN)
    _, from_spec = serve_json(tmp_path, "spec.json", "serve", "--spec", str(spec))
    assert from_flags == from_spec
    _, overridden = serve_json(tmp_path, "over.json", "serve", "--spec", str(spec),
                               "--seed", "8")
    assert overridden != from_spec


def test_sweep_writes_the_curve_as_csv_and_figure(tmp_path):
    csv_path, png = tmp_path / "curve.csv", tmp_path / "curve.png"
    assert main([*PLAIN, "--sweep-rate", "500:2500:3", "--csv", str(csv_path),
                 "--plot", str(png)]) == 0
    rows = list(csv.DictReader(csv_path.open()))
    assert [float(r["offered_rps"]) for r in rows] == [500, 1500, 2500]
    p99 = [float(r["latency_p99_ms"]) for r in rows]
    assert p99 == sorted(p99)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_single_run_plot_is_a_png_of_the_latency_distribution(tmp_path):
    png = tmp_path / "cdf.png"
    assert main([*PLAIN, "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_find_max_rate_brackets_the_sla_within_one_percent(tmp_path):
    found, _ = serve_json(tmp_path, "max.json", *PLAIN, "--sla", "latency_p99_ms=1.5",
                          "--find-max-rate")
    low, high = found["bracket_rps"]
    assert found["max_rate_rps"] == low and high / low - 1 <= 0.01
    met = {e["rate_rps"]: e["met"] for e in found["evaluations"]}
    assert met[low] and not met[high]


@pytest.mark.parametrize("args, fragment", [
    (["--rate", "0"], "--rate: Input should be greater than 0"),
    (["--rate", "-3"], "--rate: Input should be greater than 0"),
    (["--rate", "nan"], "--rate: Input should be a finite number"),
    (["--rate", "inf"], "--rate: Input should be a finite number"),
    (["--rate", "1", "--sla", "ttft_p42_ms=5"], "--sla: unknown SLA key 'ttft_p42_ms'"),
    (["--rate", "1", "--sla", "latency_p99_ms=-1"], "must be a finite number > 0"),
    (["--arrival", "gamma", "--rate", "1", "--cv", "0"], "--cv: Input should be greater"),
    (["--arrival", "trace", "--arrival-trace", "TRACE"], "missing column"),
    (["--arrival", "trace", "--arrival-trace", "BACKWARDS"], "must not decrease"),
    (["--rate", "1", "--find-max-rate"], "needs an sla"),
    (["--rate", "1", "--json", "/no/such/folder/x.json"], "does not exist"),
])
def test_bad_input_is_one_clear_line(tmp_path, capsys, args, fragment):
    (tmp_path / "t.csv").write_text("when\n0\n")
    (tmp_path / "b.csv").write_text("arrival_s\n0\n1\n0.5\n")
    files = {"TRACE": str(tmp_path / "t.csv"), "BACKWARDS": str(tmp_path / "b.csv")}
    assert main(["serve", *(files.get(a, a) for a in args)]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accsim: error:")
    assert fragment in lines[0]
    assert "Per request" not in captured.out  # refused before anything ran


def test_the_process_exits_1_without_a_traceback():
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "serve", "--rate", "-1"],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("accsim: error: --rate")
