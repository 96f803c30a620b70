"""LLMServingSim v1.0's performance tables (`accsim export llmservingsim --layers-csv`)
from accsim's simulated operator times; since v1.1.0 it reads the bundle of
simulator.export.llmservingsim instead.

The format is LLMServingSim's operator performance database as its v1.0 profiler wrote
it and its trace generator read it (casys-kaist/LLMServingSim tag v1.0.0:
inference_serving/trace_generator.py, `llm_profile/perf_models/{hardware}/{org}/
{model}/tp{tp}/`):

- `layers.csv`: `layer_name,input,kv_cache,tp_size,latency(ns)`, looked up by exact
  (layer_name, input, kv_cache, tp_size), so every input from 1 to --max-tokens has a
  row, kv_cache 0; the operators embedding, input_layernorm, q_proj, k_proj, v_proj,
  rope, attn, o_proj, post_layernorm, gate_proj, up_proj, act_fn, down_proj,
  final_layernorm, lm_head (lm_head's input counts requests, one token each);
- `predictions/attn_prefill_predictions.csv`: `kv_cache_size,prefill_chunk_size,
  prediction` (ns), and `predictions/attn_decode_predictions.csv`:
  `batch_size,kv_cache_size,prediction` (ns), kv_cache_size in steps of
  --kv-granularity, from 0 through --max-tokens.

Times are integer nanoseconds of one layer on one chip. accsim simulates the grid
points (simulator.export.profile.grid_points) and fills the rows between them by
linear interpolation (bilinear for attention), as `accsim serve` buckets its costs; a
grid point's row is its simulated time. accsim's fused QKV and gate+up GEMMs are
simulated as the separate GEMMs LLMServingSim times; embedding is 0 (accsim models no
embedding gather) and the residual adds, which LLMServingSim has no row for, are left
out. The decode row at kv_cache_size K reads K + 1 keys (the cache and the new token).
Each operator is simulated alone (v1.0's rows are one kernel each, q, k and v apart).
"""

from __future__ import annotations

from functools import lru_cache

from simulator.errors import AccsimError
from simulator.export.profile import ModelProfile, check_size, grid_points, interpolated
from simulator.export.tables import csv_text

LAYERS = ("embedding", "input_layernorm", "q_proj", "k_proj", "v_proj", "rope", "attn",
          "o_proj", "post_layernorm", "gate_proj", "up_proj", "act_fn", "down_proj",
          "final_layernorm", "lm_head")


def layer_operators(profile: ModelProfile, tokens: int) -> dict[str, list]:
    """LLMServingSim's layer name -> the accsim operators (one layer, one chip) it
    times for `tokens` tokens of one request (empty: a row of 0)."""
    cfg, ops = profile.shard, profile.operators([(tokens, 0)], ())
    qkv, gate_up = ops["qkv"], ops["mlp_gate_up"]
    kv_columns = cfg.kv_heads * cfg.head_dim
    q_columns = qkv.n - 2 * kv_columns
    width = gate_up.n // 2 if cfg.family.gated_mlp else gate_up.n
    pick = (lambda *names: [ops[name] for name in names if name in ops])
    return {
        "embedding": [], "input_layernorm": pick("input_norm"),
        "q_proj": [qkv.model_copy(update={"n": q_columns})],
        "k_proj": [qkv.model_copy(update={"n": kv_columns})],
        "v_proj": [qkv.model_copy(update={"n": kv_columns})],
        "rope": pick("rope"), "attn": pick("attn"), "o_proj": pick("o_proj"),
        "post_layernorm": pick("post_attention_norm"),
        "gate_proj": [gate_up.model_copy(update={"n": width})] if cfg.family.gated_mlp
        else [],
        "up_proj": [gate_up.model_copy(update={"n": width})],
        "act_fn": pick("mlp_act", "mlp_gate_mul"), "down_proj": pick("mlp_down"),
        "final_layernorm": pick("input_norm"),  # same shape: tokens x hidden
        "lm_head": [ops["lm_head"].model_copy(update={"m": tokens})],
    }


