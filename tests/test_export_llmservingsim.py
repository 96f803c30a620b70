"""`accsim export llmservingsim`: the bundle LLMServingSim reads since v1.1.0, against
its contract field by field.

casys-kaist/LLMServingSim at 5daddb2: docs/docs/profiler/output-bundle.md and
serving/core/trace_generator.py. `profiler/perf/<hardware>/<model>/<variant>/`
holds meta.yaml and tp<N>/{dense,per_sequence,attention}.csv, times in microseconds
(`time_us`, multiplied by 1000 to ns at load); the variant is the dtype shortened
(bfloat16 -> bf16, resolve_variant); dense rows are looked up by (layer, tokens),
per-sequence by (layer, sequences), attention by (prefill_chunk, kv_prefill, n_decode,
kv_decode) with linear interpolation on each axis and every (prefill_chunk, n_decode)
corner expected; kv_prefill / kv_decode are the tokens already cached
(scheduler._build_batch: computed_before), so a decode at kv_decode K reads K + 1 keys.
Layer names are profiler/models/llama.yaml's catalog.
"""

import csv
import json

import pytest
import yaml

from simulator.cli import main
from tests.export_models import (RUN_AGREEMENT, TINY, TINY_ID, layer_and_head,
                                 layer_compute_seconds, platform, run_seconds,
                                 simulated_seconds, tiny_config)
from simulator.frontends import hf
from simulator.frontends.hf.config import parse_config

MAX_TOKENS, MAX_BATCH = 16, 4
GRID = ["--max-tokens", str(MAX_TOKENS), "--max-batch", str(MAX_BATCH), "--bits", "2",
        "--attention-bits", "1"]
ROOT = f"profiler/perf/tpu_v5e_like/{TINY_ID}/bf16"
LLAMA_DENSE = {"embedding", "layernorm", "qkv_proj", "rotary_emb", "o_proj",
               "gate_up_proj", "act_fn", "down_proj", "final_layernorm"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("lss")
    out = root / "bundle"
    assert main(["export", "llmservingsim", "--model", str(tiny_config(root)),
                 "--tp", "1,2", "-o", str(out), *GRID]) == 0
    return out


def read(path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as source:
        reader = csv.DictReader(source)
        return reader.fieldnames, list(reader)


def ops(prefill, decode) -> dict:
    cfg = parse_config(dict(TINY), name="tiny-llama")
    return {op.name: op for op in hf.iteration_workload(cfg, prefill=prefill,
                                                        decode=decode).operators}


def us(*operators) -> float:
    return round(sum(simulated_seconds(op) for op in operators) * 1e6, 6)


def test_layout_and_meta(bundle):
    files = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file())
    tables = [f"{ROOT}/tp{t}/{n}.csv" for t in (1, 2)
              for n in ("attention", "dense", "per_sequence")]
    assert files == sorted([".accsim-export", f"{ROOT}/meta.yaml", *tables,
                            f"configs/model/{TINY_ID}.json",
                            *(f"configs/cluster/accsim_tpu_v5e_like_acme_tiny-llama_tp{t}"
                              ".json" for t in (1, 2))])
    meta = yaml.safe_load((bundle / ROOT / "meta.yaml").read_text())
    assert (meta["hardware"], meta["model"], meta["variant"], meta["tp_degrees"]) == (
        "tpu_v5e_like", TINY_ID, "bf16", [1, 2])
    assert meta["engine_effective"]["max_num_batched_tokens"] == MAX_TOKENS
    assert meta["engine_effective"]["max_num_seqs"] == MAX_BATCH
    assert "skew_fit" not in meta  # no skew measurements: the simulator applies none
    config = json.loads((bundle / f"configs/model/{TINY_ID}.json").read_text())
    assert config == TINY  # the model's config.json as read: model_type picks llama.yaml
    cluster = json.loads((bundle / "configs/cluster/accsim_tpu_v5e_like_acme_tiny-llama"
                          "_tp2.json").read_text())
    instance = cluster["nodes"][0]["instances"][0]
    assert (instance["model_name"], instance["hardware"], instance["tp_size"],
            instance["num_npus"]) == (TINY_ID, "tpu_v5e_like", 2, 2)
    p = platform()
    assert instance["npu_mem"]["mem_size"] == p.offchip.capacity_bytes / 2**30  # GB
    assert instance["npu_mem"]["mem_bw"] == p.offchip.bandwidth_gbps
    assert cluster["link_bw"] == p.interconnect.link_bandwidth_gbps


def test_dense_and_per_sequence_tables(bundle):
    header, rows = read(bundle / ROOT / "tp1/dense.csv")
    assert header == ["layer", "tokens", "time_us"]
    grid = [1, 2, 3, 4, 6, 8, 12, 16]
    assert {r["layer"] for r in rows} == LLAMA_DENSE
    for layer in LLAMA_DENSE:
        assert [int(r["tokens"]) for r in rows if r["layer"] == layer] == grid
    table = {(r["layer"], int(r["tokens"])): float(r["time_us"]) for r in rows}
    _, attention = read(bundle / ROOT / "tp1/attention.csv")
    attn = {(int(r["prefill_chunk"]), int(r["kv_prefill"]), int(r["n_decode"]),
             int(r["kv_decode"])): float(r["time_us"]) for r in attention}
    # A layer as LLMServingSim walks llama.yaml's sequence (layernorm twice) adds up to
    # the layer as `accsim run` simulates it, fused (a fused operator is in its GEMM).
    for tokens in (1, 8, 16):
        walked = sum(table[(name, tokens)] for name in (
            "layernorm", "qkv_proj", "rotary_emb", "o_proj", "layernorm",
            "gate_up_proj", "act_fn", "down_proj")) + attn[(tokens, 0, 0, 0)]
        cfg = parse_config(dict(TINY), name="tiny-llama")
        layer, _ = layer_and_head(hf.iteration_workload(cfg, prefill=[(tokens, 0)],
                                                        decode=[]))
        assert walked == pytest.approx(layer_compute_seconds(layer) * 1e6,
                                       rel=RUN_AGREEMENT)
    assert table[("qkv_proj", 8)] > 0 and table[("embedding", 8)] == 0
    header, rows = read(bundle / ROOT / "tp1/per_sequence.csv")
    assert header == ["layer", "sequences", "time_us"]
    assert {r["layer"] for r in rows} == {"lm_head", "sampler"}
    assert [int(r["sequences"]) for r in rows if r["layer"] == "lm_head"] == [1, 2, 3, 4]
    three = next(r for r in rows if r["layer"] == "lm_head" and r["sequences"] == "3")
    cfg = parse_config(dict(TINY), name="tiny-llama")
    _, head = layer_and_head(hf.iteration_workload(cfg, prefill=[], decode=[1, 1, 1]))
    final = table[("final_layernorm", 1)]  # 0 when the final norm is fused in lm_head
    assert float(three["time_us"]) + final == pytest.approx(run_seconds(head) * 1e6,
                                                            rel=RUN_AGREEMENT)


def test_attention_grid_has_every_corner_and_the_context(bundle):
    header, rows = read(bundle / ROOT / "tp1/attention.csv")
    assert header == ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"]
    keys = [tuple(int(r[c]) for c in header[:4]) for r in rows]
    assert len(keys) == len(set(keys))
    chunks, batches = [1, 2, 4, 8, 16], [1, 2, 4]
    caches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]  # to max_position_embeddings
    pairs = {(k[0], k[2]) for k in keys}
    assert pairs == {(c, n) for c in [0, *chunks] for n in [0, *batches]} - {(0, 0)}
    for pc, nd in pairs:  # each slice: the whole (kv_prefill, kv_decode) grid
        found = {(k[1], k[3]) for k in keys if (k[0], k[2]) == (pc, nd)}
        kp = [0] if pc == 0 else [0, *caches]
        # kv_decode: also each size less one, a decode reading 2^n keys
        kd = [0] if nd == 0 else sorted(set(caches) | {c - 1 for c in caches if c > 1})
        assert found == {(a, b) for a in kp for b in kd}, (pc, nd)
    assert all(float(r["time_us"]) > 0 for r in rows)


