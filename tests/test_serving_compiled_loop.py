"""The compiled serving loop (simulator.serving.compiled_loop) against the SimPy loop it
ports: on generated loads (arrivals with ties, prompt and output lengths, max batch,
token budget, KV caches small enough to preempt, 1 to 3 replicas) both leave the same
store, bit for bit: every request's record, the totals, the sampled shapes, the number
in the system; and the cost model is asked for the same grid points."""

from __future__ import annotations

import fake_hf
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.inputs.named_inputs import load_inputs
from simulator.serving import compiled_loop, engine, loop_state, schedulers
from simulator.serving.arrivals import Arrivals
from simulator.serving.engine import run_serving
from simulator.serving.iteration_cost import UnitCosts
from simulator.serving.kv_cache import HostTier, PagedKvCache
from simulator.serving.llm_cost import LlmCost
from simulator.serving.metrics import MetricsStore
from simulator.serving.spec import ServeSpec

PLATFORM = "tpu_v5e_like"


def _cost(bits: int, platform_name: str = PLATFORM, units: UnitCosts | None = None
          ) -> LlmCost:
    platform = load_inputs(platform_name, "gemm_4096", None).platform
    return LlmCost(platform, fake_hf.TinyConfig(), dtype=None, bits=bits, hf=fake_hf,
                   units=units)


@pytest.fixture(scope="module")
def units():
    """Fusion units' costs shared by the module's cost models (by content, as a
    deployment search shares them): each unit is simulated once in the module, while
    every cost model asks for its own grid points and calls, which the tests compare."""
    return UnitCosts()


@pytest.fixture(scope="module")
def cost(units):
    return _cost(4, units=units)  # few bits: decode runs cross grid cells


def _serve(spec, arrivals, cost, blocks, *, compiled):
    store = MetricsStore(spec.replicas, sample_limit=spec.error_samples)
    kv = PagedKvCache(blocks, spec.block_tokens)
    if compiled:
        assert compiled_loop.applies(spec, arrivals, cost, kv, store, llm=True)
    run_serving(spec, arrivals, cost, lambda: PagedKvCache(blocks, spec.block_tokens),
                llm=True, store=store, compiled=compiled)
    return store


def _record(store: MetricsStore) -> tuple:
    """Everything the store holds after a run, requests field by field."""
    def fields(request):
        return tuple(getattr(request, name) for name in request.__slots__)
    return ([fields(r) for r in store.finished], [fields(r) for r in store.dropped],
            store.busy_s, store.energy_j, store.iterations, store.running_max,
            store.arrived, store.preemptions, store.swaps, store.same_under_max_batch,
            np.asarray(store.change_times, dtype=np.float64).tolist(),
            np.asarray(store.change_deltas, dtype=np.int64).tolist(),
            store.sample.shapes, store.sample.stride, store.sample.seen,
            store.in_system_area, store.horizon_s)


def _arrivals(gaps, prompts, outputs) -> Arrivals:
    return Arrivals(np.cumsum(np.array(gaps, dtype=np.float64)),
                    np.array(prompts, dtype=np.int64), np.array(outputs, dtype=np.int64))


def _spec(max_batch, max_tokens, block_tokens, samples, replicas=1):
    return ServeSpec(arch=PLATFORM, model="tiny", max_batch=max_batch, replicas=replicas,
                     max_tokens=max_tokens, block_tokens=block_tokens,
                     error_samples=samples, batching="continuous", rate=1.0)


loads = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([0.0, 0.0, 1e-4, 3e-3, 0.02, 0.5]), min_size=n, max_size=n),
    st.lists(st.integers(1, 300), min_size=n, max_size=n),
    st.lists(st.integers(1, 200), min_size=n, max_size=n)))


@settings(max_examples=60, deadline=None)
@given(loads, st.integers(1, 12), st.sampled_from([8, 64, 512]), st.sampled_from([1, 16]),
       st.integers(4, 80), st.sampled_from([0, 1, 3]), st.integers(1, 3))
def test_the_compiled_loop_leaves_the_store_the_simpy_loop_leaves(
        cost, load, max_batch, max_tokens, block_tokens, blocks, samples, replicas):
    arrivals = _arrivals(*load)
    spec = _spec(max_batch, max_tokens, block_tokens, samples, replicas)
    blocks = blocks * 16 // block_tokens
    reference = _serve(spec, arrivals, cost, blocks, compiled=False)
    compiled = _serve(spec, arrivals, cost, blocks, compiled=True)
    assert _record(compiled) == _record(reference)