class Tables:
    """Grid-point times (ns, memoised) and their interpolation between points."""

    def __init__(self, profile: ModelProfile, bits: int):
        self.profile, self.bits = profile, bits
        self.layer_ns = lru_cache(maxsize=None)(self._layer_ns)
        self.prefill_ns = lru_cache(maxsize=None)(self._prefill_ns)
        self.decode_ns = lru_cache(maxsize=None)(self._decode_ns)

    def _seconds(self, ops) -> float:
        return sum(self.profile.seconds(op) for op in ops)

    def _layer_ns(self, tokens: int) -> dict[str, float]:
        return {name: self._seconds(ops) * 1e9
                for name, ops in layer_operators(self.profile, tokens).items()}

    def _prefill_ns(self, chunk: int, cached: int) -> float:
        return self.profile.seconds(self.profile.operators([(chunk, cached)], ())["attn"]) * 1e9

    def _decode_ns(self, batch: int, cached: int) -> float:
        attn = self.profile.operators((), [cached + 1] * batch)["attn"]
        return self.profile.seconds(attn) * 1e9

    def layer(self, name: str, tokens: int) -> int:
        return round(interpolated(lambda t: self.layer_ns(t)[name], tokens, self.bits))

    def bilinear(self, at, x: int, y: int) -> int:
        bits = self.bits
        return round(interpolated(lambda gx: interpolated(lambda gy: at(gx, gy), y, bits),
                                  x, bits))


def layers_csv_files(profiles: list[ModelProfile], *, hardware: str, model_id: str,
                     max_tokens: int, max_batch: int, kv_granularity: int, bits: int
                     ) -> dict[str, str]:
    """Relative path -> CSV text of the performance database, one folder per TP."""
    files = {}
    for profile in profiles:
        files |= _tp_files(profile, hardware=hardware, model_id=model_id,
                           max_tokens=max_tokens, max_batch=max_batch,
                           kv_granularity=kv_granularity, bits=bits)
    return files


def _tp_files(profile: ModelProfile, *, hardware: str, model_id: str, max_tokens: int,
              max_batch: int, kv_granularity: int, bits: int) -> dict[str, str]:
    if profile.config.moe:
        raise AccsimError("the LLMServingSim export writes dense models only (its MoE "
                          "rows, expert.w1..w3 and gate, are not written); "
                          f"{profile.config.name} is a mixture of experts", field="--model")
    tokens, batches = grid_points(max_tokens, bits), grid_points(max_batch, bits)
    cached_sizes = range(0, max_tokens + 1, kv_granularity)
    check_size(len(tokens) * (len(LAYERS) + 2 * len(tokens) + 2 * len(batches)),
               max_tokens * len(LAYERS) + len(cached_sizes) * (max_tokens + max_batch))
    tables, tp = Tables(profile, bits), profile.tp
    layers = [[name, tokens, 0, tp, tables.layer(name, tokens)]
              for tokens in range(1, max_tokens + 1) for name in LAYERS]
    prefill = [[cached, chunk, tables.bilinear(tables.prefill_ns, chunk, cached)]
               for cached in cached_sizes for chunk in range(1, max_tokens - cached + 1)]
    decode = [[batch, cached, tables.bilinear(tables.decode_ns, batch, cached)]
              for batch in range(1, max_batch + 1) for cached in cached_sizes]
    folder = f"llm_profile/perf_models/{hardware}/{model_id}/tp{tp}"
    return {
        f"{folder}/layers.csv": csv_text(["layer_name", "input", "kv_cache", "tp_size",
                                      "latency(ns)"], layers),
        f"{folder}/predictions/attn_prefill_predictions.csv": csv_text(
            ["kv_cache_size", "prefill_chunk_size", "prediction"], prefill),
        f"{folder}/predictions/attn_decode_predictions.csv": csv_text(
            ["batch_size", "kv_cache_size", "prediction"], decode),
    }