def test_attention_rows_are_keyed_by_the_cache(bundle):
    _, rows = read(bundle / ROOT / "tp1/attention.csv")
    table = {tuple(int(r[c]) for c in ("prefill_chunk", "kv_prefill", "n_decode",
                                        "kv_decode")): float(r["time_us"]) for r in rows}
    decode = ops([], [9, 9])["attn"]  # 2 decodes with 8 cached tokens read 9 keys
    assert table[(0, 0, 2, 8)] == us(decode)
    assert table[(0, 0, 2, 7)] == us(ops([], [8, 8])["attn"])  # 7 cached: 8 keys
    prefill = ops([(4, 8)], [])["attn"]  # a chunk of 4 after 8 cached
    assert table[(4, 8, 0, 0)] == us(prefill)
    # A mixed step: the two attentions of accsim's iteration, summed.
    assert table[(4, 8, 2, 8)] == pytest.approx(us(prefill) + us(decode), abs=2e-6)


def test_an_added_degree_is_merged_into_meta(tmp_path):
    config = tiny_config(tmp_path)
    out = tmp_path / "b"
    small = ["--max-tokens", "2", "--max-batch", "1", "--bits", "1",
             "--attention-bits", "1"]
    assert main(["export", "llmservingsim", "--model", str(config), "--tp", "2",
                 "-o", str(out), *small]) == 0
    first = (out / ROOT / "tp2/dense.csv").read_text()
    assert main(["export", "llmservingsim", "--model", str(config), "--tp", "1",
                 "-o", str(out), *small]) == 0
    meta = yaml.safe_load((out / ROOT / "meta.yaml").read_text())
    assert meta["tp_degrees"] == [1, 2]
    assert (out / ROOT / "tp2/dense.csv").read_text() == first
    assert (out / ROOT / "tp1/dense.csv").is_file()
