"""Vidur's profiling CSVs from accsim's simulated operator times, so Vidur can simulate
serving on hardware that does not exist yet.

Checked against microsoft/vidur at commit 7d47513 (2024-11-19):
vidur/execution_time_predictor/sklearn_execution_time_predictor.py (the loaders, row
filters, training features and lookups) and vidur/config/config.py (default paths).
Layout, relative to a Vidur clone's root:

- `data/profiling/compute/<device>/<org>/<model>/mlp.csv`: per `num_tokens`,
  `time_stats.<op>.{min,max,mean,median,std}` of the operators Vidur trains on,
  filtered on n_head, n_kv_head, n_embd, n_expanded_embd, use_gated_mlp, vocab_size
  and num_tensor_parallel_workers (the model's full sizes; the times one chip's);
- `.../attention.csv`: attn_prefill rows (batch 1, keyed by kv_cache_size = tokens
  already processed and prefill_chunk_size), attn_decode rows (keyed by batch_size and
  kv_cache_size) and attn_kv_cache_save, filtered on n_embd, n_q_head, n_kv_head,
  block_size and num_tensor_parallel_workers. Vidur looks decode up at a request's
  num_processed_tokens, which counts the token being decoded (Request.on_batch_end adds
  the first output token when the prefill completes), rounded up to
  kv_cache_prediction_granularity: so the decode row at kv_cache_size K is the
  attention over K keys, `accsim run --phase decode --context K`;
- `data/profiling/network/<device>/all_reduce.csv` (T > 1; rows with num_workers =
  devices_per_node = T) and `send_recv.csv` (pipeline stages: num_workers 2, rows for
  devices_per_node 1 and 2, the two Vidur filters on), time against `size` bytes,
  which Vidur turns back into tokens at 2 bytes per element.

Times are milliseconds of one layer on one chip, fused as `accsim run` fuses them
(simulator.export.profile: a norm, activation or residual add fused into a GEMM is in
that GEMM's column and 0 in its own), so a layer's columns add up to accsim's layer;
min, max, mean and median are the one simulated time (the simulation is deterministic), std 0. The model folder is the
model's Hugging Face id, as Vidur's {MODEL} is its model config's name. Several TP
degrees go into one file each; an export into a folder an earlier one wrote merges
into its tables (simulator.export.tables).
"""

from __future__ import annotations

from simulator.errors import AccsimError
from simulator.export.profile import ModelProfile, check_size, grid_points
from simulator.export.tables import Earlier, csv_text, merged

STATS = ("min", "max", "mean", "median", "std")
# Vidur's operator -> the accsim operators (simulator.frontends.hf.workloads) whose
# per-layer times it sums. Vidur's block adds `add` once to the attention and MLP
# layers, so it carries both residual adds of accsim's layer; attn_kv_cache_save has
# no accsim operator (K and V are written by the QKV projection), so it is 0.
MLP_OPERATORS = {
    "attn_pre_proj": ("qkv",), "attn_post_proj": ("o_proj",),
    "mlp_up_proj": ("mlp_gate_up",), "mlp_down_proj": ("mlp_down",),
    "mlp_act": ("mlp_act", "mlp_gate_mul"), "input_layernorm": ("input_norm",),
    "post_attention_layernorm": ("post_attention_norm",), "attn_rope": ("rope",),
    "add": ("attn_residual", "mlp_residual"),
}
ATTENTION_OPERATORS = ("attn_prefill", "attn_decode", "attn_kv_cache_save")
MLP_KEYS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size",
            "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers")
ATTENTION_KEYS = ("n_embd", "n_q_head", "n_kv_head", "block_size",
                  "num_tensor_parallel_workers", "max_model_len", "batch_size",
                  "prefill_chunk_size", "kv_cache_size", "is_prefill")
NETWORK_KEYS = ("rank", "num_workers", "size", "collective", "devices_per_node",
                "max_devices_per_node")
# Vidur's send_recv filter: devices_per_node 2 within a node, 1 across nodes.
SEND_RECV_DEVICES_PER_NODE = (1, 2)


def stat_columns(op: str) -> list[str]:
    return [f"time_stats.{op}.{stat}" for stat in STATS]


MLP_HEADER = [c for op in MLP_OPERATORS for c in stat_columns(op)] + list(MLP_KEYS)
ATTENTION_HEADER = ([c for op in ATTENTION_OPERATORS for c in stat_columns(op)]
                    + list(ATTENTION_KEYS))
ALL_REDUCE_HEADER = stat_columns("all_reduce") + list(NETWORK_KEYS)
SEND_RECV_HEADER = stat_columns("send_recv") + list(NETWORK_KEYS)


def stats(ms: float) -> list[float]:
    return [ms, ms, ms, ms, 0.0]


def operator_ms(times: dict[str, float], names: tuple[str, ...]) -> float:
    """Milliseconds of the named accsim operators (absent ones, e.g. rope in a model
    without rotary embeddings, count 0; fused ones are in their unit's GEMM)."""
    return sum(times[name] for name in names if name in times) * 1e3


