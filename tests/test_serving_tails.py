"""Memory tails (DESIGN.md section 20): per request, time lost to queueing for KV
blocks, to preemption by recompute and to swaps through a host tier, each checked on
a run where it must appear (and nowhere else), and their shares of each latency
percentile's tail."""

from __future__ import annotations

import json

import numpy as np
import pytest
from serving_helpers import LinearTokenCost, run

from simulator.cli import main
from simulator.serving.kv_cache import HostTier
from simulator.serving.serve import Setup, simulate_serving
from simulator.serving.spec import ServeSpec
from simulator.serving.tails import CAUSES, cause_seconds, memory_tails


def _trace(tmp_path, rows: str) -> str:
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    return str(path)


def test_the_head_refused_blocks_waits_for_kv_until_the_holder_finishes(tmp_path):
    """Two requests at once, blocks for one: the second's whole wait is KV queueing,
    from its arrival to the first one's finish, and it queues for nothing else."""
    spec = ServeSpec(model="m", arrival_trace=_trace(tmp_path, "0,64,4\n0,64,4\n"))
    store, _, _ = run(spec, LinearTokenCost(), kv_blocks=5)
    first, second = sorted(store.finished, key=lambda r: r.id)
    assert first.kv_wait_s == 0.0 and first.admitted_s == 0.0
    assert second.kv_wait_s == pytest.approx(first.finish_s, rel=1e-12)
    assert second.admitted_s == first.finish_s
    _, causes = cause_seconds(store.finished)
    assert causes["queue"].tolist() == [0.0, 0.0]
    assert causes["preemption"].sum() == causes["swap"].sum() == 0.0


def test_requests_behind_a_refused_head_queue_for_kv_too(tmp_path):
    """Three requests at once, blocks for one: the third waits behind the second, which
    waits for blocks; both waits are KV queueing (admission stopped on memory)."""
    spec = ServeSpec(model="m", arrival_trace=_trace(tmp_path, "0,64,4\n" * 3))
    store, _, _ = run(spec, LinearTokenCost(), kv_blocks=5)
    first, second, third = sorted(store.finished, key=lambda r: r.id)
    assert third.admitted_s == second.finish_s
    assert third.kv_wait_s == pytest.approx(second.finish_s, rel=1e-12)
    _, causes = cause_seconds(store.finished)
    assert causes["queue"].tolist() == pytest.approx([0.0, 0.0, 0.0], abs=1e-15)


def test_a_wait_for_a_batch_slot_is_queueing_not_kv(tmp_path):
    """Blocks for both, a batch of one: the second's wait is the batch limit's."""
    spec = ServeSpec(model="m", max_batch=1,
                     arrival_trace=_trace(tmp_path, "0,64,4\n0,64,4\n"))
    store, _, _ = run(spec, LinearTokenCost(), kv_blocks=100)
    first, second = sorted(store.finished, key=lambda r: r.id)
    _, causes = cause_seconds(store.finished)
    assert causes["kv_queue"].tolist() == [0.0, 0.0]
    assert causes["queue"][1] == pytest.approx(first.finish_s, rel=1e-12)


def _preempting(tmp_path) -> ServeSpec:
    return ServeSpec(model="m", max_batch=8,
                     arrival_trace=_trace(tmp_path, "0,64,200\n" * 8))


def test_recompute_time_is_the_preemptions_and_swaps_the_host_tiers(tmp_path):
    """Eight requests on a cache that cannot hold their outputs: the requests that
    lost time to preemption are exactly those preempted, each loses from its
    preemption to the end of its recomputed prefill (at least one iteration); with a
    host tier the same squeeze is lost to swaps instead."""
    store, _, _ = run(_preempting(tmp_path), LinearTokenCost(), kv_blocks=40)
    _, causes = cause_seconds(store.finished)
    done = sorted(store.finished, key=lambda r: r.id)
    preempted = np.array([r.preemptions > 0 for r in done])
    assert preempted.any()
    assert ((causes["preemption"] > 0) == preempted).all()
    assert (causes["preemption"][preempted] >= 1e-3).all()  # one iteration's base cost
    assert causes["swap"].sum() == 0.0
    spec = _preempting(tmp_path).model_copy(update={"kv_host_tier": True})
    setup = Setup(spec, None, None, LinearTokenCost(), 40, None,
                  host_tier=HostTier(5e-6, 32e9, 4096))
    swapped, _ = simulate_serving(setup, spec)
    _, causes = cause_seconds(swapped.finished)
    assert swapped.swaps > 0 and causes["preemption"].sum() == 0.0
    assert np.count_nonzero(causes["swap"]) == sum(
        r.preemptions > 0 for r in swapped.finished)


def test_the_shares_are_each_tails_causes_over_its_latency(tmp_path):
    store, _, times = run(_preempting(tmp_path), LinearTokenCost(), kv_blocks=40)
    tails = memory_tails(store.finished)
    latency, causes = cause_seconds(store.finished)
    assert (sum(causes.values()) <= latency + 1e-12).all()  # disjoint parts of it
    for p in (50, 95, 99):
        row = tails[f"p{p}"]
        assert row["latency_ms"] == pytest.approx(np.percentile(times.latency_s, p) * 1e3)
        tail = latency >= row["latency_ms"] / 1e3
        assert row["requests"] == tail.sum()
        for name in CAUSES:
            assert row[name] == pytest.approx(causes[name][tail].sum()
                                              / latency[tail].sum())
        assert sum(row[name] for name in CAUSES) <= 1.0
    assert tails["causes"]["preemption"]["requests"] == sum(
        r.preemptions > 0 for r in store.finished)


def test_serve_reports_memory_tails_only_when_asked(tmp_path, capsys):
    out = tmp_path / "r.json"
    args = ["serve", "--arch", "tpu_v1", "--workload", "gemm_4096", "--rate", "50",
            "--requests", "30", "--json", str(out)]
    assert main(args) == 0
    assert "memory_tails" not in json.loads(out.read_text())
    assert main(args + ["--memory-tails"]) == 0
    result = json.loads(out.read_text())
    assert set(result["memory_tails"]) == {"causes", "p50", "p95", "p99"}
    assert "memory tails (share of the latency" in capsys.readouterr().out
