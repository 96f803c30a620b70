"""`accsim export llmservingsim --layers-csv`: the v1.0 performance tables against
LLMServingSim's documented columns and lookups.

casys-kaist/LLMServingSim tag v1.0.0 (inference_serving/trace_generator.py):
`llm_profile/perf_models/{hardware}/{org}/{model}/tp{tp}/layers.csv` with columns
layer_name,input,kv_cache,tp_size,latency(ns), looked up by the exact key
(layer_name, input, kv_cache, tp_size) for the layers embedding, input_layernorm,
q_proj, k_proj, v_proj, rope, attn, o_proj, post_layernorm, gate_proj, up_proj, act_fn,
down_proj, final_layernorm, lm_head; `predictions/attn_prefill_predictions.csv`
(kv_cache_size,prefill_chunk_size,prediction) and
`predictions/attn_decode_predictions.csv` (batch_size,kv_cache_size,prediction), ns.
"""

import csv

import pytest

from simulator.cli import main
from simulator.inputs.platform import Platform
from simulator.frontends import hf
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

LAYERS = {"embedding", "input_layernorm", "q_proj", "k_proj", "v_proj", "rope", "attn",
          "o_proj", "post_layernorm", "gate_proj", "up_proj", "act_fn", "down_proj",
          "final_layernorm", "lm_head"}
MAX_TOKENS, MAX_BATCH, STEP = 24, 3, 8


def ns(op) -> float:
    p = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    single = op.model_copy(update={"repeat": 1, "inputs": None})
    return simulate(Inputs(p, Workload(name="t", operators=[single]), Mapping())
                    ).operators_total.cycles / p.clock_ghz


def read(path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as source:
        reader = csv.DictReader(source)
        return reader.fieldnames, list(reader)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("lss") / "db"
    assert main(["export", "llmservingsim", "--layers-csv", "--model", "llama_3_1_8b",
                 "-o", str(out),
                 "--max-tokens", str(MAX_TOKENS), "--max-batch", str(MAX_BATCH),
                 "--kv-granularity", str(STEP), "--hardware", "V5E_LIKE"]) == 0
    return out / "llm_profile/perf_models/V5E_LIKE/meta-llama/Llama-3.1-8B/tp1"


def test_layers_table_has_every_exact_key(folder):
    header, rows = read(folder / "layers.csv")
    assert header == ["layer_name", "input", "kv_cache", "tp_size", "latency(ns)"]
    keys = {(r["layer_name"], int(r["input"]), int(r["kv_cache"]), int(r["tp_size"]))
            for r in rows}
    assert keys == {(name, n, 0, 1) for name in LAYERS for n in range(1, MAX_TOKENS + 1)}
    assert len(rows) == len(keys)
    for row in rows:
        latency = int(row["latency(ns)"])
        assert latency == 0 if row["layer_name"] == "embedding" else latency > 0


def test_grid_rows_are_simulated_and_the_rest_lie_between(folder):
    _, rows = read(folder / "layers.csv")
    table = {(r["layer_name"], int(r["input"])): int(r["latency(ns)"]) for r in rows}
    cfg = hf.load_model_config("llama_3_1_8b")
    for tokens in (4, 16):  # grid points (at most 2 significant bits)
        ops = {op.name: op for op in hf.iteration_workload(
            cfg, prefill=[(tokens, 0)], decode=[]).operators}
        assert table[("attn", tokens)] == round(ns(ops["attn"]))
        assert table[("act_fn", tokens)] == round(ns(ops["mlp_act"])
                                                  + ns(ops["mlp_gate_mul"]))
        q = ops["qkv"].model_copy(update={"n": cfg.heads * cfg.head_dim})
        assert table[("q_proj", tokens)] == round(ns(q))
        gate = ops["mlp_gate_up"].model_copy(update={"n": cfg.intermediate})
        assert table[("gate_proj", tokens)] == round(ns(gate))
    for name in ("down_proj", "attn", "lm_head"):  # 20 lies between grid points 16, 24
        low, mid, high = table[(name, 16)], table[(name, 20)], table[(name, 24)]
        assert min(low, high) <= mid <= max(low, high)
        assert mid == round((low + high) / 2) or abs(mid - (low + high) / 2) <= 1


def test_attention_predictions(folder):
    header, prefill = read(folder / "predictions" / "attn_prefill_predictions.csv")
    assert header == ["kv_cache_size", "prefill_chunk_size", "prediction"]
    assert {int(r["kv_cache_size"]) for r in prefill} == {0, 8, 16}  # 24: no chunk left
    assert all(int(r["kv_cache_size"]) + int(r["prefill_chunk_size"]) <= MAX_TOKENS
               and int(r["prediction"]) > 0 for r in prefill)
    header, decode = read(folder / "predictions" / "attn_decode_predictions.csv")
    assert header == ["batch_size", "kv_cache_size", "prediction"]
    keys = {(int(r["batch_size"]), int(r["kv_cache_size"])) for r in decode}
    assert keys == {(b, k) for b in (1, 2, 3) for k in (0, 8, 16, 24)}  # to max tokens
    cfg = hf.load_model_config("llama_3_1_8b")
    row = next(r for r in decode if (r["batch_size"], r["kv_cache_size"]) == ("2", "8"))
    attn = {op.name: op for op in hf.iteration_workload(
        cfg, prefill=[], decode=[9, 9]).operators}["attn"]
    assert int(row["prediction"]) == round(ns(attn))
    row = next(r for r in prefill
               if (r["kv_cache_size"], r["prefill_chunk_size"]) == ("8", "4"))
    attn = {op.name: op for op in hf.iteration_workload(
        cfg, prefill=[(4, 8)], decode=[]).operators}["attn"]
    assert int(row["prediction"]) == round(ns(attn))
