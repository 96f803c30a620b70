"""Static and dynamic batching timelines, the batch scaling of plain workloads, and the
operator-cost memo against whole-workload simulation."""

from __future__ import annotations

import numpy as np
import pytest
from serving_helpers import FixedBatchCost, run

from simulator.inputs.named_inputs import load_inputs
from simulator.serving.iteration_cost import (SAMPLE_FIELD, OperatorCosts, PlainBatchCost,
                                    batched_workload, simulated_cost)
from simulator.serving.spec import ServeSpec


def trace_file(tmp_path, times) -> str:
    path = tmp_path / "arrivals.csv"
    path.write_text("arrival_s\n" + "".join(f"{t!r}\n" for t in times))
    return str(path)


def test_static_batch_latency_is_fill_wait_plus_the_batch_simulated_time():
    """Arrivals slower than service: each batch of b starts when its b-th request
    arrives, so every latency is that wait plus the batch's simulated time."""
    b = 4
    inputs = load_inputs("tpu_v1", "tpu_v1_mlp_b200", None)
    cost = PlainBatchCost(inputs.platform, inputs.workload)
    batch_s = cost.batch(b).seconds
    spec = ServeSpec(workload="w", rate=0.2 * b / batch_s, requests=400,
                     batching="static", max_batch=b, seed=5)
    store, came, times = run(spec, cost)
    arrivals = came.times_s
    fill = np.repeat(arrivals[b - 1::b], b)
    assert np.all(fill[b::b] >= fill[:-b:b] + batch_s)  # arrivals slower than service
    expected = fill - arrivals + batch_s
    assert times.latency_s == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert sum(store.iterations) == 400 // b


def test_static_batch_with_timeout_runs_short_but_costs_a_full_batch(tmp_path):
    spec = ServeSpec(workload="w", arrival="trace", max_wait_ms=2.0,
                     arrival_trace=trace_file(tmp_path, [0.0, 0.001, 0.010]),
                     batching="static", max_batch=4)
    store, _, times = run(spec, FixedBatchCost(1e-3, 1e-3))
    # batch 1 at 2 ms with two requests costing four (5 ms); the third waits 2 ms too
    assert times.latency_s.tolist() == pytest.approx([0.007, 0.006, 0.007])


def test_static_batch_without_timeout_runs_the_last_partial_batch_when_arrivals_end(
        tmp_path):
    spec = ServeSpec(workload="w", arrival="trace", batching="static", max_batch=4,
                     arrival_trace=trace_file(tmp_path, [0.0, 0.001, 0.002, 0.003, 0.004]))
    store, _, times = run(spec, FixedBatchCost(1e-3, 1e-3))
    # a full batch at 3 ms (done 8 ms); the fifth request, left alone, runs at 8 ms
    assert times.latency_s.tolist() == pytest.approx([0.008, 0.007, 0.006, 0.005, 0.009])


def test_dynamic_batch_runs_when_full_or_when_the_first_has_waited(tmp_path):
    spec = ServeSpec(workload="w", arrival="trace", max_wait_ms=1.0, batching="dynamic",
                     max_batch=2, arrival_trace=trace_file(
                         tmp_path, [0.0, 0.0001, 0.0002, 0.005, 0.02]))
    _, _, times = run(spec, FixedBatchCost(1e-3, 1e-3))
    # [0, 0.1 ms] full at 0.1 ms -> done 3.1 ms; 0.2 ms waits for the replica (3.1 ms,
    # past its 1 ms wait) -> done 5.1 ms; 5 ms finds the replica free at 5.1 ms and
    # waits out its 1 ms -> 8 ms; 20 ms likewise -> 23 ms
    assert times.latency_s.tolist() == pytest.approx(
        [0.0031, 0.0030, 0.0049, 0.003, 0.003])


def test_a_batch_scales_each_operators_sample_dimension():
    inputs = load_inputs("tpu_v1", "resnet50_b1", None)
    batched = batched_workload(inputs.workload, 3)
    for one, three in zip(inputs.workload.operators, batched.operators):
        field = SAMPLE_FIELD[one.kind]
        assert getattr(three, field) == 3 * getattr(one, field)
        assert one.model_dump(exclude={field}) == three.model_dump(exclude={field})


def test_batches_reuse_weights_so_cost_grows_slower_than_batch_size():
    inputs = load_inputs("tpu_v1", "tpu_v1_mlp_b200", None)
    cost = PlainBatchCost(inputs.platform, inputs.workload)
    one, eight = cost.batch(1).seconds, cost.batch(8).seconds
    assert one < eight < 8 * one


@pytest.mark.parametrize("arch, workload", [("tpu_v1", "resnet50_b1"),
                                            ("tpu_v5e_like", "bert_base_s128")])
def test_memoised_operator_sum_equals_whole_workload_simulation(arch, workload):
    inputs = load_inputs(arch, workload, None)
    summed = OperatorCosts(inputs.platform).workload(inputs.workload)
    whole = simulated_cost(inputs.platform, inputs.workload)
    assert summed.seconds == pytest.approx(whole.seconds, rel=1e-12)
    assert summed.energy_j == pytest.approx(whole.energy_j, rel=1e-9)


def test_a_batch_too_large_for_int64_is_one_clear_error():
    from simulator.errors import AccsimError
    inputs = load_inputs("tpu_v1", "gemm_4096", None)
    with pytest.raises(AccsimError, match="too large"):
        batched_workload(inputs.workload, 2**40)
