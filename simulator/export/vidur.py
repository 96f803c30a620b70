"""Vidur's profiling CSVs from accsim's simulated operator times, so Vidur can simulate
serving on hardware that does not exist yet.

Layout and columns are those Vidur's sklearn execution-time predictor reads
(microsoft/vidur, vidur/execution_time_predictor/sklearn_execution_time_predictor.py;
default paths in vidur/config/config.py): `compute/<device>/<model>/mlp.csv` with
`time_stats.<op>.median` per operator against `num_tokens`, filtered on n_head,
n_kv_head, n_embd, n_expanded_embd, use_gated_mlp, vocab_size and
num_tensor_parallel_workers; `compute/<device>/<model>/attention.csv` with
attn_prefill (against kv_cache_size and prefill_chunk_size, batch 1), attn_decode
(against batch_size and kv_cache_size, prefill_chunk_size 0) and attn_kv_cache_save,
filtered on n_embd, n_q_head, n_kv_head, block_size and num_tensor_parallel_workers;
and with T > 1 `network/<device>/all_reduce.csv` (time against `size` bytes, Vidur
taking num_tokens = size / n_embd / 2). Times are milliseconds of one layer on one chip;
min, max, mean and median are the one simulated time (the simulation is deterministic),
std 0.
"""

from __future__ import annotations

import csv
import io

from simulator.errors import AccsimError
from simulator.export.profile import ModelProfile, check_size, grid_points

STATS = ("min", "max", "mean", "median", "std")
# Vidur's operator -> the accsim operators (simulator.frontends.hf.workloads) whose
# per-layer times it sums. `add` is one residual add (Vidur charges it per its layer
# model); attn_kv_cache_save has no accsim operator (the K and V writes are part of
# the QKV projection's output), so it is written as 0.
MLP_OPERATORS = {
    "attn_pre_proj": ("qkv",), "attn_post_proj": ("o_proj",),
    "mlp_up_proj": ("mlp_gate_up",), "mlp_down_proj": ("mlp_down",),
    "mlp_act": ("mlp_act", "mlp_gate_mul"), "input_layernorm": ("input_norm",),
    "post_attention_layernorm": ("post_attention_norm",), "attn_rope": ("rope",),
    "add": ("attn_residual",),
}
ATTENTION_OPERATORS = ("attn_prefill", "attn_decode", "attn_kv_cache_save")
MLP_KEYS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size",
            "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers")
ATTENTION_KEYS = ("n_embd", "n_q_head", "n_kv_head", "block_size",
                  "num_tensor_parallel_workers", "max_model_len", "batch_size",
                  "prefill_chunk_size", "kv_cache_size", "is_prefill")
ALL_REDUCE_KEYS = ("rank", "num_workers", "size", "collective", "devices_per_node",
                   "max_devices_per_node")


def stat_columns(op: str) -> list[str]:
    return [f"time_stats.{op}.{stat}" for stat in STATS]


def stats(ms: float) -> list[float]:
    return [ms, ms, ms, ms, 0.0]


def _csv(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def operator_ms(profile: ModelProfile, ops: dict, names: tuple[str, ...]) -> float:
    """Milliseconds of the named accsim operators (absent ones, e.g. rope in a model
    without rotary embeddings, count 0)."""
    return sum(profile.seconds(ops[name]) for name in names if name in ops) * 1e3


def mlp_csv(profile: ModelProfile, tokens: list[int]) -> str:
    cfg = profile.config
    keys = [cfg.heads, cfg.kv_heads, cfg.hidden, cfg.intermediate, cfg.vocab,
            cfg.family.gated_mlp]
    rows = []
    for count in tokens:
        ops = profile.dense(count)
        row = []
        for names in MLP_OPERATORS.values():
            row += stats(operator_ms(profile, ops, names))
        rows.append(row + keys + [count, profile.tp])
    header = [c for op in MLP_OPERATORS for c in stat_columns(op)] + list(MLP_KEYS)
    return _csv(header, rows)


def attention_csv(profile: ModelProfile, *, max_tokens: int, max_batch: int,
                  block_size: int, bits: int) -> str:
    """Prefill rows (batch 1, every chunk and cached size on the grid whose sum fits
    max_tokens) and decode rows (every batch and cached size on the grid)."""
    cfg = profile.config
    keys = [cfg.hidden, cfg.heads, cfg.kv_heads, block_size, profile.tp, max_tokens]
    rows = []
    cached_sizes = grid_points(max_tokens - 1, bits, zero=True) if max_tokens > 1 else [0]
    for chunk in grid_points(max_tokens, bits):
        for cached in cached_sizes:
            if chunk + cached <= max_tokens:
                ms = profile.seconds(profile.prefill_attention(chunk, cached)) * 1e3
                rows.append(stats(ms) + stats(0.0) + stats(0.0)
                            + keys + [1, chunk, cached, True])
    for batch in grid_points(max_batch, bits):
        for cached in cached_sizes:
            ms = profile.seconds(profile.decode_attention(batch, cached)) * 1e3
            rows.append(stats(0.0) + stats(ms) + stats(0.0)
                        + keys + [batch, 0, cached, False])
    header = [c for op in ATTENTION_OPERATORS for c in stat_columns(op)]
    return _csv(header + list(ATTENTION_KEYS), rows)


def all_reduce_csv(profile: ModelProfile, tokens: list[int]) -> str:
    """The tensor-parallel all-reduce of `num_tokens` x hidden activations, priced at
    the model's activation bytes; `size` as Vidur reads it (2 bytes per element)."""
    hidden, tp = profile.config.hidden, profile.tp
    rows = [[*stats(profile.all_reduce_seconds(count * hidden * profile.act_bytes) * 1e3),
             0, tp, count * hidden * 2, "all_reduce", tp, tp] for count in tokens]
    return _csv(stat_columns("all_reduce") + list(ALL_REDUCE_KEYS), rows)


def vidur_files(profile: ModelProfile, *, max_tokens: int, max_batch: int,
                block_size: int, bits: int) -> dict[str, str]:
    """Relative path -> CSV text of the whole profile."""
    if profile.config.moe:
        raise AccsimError("Vidur's execution-time predictor reads dense models only; "
                          f"{profile.config.name} is a mixture of experts", field="--model")
    device, model = profile.platform.name, profile.config.name
    tokens = grid_points(max_tokens, bits)
    batches = grid_points(max_batch, bits)
    check_size(len(tokens) * (len(MLP_OPERATORS) + len(batches) + len(tokens) + 1),
               len(tokens) * (len(tokens) + len(batches) + 2))
    files = {
        f"compute/{device}/{model}/mlp.csv": mlp_csv(profile, tokens),
        f"compute/{device}/{model}/attention.csv": attention_csv(
            profile, max_tokens=max_tokens, max_batch=max_batch, block_size=block_size,
            bits=bits),
    }
    if profile.tp > 1:
        files[f"network/{device}/all_reduce.csv"] = all_reduce_csv(profile, tokens)
    return files
