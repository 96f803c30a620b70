"""The LLM cost adapter: shape bucketing, the split of an iteration into shared and
per-request parts, its error against whole-iteration simulation, and LLM serving end
to end, with a stand-in frontend (tests/fake_hf.py) and the real one
(simulator.frontends.hf)."""

from __future__ import annotations

import fake_hf
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from simulator.inputs.named_inputs import load_inputs
from simulator.errors import AccsimError
from simulator.serving import llm_cost
from simulator.serving.llm_cost import LlmCost, bucketing_error, grid_cell
from simulator.serving.serve import prepare, serve
from simulator.serving.spec import ServeSpec

def on_grid(value: int, bits: int) -> bool:
    shift = max(0, value.bit_length() - bits)
    return value >> shift << shift == value


@given(st.integers(0, 10**9), st.integers(1, 12))
def test_grid_cell_is_the_neighbouring_grid_points_at_most_2_to_1_minus_bits_apart(
        value, bits):
    low, high = grid_cell(value, bits)
    assert low <= value <= high and on_grid(low, bits) and on_grid(high, bits)
    assert (low == high) == on_grid(value, bits)
    assert high - low <= low * 2.0 ** (1 - bits)
    assert not any(on_grid(v, bits) for v in range(low + 1, min(high, low + 2000)))


@pytest.fixture(scope="module")
def tiny_cost():
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    return LlmCost(platform, fake_hf.TinyConfig(), dtype=None, bits=20, hf=fake_hf)


def test_attention_operators_are_told_apart_from_shared_ones(tiny_cost):
    names = [op.name for op in fake_hf.iteration_workload(
        fake_hf.TinyConfig(), prefill=[(64, 0)], decode=[]).operators]
    own = sorted(names[i] for i in tiny_cost._prefill_own)
    assert own == ["p0_pv", "p0_qk", "p0_softmax"]
    assert len(tiny_cost._decode_own) == 3


@pytest.mark.parametrize("prefill, decode", [([(37, 0)], []), ([(100, 260)], []),
                                             ([], [300]), ([], [77])])
def test_one_request_iterations_split_and_summed_equal_whole_simulation(
        tiny_cost, prefill, decode):
    split = tiny_cost.iteration(prefill, decode)
    whole = tiny_cost.exact(prefill, decode)
    assert split.seconds == pytest.approx(whole.seconds, rel=1e-12)
    assert split.energy_j == pytest.approx(whole.energy_j, rel=1e-9)


def test_a_decode_run_costs_what_its_iterations_cost_one_by_one():
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    cost = LlmCost(platform, fake_hf.TinyConfig(), dtype=None, bits=4, hf=fake_hf)
    contexts = [5, 17, 250, 1023, 1024, 3000]
    run = cost.decode_run(contexts, 300)
    one_by_one = [cost.iteration((), [c + step for c in contexts]) for step in range(300)]
    assert [c.seconds for c in run] == pytest.approx([c.seconds for c in one_by_one],
                                                     rel=1e-12)
    assert [c.energy_j for c in run] == pytest.approx([c.energy_j for c in one_by_one],
                                                      rel=1e-9)


def test_default_bucketing_error_on_mixed_iterations_is_under_two_percent():
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    cost = LlmCost(platform, fake_hf.TinyConfig(), dtype=None, bits=6, hf=fake_hf)
    shapes = [(((200, 0),), (300, 310, 320)), (((512, 1024),), ()),
              ((), tuple(range(900, 1000, 7))), (((61, 0), (13, 80)), (1500, 1700))]
    report = bucketing_error(cost, shapes)
    assert report["samples"] == 4
    assert report["max_abs_error"] < 0.02
    assert abs(report["total_time_error"]) < 0.02