@pytest.mark.parametrize("replicas", [1, 2])
def test_preemptions_happen_and_match(cost, replicas):
    rng = np.random.default_rng(7)
    n = 120
    arrivals = _arrivals(rng.exponential(0.002, n), rng.integers(50, 400, n),
                         rng.integers(20, 300, n))
    spec = _spec(32, 256, 16, 8, replicas)
    reference = _serve(spec, arrivals, cost, 60 // replicas, compiled=False)
    compiled = _serve(spec, arrivals, cost, 60 // replicas, compiled=True)
    assert reference.preemptions > 0
    assert _record(compiled) == _record(reference)


def test_a_cold_cost_model_is_asked_for_the_same_grid_points_in_the_same_order(units):
    rng = np.random.default_rng(3)
    n = 60
    arrivals = _arrivals(rng.exponential(0.003, n), rng.integers(1, 500, n),
                         rng.integers(1, 400, n))
    spec = _spec(16, 128, 16, 4)
    costs = [_cost(5, units=units), _cost(5, units=units)]
    for each, compiled in zip(costs, (False, True)):
        _serve(spec, arrivals, each, 80, compiled=compiled)
    first, second = costs
    for table in ("_dense", "_prefill", "_decode", "_pair"):
        assert list(getattr(second, table)) == list(getattr(first, table)), table


def test_over_a_host_link_each_call_is_priced_by_its_tokens_and_requests(units):
    """Over a host link a call's cost depends on its tokens and requests (the compiled
    loop keys each call by them); without one every call costs the same, and a
    compiled run asks the cost model for one call's cost, not one per (tokens,
    requests). Both leave the store the SimPy loop leaves."""
    rng = np.random.default_rng(5)
    n = 80
    arrivals = _arrivals(rng.exponential(0.003, n), rng.integers(1, 500, n),
                         rng.integers(1, 200, n))
    spec = _spec(16, 128, 16, 4)
    for platform_name, keyed in ((PLATFORM, False), ("whatif/tpu_v5e_host", True)):
        costs = [_cost(4, platform_name, units), _cost(4, platform_name, units)]
        reference = _serve(spec, arrivals, costs[0], 80, compiled=False)
        compiled = _serve(spec, arrivals, costs[1], 80, compiled=True)
        assert _record(compiled) == _record(reference), platform_name
        asked = {(found.seconds, found.energy_j) for found in costs[0]._call_memo.values()}
        assert len(costs[0]._call_memo) > 10
        assert (len(asked) > 1) == keyed, platform_name
        assert len(costs[1]._call_memo) == (len(costs[0]._call_memo) if keyed else 1)


def _with_arrival_at(arrivals: Arrivals, at: float, prompt: int, output: int) -> Arrivals:
    order = np.searchsorted(arrivals.times_s, at, side="right")
    return Arrivals(np.insert(arrivals.times_s, order, at),
                    np.insert(arrivals.prompt_tokens, order, prompt),
                    np.insert(arrivals.output_tokens, order, output))


@pytest.mark.parametrize("seed, replicas", [(0, 1), (1, 1), (2, 2), (3, 3)])
def test_arrivals_at_the_very_end_of_an_iteration_are_ordered_as_simpy_orders_them(
        cost, seed, replicas):
    """Arrivals exactly at iteration ends (a request's first token or finish: the sums
    the loop makes, so the tie is exact), added one at a time, each later than the
    last, so the earlier ties stay ties: which of the two events goes first is SimPy's
    event order, and both loops must follow it."""
    rng = np.random.default_rng(seed)
    n = 12
    arrivals = _arrivals(rng.exponential(0.01, n), rng.integers(1, 200, n),
                         rng.integers(1, 120, n))
    spec = _spec(4, 64, 16, 2, replicas)
    last = 0.0
    for _ in range(8):
        reference = _serve(spec, arrivals, cost, 40, compiled=False)
        assert _record(_serve(spec, arrivals, cost, 40, compiled=True)) == \
            _record(reference)
        ends = sorted({t for r in reference.finished for t in (r.first_token_s, r.finish_s)
                       if t > last})
        if not ends:
            break
        last = ends[int(rng.integers(0, min(3, len(ends))))]
        arrivals = _with_arrival_at(arrivals, last, int(rng.integers(1, 100)),
                                    int(rng.integers(1, 60)))


def test_replicas_starting_together_plan_in_simpy_order(cost):
    """Arrivals at time 0 on each of three replicas: their first plans (and sampled
    shapes) come in the order SimPy starts the replica processes."""
    arrivals = _arrivals([0.0, 0.0, 0.0, 0.001], [30, 70, 110, 20], [5, 9, 3, 4])
    spec = _spec(8, 64, 16, 2, 3)
    reference = _serve(spec, arrivals, cost, 40, compiled=False)
    assert reference.sample.shapes[0] == (((30, 0),), ())
    assert _record(_serve(spec, arrivals, cost, 40, compiled=True)) == _record(reference)


def test_the_kernels_copies_of_the_reference_constants_are_the_reference_values():
    """Numba compiles module constants in; the kernels' cache key covers kernel modules
    only, so the copies are checked here against the modules they copy."""
    assert loop_state.MAX_RUN_ITERATIONS == schedulers.MAX_RUN_ITERATIONS
    assert loop_state.REPORT_EVERY == engine.REPORT_EVERY


@pytest.mark.parametrize("routing", ["least_loaded", "shared_queue"])
def test_one_replica_under_any_router_is_the_same_run(cost, routing):
    rng = np.random.default_rng(11)
    n = 50
    arrivals = _arrivals(rng.exponential(0.004, n), rng.integers(1, 300, n),
                         rng.integers(1, 150, n))
    spec = _spec(8, 128, 16, 3).model_copy(update={"routing": routing})
    reference = _serve(spec, arrivals, cost, 50, compiled=False)
    assert _record(_serve(spec, arrivals, cost, 50, compiled=True)) == _record(reference)


def test_runs_beyond_the_scope_take_the_simpy_loop(cost):
    """Other batching, other routers over several replicas, a host tier, a trace's
    prefixes, a cost model of another class, a used store (pipelined stages are in
    scope: tests/test_serving_compiled_pipeline.py)."""
    arrivals = _arrivals([0.0, 0.01], [10, 20], [3, 4])
    spec = _spec(8, 64, 16, 0)
    kv = PagedKvCache(40, 16)

    def applies(spec=spec, arrivals=arrivals, cost=cost, kv=kv, store=None):
        store = store or MetricsStore(spec.replicas)
        return compiled_loop.applies(spec, arrivals, cost, kv, store, llm=True)

    assert applies()
    assert not applies(spec.model_copy(update={"batching": "dynamic"}))
    assert not applies(spec.model_copy(update={"replicas": 2, "routing": "least_loaded"}))
    assert not applies(kv=PagedKvCache(40, 16, host=HostTier(1e-6, 1e9, 2)))
    assert not applies(arrivals=Arrivals(arrivals.times_s, arrivals.prompt_tokens,
                                         arrivals.output_tokens,
                                         prefix_tokens=np.array([0, 5])))
    assert not applies(cost=object())
    used = MetricsStore(1)
    used.arrived = 1
    assert not applies(store=used)
    assert not compiled_loop.applies(spec, arrivals, cost, kv, MetricsStore(1), llm=False)


def test_many_runs_cut_short_leave_their_stale_timeouts_in_the_queue(cost):
    """A long decode run cut short by each of many arrivals: every cut leaves its run's
    timeout queued (stale), as SimPy leaves it, so the heap holds hundreds at once."""
    n = 300
    arrivals = _arrivals([0.0] + [2e-4] * (n - 1), [8] + [4] * (n - 1),
                         [3000] + [2] * (n - 1))
    spec = _spec(512, 512, 16, 2)
    reference = _serve(spec, arrivals, cost, 2000, compiled=False)
    assert _record(_serve(spec, arrivals, cost, 2000, compiled=True)) == _record(reference)
    assert compiled_loop.queue_room(n, 1) < 2 * n


def test_decoding_requests_priced_by_their_kept_stretches_leave_the_simpy_store(cost):
    """Long decodes cut into many short runs by frequent arrivals, each request's
    context staying inside one grid cell for several runs (its kept stretch priced)
    and crossing into the next (its stretch found again), others finishing between
    (the lane's values moved up in order): the same store as the SimPy loop's; a
    KV cache small enough to preempt some (their rows made current again)."""
    rng = np.random.default_rng(11)
    n = 80
    arrivals = _arrivals(rng.exponential(0.004, n), rng.integers(100, 900, n),
                         rng.integers(50, 700, n))
    spec = _spec(24, 256, 16, 4)
    reference = _serve(spec, arrivals, cost, 400, compiled=False)
    compiled = _serve(spec, arrivals, cost, 400, compiled=True)
    assert reference.preemptions > 0
    assert sum(reference.iterations) > 2 * n
    assert _record(compiled) == _record(reference)
