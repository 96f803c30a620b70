"""The compiled serving loop on pipelined replicas (P > 1 stages, their micro-batches
through the stages: engine.PipelinedReplica) against the SimPy loop: on generated
loads (arrivals with ties, 2 and 4 stages, 1 to 4 micro-batches, replicas, KV caches
small enough to preempt) both leave the same store bit for bit, the pipeline's stage
busy and active seconds included, and the cost model is asked for the same grid
points."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.serving import compiled_loop
from simulator.serving.iteration_cost import UnitCosts
from simulator.serving.kv_cache import PagedKvCache
from simulator.serving.metrics import MetricsStore
from test_serving_compiled_loop import _arrivals, _cost, _record, _serve, _spec, loads


@pytest.fixture(scope="module")
def units():
    """Fusion units' costs shared by the module's cost models (by content, as a
    deployment search shares them): each unit is simulated once in the module, while
    every cost model asks for its own grid points, which the tests compare."""
    return UnitCosts()


@pytest.fixture(scope="module")
def cost(units):
    return _cost(4, units=units)  # few bits: decode runs cross grid cells


def _pipelined(max_batch, max_tokens, block_tokens, samples, replicas, stages,
               micro_batches=None):
    return _spec(max_batch, max_tokens, block_tokens, samples, replicas).model_copy(
        update={"pp": stages, "micro_batches": micro_batches})


def _pipeline_record(store: MetricsStore) -> tuple:
    return _record(store) + (store.stage_busy_s, store.pipeline_active_s,
                             store.pipeline_bubble_fraction(2))


def _same(spec, arrivals, cost, blocks) -> MetricsStore:
    reference = _serve(spec, arrivals, cost, blocks, compiled=False)
    compiled = _serve(spec, arrivals, cost, blocks, compiled=True)
    assert _pipeline_record(compiled) == _pipeline_record(reference)
    return reference


@settings(max_examples=60, deadline=None)
@given(loads, st.integers(1, 12), st.sampled_from([8, 64, 512]), st.sampled_from([1, 16]),
       st.integers(4, 80), st.sampled_from([0, 1, 3]), st.integers(1, 3),
       st.sampled_from([2, 4]), st.sampled_from([None, 1, 2, 3]))
def test_pipelined_runs_leave_the_store_the_simpy_loop_leaves(
        cost, load, max_batch, max_tokens, block_tokens, blocks, samples, replicas,
        stages, micro_batches):
    spec = _pipelined(max_batch, max_tokens, block_tokens, samples, replicas, stages,
                      micro_batches)
    _same(spec, _arrivals(*load), cost, blocks * 16 // block_tokens)


@pytest.mark.parametrize("stages, replicas, micro_batches",
                         [(2, 1, None), (4, 1, None), (2, 2, 1), (4, 3, 3)])
def test_pipelined_preemptions_happen_and_match(cost, stages, replicas, micro_batches):
    rng = np.random.default_rng(7)
    n = 120
    arrivals = _arrivals(rng.exponential(0.002, n), rng.integers(50, 400, n),
                         rng.integers(20, 300, n))
    spec = _pipelined(32, 256, 16, 8, replicas, stages, micro_batches)
    reference = _same(spec, arrivals, cost, 60 // replicas)
    assert reference.preemptions > 0
    assert reference.pipeline_bubble_fraction(stages) > 0


@pytest.mark.parametrize("seed, stages, replicas", [(0, 2, 1), (1, 4, 1), (2, 2, 2)])
def test_pipelined_arrivals_at_iteration_ends_are_ordered_as_simpy_orders_them(
        cost, seed, stages, replicas):
    """Arrivals exactly at a micro-batch's iteration ends (first tokens and finishes:
    the sums the loop makes), added one at a time: the tie between the arrival's
    events and the stage's end is SimPy's event order, and both loops follow it."""
    rng = np.random.default_rng(seed)
    n = 12
    arrivals = _arrivals(rng.exponential(0.01, n), rng.integers(1, 200, n),
                         rng.integers(1, 120, n))
    spec = _pipelined(4, 64, 16, 2, replicas, stages)
    last, tied = 0.0, 0
    for _ in range(8):
        reference = _same(spec, arrivals, cost, 40)
        ends = sorted({t for r in reference.finished for t in (r.first_token_s, r.finish_s)
                       if t > last})
        if not ends:
            break
        last = ends[int(rng.integers(0, min(3, len(ends))))]
        tied += 1
        order = np.searchsorted(arrivals.times_s, last, side="right")
        arrivals = type(arrivals)(np.insert(arrivals.times_s, order, last),
                                  np.insert(arrivals.prompt_tokens, order,
                                            int(rng.integers(1, 100))),
                                  np.insert(arrivals.output_tokens, order,
                                            int(rng.integers(1, 60))))
    assert tied >= 3


def test_micro_batches_at_time_zero_enter_in_simpy_order(cost):
    """Arrivals at time 0 on two replicas of four micro-batches: which micro-batch plans
    first (and the shapes sampled) is the order SimPy starts the lane processes."""
    arrivals = _arrivals([0.0] * 6 + [0.001], [30, 70, 110, 20, 9, 40, 5],
                         [5, 9, 3, 4, 6, 2, 8])
    spec = _pipelined(2, 64, 16, 2, 2, 4)
    reference = _same(spec, arrivals, cost, 40)
    assert reference.sample.shapes[0] == (((30, 0), (34, 0)), ())


def test_a_cold_cost_model_is_asked_the_same_for_a_pipelined_run(units):
    rng = np.random.default_rng(5)
    n = 60
    arrivals = _arrivals(rng.exponential(0.003, n), rng.integers(1, 500, n),
                         rng.integers(1, 400, n))
    spec = _pipelined(16, 128, 16, 4, 1, 2)
    costs = [_cost(5, units=units), _cost(5, units=units)]
    for each, compiled in zip(costs, (False, True)):
        _serve(spec, arrivals, each, 80, compiled=compiled)
    first, second = costs
    for table in ("_dense", "_prefill", "_decode", "_pair"):
        assert list(getattr(second, table)) == list(getattr(first, table)), table


def test_pipelined_runs_are_in_scope_and_other_routers_over_replicas_are_not(cost):
    arrivals = _arrivals([0.0, 0.01], [10, 20], [3, 4])
    kv = PagedKvCache(40, 16)

    def applies(spec):
        return compiled_loop.applies(spec, arrivals, cost, kv, MetricsStore(spec.replicas),
                                     llm=True)

    assert applies(_pipelined(8, 64, 16, 0, 2, 4, 3))
    assert not applies(_pipelined(8, 64, 16, 0, 2, 4).model_copy(
        update={"routing": "least_loaded"}))
    assert not applies(_pipelined(8, 64, 16, 0, 1, 2).model_copy(
        update={"batching": "dynamic"}))
