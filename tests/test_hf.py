"""LLM workloads from Hugging Face config.json (DESIGN.md section 9): the shipped
configs' sizes, key spellings and bad configs, the operator list per phase, MoE
routing, continuous-batching iterations, the figures and the command line."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main
from simulator.errors import AccsimError
from simulator.frontends.hf import (decode_workload, iteration_workload,
                                    load_model_config, model_stats, prefill_workload,
                                    shipped_configs)
from simulator.frontends.hf.config import locate_config, parse_config
from simulator.inputs.loader import load_model, locate
from simulator.inputs.platform import Platform
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

# Published sizes (model cards; workloads/hf/README.md): total, active.
PUBLISHED = {"llama_3_1_8b": (8.03e9, 8.03e9), "llama_3_1_70b": (70.6e9, 70.6e9),
             "mixtral_8x7b": (46.7e9, 12.9e9), "qwen3_30b_a3b": (30.5e9, 3.3e9),
             "gpt2": (124e6, 124e6)}
# The families of DESIGN.md section 21, checked in tests/test_hf_families.py.
FAMILY_CONFIGS = ["deepseek_r1", "gemma_3_27b", "gpt_oss_20b", "jamba_v0_1",
                  "llama_4_scout_17b_16e"]

LLAMA = json.loads(locate_config("llama_3_1_8b").read_text())


def test_every_published_config_is_shipped():
    assert shipped_configs() == sorted([*PUBLISHED, *FAMILY_CONFIGS])


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_the_published_sizes(name):
    stats = model_stats(load_model_config(name))
    total, active = PUBLISHED[name]
    assert stats.params_total == pytest.approx(total, rel=0.005)
    if name == "qwen3_30b_a3b":
        # The card's "3.3 B activated" is rounded down from this count (3.353 B, which
        # counts both embedding tables, as Mixtral's 12.9 B does): pinned exactly.
        assert stats.params_active == 3_353_032_704
    else:
        assert stats.params_active == pytest.approx(active, rel=0.005)


def test_llama_kv_bytes_and_flops_per_token():
    stats = model_stats(load_model_config("llama_3_1_8b"))
    assert stats.kv_bytes_per_token == 128 * 1024          # bf16: 128 KiB per token
    assert stats.kv_bytes_per_request(2048) == 256 * 2**20
    assert stats.weight_bytes == 2 * stats.params_total
    # 2 x (params - the input embedding table - norms)
    norms = 4096 * (2 * 32 + 1)
    assert stats.flops_per_token == 2 * (stats.params_total - 128256 * 4096 - norms)
    assert stats.attention_flops_per_token(2048) == 4 * 32 * 32 * 128 * 2048


def test_key_spellings_of_each_family():
    gpt2 = load_model_config("gpt2")
    assert (gpt2.hidden, gpt2.layers, gpt2.heads, gpt2.kv_heads, gpt2.head_dim,
            gpt2.intermediate, gpt2.tie_embeddings) == (768, 12, 12, 12, 64, 3072, True)
    qwen = load_model_config("qwen3_30b_a3b")
    assert qwen.head_dim == 128 and qwen.heads * qwen.head_dim != qwen.hidden
    assert (qwen.experts, qwen.experts_per_token, qwen.moe_intermediate) == (128, 8, 768)
    mixtral = load_model_config("mixtral_8x7b")
    assert (mixtral.experts, mixtral.experts_per_token) == (8, 2)
    assert mixtral.sliding_window is None          # "sliding_window": null
    assert load_model_config("llama_3_1_8b").kv_heads == 8


def _config(**changes) -> dict:
    raw = dict(LLAMA)
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return raw


@pytest.mark.parametrize("changes, key, rule", [
    ({"hidden_size": None}, "hidden_size", "missing keys for a llama model: "
                                           "hidden_size or n_embd"),
    ({"num_attention_heads": 0}, "num_attention_heads", "must be positive, found 0"),
    ({"num_hidden_layers": -2}, "num_hidden_layers", "must be positive, found -2"),
    ({"intermediate_size": 14336.5}, "intermediate_size", "must be a whole number"),
    ({"num_attention_heads": 30}, "num_attention_heads",
     "30 heads do not divide hidden size 4096"),
    ({"num_key_value_heads": 5}, "num_key_value_heads",
     "5 key/value heads do not divide 32 attention heads"),
    ({"vocab_size": True}, "vocab_size", "must be a whole number"),
    ({"model_type": "falcon", "hidden_size": None}, "model_type",
     "unknown architecture 'falcon'"),
    ({"model_type": "mixtral", "num_local_experts": 8}, "num_experts_per_tok",
     "needs num_experts_per_tok"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings", "must be true or false"),
])
def test_bad_configs_name_the_key(changes, key, rule):
    with pytest.raises(AccsimError) as caught:
        parse_config(_config(**changes), file="config.json")
    assert caught.value.field == key
    assert rule in caught.value.rule
    assert caught.value.file == "config.json"


def test_unknown_architecture_names_the_missing_keys():
    with pytest.raises(AccsimError, match="missing keys: hidden_size or n_embd, "
                       "num_hidden_layers or n_layer"):
        parse_config({"model_type": "t5", "num_attention_heads": 8,
                      "vocab_size": 100}, file="c.json")


def test_irrelevant_keys_are_ignored_and_sliding_window_caps_kv():
    raw = _config(model_type="mistral", sliding_window=4096, some_future_key={"x": 1})
    cfg = parse_config(raw, file="c.json")
    attn = next(op for op in decode_workload(cfg, batch=1, context=8192).operators
                if op.kind == "attention")
    assert attn.kv_len == 4096
    long = next(op for op in prefill_workload(cfg, batch=1, seq=8192).operators
                if op.kind == "attention")
    assert (long.q_len, long.kv_len, long.causal) == (8192, 4096, False)
    # Qwen's use_sliding_window: false leaves the window unused.
    unused = parse_config(_config(model_type="qwen2", sliding_window=4096,
                                  use_sliding_window=False), file="c.json")
    assert unused.sliding_window is None


LABELS_DENSE = ["norm", "attention.qkv", "rope", "attention.core", "attention.o",
                "residual", "norm", "mlp.gate_up", "mlp.act", "mlp.act", "mlp.down",
                "residual", "norm", "lm_head"]


def test_dense_prefill_operators_in_order():
    cfg = load_model_config("llama_3_1_8b")
    workload = prefill_workload(cfg, batch=2, seq=512)
    assert [op.layer_type for op in workload.operators] == LABELS_DENSE
    ops = {op.name: op for op in workload.operators}
    assert (ops["qkv"].m, ops["qkv"].n, ops["qkv"].k) == (1024, 6144, 4096)
    assert (ops["mlp_gate_up"].n, ops["mlp_down"].k) == (2 * 14336, 14336)
    attn = ops["attn"]
    assert (attn.batch, attn.heads, attn.kv_heads, attn.q_len, attn.kv_len,
            attn.head_dim, attn.causal) == (2, 32, 8, 512, 512, 128, True)
    assert all(op.repeat == 32 for op in workload.operators[:-2])
    assert ops["lm_head"].m == 2 and ops["lm_head"].repeat == 1   # last token only
    assert prefill_workload(cfg, batch=2, seq=512, all_logits=True).operators[-1].m == 1024


def test_gpt2_has_gelu_mlp_and_no_rope():
    workload = decode_workload(load_model_config("gpt2"), batch=4, context=100)
    kinds = {op.name: op for op in workload.operators}
    assert "rope" not in kinds and kinds["mlp_act"].op == "gelu"
    assert kinds["mlp_gate_up"].n == 3072 and "mlp_gate_mul" not in kinds


def test_moe_decode_touches_only_the_experts_routed_to():
    cfg = load_model_config("mixtral_8x7b")
    small = {op.name: op for op in decode_workload(cfg, batch=1, context=64).operators}
    assert small["experts_gate_up"].batch == 2      # min(8, 1 x 2)
    assert small["experts_gate_up"].m == 1
    assert small["router"].n == 8
    big = {op.name: op for op in decode_workload(cfg, batch=64, context=64).operators}
    assert big["experts_gate_up"].batch == 8
    assert big["experts_gate_up"].m == 16            # ceil(64 x 2 / 8)
    skewed = {op.name: op for op in decode_workload(cfg, batch=64, context=64,
                                                    imbalance=1.5).operators}
    assert skewed["experts_gate_up"].m == 24        # the busiest expert: 1.5 x mean
    qwen = {op.name: op for op in prefill_workload(load_model_config("qwen3_30b_a3b"),
                                                   batch=1, seq=16).operators}
    assert qwen["experts_gate_up"].batch == 128 and qwen["experts_gate_up"].m == 1
    assert [op.layer_type for op in qwen.values()].count("moe.experts") == 4


def test_decode_weights_touched_follow_the_experts():
    platform = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    cfg = load_model_config("mixtral_8x7b")
    one = simulate(Inputs(platform, decode_workload(cfg, batch=1, context=64), Mapping()))
    experts = one.by_layer_type["moe.experts"].compulsory_bytes
    per_expert = 3 * 4096 * 14336 * 2 * 32            # bf16 weights, all layers
    assert experts >= 2 * per_expert and experts < 2.01 * per_expert


def test_iteration_groups_attention_and_sums_tokens():
    cfg = load_model_config("llama_3_1_8b")
    workload = iteration_workload(cfg, prefill=[(128, 0), (64, 512)],
                                  decode=[1000, 1000, 300])
    ops = workload.operators
    attn = [op for op in ops if op.kind == "attention"]
    assert sorted((op.batch, op.q_len, op.kv_len, op.causal) for op in attn) == [
        (1, 1, 300, False), (1, 64, 576, True), (1, 128, 128, True), (2, 1, 1000, False)]
    assert next(op for op in ops if op.name == "qkv").m == 128 + 64 + 3
    assert ops[-1].m == 5
    with pytest.raises(AccsimError, match="decode\\[0\\]"):
        iteration_workload(cfg, prefill=[], decode=[0])


def test_decode_attention_reads_the_kv_cache():
    platform = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    cfg = load_model_config("llama_3_1_8b")
    result = simulate(Inputs(platform, decode_workload(cfg, batch=2, context=1024),
                             Mapping()))
    attention = result.operators_by_layer_type["attention.core"][0]
    kv = attention.lowered.counters.compulsory["kv"] * attention.lowered.runs
    assert kv == 2 * model_stats(cfg).kv_bytes_per_request(1024)


def test_import_hf_writes_yaml_that_loads_back(tmp_path, capsys):
    out = tmp_path / "w.yaml"
    assert main(["import", "hf", "qwen3_30b_a3b", "--phase", "decode", "--batch", "3",
                 "--context", "100", "-o", str(out)]) == 0
    loaded = load_model(out, Workload)[0]
    built = decode_workload(load_model_config("qwen3_30b_a3b"), batch=3, context=100)
    assert loaded.operators == built.operators


@pytest.mark.parametrize("args, message", [
    (["--phase", "prefill"], "--seq: --phase prefill needs --seq N"),
    (["--phase", "decode", "--seq", "4"], "--context: --phase decode needs --context"),
    (["--phase", "prefill", "--seq", "4", "--context", "9"], "--context does not apply"),
    (["--phase", "decode", "--context", "0"], "--context: must be a whole number from 1"),
    (["--phase", "decode", "--context", "8", "--batch", "-1"], "--batch: must be"),
])
def test_phase_options_are_checked_first(args, message, capsys):
    assert main(["import", "hf", "gpt2", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_run_model_prints_the_llm_figures(capsys):
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "gpt2", "--phase", "decode",
                 "--batch", "2", "--context", "256"]) == 0
    out = capsys.readouterr().out
    for text in ("gpt2 decode, batch 2, context 256", "parameters (total / active)",
                 "KV bytes per token / per request", "roofline bound / simulated",
                 "tokens/s", "ms/token", "arithmetic intensity"):
        assert text in out
    assert main(["run", "--seq", "4"]) == 1
    assert "only with --model" in capsys.readouterr().err


def test_step_figures_follow_from_the_result():
    from simulator.frontends.hf import step_figures
    platform = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    cfg = load_model_config("gpt2")
    for phase, workload, length in (
            ("decode", decode_workload(cfg, batch=4, context=300), 300),
            ("prefill", prefill_workload(cfg, batch=4, seq=300), 300)):
        result = simulate(Inputs(platform, workload, Mapping()))
        fig = step_figures(cfg, result, phase=phase, batch=4, length=length)
        seconds = result.total.cycles / (platform.clock_ghz * 1e9)
        per_request = 1 if phase == "decode" else length
        assert fig.simulated_s == pytest.approx(seconds)
        assert fig.tokens == 4 * per_request
        assert fig.tokens_per_s == pytest.approx(4 * per_request / seconds)
        assert fig.ms_per_token == pytest.approx(1e3 * seconds / per_request)
        assert 0 < fig.roofline_s <= fig.simulated_s
        assert fig.kv_bytes_per_request == 300 * 2 * 12 * 12 * 64 * 2
        # Every token multiplies by every matmul weight but lm_head's, which runs on one
        # token per sequence; attention's FLOPs come on top.
        lm_head = 2 * cfg.vocab * cfg.hidden
        weights = fig.tokens * (fig.flops_per_token - lm_head) + 4 * lm_head
        attention = fig.step_flops - weights
        assert 0 < attention < 4 * per_request * model_stats(
            cfg).attention_flops_per_token(300)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_every_shipped_model_runs_above_its_roofline(name):
    platform = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    cfg = load_model_config(name)
    for workload in (decode_workload(cfg, batch=2, context=300),
                     prefill_workload(cfg, batch=1, seq=200)):
        result = simulate(Inputs(platform, workload, Mapping()))
        for op in result.operators:
            t = op.totals
            assert t.cycles >= t.roofline_bound_cycles, op.lowered.name
            assert (t.overhead_cycles + t.busy_cycles + t.fill_cycles
                    + t.input_stall_cycles + t.output_stall_cycles
                    + t.drain_cycles) == t.cycles, op.lowered.name