def platform_file(tmp_path, capacity_bytes) -> str:
    inputs = load_inputs("tpu_v5e_like", "gemm_4096", None)
    raw = inputs.platform.model_dump(mode="json")
    raw["offchip"]["capacity_bytes"] = capacity_bytes
    path = tmp_path / "v5e_with_hbm.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_llm_serving_end_to_end_with_a_stand_in_frontend(tmp_path):
    stats = fake_hf.model_stats(fake_hf.TinyConfig())
    blocks = 40
    arch = platform_file(tmp_path, stats.weight_bytes + blocks * 16
                         * stats.kv_bytes_per_token)
    spec = ServeSpec(arch=arch, model="tiny", rate=200.0, requests=300, prompt_tokens=96,
                     output_tokens=24, sla={"ttft_p99_ms": 50, "tpot_p99_ms": 5})
    setup = prepare(spec, hf=fake_hf)
    assert setup.kv_blocks == blocks
    result, _ = serve(setup, spec)
    assert result["completed"] + result["dropped"] == result["requests"] == 300
    assert result["tokens_per_s"] == pytest.approx(result["throughput_rps"] * 24)
    assert result["tpot_ms"]["p50"] > 0 and result["service_ms"] is None
    assert result["bucketing"]["samples"] > 0
    assert result["bucketing"]["max_abs_error"] < 0.02
    assert result["goodput_rps"] <= result["throughput_rps"]
    assert result["manifest"]["serving"]["kv_blocks_per_replica"] == blocks
    import json
    again, _ = serve(prepare(spec, hf=fake_hf), spec)
    assert json.dumps(again) == json.dumps(result)


def test_weights_larger_than_hbm_are_an_error_naming_both_sizes(tmp_path):
    stats = fake_hf.model_stats(fake_hf.TinyConfig())
    spec = ServeSpec(arch=platform_file(tmp_path, stats.weight_bytes // 2), model="tiny",
                     rate=1.0, requests=1)
    with pytest.raises(AccsimError, match=f"{stats.weight_bytes:,} bytes.*"
                       f"{stats.weight_bytes // 2:,} bytes"):
        prepare(spec, hf=fake_hf)


def test_a_platform_without_hbm_capacity_cannot_serve_an_llm(tmp_path):
    spec = ServeSpec(arch=platform_file(tmp_path, None), model="tiny", rate=1.0,
                     requests=1)
    with pytest.raises(AccsimError, match="capacity_bytes"):
        prepare(spec, hf=fake_hf)


def test_llama_3_1_8b_facts_and_bucketing_error_with_the_real_frontend():
    config, facts = llm_cost.load_model("llama_3_1_8b", dtype=None)
    assert facts.kv_bytes_per_token == 131072      # 2 x 32 x 8 x 128 x 2 bytes
    assert facts.weight_bytes == pytest.approx(2 * 8.03e9, rel=0.01)
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    cost = LlmCost(platform, config, dtype=None, bits=6)
    shapes = [(((500, 0),), (1200, 1300)), ((), tuple(range(800, 1400, 100))),
              (((256, 1024),), (700,) * 5)]
    report = bucketing_error(cost, shapes)
    assert report["max_abs_error"] < 0.02


def test_accsim_serve_model_with_the_real_frontend(tmp_path):
    import json

    from simulator.cli import main
    out = tmp_path / "llm.json"
    assert main(["serve", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--rate",
                 "2", "--requests", "12", "--prompt-tokens", "24", "--output-tokens", "4",
                 "--sla", "tpot_p99_ms=100", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["completed"] == 12 and result["dropped"] == 0
    assert result["tokens_per_s"] == pytest.approx(4 * result["throughput_rps"])
    assert 0 < result["tpot_ms"]["p50"] < result["ttft_ms"]["p50"]
    assert result["bucketing"]["samples"] > 0
    assert result["bucketing"]["max_abs_error"] < 0.02
    assert result["manifest"]["serving"]["model"]["sha256"]
    assert result["manifest"]["serving"]["kv_blocks_per_replica"] > 0
