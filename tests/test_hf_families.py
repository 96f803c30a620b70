"""The model families of DESIGN.md section 21 read from their unedited config.json:
parameter counts against the model cards, cache bytes per token against the
architecture, the layer layouts, MLA's two forms, the scan operator, declared weight
formats and their fallback, sharding rules, decode near its roofline, and configs of
other sizes of each family (hand-written, not shipped) read without edits."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.frontends.hf import (decode_workload, iteration_workload,
                                    load_model_config, model_stats, prefill_workload)
from simulator.frontends.hf.config import parse_config
from simulator.frontends.hf.layers import Step, attention_shapes
from simulator.frontends.hf.quantization import fit_formats
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.system.parallelism import SystemPlan
from simulator.system.shard import model_footprint, shard_config, stage_weight_params
from simulator.inputs.workload import Scan

# (total, active) as each card states them, the rounding the card uses (half a unit
# of its last digit), and which active count the card means: DeepSeek and OpenAI
# count activated parameters without the input embedding table (DeepSeek-V3's
# README_WEIGHTS: "36.6B (including 0.9B for the output Head)"; gpt-oss model card
# table: active = MLP share + attention + unembedding); Meta, AI21 count both tables.
# Multimodal cards count the vision tower (params_vision) in the total.
CARDS = {
    "deepseek_r1": (671e9, 37e9, 0.5e9, "no_embedding"),
    "gpt_oss_20b": (20.91e9, 3.61e9, 0.005e9, "no_embedding"),
    "gemma_3_27b": (27e9, None, 0.5e9, None),
    "llama_4_scout_17b_16e": (109e9, 17e9, 0.5e9, "all"),
    "jamba_v0_1": (52e9, 12e9, 0.5e9, "all"),
}


def stats_of(name):
    return model_stats(load_model_config(name))


@pytest.mark.parametrize("name", sorted(CARDS))
def test_parameter_counts_match_the_model_cards(name):
    stats = stats_of(name)
    total, active, half_unit, convention = CARDS[name]
    assert abs(stats.params_total + stats.params_vision - total) <= half_unit
    if active is not None:
        counted = (stats.params_active_no_embedding if convention == "no_embedding"
                   else stats.params_active)
        assert abs(counted - active) <= half_unit


def test_exact_counts_pinned():
    # Computed from the configs by the formulas of stats.FORMULAS; a change is a
    # change of the counting rules.
    assert stats_of("deepseek_r1").params_total == 671_026_419_200
    assert stats_of("gpt_oss_20b").params_total == 20_914_757_184
    assert stats_of("jamba_v0_1").params_total == 51_570_323_328
    assert stats_of("llama_4_scout_17b_16e").params_vision == 871_932_416
    assert stats_of("deepseek_r1").params_active_no_embedding == 36_625_618_432
    assert stats_of("gpt_oss_20b").params_active_no_embedding == 3_608_307_264


def test_cache_bytes_per_token_follow_the_architecture():
    bf16 = 2
    # DeepSeek MLA: the 512-wide latent and the 64-wide RoPE key per layer.
    assert stats_of("deepseek_r1").kv_bytes_per_token == 61 * (512 + 64) * bf16
    # gpt-oss-20b: 24 layers x K and V x 8 KV heads x 64.
    oss = stats_of("gpt_oss_20b")
    assert oss.kv_bytes_per_token == 24 * 2 * 8 * 64 * bf16
    # ... of which the 12 sliding layers keep 128 tokens.
    assert oss.kv_bytes_per_request(4096) == 12 * 2 * 8 * 64 * bf16 * (4096 + 128)
    # Gemma 3 27B: 62 layers x 2 x 16 x 128; 52 local layers keep 1,024 tokens.
    gemma = stats_of("gemma_3_27b")
    assert gemma.kv_bytes_per_token == 62 * 2 * 16 * 128 * bf16
    assert gemma.kv_bytes_per_request(8192) == 2 * 16 * 128 * bf16 * (
        10 * 8192 + 52 * 1024)
    # Llama 4 Scout: 48 x 2 x 8 x 128; 36 chunked layers keep their chunk's tokens.
    scout = stats_of("llama_4_scout_17b_16e")
    assert scout.kv_bytes_per_token == 48 * 2 * 8 * 128 * bf16
    assert scout.kv_bytes_per_request(10000) == 2 * 8 * 128 * bf16 * (
        12 * 10000 + 36 * (10000 - 8192))
    # Jamba: 4 attention layers of 2 x 8 x 128; 28 Mamba layers each hold a 8192 x 16
    # state and the last 3 inputs of the width-4 convolution over 8192 channels.
    jamba = stats_of("jamba_v0_1")
    assert jamba.kv_bytes_per_token == 4 * 2 * 8 * 128 * bf16
    assert jamba.state_bytes_per_request == 28 * (8192 * 16 + 3 * 8192) * bf16
    assert jamba.kv_bytes_per_request(1000) == 4 * 2 * 8 * 128 * bf16 * 1000 \
        + jamba.state_bytes_per_request


def test_layer_layouts_follow_each_config():
    kinds = lambda name: load_model_config(name).groups()  # noqa: E731
    assert kinds("deepseek_r1") == [(("full", "dense"), 3), (("full", "moe"), 58)]
    assert kinds("gemma_3_27b") == [(("sliding", "dense"), 52), (("full", "dense"), 10)]
    assert kinds("gpt_oss_20b") == [(("sliding", "moe"), 12), (("full", "moe"), 12)]
    assert kinds("llama_4_scout_17b_16e") == [(("chunked", "moe"), 36),
                                              (("full", "moe"), 12)]
    assert kinds("jamba_v0_1") == [(("ssm", "dense"), 12), (("ssm", "moe"), 16),
                                   (("full", "dense"), 4)]
    gemma = load_model_config("gemma_3_27b")
    assert [mixer for mixer, _ in gemma.kinds[:6]] == ["sliding"] * 5 + ["full"]


def test_every_layer_kind_is_simulated_with_its_repeat():
    cfg = load_model_config("gemma_3_27b")
    ops = {op.name: op for op in decode_workload(cfg, batch=1, context=4096).operators}
    assert ops["sliding_dense.attn"].kv_len == 1024
    assert ops["sliding_dense.attn"].repeat == 52
    assert ops["full_dense.attn"].kv_len == 4096
    assert ops["full_dense.attn"].repeat == 10
    # Gemma's sandwich norms: one on each block's output before the residual add.
    assert ops["full_dense.attn_out_norm"].inputs == ["full_dense.o_proj"]


def test_chunked_attention_splits_at_chunk_boundaries():
    cfg = load_model_config("llama_4_scout_17b_16e")
    prompt = attention_shapes(cfg, "chunked", Step({(10000, 0): 2}))
    assert [(s.batch, s.q_len, s.kv_len, s.causal) for s in prompt] == [
        (2, 1808, 1808, True), (2, 8192, 8192, True)]
    decode = attention_shapes(cfg, "chunked", Step({(1, 9999): 1}))
    assert [(s.q_len, s.kv_len) for s in decode] == [(1, 10000 - 8192)]
    # The NoPE global layers read everything and take no RoPE.
    ops = {op.name: op for op in decode_workload(cfg, batch=1, context=10000).operators}
    assert ops["full_moe.attn"].kv_len == 10000
    assert "full_moe.rope" not in ops and "chunked_moe.rope" in ops


def test_mla_decode_is_absorbed_and_prefill_naive():
    cfg = load_model_config("deepseek_r1")
    decode = {op.name: op for op in decode_workload(cfg, batch=1, context=4096).operators}
    attn = decode["full_moe.attn"]
    # All 128 heads against the one cached latent + RoPE key: QK^T over 576, PV over
    # 512, as one K/V head of (576 + 512) / 2.
    assert (attn.heads, attn.kv_heads, attn.head_dim) == (128, 1, 544)
    assert attn.macs == 128 * 4096 * (576 + 512)
    assert decode["full_moe.q_absorb"].batch == 128
    assert "full_moe.kv_b" not in decode
    prefill = {op.name: op for op in prefill_workload(cfg, batch=1, seq=2048).operators}
    assert "full_moe.q_absorb" not in prefill
    kv_b = prefill["full_moe.kv_b"]
    assert (kv_b.m, kv_b.n, kv_b.k) == (2048, 128 * 256, 512)
    attn = prefill["full_moe.attn"]
    assert attn.macs == 128 * (2048 * 2049 // 2) * (192 + 128)


def test_deepseek_shared_and_routed_experts():
    cfg = load_model_config("deepseek_r1")
    ops = {op.name: op for op in decode_workload(cfg, batch=1, context=16).operators}
    assert ops["full_moe.experts_gate_up"].batch == 8          # top-8 routed
    assert ops["full_moe.shared_gate_up"].n == 2 * 2048        # one shared expert
    assert ops["full_dense.mlp_gate_up"].n == 2 * 18432        # first 3 layers dense
    assert ops["full_dense.mlp_gate_up"].repeat == 3


def test_ssm_layers_run_the_scan_kind_with_their_state():
    cfg = load_model_config("jamba_v0_1")
    ops = {op.name: op for op in decode_workload(cfg, batch=3, context=500).operators}
    scan = ops["ssm_moe.scan"]
    assert isinstance(scan, Scan)
    assert (scan.batch, scan.steps, scan.channels, scan.state) == (3, 1, 8192, 16)
    shape = scan.vector()
    # The state is read and written every step.
    assert shape.input_elements >= 3 * 8192 * 16
    assert shape.output_elements == 3 * 8192 + 3 * 8192 * 16
    assert shape.passes == 3 and shape.cost_kind == "mul"
    # Mamba's conv reads its window of 4 per channel.
    assert (ops["ssm_moe.conv"].rows, ops["ssm_moe.conv"].cols) == (3 * 8192, 4)


def test_declared_formats_fall_back_where_the_platform_lacks_them():
    cfg = load_model_config("gpt_oss_20b")
    assert dict(cfg.weight_formats) == {"experts": "mxfp4"}
    ops = {op.name: op for op in decode_workload(cfg, batch=1, context=16).operators}
    assert ops["full_moe.experts_gate_up"].weight_dtype == "mxfp4"
    assert ops["full_moe.qkv"].weight_dtype is None            # self_attn kept
    assert fit_formats({"experts": "mxfp4"}, ("bf16", "int8"))[0] == {}
    assert fit_formats({"experts": "mxfp4"}, ("bf16", "fp8"))[0] == {"experts": "fp8"}
    assert fit_formats({"experts": "mxfp4"}, ("bf16", "mxfp4"))[0] == {"experts": "mxfp4"}
    # Stored bytes: experts at 4.25 bits, the rest bf16.
    stats = model_stats(cfg)
    assert stats.weight_bytes < 0.35 * stats.params_total * 2
    deepseek = load_model_config("deepseek_r1")
    assert dict(deepseek.weight_formats)["experts"] == "fp8_e4m3"
    assert "router" not in dict(deepseek.weight_formats)


def test_sharding_rules_of_latent_attention_and_state():
    cfg = load_model_config("deepseek_r1")
    plan = SystemPlan(chips=8, tp=8)
    shard = shard_config(cfg, plan)
    assert shard.heads == 16 and shard.mla == cfg.mla      # heads split, latent whole
    one = model_footprint(cfg, SystemPlan(), tokens=1, kv_tokens=1000, logits_rows=1,
                          act_bytes=2, weight_bytes=2, kv_bytes=2, requests=1)
    eight = model_footprint(cfg, plan, tokens=1, kv_tokens=1000, logits_rows=1,
                            act_bytes=2, weight_bytes=2, kv_bytes=2, requests=1)
    assert one.kv_bytes == eight.kv_bytes == 61 * 576 * 2 * 1000
    assert eight.weight_bytes < one.weight_bytes / 4
    jamba = load_model_config("jamba_v0_1")
    state = model_footprint(jamba, SystemPlan(chips=2, tp=2), tokens=1, kv_tokens=1,
                            logits_rows=1, act_bytes=2, weight_bytes=2, kv_bytes=2,
                            requests=1).kv_bytes
    assert state == 28 * (4096 * 16 + 3 * 4096) * 2 + 4 * 2 * 4 * 128 * 2
    stages = stage_weight_params(jamba, SystemPlan(chips=2, pp=2))
    assert sum(stages) == model_stats(jamba).params_total


PLATFORM = None


def platform():
    global PLATFORM
    if PLATFORM is None:
        PLATFORM = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    return PLATFORM


@pytest.mark.parametrize("name", sorted(CARDS))
def test_decode_batch_1_is_within_1_2x_of_its_roofline(name):
    chip = platform()
    cfg = load_model_config(name)
    fitted, _ = fit_formats(dict(cfg.weight_formats),
                            tuple(chip.systolic_array.input_dtypes))
    cfg = replace(cfg, weight_formats=tuple(fitted.items()))
    total = simulate(Inputs(chip, decode_workload(cfg, batch=1, context=4096),
                            Mapping())).total
    assert total.roofline_bound_cycles <= total.cycles <= 1.2 * total.roofline_bound_cycles


def test_prefill_and_iteration_build_for_every_family():
    for name in CARDS:
        cfg = load_model_config(name)
        prefill_workload(cfg, batch=1, seq=300)
        iteration_workload(cfg, prefill=[(100, 50)], decode=[40, 9000])


# --- other sizes of each family, written as their config.json files are ------------

OTHER_SIZES = {
    # DeepSeek-V2-Lite: no q latent (q_lora_rank null), 64 routed + 2 shared experts.
    "deepseek_v2_lite": ({
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "first_k_dense_replace": 1, "hidden_size": 2048, "intermediate_size": 10944,
        "kv_lora_rank": 512, "moe_intermediate_size": 1408, "moe_layer_freq": 1,
        "n_routed_experts": 64, "n_shared_experts": 2, "num_attention_heads": 16,
        "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,
        "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "vocab_size": 102400, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"}, 15.7e9, 0.05e9),
    # Gemma 3 4B: a sparse text_config (heads, KV heads and head_dim from defaults).
    "gemma_3_4b": ({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                        "model_type": "gemma3_text", "num_hidden_layers": 34,
                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                        "sliding_window": 1024},
        "vision_config": {"hidden_size": 1152, "image_size": 896,
                          "intermediate_size": 4304, "model_type": "siglip_vision_model",
                          "num_attention_heads": 16, "num_hidden_layers": 27,
                          "patch_size": 14, "vision_use_head": False}}, 4.3e9, 0.05e9),
    # Gemma 2 9B: alternating local/global layers, soft-capping.
    "gemma_2_9b": ({
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
        "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
        "head_dim": 256, "hidden_size": 3584, "intermediate_size": 14336,
        "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
        "sliding_window": 4096, "vocab_size": 256000}, 9.24e9, 0.005e9),
    # gpt-oss-120b: 128 experts, 36 layers.
    "gpt_oss_120b": ({
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "attention_bias": True, "experts_per_token": 4, "head_dim": 64,
        "hidden_size": 2880, "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention"] * 18,
        "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
        "num_key_value_heads": 8, "num_local_experts": 128, "sliding_window": 128,
        "quantization_config": {"modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router",
            "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
        "tie_word_embeddings": False, "vocab_size": 201088}, 116.83e9, 0.005e9),
    # Llama 4 Maverick: MoE every other layer, 128 experts.
    "llama_4_maverick": ({
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
        "text_config": {"attention_chunk_size": 8192, "head_dim": 128,
                        "hidden_size": 5120, "interleave_moe_layer_step": 2,
                        "intermediate_size": 8192, "intermediate_size_mlp": 16384,
                        "model_type": "llama4_text", "num_attention_heads": 40,
                        "num_experts_per_tok": 1, "num_hidden_layers": 48,
                        "num_key_value_heads": 8, "num_local_experts": 128,
                        "vocab_size": 202048},
        "tie_word_embeddings": False}, 400e9, 2.5e9),
    # Mamba-Codestral-7B: Mamba2 only.
    "mamba_codestral": ({
        "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
        "chunk_size": 256, "conv_kernel": 4, "expand": 2, "head_dim": 64,
        "hidden_size": 4096, "n_groups": 8, "num_heads": 128, "num_hidden_layers": 64,
        "state_size": 128, "tie_word_embeddings": False, "use_bias": False,
        "use_conv_bias": True, "vocab_size": 32768}, 7.29e9, 0.05e9),
}


@pytest.mark.parametrize("name", sorted(OTHER_SIZES))
def test_other_sizes_read_without_edits(name, tmp_path):
    raw, total, tolerance = OTHER_SIZES[name]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    cfg = load_model_config(path)
    stats = model_stats(cfg)
    # Published totals (model cards: DeepSeek-V2-Lite 15.7B, Gemma 3 4B 4.3B with its
    # vision tower, Gemma 2 9B 9.24B, gpt-oss-120b 116.83B, Llama 4 Maverick 400B,
    # Mamba-Codestral 7.29B).
    assert abs(stats.params_total + stats.params_vision - total) <= tolerance
    decode_workload(cfg, batch=2, context=1000)
    prefill_workload(cfg, batch=1, seq=64)


def test_other_sizes_layouts():
    def read(name, tmp_path=None):
        return parse_config(OTHER_SIZES[name][0])
    maverick = read("llama_4_maverick")
    assert [ffn for _, ffn in maverick.kinds[:4]] == ["dense", "moe", "dense", "moe"]
    gemma2 = read("gemma_2_9b")
    assert [mixer for mixer, _ in gemma2.kinds[:4]] == ["sliding", "full"] * 2
    assert gemma2.attn_softcap == 50.0
    lite = read("deepseek_v2_lite")
    assert lite.mla.q_lora_rank == 0
    assert model_stats(lite).kv_bytes_per_token == 27 * 576 * 2
    mamba = read("mamba_codestral")
    assert model_stats(mamba).kv_bytes_per_token == 0
    # 128 heads x 64 x 128 state + 3 x (8192 + 2 x 8 x 128) conv inputs, 64 layers.
    assert model_stats(mamba).state_bytes_per_request == 64 * (
        8192 * 128 + 3 * (8192 + 2 * 8 * 128)) * 2


def test_a_broken_hybrid_pattern_names_the_key():
    raw = {"model_type": "nemotron_h", "hidden_size": 64, "num_hidden_layers": 3,
           "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 32,
           "mamba_num_heads": 4, "hybrid_override_pattern": "M*X"}
    with pytest.raises(AccsimError, match="one layer kind per layer") as caught:
        parse_config(raw, file="config.json")
    assert caught.value.field == "hybrid_override_pattern"


def test_mamba2_prefill_runs_the_chunked_form_on_the_array():
    cfg = parse_config(OTHER_SIZES["mamba_codestral"][0])
    ops = {op.name: op for op in prefill_workload(cfg, batch=2, seq=1000).operators}
    scores = ops["ssd_scores"]
    # 4 chunks of 256 (the last padded) x 2 sequences x 128 heads, C B^T over 128.
    assert (scores.batch, scores.m, scores.n, scores.k) == (2 * 4 * 128, 256, 256, 128)
    assert (ops["ssd_diag"].m, ops["ssd_diag"].n, ops["ssd_diag"].k) == (256, 64, 256)
    passed = ops["ssd_pass"]
    assert isinstance(passed, Scan) and (passed.batch, passed.steps) == (2, 4)
    decode = {op.name: op for op in decode_workload(cfg, batch=2, context=1000).operators}
    assert "ssd_scores" not in decode and decode["scan"].steps == 1


def test_mla_head_size_gives_its_attention_flops():
    stats = stats_of("deepseek_r1")
    # QK^T over 192 and PV over 128 per head: 2 x (192 + 128) FLOPs per key and head.
    assert stats.attention_flops_per_token(1000) == 61 * 128 * 2 * (192 + 128) * 1000
