"""Memory tails (serving.tails): each request's time split into KV wait, queueing,
preemption and service, worked by hand on a deterministic cost, and each cause's share
of the requests at or above a percentile."""

from __future__ import annotations

import numpy as np
import pytest
from serving_helpers import LinearTokenCost, run
from test_serving_continuous import llm_spec

from simulator.serving.tails import CAUSES, latency_causes, request_causes

MS = 1e-3
# base 1 ms + 0.1 ms per token: every figure below is worked by hand from it.
COST = LinearTokenCost(base_s=1 * MS, per_token_s=0.1 * MS, per_context_s=0.0)
TWO_REQUESTS = [(0.0, 8, 2), (0.0, 8, 2)]   # 9 tokens of KV each at most: 1 block


def causes_by_id(store, *, first_token=False) -> dict[int, dict[str, float]]:
    done = sorted(store.finished, key=lambda r: r.id)
    rows = request_causes(done, first_token=first_token)
    return {r.id: dict(zip(CAUSES, row)) for r, row in zip(done, rows)}


def test_a_request_waiting_for_kv_blocks_counts_kv_wait_not_queueing(tmp_path):
    # One 16-token block: A takes it; B waits for it. A: prefill 8 tokens 1.8 ms, one
    # decode 1.1 ms -> done at 2.9 ms and frees the block; B is admitted at 2.9 ms,
    # prefills (1.8) and decodes (1.1) -> 5.8 ms.
    store, _, times = run(llm_spec(tmp_path, TWO_REQUESTS), COST, kv_blocks=1)
    causes = causes_by_id(store)
    assert causes[0] == pytest.approx({"kv_wait": 0, "queue": 0, "preemption": 0,
                                       "service": 2.9 * MS})
    assert causes[1] == pytest.approx({"kv_wait": 2.9 * MS, "queue": 0,
                                       "preemption": 0, "service": 2.9 * MS})
    shares = latency_causes(store.finished, tokens=True)
    # the p99 tail is B alone: half its latency waited for KV blocks
    assert shares["latency"]["p99"] == pytest.approx(
        {"kv_wait": 0.5, "queue": 0.0, "preemption": 0.0, "service": 0.5})
    # B's first token came 4.7 ms after it arrived, 2.9 of them waiting for KV
    assert shares["ttft"]["p99"]["kv_wait"] == pytest.approx(2.9 / 4.7)


def test_a_request_waiting_for_a_batch_slot_counts_queueing_not_kv_wait(tmp_path):
    # Room for both in the cache, but one at a time (max_batch 1): the same times,
    # the wait now the batch limit's.
    store, _, _ = run(llm_spec(tmp_path, TWO_REQUESTS, max_batch=1), COST,
                      kv_blocks=100)
    causes = causes_by_id(store)
    assert causes[1] == pytest.approx({"kv_wait": 0, "queue": 2.9 * MS,
                                       "preemption": 0, "service": 2.9 * MS})


def test_preemptions_show_in_the_tail_and_causes_add_up_to_each_latency(tmp_path):
    rows = [(0.0, 16, 48)] * 6            # 63 tokens of KV each at most: 4 blocks
    store, _, times = run(llm_spec(tmp_path, rows), COST, kv_blocks=8)
    assert store.preemptions > 0
    done = sorted(store.finished, key=lambda r: r.id)
    for first_token, figure in ((False, times.latency_s), (True, times.ttft_s)):
        split = request_causes(done, first_token=first_token)
        assert split.sum(axis=1) == pytest.approx(figure, rel=1e-12, abs=1e-15)
        assert np.all(split >= -1e-12)
    preempted = [r for r in done if r.preemptions]
    assert all(r.preemption_s > 0 for r in preempted)
    assert all(r.preemption_s == 0 for r in done if not r.preemptions)
    shares = latency_causes(store.finished, tokens=True)["latency"]
    assert shares["p99"]["preemption"] > 0
    for tail in shares.values():
        assert sum(tail.values()) == pytest.approx(1.0)


def test_an_uncontended_run_is_all_service(tmp_path):
    store, _, _ = run(llm_spec(tmp_path, [(0.0, 8, 4), (0.1, 8, 4)]), COST,
                      kv_blocks=100)
    for tail in latency_causes(store.finished, tokens=True)["latency"].values():
        assert tail == pytest.approx({"kv_wait": 0, "queue": 0, "preemption": 0,
                                      "service": 1.0})
