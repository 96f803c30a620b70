"""Serving on pipelined replicas (DESIGN.md section 14): P stages are SimPy resources
fed by micro-batches, so iterations of different micro-batches overlap across stages;
the bubble is reported; P = 1 is the unpipelined replica, unchanged."""

from __future__ import annotations

import pytest
from serving_helpers import LinearTokenCost, run

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import load_model, locate
from simulator.serving.serve import Setup, summary
from simulator.serving.spec import ServeSpec

MS = 1e-3
COST = LinearTokenCost(base_s=1 * MS, per_token_s=0.1 * MS, per_context_s=0.0)


def spec(**fields) -> ServeSpec:
    """Poisson arrivals faster than one replica drains them (a saturated pipeline)."""
    return ServeSpec(model="m", rate=2000.0, requests=60, prompt_tokens=32,
                     output_tokens=16, max_batch=4, **fields)


def serve(served: ServeSpec, *, kv_blocks: int = 4096) -> dict:
    store, came, _ = run(served, COST, kv_blocks=kv_blocks)
    platform, _ = load_model(locate("tpu_v5e_like", "platform"), Platform)
    setup = Setup(served, platform, None, COST, kv_blocks, None)
    return summary(setup, served, store, came) | {"_busy": store.busy_s}


def test_pipelined_stages_beat_stages_in_turn_and_report_the_bubble():
    in_turn = serve(spec(chips=2, pp=2, micro_batches=1))
    piped = serve(spec(chips=2, pp=2))
    for result in (in_turn, piped):
        assert result["completed"] + result["dropped"] == result["requests"] == 60
    # Two micro-batches keep both stages busy: close to twice the throughput.
    assert piped["throughput_rps"] > 1.6 * in_turn["throughput_rps"]
    # One micro-batch leaves each stage idle while the other runs: a bubble of 1 - 1/P.
    assert in_turn["system"]["pipeline_bubble_fraction"] == pytest.approx(0.5)
    bubble = piped["system"]["pipeline_bubble_fraction"]
    assert 0.0 <= bubble < 0.2
    assert piped["system"]["micro_batches"] == 2 and in_turn["system"]["micro_batches"] == 1


def test_micro_batches_share_the_replicas_kv_cache():
    """A cache that holds one request at a time: the micro-batches take turns, none
    is lost, and nothing deadlocks."""
    tight = serve(spec(chips=4, pp=4), kv_blocks=3)  # 48 tokens: one 32 + 16 request
    assert tight["completed"] == 60 and tight["dropped"] == 0


def test_one_micro_batch_is_the_unpipelined_replica(tmp_path):
    """Stages in turn cost each iteration whole, as the P = 1 replica does: the same
    request times (P = 1 itself runs the replica of before, whose figures the serving
    tests check by hand)."""
    _, _, one = run(spec(), COST, kv_blocks=4096)
    _, _, turns = run(spec(chips=2, pp=2, micro_batches=1), COST, kv_blocks=4096)
    assert turns.latency_s == pytest.approx(one.latency_s, rel=1e-12)
    assert turns.ttft_s == pytest.approx(one.ttft_s, rel=1e-12)


def test_micro_batches_need_a_pipeline():
    with pytest.raises(AccsimError, match="micro-batches fill a pipeline: give pp > 1"):
        spec(micro_batches=2)
