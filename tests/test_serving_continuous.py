"""Continuous batching (chunked prefill, joins at iteration boundaries, decode runs cut
short by arrivals), LLM request batching, and the KV cache: its bound on concurrency,
preemption by recompute, and dropped requests."""

from __future__ import annotations

import numpy as np
import pytest
from serving_helpers import LinearTokenCost, run

from simulator.serving.iteration_cost import Cost
from simulator.serving.kv_cache import PagedKvCache, blocks_for, kv_capacity_blocks
from simulator.serving.schedulers import ContinuousBatching
from simulator.serving.spec import ServeSpec

MS = 1e-3


def trace(tmp_path, rows) -> str:
    """A trace of (arrival s, prompt tokens, output tokens)."""
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n"
                    + "".join(f"{t!r},{p},{o}\n" for t, p, o in rows))
    return str(path)


def llm_spec(tmp_path, rows, **fields) -> ServeSpec:
    return ServeSpec(model="m", arrival="trace", arrival_trace=trace(tmp_path, rows),
                     **fields)


# base 1 ms + 0.1 ms per token: every figure below is worked by hand from it.
COST = LinearTokenCost(base_s=1 * MS, per_token_s=0.1 * MS, per_context_s=0.0)


def by_id(store):
    return {r.id: r for r in store.finished}


def test_two_prompts_prefill_together_then_decode_together(tmp_path):
    store, _, times = run(llm_spec(tmp_path, [(0.0, 4, 3), (0.0, 4, 3)]), COST,
                          kv_blocks=100)
    # prefill 8 tokens: 1.8 ms -> first tokens; two decode iterations of 2 tokens
    assert times.ttft_s.tolist() == pytest.approx([1.8 * MS] * 2)
    assert times.latency_s.tolist() == pytest.approx([4.2 * MS] * 2)
    assert times.tpot_s.tolist() == pytest.approx([1.2 * MS] * 2)


def test_a_long_prompt_is_prefilled_in_chunks_of_the_token_budget(tmp_path):
    _, _, times = run(llm_spec(tmp_path, [(0.0, 20, 1)], max_tokens=8), COST,
                      kv_blocks=100)
    # chunks of 8, 8 and 4 tokens: 1.8 + 1.8 + 1.4 ms
    assert times.ttft_s.tolist() == pytest.approx([5.0 * MS])
    assert times.latency_s.tolist() == pytest.approx([5.0 * MS])


def test_an_arrival_joins_at_the_next_iteration_boundary_of_a_decode_run(tmp_path):
    store, _, _ = run(llm_spec(tmp_path, [(0.0, 4, 10), (2.6 * MS, 4, 2)]), COST,
                      kv_blocks=100)
    a, b = by_id(store)[0], by_id(store)[1]
    # A: prefill 1.4 ms, decodes of 1.1 ms end at 2.5, 3.6 ms; B arriving at 2.6 ms
    # joins at 3.6 ms: A's decode + B's 4 prompt tokens = 1.5 ms -> 5.1 ms (B's first
    # token); both decode (1.2 ms) -> 6.3 ms, B done; A's last 5 decodes -> 11.8 ms
    assert a.first_token_s == pytest.approx(1.4 * MS)
    assert b.first_token_s == pytest.approx(5.1 * MS)
    assert b.finish_s == pytest.approx(6.3 * MS)
    assert a.finish_s == pytest.approx(11.8 * MS)


@pytest.mark.parametrize("batching", ["static", "dynamic"])
def test_request_batching_prefills_once_and_decodes_until_the_longest_is_done(
        tmp_path, batching):
    store, _, _ = run(llm_spec(tmp_path, [(0.0, 4, 2), (0.0, 4, 3)], batching=batching,
                               max_batch=2), COST, kv_blocks=100)
    done = by_id(store)
    # prefill 8 tokens 1.8 ms; decode of 2 (1.2 ms) -> 3.0 ms; decode of 1 -> 4.1 ms
    assert [done[0].first_token_s, done[1].first_token_s] == pytest.approx([1.8 * MS] * 2)
    assert done[0].finish_s == pytest.approx(3.0 * MS)
    assert done[1].finish_s == pytest.approx(4.1 * MS)


def test_kv_capacity_for_exactly_k_requests_runs_at_most_k_at_once(tmp_path):
    k, prompt = 3, 64  # each request holds 64 tokens = 4 blocks of 16
    rows = [(0.001 * i, prompt, 1) for i in range(20)]
    store, _, times = run(llm_spec(tmp_path, rows), COST,
                          kv_blocks=k * blocks_for(prompt, 16))
    assert max(store.running_max) == k
    assert len(store.finished) == 20 and store.preemptions == 0


