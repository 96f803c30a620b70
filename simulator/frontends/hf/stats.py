"""Model-level figures of an LLM: parameters, FLOPs and KV-cache bytes per token, with
the formulas they come from (DESIGN.md section 9), and the figures reported beside a
simulated step (roofline bound, tokens/s, ms/token)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.inputs.platform import DTYPE_BYTES
from simulator.frontends.hf.config import ModelConfig

# The dtype assumed when none is given: the one the shipped configs are published in.
DEFAULT_DTYPE = "bf16"

FORMULAS = {
    "params": "embeddings + layers x (attention + norms + MLP or router + experts) + "
              "final norm (+ lm_head unless tied)",
    "params_active": "as params, with only num_experts_per_tok experts per MoE layer",
    "flops_per_token": "2 x active parameters used in matmuls (lm_head included, "
                       "embedding lookups excluded); attention adds 4 x layers x heads "
                       "x head_dim x keys read",
    "kv_bytes_per_token": "2 (K and V) x layers x kv_heads x head_dim x kv dtype bytes",
    "weight_bytes": "params x weight dtype bytes",
}


@dataclass(frozen=True)
class ModelStats:
    """Sizes of a model at given dtypes."""

    params_total: int
    params_active: int
    matmul_params_active: int     # active parameters a token multiplies by
    weight_bytes: int
    kv_bytes_per_token: int
    flops_per_token: int          # weights only; see attention_flops_per_token
    layers: int
    heads: int
    head_dim: int
    sliding_window: int | None

    def attention_flops_per_token(self, keys: int) -> int:
        """QK^T and PV FLOPs of one token attending to `keys` keys, all layers."""
        return 4 * self.layers * self.heads * self.head_dim * keys

    def kv_bytes_per_request(self, context: int) -> int:
        """KV-cache bytes of one request holding `context` tokens (window-capped)."""
        keys = min(context, self.sliding_window) if self.sliding_window else context
        return self.kv_bytes_per_token * keys


def _attention_params(cfg: ModelConfig) -> int:
    f, d = cfg.family, cfg.head_dim
    qkv_out = (cfg.heads + 2 * cfg.kv_heads) * d
    params = cfg.hidden * qkv_out + cfg.heads * d * cfg.hidden
    params += qkv_out if f.qkv_bias else 0
    params += cfg.hidden if f.dense_bias else 0
    params += 2 * d if f.qk_norm else 0
    return params


def _mlp_params(cfg: ModelConfig, width: int) -> int:
    """One MLP (or expert) of this width."""
    if cfg.family.gated_mlp:
        return 3 * cfg.hidden * width
    biases = width + cfg.hidden if cfg.family.dense_bias else 0
    return 2 * cfg.hidden * width + biases


def _norm_params(cfg: ModelConfig) -> int:
    return cfg.hidden * (2 if cfg.family.norm == "layer" else 1)


def layer_params(cfg: ModelConfig, experts: int) -> int:
    """Parameters of one decoder layer counting `experts` of its MoE experts."""
    params = _attention_params(cfg) + 2 * _norm_params(cfg)
    if not cfg.moe:
        return params + _mlp_params(cfg, cfg.intermediate)
    params += cfg.hidden * cfg.experts + experts * _mlp_params(cfg, cfg.moe_intermediate)
    if cfg.shared_intermediate:
        params += _mlp_params(cfg, cfg.shared_intermediate)
    return params


def model_stats(cfg: ModelConfig, *, dtype: str | None = None,
                weight_dtype: str | None = None, kv_dtype: str | None = None
                ) -> ModelStats:
    """Parameter counts, weight bytes, KV bytes and FLOPs per token (FORMULAS)."""
    e = DTYPE_BYTES[dtype or DEFAULT_DTYPE]
    w = DTYPE_BYTES[weight_dtype] if weight_dtype else e
    kv = DTYPE_BYTES[kv_dtype] if kv_dtype else e
    embed = cfg.vocab * cfg.hidden
    positions = (cfg.max_positions or 0) * cfg.hidden if not cfg.family.rotary else 0
    lm_head = 0 if cfg.tie_embeddings else embed
    outer = embed + positions + _norm_params(cfg) + lm_head
    total = outer + cfg.layers * layer_params(cfg, cfg.experts)
    active = outer + cfg.layers * layer_params(cfg, cfg.experts_per_token)
    # A token multiplies by every active weight but the embedding tables (looked up) and
    # the norms (elementwise); a tied lm_head multiplies by the embedding table.
    matmul = active - embed - positions - _norm_params(cfg) * (1 + 2 * cfg.layers) \
        + (embed if cfg.tie_embeddings else 0)
    return ModelStats(
        params_total=total, params_active=active, matmul_params_active=matmul,
        weight_bytes=total * w,
        kv_bytes_per_token=2 * cfg.layers * cfg.kv_heads * cfg.head_dim * kv,
        flops_per_token=2 * matmul, layers=cfg.layers, heads=cfg.heads,
        head_dim=cfg.head_dim, sliding_window=cfg.sliding_window)
