"""A stand-in for simulator.frontends.hf with the agreed functions, so the serving
adapter is tested without the real frontend: a tiny decoder whose iteration runs
projections and MLP over all tokens, attention per request, and the LM head over the
requests that produce a token."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.inputs.workload import Workload


@dataclass(frozen=True)
class TinyConfig:
    name: str = "tiny"
    layers: int = 2
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    ffn: int = 512
    vocab: int = 1000


@dataclass(frozen=True)
class Stats:
    weight_bytes: int
    kv_bytes_per_token: int
    params_total: int
    params_active: int


def load_model_config(path_or_shipped_name) -> TinyConfig:
    return TinyConfig()


def model_stats(cfg: TinyConfig, *, dtype=None) -> Stats:
    per_layer = (cfg.hidden * (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
                 + cfg.heads * cfg.head_dim * cfg.hidden + 3 * cfg.hidden * cfg.ffn)
    params = cfg.layers * per_layer + cfg.vocab * cfg.hidden
    kv_bytes = 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * 2  # K and V, 2 bytes each
    return Stats(2 * params, kv_bytes, params, params)


def _attention(cfg, tag, q, kv):
    return [
        {"name": f"{tag}_qk", "layer_type": "attention.qk", "kind": "gemm",
         "batch": cfg.heads, "m": q, "n": kv, "k": cfg.head_dim, "repeat": cfg.layers},
        {"name": f"{tag}_softmax", "layer_type": "attention.softmax", "kind": "softmax",
         "rows": cfg.heads * q, "cols": kv, "repeat": cfg.layers},
        {"name": f"{tag}_pv", "layer_type": "attention.pv", "kind": "gemm",
         "batch": cfg.heads, "m": q, "n": cfg.head_dim, "k": kv, "repeat": cfg.layers}]


def iteration_workload(cfg: TinyConfig, *, prefill, decode, dtype=None) -> Workload:
    tokens = sum(new for new, _ in prefill) + len(decode)
    r = cfg.layers
    ops = [{"name": "norm", "layer_type": "norm", "kind": "norm", "rows": tokens,
            "cols": cfg.hidden, "repeat": r},
           {"name": "qkv", "layer_type": "attention.qkv", "kind": "gemm", "m": tokens,
            "n": (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, "k": cfg.hidden,
            "repeat": r}]
    for i, (new, cached) in enumerate(prefill):
        ops += _attention(cfg, f"p{i}", new, new + cached)
    for i, context in enumerate(decode):
        ops += _attention(cfg, f"d{i}", 1, context)
    ops += [{"name": "o", "layer_type": "attention.out", "kind": "gemm", "m": tokens,
             "n": cfg.hidden, "k": cfg.heads * cfg.head_dim, "repeat": r},
            {"name": "up", "layer_type": "mlp.up", "kind": "gemm", "m": tokens,
             "n": 2 * cfg.ffn, "k": cfg.hidden, "repeat": r},
            {"name": "act", "layer_type": "mlp.act", "kind": "elementwise",
             "elements": tokens * cfg.ffn, "op": "silu", "repeat": r},
            {"name": "down", "layer_type": "mlp.down", "kind": "gemm", "m": tokens,
             "n": cfg.hidden, "k": cfg.ffn, "repeat": r},
            {"name": "lm_head", "layer_type": "lm_head", "kind": "gemm",
             "m": len(prefill) + len(decode), "n": cfg.vocab, "k": cfg.hidden}]
    return Workload.model_validate({"name": "tiny_iteration", "operators": ops})
