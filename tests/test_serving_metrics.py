"""The result's derived figures: energy with idle static power, utilisation, goodput
under an SLA (also as counted from a run's stored requests), and the SLA checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from serving_helpers import LinearTokenCost, run

from simulator.metrics.energy import static_power_w
from simulator.errors import AccsimError
from simulator.serving.metrics import RequestTimes
from simulator.serving.serve import prepare, simulate_serving, summary
from simulator.serving.sla import (check_sla, good_requests, goodput_columns, goodput_rps,
                                  parse_sla, sla_report)
from simulator.serving.spec import ServeSpec
from simulator.sweep.deploy_runs import packed_requests, unpacked_requests


def test_energy_utilization_and_throughput_follow_from_the_simulated_batches():
    spec = ServeSpec(arch="tpu_v1", workload="tpu_v1_mlp_b200", rate=200.0, requests=500,
                     max_batch=1, max_wait_ms=0, seed=3)
    setup = prepare(spec)
    store, came = simulate_serving(setup, spec)
    figures = summary(setup, spec, store, came)
    one = setup.cost.batch(1)
    horizon = store.horizon_s
    busy = 500 * one.seconds
    assert figures["utilization"] == pytest.approx(busy / horizon)
    expected = 500 * one.energy_j + (horizon - busy) * static_power_w(setup.platform)
    assert figures["energy_per_request_j"] * 500 == pytest.approx(expected)
    assert figures["throughput_rps"] == pytest.approx(500 / horizon)
    assert figures["service_ms"] == pytest.approx(one.seconds * 1e3)
    assert figures["latency_ms"]["p50"] >= figures["service_ms"] * (1 - 1e-9)


def times(latency, ttft, tpot, outputs) -> dict:
    """goodput_columns of requests with these times."""
    outputs = np.array(outputs)
    multi = np.flatnonzero(outputs > 1)
    return goodput_columns(RequestTimes(np.array(latency), np.array(ttft),
                                        np.array(tpot)[multi], multi, outputs))


def test_goodput_counts_requests_meeting_every_target_themselves():
    got = times(latency=[1.0, 2.0, 3.0], ttft=[0.1, 0.5, 0.2], tpot=[0.01, 0.01, 0.05],
                outputs=[10, 10, 10])
    assert good_requests({"latency_p99_ms": 2500}, got) == 2
    assert good_requests({"latency_p99_ms": 2500, "ttft_p50_ms": 300}, got) == 1
    assert good_requests({"tpot_p99_ms": 20}, got) == 2
    one_token = times([1.0], [1.0], [0.0], [1])  # no TPOT: passes a TPOT target
    assert good_requests({"tpot_p99_ms": 1}, one_token) == 1


def test_sla_report_names_each_target_with_its_value():
    figures = {"latency_ms": {"p99": 4.0, "mean": 2.0}, "ttft_ms": None, "tpot_ms": None}
    report = sla_report({"latency_p99_ms": 5, "latency_mean_ms": 1.5}, figures)
    assert report["met"] is False
    assert report["targets"]["latency_p99_ms"] == {"target": 5, "value": 4.0, "met": True}
    assert report["targets"]["latency_mean_ms"]["met"] is False
    assert sla_report({"tpot_p99_ms": 5}, figures)["met"] is False  # plain: no TPOT
    assert sla_report({}, figures) is None


@pytest.mark.parametrize("text, fragment", [
    ("ttft_p98_ms=1", "unknown SLA key"), ("latency_p99=1", "unknown SLA key"),
    ("latency_p99_ms", "expected KEY=VALUE"), ("latency_p99_ms=fast", "not a number"),
    ("latency_p99_ms=0", "> 0"), ("latency_p99_ms=inf", "> 0")])
def test_bad_sla_text_is_one_clear_error(text, fragment):
    with pytest.raises(AccsimError, match=fragment):
        parse_sla(text)


def test_sla_keys_cover_every_metric_and_statistic():
    assert parse_sla("ttft_p99_ms=500, tpot_p99_ms=50,latency_p99_ms=20") == {
        "ttft_p99_ms": 500.0, "tpot_p99_ms": 50.0, "latency_p99_ms": 20.0}
    assert len(check_sla({f"{m}_{s}_ms": 1 for m in ("latency", "ttft", "tpot")
                          for s in ("p50", "p90", "p95", "p99", "mean", "max")})) == 18


def test_goodput_counted_from_a_runs_packed_requests_is_the_runs_own(tmp_path):
    # Random prompts and outputs (one-token outputs among them), arriving faster than
    # served: the requests' times spread across each target below.
    rng = np.random.default_rng(7)
    rows = zip(np.cumsum(rng.exponential(2e-3, 200)).tolist(),
               rng.integers(1, 300, 200).tolist(), rng.integers(1, 40, 200).tolist())
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n"
                    + "".join(f"{t!r},{p},{o}\n" for t, p, o in rows))
    spec = ServeSpec(model="m", arrival="trace", arrival_trace=str(path), max_batch=8)
    store, _, times = run(spec, LinearTokenCost(base_s=1e-3, per_token_s=1e-5),
                          kv_blocks=1000)
    packed = json.loads(json.dumps(packed_requests(times, store.horizon_s)))
    columns, horizon = unpacked_requests(packed)
    assert horizon == store.horizon_s
    counts = set()
    for sla in ({"ttft_p99_ms": 200.0}, {"tpot_p50_ms": 1.6, "latency_max_ms": 300.0},
                {"ttft_p90_ms": 300.0, "tpot_p99_ms": 1.5, "latency_mean_ms": 350.0}):
        # each request judged by hand, its TPOT only where it has more than one token
        tpot = dict(zip(times.tpot_index.tolist(), times.tpot_s.tolist()))
        limits = {key.split("_")[0]: ceiling / 1e3 for key, ceiling in sla.items()}
        good = sum(all(value <= limits[metric] for metric, value in
                       (("latency", times.latency_s[i]), ("ttft", times.ttft_s[i]),
                        ("tpot", tpot.get(i, 0.0))) if metric in limits)
                   for i in range(times.latency_s.size))
        assert goodput_rps(sla, columns, horizon) == good / store.horizon_s
        assert goodput_rps(sla, goodput_columns(times), store.horizon_s) == \
            good / store.horizon_s
        counts.add(good)
    assert len(counts) == 3 and 0 < min(counts) and max(counts) < times.latency_s.size
