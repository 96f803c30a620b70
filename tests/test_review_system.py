"""A review study on a multi-chip system (scope.system, DESIGN.md section 14): every
run simulates one chip's shard and its result file carries the system block; the plan
and the per-chip capacity are checked before any simulation."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main

STUDY = """\
title: Llama-3.1-8B decode and a GEMM on four v5e chips
objective: review a tensor-parallel system
owners: [a tester]
scope:
  platforms: [tpu_v5e_like]
  workloads: [gemm_4096]
  models: [{config: llama_3_1_8b, phase: decode, batch: 1, context: 512}]
  system: {tp: 4}
baseline: tpu_v5e_like
sla:
  latency_ms: {p99: 50}
"""


def test_a_study_reviews_a_tensor_parallel_system(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    out, cache = tmp_path / "packet", tmp_path / "cache"
    assert main(["review", str(study), "--out", str(out), "--cache", str(cache)]) == 0
    packet = json.loads((out / "packet.json").read_text())
    runs = [r for r in packet["results"] if r["kind"] == "run"]
    assert sorted(r["path"] for r in runs) == [
        "results/tpu_v5e_like.gemm_4096.default.tp4_pp1.json",
        "results/tpu_v5e_like.llama_3_1_8b_decode_b1_c512.default.tp4_pp1.json"]
    for run in runs:
        result = json.loads((out / run["path"]).read_text())
        system = result["system"]
        assert (system["chips"], system["tp"], system["pp"]) == (4, 4, 1)
        assert result["workload"]["time_s"] == system["time_s"]
    assert packet["verdict"] == "pass"  # collectives keep the cycle identity
    llama = json.loads((out / runs[1]["path"]).read_text())["system"]
    assert llama["collective_s"] > 0  # the Megatron all-reduces of every layer
    scope = next(s for s in packet["sections"] if s["id"] == "scope-sla")
    rows = scope["tables"][0]["rows"]
    assert ["system", "--chips 4 --tp 4 --pp 1 --ep 1"] in [row[:2] for row in rows]
    capsys.readouterr()
    # The same study again: both runs come from the cache (keyed with the plan).
    assert main(["review", str(study), "--out", str(out), "--cache", str(cache)]) == 0
    assert "2 runs and 0 serving results (2 reused" in capsys.readouterr().out
    assert main(["verify", str(out / "packet.json")]) == 0


def test_a_study_overlaps_the_systems_collectives(tmp_path, capsys):
    """scope.system.overlap is `accsim run --overlap`: the decomposed run hides part of
    the collective time the run without overlap exposes, and the packet verifies."""
    exposed = {}
    for overlap in ("none", "decomposed"):
        study = tmp_path / f"{overlap}.yaml"
        study.write_text(STUDY.replace("system: {tp: 4}",
                                       f"system: {{tp: 4, overlap: {overlap}}}"))
        out = tmp_path / overlap
        assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 0
        packet = json.loads((out / "packet.json").read_text())
        path = next(r["path"] for r in packet["results"] if "llama" in r["path"])
        system = json.loads((out / path).read_text())["system"]
        assert system["collective_exposed_s"] + system["collective_hidden_s"] == \
            pytest.approx(system["collective_s"], rel=1e-12)
        exposed[overlap] = system["collective_exposed_s"]
        assert main(["verify", str(out / "packet.json")]) == 0
    assert 0 <= exposed["decomposed"] < exposed["none"]


@pytest.mark.parametrize("system, platforms, message", [
    ("{tp: 3}", "[tpu_v5e_like]", "scope.system.tp: tensor parallelism 3 cannot be "
     "built: the 32 query heads padded to 33"),
    ("{tp: 2}", "[tpu_v1]", "interconnect: 2 chips need links between them"),
    ("{chips: 8, tp: 2}", "[tpu_v5e_like]", "scope.system.chips: T x P = 2 x 1 = 2 "
     "must equal the chips (8)"),
])
def test_a_bad_system_is_refused_before_any_run(tmp_path, capsys, system, platforms,
                                                message):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.replace("{tp: 4}", system)
                     .replace("platforms: [tpu_v5e_like]", f"platforms: {platforms}")
                     .replace("baseline: tpu_v5e_like", f"baseline: {platforms[1:-1]}"))
    assert main(["review", str(study), "--out", str(tmp_path / "p"), "--no-cache"]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "p" / "results").exists() or \
        not any((tmp_path / "p" / "results").iterdir())


def test_a_study_serves_each_replica_as_a_group_of_the_system(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.replace("  system: {tp: 4}\n", "  system: {tp: 4}\n  serving: "
                                   "{rate_per_s: 5, requests: 8, prompt_tokens: 64, "
                                   "output_tokens: 8}\n"))
    out = tmp_path / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 0
    served = json.loads((out / "results" / "serving.tpu_v5e_like."
                         "llama_3_1_8b_decode_b1_c512.json").read_text())
    point = served["points"][0]
    assert point["system"]["chips"] == point["system"]["tp"] == 4
    assert point["completed"] + point["dropped"] == point["requests"] == 8
    # a plain workload is served on one chip only: that pair says why it is not served
    assert not (out / "results" / "serving.tpu_v5e_like.gemm_4096.json").exists()
    packet = json.loads((out / "packet.json").read_text())
    assert "multi-chip replicas serve LLMs" in json.dumps(packet["sections"])
