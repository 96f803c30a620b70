"""A decode batch's attention as one launch per layer (DESIGN.md section 10, issue 41
item 2): the requests' K/V reads and products add up, the launch's fixed costs
(dispatch, first K/V load, pipeline fill and last products) are paid once, both parts
derived from the operator model (single and paired requests at one context), and the
bucketed iteration stays within its bound of `LlmCost.exact`."""

from __future__ import annotations

import pytest

from simulator.frontends.hf.config import load_model_config
from simulator.inputs.named_inputs import load_inputs
from simulator.mapping.plan import Mapping
from simulator.serving.iteration_cost import simulated_cost
from simulator.serving.cost_cache import CostCache
from simulator.serving.llm_cost import FIXED, VARIABLE, LlmCost, bucketing_error

LAYERS = 32  # Llama-3.1-8B


@pytest.fixture(scope="module")
def platform():
    return load_inputs("tpu_v5e_like", "gemm_4096", None).platform


@pytest.fixture(scope="module")
def llama(platform):
    """Every context its own grid point (bits 20): no interpolation in the way."""
    return LlmCost(platform, load_model_config("llama_3_1_8b"), dtype=None, bits=20,
                   cache=CostCache(None))


def attention(cost: LlmCost, decode: list[int]) -> float:
    """The decode iteration's seconds less its shared operators and its call."""
    b = len(decode)
    return cost.iteration((), decode).seconds - cost._dense_cost(b)[0] - \
        cost._call(b, b).seconds


def test_the_fixed_part_is_at_least_one_dispatch_per_layer(llama, platform):
    variable, fixed = llama._decode_cost(2048)
    dispatch = LAYERS * platform.seconds(platform.runtime.op_overhead_cycles)
    assert fixed[0] >= dispatch
    assert variable[0] > 0 and fixed[0] < variable[0]


@pytest.mark.parametrize("b", [2, 16])
def test_b_decodes_cost_b_single_decodes_less_b_minus_1_fixed_parts(llama, b):
    contexts = [2048 - 13 * i for i in range(b)]
    alone = sum(attention(llama, [c]) for c in contexts)
    fixed = [llama._decode_cost(c)[FIXED][0] for c in contexts]
    batched = attention(llama, contexts)
    assert batched < alone
    assert alone - batched == pytest.approx(sum(fixed) - fixed[0], rel=1e-9)
    assert batched == pytest.approx(sum(llama._decode_cost(c)[VARIABLE][0]
                                        for c in contexts) + fixed[0], rel=1e-12)


@pytest.mark.parametrize("b", [16, 64])
def test_equal_contexts_cost_what_one_batch_b_operator_costs_in_a_run(llama, b):
    """The frontend runs b requests at one context as one attention operator of batch
    b (its K/V head groups chained): the served iteration prices exactly that."""
    decode = [2048] * b
    workload = llama._workload((), decode)
    run = simulated_cost(llama.platform, workload, Mapping())
    call = llama._call(b, b).seconds
    assert llama.exact((), decode).seconds == pytest.approx(run.seconds, rel=1e-12)
    # the shared part is priced with one request's head (lm_head over one row, as
    # test_fusion_serving says); the attention is exact
    assert llama.iteration((), decode).seconds - call == pytest.approx(run.seconds,
                                                                       rel=1e-3)
    one = llama._workload((), [2048])
    old = b * (simulated_cost(llama.platform, one, Mapping()).seconds
               - llama._dense_cost(1)[0])
    assert attention(llama, decode) < old


def test_ragged_batches_bucket_within_their_bound(platform):
    cost = LlmCost(platform, load_model_config("llama_3_1_8b"), dtype=None, bits=3,
                   cache=CostCache(None))
    shapes = [((), tuple(range(900, 900 + 16 * 37, 37))),
              ((), tuple(range(1500, 1500 + 64 * 53, 53))),
              (((200, 0),), (300, 310, 4000)), (((61, 0), (13, 80)), (1500, 1700))]
    report = bucketing_error(cost, shapes)
    assert report["samples"] == 4
    assert report["max_abs_error"] < 0.02
    assert abs(report["total_time_error"]) < 0.02


def test_a_decode_run_costs_what_its_iterations_cost_one_by_one(platform):
    """The fixed part follows the longest context across grid cells as the
    variable parts follow theirs."""
    cost = LlmCost(platform, load_model_config("llama_3_1_8b"), dtype=None, bits=3,
                   cache=CostCache(None))
    contexts = [5, 17, 250, 1023, 1030]
    run = cost.decode_run(contexts, 60)
    one_by_one = [cost.iteration((), [c + step for c in contexts]) for step in range(60)]
    assert [c.seconds for c in run] == pytest.approx([c.seconds for c in one_by_one],
                                                     rel=1e-12)
    assert [c.energy_j for c in run] == pytest.approx([c.energy_j for c in one_by_one],
                                                      rel=1e-9)
