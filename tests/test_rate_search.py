"""serve's SLA rate search (simulator.serving.curves.find_max_rate) on a lattice of 1%
steps from the start rate: the answer is the highest lattice rate whose run meets the
SLA with the next one up missing, whichever way the bracket was narrowed, and the
slack-guided probes need fewer runs than halving the bracket. Runs are stood in for
by a latency that grows with the rate, so each case is exact and instant."""

from __future__ import annotations

import json
import math

import pytest
from tiny_llama import TINY_LLAMA

from simulator.errors import AccsimError
from simulator.serving import curves
from simulator.serving.cost_cache import CostCache
from simulator.serving.curves import STEPS_PER_DOUBLING, find_max_rate, lattice_rate
from simulator.serving.serve import prepare
from simulator.serving.sla import sla_report
from simulator.serving.spec import ServeSpec

TARGET_MS = 100.0
SPEC = ServeSpec.model_validate({"workload": "resnet50_b1", "arch": "tpu_v1", "rate": 10.0,
                                 "sla": {"latency_p99_ms": TARGET_MS},
                                 "find_max_rate": True})


def runs(latency_ms):
    """A `run` for find_max_rate whose p99 latency at a rate is latency_ms(rate)."""
    def run(rate: float) -> dict:
        value = latency_ms(rate)
        figures = {"latency_ms": {"p99": value}}
        return {**figures, "sla": sla_report(SPEC.sla, figures)}
    return run


def highest_meeting(latency_ms) -> float:
    """The answer by scanning the lattice: the highest rate meeting the target."""
    k = -10 * STEPS_PER_DOUBLING
    while latency_ms(lattice_rate(SPEC.rate, k + 1)) <= TARGET_MS:
        k += 1
    return lattice_rate(SPEC.rate, k)


@pytest.mark.parametrize("capacity", [0.37, 2.5, 9.99, 10.0, 31.0, 613.0])
def test_the_answer_is_the_highest_lattice_rate_that_meets_the_sla(capacity):
    def queueing(rate):  # explodes as the rate nears the capacity, as a queue does
        return 10.0 / max(1e-9, 1 - rate / (capacity * 1.1))
    found = find_max_rate(None, SPEC, run=runs(queueing))
    assert found["max_rate_rps"] == highest_meeting(queueing)
    low, high = found["bracket_rps"]
    assert high == lattice_rate(SPEC.rate, round(
        STEPS_PER_DOUBLING * math.log2(low / SPEC.rate)) + 1)
    assert high / low - 1 < 0.01
    met = {e["rate_rps"]: e["met"] for e in found["evaluations"]}
    assert met[low] and not met[high]


def test_guided_probes_need_fewer_runs_than_halving_the_bracket(monkeypatch):
    def linear(rate):
        return 40.0 * rate
    guided = find_max_rate(None, SPEC, run=runs(linear))
    monkeypatch.setattr(curves, "sla_slack", lambda report: None)  # midpoints only
    halved = find_max_rate(None, SPEC, run=runs(linear))
    assert guided["max_rate_rps"] == halved["max_rate_rps"] == highest_meeting(linear)
    assert len(guided["evaluations"]) < len(halved["evaluations"])


def test_a_slack_that_misleads_still_brackets_exactly():
    def step(rate):  # flat below the capacity, then a cliff: the line misjudges it
        return 99.0 if rate <= 3.3 else 101.0
    found = find_max_rate(None, SPEC, run=runs(step))
    assert found["max_rate_rps"] == highest_meeting(step)
    assert len(found["evaluations"]) <= 2 + 2 * math.ceil(math.log2(STEPS_PER_DOUBLING))


def test_met_at_every_rate_is_one_clear_error():
    """From 10 requests/s the 27th doubling passes the spec's 1e9 bound: 26 are run."""
    with pytest.raises(AccsimError, match=r"no bracket found in 26 doublings of 10 "
                       r"requests/s, the last the spec's bounds allow \(last tried "
                       r"6\.71089e\+08\)"):
        find_max_rate(None, SPEC, run=runs(lambda rate: 1.0))


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    """The tiny model and a trace of 64 requests (prompts 32-95 tokens, outputs 4-11)."""
    folder = tmp_path_factory.mktemp("rate")
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    rows = [f"{i * 0.01:.2f},{32 + i},{4 + i % 8}" for i in range(64)]
    (folder / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                      + "\n".join(rows) + "\n")
    return str(folder / "config.json"), str(folder / "trace.csv")


def tiny_spec(files, **fields) -> ServeSpec:
    model, trace = files
    return ServeSpec.model_validate({"model": model, "arch": "tpu_v5e_like",
                                     "arrival_trace": trace, "max_batch": 8, **fields})


def test_an_llm_search_starts_where_full_batches_saturate(tiny_files):
    """Without --rate an LLM's search over a trace starts at its saturation estimate:
    replicas multiply it, and a TTFT target a few unloaded prefills long, which binds where the
    queue starts to grow, finds a capacity within a doubling of it (so the search
    needs few runs)."""
    spec = tiny_spec(tiny_files)
    setup = prepare(spec, cost_cache=CostCache(None))
    start = curves._start_rate(setup, spec)
    doubled = tiny_spec(tiny_files, replicas=2)
    assert curves._start_rate(prepare(doubled, cost_cache=CostCache(None)),
                              doubled) == pytest.approx(2 * start, rel=1e-12)
    binding = tiny_spec(tiny_files, requests=1000, sla={"ttft_p99_ms": 1.0})
    found = find_max_rate(prepare(binding, cost_cache=CostCache(None)),
                          binding)
    assert found["evaluations"][0]["rate_rps"] == start
    assert start / 2 <= found["max_rate_rps"] <= 2 * start
    assert len(found["evaluations"]) <= 2 + math.ceil(math.log2(STEPS_PER_DOUBLING)) + 1
