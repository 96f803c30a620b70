"""The shipped case study (experiments/studies/gemm_winner_loses_in_production.yaml,
issue 44 item 5): its packet renders, each claim of the study holds in the result files
the packet links, and the packet passes its own `accsim verify`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main as accsim

STUDY = Path(__file__).resolve().parents[1] / "experiments" / "studies" / \
    "gemm_winner_loses_in_production.yaml"
BASE, CANDIDATE = "tpu_v5e_like", "tpu_v5e_bigarray_whatif"
DECODE = "llama_3_1_8b_decode_b8_c2048"


@pytest.fixture(scope="module")
def packet(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("case") / "packet"
    assert accsim(["review", str(STUDY), "--out", str(out)]) == 0
    return out


def result(packet: Path, name: str) -> dict:
    return json.loads((packet / "results" / name).read_text())


def test_the_candidate_wins_the_synthetic_gemm(packet):
    base = result(packet, f"{BASE}.gemm_4096.default.tp2_pp1.json")["workload"]
    candidate = result(packet, f"{CANDIDATE}.gemm_4096.default.tp2_pp1.json")["workload"]
    assert candidate["time_s"] < 0.7 * base["time_s"]


def test_the_candidate_loses_in_production_to_overhead_and_memory_tails(packet):
    base = result(packet, f"serving.{BASE}.{DECODE}.json")["points"][0]
    candidate = result(packet, f"serving.{CANDIDATE}.{DECODE}.json")["points"][0]
    # the SLA (3 s p99 TTFT, 100 ms p99 TPOT) holds on the baseline only
    assert base["ttft_ms"]["p99"] <= 3000 and base["tpot_ms"]["p99"] <= 100
    assert candidate["ttft_ms"]["p99"] > 3000
    # per-operator dispatch: every decode token slower on twice the matrix units
    assert candidate["tpot_ms"]["p50"] > base["tpot_ms"]["p50"]
    # memory tail: the candidate's slowest requests lost most of their waiting to
    # queueing for KV blocks (the rest of their latency is service)
    tail = {c: v for c, v in candidate["memory_tails"]["p99"].items()
            if c not in ("latency_ms", "requests")}
    assert max(tail, key=tail.get) == "kv_queue" and tail["kv_queue"] > 0.5 * sum(
        tail.values())
    assert base["memory_tails"]["p99"]["kv_queue"] == 0
    assert candidate["preempted"] > base["preempted"]
    run = result(packet, f"{CANDIDATE}.{DECODE}.default.tp2_pp1.json")["workload"]
    assert run["overhead_fraction"] > \
        result(packet, f"{BASE}.{DECODE}.default.tp2_pp1.json")["workload"][
            "overhead_fraction"]


def test_the_packet_names_the_tail_and_passes_its_own_verify(packet, capsys):
    sections = {s["id"]: s for s in json.loads((packet / "packet.json").read_text())[
        "sections"]}
    serving = sections["serving"]
    assert serving["verdict"] == "fail" and CANDIDATE in serving["reason"]
    assert any(line.startswith(f"{DECODE} on {CANDIDATE}: the p99 latency tail")
               and "the most to kv queue" in line for line in serving["text"])
    capsys.readouterr()
    assert accsim(["verify", str(packet / "packet.json")]) == 0
    assert "verified" in capsys.readouterr().out
