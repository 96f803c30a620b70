"""Serving prices an iteration as a whole run fuses it (DESIGN.md sections 10, 15): the
memoised sum of fusion units equals one run of the same workload under the same
--fusion, for plain workloads and LLM iterations (real frontend), and serve takes
--fusion."""

from __future__ import annotations

import pytest

from simulator.inputs.named_inputs import load_inputs
from simulator.frontends.hf.config import load_model_config
from simulator.inputs.run_inputs import Inputs
from simulator.mapping.plan import Mapping
from simulator.search.resolve import fusion_units
from simulator.serving.iteration_cost import OperatorCosts, PlainBatchCost, simulated_cost
from simulator.serving.cost_cache import CostCache
from simulator.serving.llm_cost import LlmCost
from simulator.serving.serve import prepare
from simulator.serving.spec import ServeSpec
from simulator.simulate import simulate

MODES = ["none", "auto"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("arch, workload", [("tpu_v5e_like", "bert_base_s128"),
                                            ("tpu_v1", "resnet50_b1")])
def test_unit_sum_equals_a_whole_run_under_the_same_fusion(arch, workload, mode):
    inputs = load_inputs(arch, workload, None, fusion=mode)
    summed = OperatorCosts(inputs.platform, inputs.mapping).workload(inputs.workload)
    run = simulate(inputs).operators_total
    seconds = run.cycles / (inputs.platform.clock_ghz * 1e9)
    assert summed.seconds == pytest.approx(seconds, rel=1e-12)
    assert summed.energy_j == pytest.approx(run.energy_pj * 1e-12, rel=1e-9)


def test_auto_units_group_what_the_run_fuses_and_cost_less():
    inputs = load_inputs("tpu_v5e_like", "bert_base_s128", None)
    auto = Mapping(fusion="auto")
    units = fusion_units(inputs.workload, auto)
    assert any(len(unit) > 1 for unit in units)
    assert sorted(i for unit in units for i in unit) == list(range(
        len(inputs.workload.operators)))
    assert all(len(unit) == 1 for unit in fusion_units(inputs.workload,
                                                        Mapping(fusion="none")))
    batch = {mode: PlainBatchCost(inputs.platform, inputs.workload,
                                  mapping=Mapping(fusion=mode)).batch(4).seconds
             for mode in MODES}
    assert batch["auto"] < batch["none"]


@pytest.fixture(scope="module")
def llama_costs():
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    config = load_model_config("llama_3_1_8b")
    return {mode: LlmCost(platform, config, dtype=None, bits=20, cache=CostCache(None),
                          mapping=Mapping(fusion=mode)) for mode in MODES}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prefill, decode", [([(48, 0)], []), ([(24, 40)], []),
                                             ([], [300])])
def test_a_served_llm_iteration_costs_what_a_run_of_its_workload_costs(
        llama_costs, mode, prefill, decode):
    cost = llama_costs[mode]
    split = cost.iteration(prefill, decode)
    call = cost._call(len(decode) + sum(n for n, _ in prefill), len(decode) + len(prefill))
    workload = cost._workload(prefill, decode)
    run = simulate(Inputs(cost.platform, workload, Mapping(fusion=mode)))
    whole = run.operators_total.cycles / (cost.platform.clock_ghz * 1e9)
    assert split.seconds - call.seconds == pytest.approx(whole, rel=1e-12)
    assert cost.exact(prefill, decode).seconds == pytest.approx(
        simulated_cost(cost.platform, workload, Mapping(fusion=mode)).seconds, rel=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_a_mixed_iteration_differs_from_its_run_only_by_the_per_request_head(
        llama_costs, mode):
    """Several requests: the shared part is priced at the iteration's tokens with one
    request's head (final norm, lm_head over one row), as before fusion; fusion adds
    no error of its own."""
    cost = llama_costs[mode]
    shape = ([(24, 40)], [90, 200])
    assert cost.iteration(*shape).seconds == pytest.approx(cost.exact(*shape).seconds,
                                                           rel=1e-3)


def test_fusion_makes_a_served_llm_iteration_cheaper(llama_costs):
    shape = ([(48, 0)], [300])
    assert llama_costs["auto"].iteration(*shape).seconds < \
        llama_costs["none"].iteration(*shape).seconds


def test_the_shared_o_projection_is_not_a_requests_operator(llama_costs):
    names = [op.name for op in llama_costs["none"].reference_workload().operators]
    own = {names[i] for i in llama_costs["none"]._decode_own}
    assert "o_proj" not in own and all(name.startswith("attn") for name in own)


@pytest.mark.parametrize("mode", MODES)
def test_serve_prices_iterations_under_the_specs_fusion(mode):
    setup = prepare(ServeSpec(workload="bert_base_s128", arch="tpu_v5e_like", rate=10,
                              fusion=mode))
    assert setup.cost._costs.mapping.fusion == mode
    assert setup.reference.mapping.fusion == mode


def test_serve_cli_takes_fusion_and_auto_serves_faster(tmp_path):
    from simulator.cli import main
    import json
    latency = {}
    for mode in MODES:
        out = tmp_path / f"{mode}.json"
        assert main(["serve", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                     "--rate", "50", "--requests", "40", "--fusion", mode,
                     "--json", str(out)]) == 0
        data = json.loads(out.read_text())
        assert data["manifest"]["serving"]["spec"]["fusion"] == mode
        latency[mode] = data["latency_ms"]["p50"]
    assert latency["auto"] < latency["none"]


def test_review_fusion_reaches_every_plan_and_serving_point():
    from simulator.review.serving_runs import serve_spec
    from simulator.review.study import load_study, with_study_fusion
    study = load_study("experiments/studies/resnet50_platforms.yaml")
    assert with_study_fusion(study, None) is study
    fused = with_study_fusion(study, "auto")
    assert all(m.model.fusion == "auto" for m in fused.mappings)
    spec = serve_spec(fused, fused.platforms[0], fused.workloads[0].source.path, llm=False)
    assert spec.fusion == "auto" and spec.mapping().fusion == "auto"
