"""A sweep whose workload is a serving workload (DESIGN.md sections 11 and 18):
deployment axes beside platform fields, each point's SLA capacity from the deployment
search (the same key, so a point plan-deployment stored is read back, not computed),
a front over serving objectives, and a bad spec gets one clear error."""

from __future__ import annotations

import json

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main

SPEC = """\
name: tiny_serving
platform: tpu_v5e_like
serving:
  model: config.json
  prompt_tokens: 64
  output_tokens: 8
  requests: 48
  sla: {ttft_p99_ms: 0.5, tpot_p99_ms: 0.2}
axes:
  AXES
objectives: {tokens_per_s_per_chip: max, ttft_p99_ms: min}
"""
DEPLOYMENTS = "system.tp: [1, 2]\n  serving.max_batch: [4, 16]"


def write_spec(folder, axes: str = DEPLOYMENTS, text: str = SPEC):
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    path = folder / "spec.yaml"
    path.write_text(text.replace("AXES", axes))
    return path


def test_a_serving_sweep_reads_back_what_plan_deployment_stored(tmp_path, capsys):
    store, out = tmp_path / "s.sqlite", tmp_path / "plan.json"
    spec = write_spec(tmp_path)
    assert main(["plan-deployment", "--arch", "tpu_v5e_like", "--model",
                 str(tmp_path / "config.json"), "--prompt-tokens", "64", "--output-tokens",
                 "8", "--requests", "48", "--sla", "ttft_p99_ms=0.5,tpot_p99_ms=0.2",
                 "--budget-chips", "2", "--replicas", "1", "--max-batch", "4,16",
                 "--store", str(store), "--json", str(out)]) == 0
    capsys.readouterr()
    planned = {(row["tp"], row["pp"], row["max_batch"]): row
               for row in json.loads(out.read_text())["points"]}
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    text = capsys.readouterr().out
    # T1 and T2 (P1) at max batch 4 and 16: the points plan-deployment searched.
    assert "4 already stored, 0 computed" in text
    for (tp, pp, batch), row in planned.items():
        if pp == 1:
            line = next(line for line in text.splitlines()
                        if f"system.tp={tp}, serving.max_batch={batch}:" in line)
            assert f"tokens_per_s_per_chip {row['tokens_per_s_per_chip']:.4g}" in line
    assert text.count("[front]") >= 1


def test_platform_axes_move_the_sla_capacity(tmp_path, capsys):
    spec = write_spec(tmp_path, "offchip.bandwidth_gbps: [20.0, 819.0]\n  "
                      "serving.chunk_tokens: [64]")
    assert main(["sweep", "run", str(spec), "--store", str(tmp_path / "s.sqlite")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "chunk_tokens" in line]
    assert len(lines) == 2
    slow, fast = (float(line.split("tokens_per_s_per_chip ")[1].split(",")[0])
                  for line in lines)
    assert slow < fast
    assert len(list((tmp_path / "s-platforms").glob("*.yaml"))) == 2


@pytest.mark.parametrize("axes, text, message", [
    ("serving.batching: [fifo]", SPEC, "axes.serving.batching[0]: value 'fifo': not a "
     "batching policy"),
    ("serving.queue: [1]", SPEC, "axes.serving.queue: no such serving field"),
    (DEPLOYMENTS, SPEC.replace("  requests: 48", "  requests: 48\n  replicas: 2"),
     "serving.replicas: replicas is set by the sweep's platform and axes"),
    (DEPLOYMENTS, SPEC.replace("objectives: {tokens_per_s_per_chip: max, ttft_p99_ms: min}",
                               "objectives: {time_s: min}"),
     "unknown objective 'time_s'"),
    (DEPLOYMENTS, SPEC.replace("  sla: {ttft_p99_ms: 0.5, tpot_p99_ms: 0.2}\n", ""),
     "a serving sweep serves an LLM (model) against an SLA"),
])
def test_a_bad_serving_sweep_is_one_clear_error(tmp_path, capsys, axes, text, message):
    spec = write_spec(tmp_path, axes, text)
    assert main(["sweep", "run", str(spec), "--store", str(tmp_path / "s.sqlite")]) == 1
    err = capsys.readouterr().err
    assert message in err and "spec.yaml" in err and len(err.strip().splitlines()) == 1
