"""Deterministic cost models and a runner for serving tests: the scheduling, KV cache,
queueing and metrics are checked without the operator simulator in the loop."""

from __future__ import annotations

from simulator.serving.iteration_cost import Cost, DecodeRunByIteration
from simulator.serving.metrics import RequestTimes
from simulator.serving.serve import Setup, simulate_serving
from simulator.serving.spec import ServeSpec


class FixedBatchCost:
    """A batch of b costs base + per_request * b seconds (energy 1 J per second)."""

    def __init__(self, base_s: float, per_request_s: float = 0.0):
        self.base_s = base_s
        self.per_request_s = per_request_s

    def batch(self, size: int) -> Cost:
        seconds = self.base_s + self.per_request_s * size
        return Cost(seconds, seconds)


class LinearTokenCost(DecodeRunByIteration):
    """An iteration costs base + per_token * tokens + per_context * decode context."""

    def __init__(self, base_s=1e-3, per_token_s=1e-5, per_context_s=1e-8):
        self.base_s, self.per_token_s = base_s, per_token_s
        self.per_context_s = per_context_s

    def iteration(self, prefill, decode) -> Cost:
        tokens = len(decode) + sum(new for new, _ in prefill)
        seconds = self.base_s + self.per_token_s * tokens + self.per_context_s * sum(decode)
        return Cost(seconds, seconds)


def run(spec: ServeSpec, cost, *, kv_blocks: int | None = None):
    """Serve `spec` with a test cost model; (store, arrivals, per-request times)."""
    setup = Setup(spec, None, None, cost, kv_blocks, None)
    store, came = simulate_serving(setup, spec)
    times = RequestTimes.of(store.finished, tokens=spec.llm)
    assert_littles_law(store, came, times)
    return store, came, times


def assert_littles_law(store, came, times) -> None:
    """L = lambda W: the time-averaged number in the system equals the arrival rate
    times the mean time in the system, and every request is accounted for."""
    assert len(store.finished) + len(store.dropped) == len(came)
    if not store.finished or store.dropped:
        return
    horizon = store.horizon_s
    in_system = store.in_system_area / horizon
    rate = len(came) / horizon
    assert abs(in_system - rate * times.latency_s.mean()) <= 1e-9 * max(in_system, 1)