def mlp_rows(profile: ModelProfile, tokens: list[int]) -> list[list]:
    cfg = profile.config
    keys = [cfg.heads, cfg.kv_heads, cfg.hidden, cfg.intermediate, cfg.vocab,
            cfg.family.gated_mlp]
    rows = []
    for count in tokens:
        times = profile.dense(count)
        row = []
        for names in MLP_OPERATORS.values():
            row += stats(operator_ms(times, names))
        rows.append(row + keys + [count, profile.tp])
    return rows


def attention_rows(profile: ModelProfile, *, max_tokens: int, max_batch: int,
                   block_size: int, bits: int) -> list[list]:
    """Prefill rows (batch 1, every chunk and processed size on the grid whose sum fits
    max_tokens) and decode rows (every batch and context on the grid, context >= 1:
    Vidur's profiler writes no decode row without a cache)."""
    cfg = profile.config
    keys = [cfg.hidden, cfg.heads, cfg.kv_heads, block_size, profile.tp, max_tokens]
    rows = []
    processed = grid_points(max_tokens - 1, bits, zero=True) if max_tokens > 1 else [0]
    for chunk in grid_points(max_tokens, bits):
        for cached in processed:
            if chunk + cached <= max_tokens:
                ms = profile.prefill_attention(chunk, cached) * 1e3
                rows.append(stats(ms) + stats(0.0) + stats(0.0)
                            + keys + [1, chunk, cached, True])
    for batch in grid_points(max_batch, bits):
        for context in grid_points(max_tokens, bits):
            ms = profile.decode_attention(batch, context) * 1e3
            rows.append(stats(0.0) + stats(ms) + stats(0.0)
                        + keys + [batch, 0, context, False])
    return rows


def all_reduce_rows(profile: ModelProfile, tokens: list[int]) -> list[list]:
    """The tensor-parallel all-reduce of `num_tokens` x hidden activations, priced at
    the model's activation bytes; `size` as Vidur reads it (2 bytes per element)."""
    hidden, tp = profile.config.hidden, profile.tp
    return [[*stats(profile.all_reduce_seconds(count * hidden * profile.act_bytes) * 1e3),
             0, tp, count * hidden * 2, "all_reduce", tp, tp] for count in tokens]


def send_recv_rows(profile: ModelProfile, tokens: list[int]) -> list[list]:
    """One pipeline stage's activations (`num_tokens` x hidden) sent to the next chip,
    for both of Vidur's devices_per_node filters (accsim prices one interconnect)."""
    hidden = profile.config.hidden
    return [[*stats(profile.send_seconds(count * hidden * profile.act_bytes) * 1e3),
             0, 2, count * hidden * 2, "send_recv", per_node, 2]
            for per_node in SEND_RECV_DEVICES_PER_NODE for count in tokens]


def vidur_files(profiles: list[ModelProfile], *, device: str, model_id: str,
                max_tokens: int, max_batch: int, block_size: int, bits: int,
                attention_bits: int, earlier: Earlier) -> dict[str, str]:
    """Relative path -> CSV text of the profile of every TP degree in `profiles`
    (one model, one platform), merged with the tables `earlier` reads back."""
    first = profiles[0]
    if first.config.moe:
        raise AccsimError("Vidur's execution-time predictor reads dense models only; "
                          f"{first.config.name} is a mixture of experts", field="--model")
    tokens = grid_points(max_tokens, bits)
    attention_tokens = grid_points(max_tokens, attention_bits)
    batches = grid_points(max_batch, attention_bits)
    check_size(len(profiles) * (len(tokens) * len(MLP_OPERATORS)
                                + len(attention_tokens) * (len(attention_tokens)
                                                           + len(batches))),
               len(profiles) * (len(tokens) + len(attention_tokens)
                                * (len(attention_tokens) + len(batches))))
    degrees = {p.tp for p in profiles}
    compute = f"data/profiling/compute/{device}/{model_id}"
    network = f"data/profiling/network/{device}"
    tables = {
        f"{compute}/mlp.csv": (MLP_HEADER, [r for p in profiles
                                            for r in mlp_rows(p, tokens)]),
        f"{compute}/attention.csv": (ATTENTION_HEADER, [
            r for p in profiles for r in attention_rows(
                p, max_tokens=max_tokens, max_batch=max_batch, block_size=block_size,
                bits=attention_bits)]),
        f"{network}/all_reduce.csv": (ALL_REDUCE_HEADER, [
            r for p in profiles if p.tp > 1 for r in all_reduce_rows(p, tokens)]),
    }
    files = {}
    for path, (header, rows) in tables.items():
        key = "num_workers" if path.endswith("all_reduce.csv") else \
            "num_tensor_parallel_workers"
        text = merged(header, rows, earlier(path), key, degrees, earlier.shown(path))
        if text.count("\n") > 1:  # rows besides the header
            files[path] = text
    if first.platform.interconnect is not None:  # pipeline stages need links
        files[f"{network}/send_recv.csv"] = csv_text(SEND_RECV_HEADER,
                                                     send_recv_rows(first, tokens))
    return files