class CountingCost(LinearTokenCost):
    """Tallies the prefill tokens computed (recomputation shows up here)."""

    prefilled = 0

    def iteration(self, prefill, decode) -> Cost:
        self.prefilled += sum(new for new, _ in prefill)
        return super().iteration(prefill, decode)


def test_full_cache_preempts_recomputes_and_loses_no_request(tmp_path):
    rows = [(0.0, 16, 48)] * 6            # 63 tokens of KV each at most: 4 blocks
    cost = CountingCost(1 * MS, 0.1 * MS, 0.0)
    store, came, times = run(llm_spec(tmp_path, rows), cost, kv_blocks=8)
    assert store.preemptions > 0
    assert len(store.finished) + len(store.dropped) == len(came) == 6
    assert not store.dropped
    assert all(r.produced == r.output_tokens == 48 for r in store.finished)
    assert sum(r.preemptions for r in store.finished) == store.preemptions
    assert cost.prefilled > 6 * 16          # preempted requests were prefilled again
    assert np.all(times.ttft_s <= times.latency_s)


def test_a_request_whose_kv_alone_exceeds_the_cache_is_dropped_and_counted(tmp_path):
    rows = [(0.0, 8, 4), (0.0, 200, 10), (0.001, 8, 4)]
    store, came, _ = run(llm_spec(tmp_path, rows), COST, kv_blocks=8)  # 128 tokens
    assert [r.id for r in store.dropped] == [1]
    assert len(store.finished) == 2 and len(store.finished) + len(store.dropped) == 3


class CheckedKv(PagedKvCache):
    """The paged cache, asserting it never hands out more blocks than it has."""

    def grow(self, request_id, tokens):
        grown = super().grow(request_id, tokens)
        assert 0 <= self.free_blocks <= self.total_blocks
        return grown


@pytest.mark.parametrize("seed", range(4))
def test_random_loads_keep_every_invariant(tmp_path, seed, monkeypatch):
    from simulator.serving import kv_cache
    monkeypatch.setitem(kv_cache.KV_ALLOCATORS._entries, "paged", CheckedKv)
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(2 * MS, 150))
    rows = [(float(t), int(p), int(o)) for t, p, o in
            zip(times, rng.integers(1, 120, 150), rng.integers(1, 60, 150))]
    spec = llm_spec(tmp_path, rows, max_tokens=int(rng.integers(8, 64)),
                    max_batch=int(rng.integers(1, 12)), replicas=int(rng.integers(1, 3)))
    store_blocks = int(rng.integers(8, 20))
    store, came, got = run(spec, COST, kv_blocks=store_blocks)
    assert len(store.finished) + len(store.dropped) == 150
    assert all(r.produced == r.output_tokens for r in store.finished)
    assert max(store.running_max) <= spec.max_batch
    assert np.all(got.ttft_s > 0) and np.all(got.ttft_s <= got.latency_s)
    assert all(blocks_for(r.max_kv_tokens, 16) > store_blocks for r in store.dropped)


class CheckedContinuous(ContinuousBatching):
    """Continuous batching, asserting before each plan that its running requests are
    decoding then prefilling as it keeps them (prefill completes in admission order):
    every request in `decoding` has its prompt prefilled, none in `prefilling` has."""

    def plan(self, now):
        assert all(r.prefilled == r.prefill_target for r in self.decoding)
        assert all(r.prefilled < r.prefill_target for r in self.prefilling)
        assert len({id(r) for r in self.decoding + self.prefilling}) == self.running_count
        return super().plan(now)


@pytest.mark.parametrize("seed", range(4))
def test_running_requests_stay_decoding_then_prefilling(tmp_path, seed, monkeypatch):
    from simulator.serving import schedulers
    monkeypatch.setitem(schedulers.REPLICA_SCHEDULERS._entries, "continuous",
                        CheckedContinuous)
    rng = np.random.default_rng(100 + seed)
    times = np.cumsum(rng.exponential(1 * MS, 120))
    rows = [(float(t), int(p), int(o)) for t, p, o in
            zip(times, rng.integers(1, 200, 120), rng.integers(1, 40, 120))]
    spec = llm_spec(tmp_path, rows, max_tokens=int(rng.integers(8, 96)),
                    max_batch=int(rng.integers(2, 16)), pp=int(rng.integers(1, 3)))
    store, came, _ = run(spec, COST, kv_blocks=int(rng.integers(16, 40)))
    assert len(store.finished) + len(store.dropped) == len(came) == 120
    assert all(r.produced == r.output_tokens for r in store.finished)


def test_weights_that_do_not_fit_are_an_error_naming_both_sizes():
    from simulator.errors import AccsimError
    with pytest.raises(AccsimError, match=r"weights \(2,000 bytes\).*capacity_bytes 1,000"):
        kv_capacity_blocks(1000, 2000, 10, 16)
    assert kv_capacity_blocks(2000 + 16 * 10 * 3 + 5, 2000, 10, 16) == 3
