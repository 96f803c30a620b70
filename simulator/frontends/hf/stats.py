"""Model-level figures of an LLM: parameters, FLOPs and KV-cache bytes per token, with
the formulas they come from (DESIGN.md section 9), and the figures reported beside a
simulated step (roofline bound, tokens/s, ms/token)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.model.formats import packed_bytes, whole_bytes
from simulator.frontends.hf.config import ModelConfig
from simulator.frontends.hf.families import CHUNKED, MOE, NONE, SLIDING, SSM, Layer

# The dtype assumed when none is given: the one the shipped configs are published in.
DEFAULT_DTYPE = "bf16"

FORMULAS = {
    "params": "embeddings + sum over layers of (mixer: attention, latent attention or "
              "state-space scan; norms; dense MLP or router + experts + shared experts) "
              "+ final norm (+ lm_head unless tied)",
    "params_active": "as params, with only num_experts_per_tok routed experts per MoE "
                     "layer (both embedding tables counted)",
    "flops_per_token": "2 x active parameters used in matmuls (lm_head included, "
                       "embedding lookups excluded); attention adds 4 x layers x heads "
                       "x head_dim x keys read",
    "kv_bytes_per_token": "sum over attention layers of 2 (K and V) x kv_heads x head_dim "
                          "(latent attention: kv_lora_rank + qk_rope_head_dim) x kv dtype "
                          "bytes",
    "state_bytes_per_request": "sum over state-space layers of (inner x state + "
                               "(conv - 1) x conv channels) x kv dtype bytes",
    "weight_bytes": "params x weight dtype bytes (declared formats per role)",
}


@dataclass(frozen=True)
class ModelStats:
    """Sizes of a model at given dtypes."""

    params_total: int
    params_active: int
    matmul_params_active: int     # active parameters a token multiplies by
    weight_bytes: int
    kv_bytes_per_token: int       # every attention layer's, before windows and chunks
    flops_per_token: int          # weights only; see attention_flops_per_token
    layers: int
    heads: int
    head_dim: int
    sliding_window: int | None
    # Active parameters without the input embedding table (looked up, not multiplied):
    # how DeepSeek and OpenAI state "activated" parameters.
    params_active_no_embedding: int = 0
    state_bytes_per_request: int = 0   # state-space layers' fixed cache per request
    cache_bytes_by_mixer: tuple = ()   # (mixer, layers, bytes per cached token)
    chunk: int | None = None
    params_vision: int = 0             # a multimodal model's vision tower (not simulated)
    attention_layers: int | None = None  # layers whose attention reads keys

    def attention_flops_per_token(self, keys: int) -> int:
        """QK^T and PV FLOPs of one token attending to `keys` keys, all layers."""
        layers = self.layers if self.attention_layers is None else self.attention_layers
        return 4 * layers * self.heads * self.head_dim * keys

    def kv_bytes_per_request(self, context: int) -> int:
        """Cache bytes of one request holding `context` tokens: each attention layer's
        tokens (window- or chunk-capped) plus the state-space layers' fixed state."""
        if not self.cache_bytes_by_mixer:
            keys = min(context, self.sliding_window) if self.sliding_window else context
            return self.kv_bytes_per_token * keys + self.state_bytes_per_request
        total = self.state_bytes_per_request
        for mixer, layers, per_token in self.cache_bytes_by_mixer:
            total += layers * per_token * _cached(mixer, context, self.sliding_window,
                                                  self.chunk)
        return total


def _cached(mixer: str, tokens: int, window: int | None, chunk: int | None) -> int:
    if mixer == SLIDING:
        return min(tokens, window)
    if mixer == CHUNKED:
        return (tokens - 1) % chunk + 1 if tokens else 0
    return tokens


def _attention_params(cfg: ModelConfig) -> int:
    f, d = cfg.family, cfg.head_dim
    if cfg.mla:
        return _mla_params(cfg)
    qkv_out = (cfg.heads + 2 * cfg.kv_heads) * d
    params = cfg.hidden * qkv_out + cfg.heads * d * cfg.hidden
    params += qkv_out if f.qkv_bias else 0
    params += cfg.hidden if f.dense_bias or f.o_bias else 0
    params += 2 * d if f.qk_norm else 0
    params += cfg.heads if f.sinks else 0
    return params


def _mla_params(cfg: ModelConfig) -> int:
    """q: down to q_lora_rank, norm, up to heads x (nope + rope) (or one projection);
    kv: down to kv_lora_rank + the RoPE key, norm, up to heads x (nope + v); o."""
    m, h = cfg.mla, cfg.heads
    q = (cfg.hidden * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * h * m.qk_head_dim
         if m.q_lora_rank else cfg.hidden * h * m.qk_head_dim)
    kv = cfg.hidden * m.cached + m.kv_lora_rank \
        + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
    return q + kv + h * m.v_head_dim * cfg.hidden


def ssm_params(cfg: ModelConfig) -> int:
    """One state-space mixer: in_proj, the depthwise convolution, the scan's own
    parameters (dt, A, D), the gated norm (mamba2) or dt/B/C norms (Jamba), out_proj."""
    s, h = cfg.ssm, cfg.hidden
    conv = s.conv_dim * s.conv + (s.conv_dim if s.conv_bias else 0)
    out = s.inner * h + (h if s.proj_bias else 0)
    if s.kind == "mamba2":
        in_width = 2 * s.inner + 2 * s.groups * s.state + s.heads
        return (h * in_width + (in_width if s.proj_bias else 0) + conv + 3 * s.heads
                + s.inner + out)
    in_width = 2 * s.inner
    x_proj = s.inner * (s.dt_rank + 2 * s.state)
    dt_proj = s.dt_rank * s.inner + s.inner
    norms = s.dt_rank + 2 * s.state if s.inner_norms else 0
    return (h * in_width + (in_width if s.proj_bias else 0) + conv + x_proj + dt_proj
            + s.inner * s.state + s.inner + norms + out)


def _mlp_params(cfg: ModelConfig, width: int, biases: bool = False) -> int:
    """One MLP (or expert) of this width."""
    if cfg.family.gated_mlp:
        return 3 * cfg.hidden * width + (2 * width + cfg.hidden if biases else 0)
    biases = biases or cfg.family.dense_bias
    return 2 * cfg.hidden * width + (width + cfg.hidden if biases else 0)


def _norm_params(cfg: ModelConfig) -> int:
    return cfg.hidden * (2 if cfg.family.norm == "layer" else 1)


def mixer_params(cfg: ModelConfig, mixer: str) -> int:
    if mixer == SSM:
        return ssm_params(cfg)
    return 0 if mixer == NONE else _attention_params(cfg)


def router_params(cfg: ModelConfig) -> int:
    f = cfg.family
    return cfg.hidden * cfg.experts + (cfg.experts if f.expert_bias or f.router_bias
                                       else 0)


def ffn_params(cfg: ModelConfig, ffn: str, experts: int) -> int:
    """A layer's MLP, or its MoE block counting `experts` routed experts."""
    if ffn == NONE:
        return 0
    if ffn != MOE:
        return _mlp_params(cfg, cfg.intermediate)
    params = router_params(cfg) + experts * _mlp_params(cfg, cfg.moe_intermediate,
                                                         cfg.family.expert_bias)
    return params + (_mlp_params(cfg, cfg.shared_intermediate)
                     if cfg.shared_intermediate else 0)


def norm_count(cfg: ModelConfig, kind: Layer) -> int:
    """Norms of a layer: one before each block it has (and one after, Gemma)."""
    blocks = sum(part != NONE for part in kind)
    return blocks * (2 if cfg.family.sandwich_norms else 1)


def layer_params(cfg: ModelConfig, experts: int, kind: Layer | None = None) -> int:
    """Parameters of one layer of `kind` (default: the first layer's) counting
    `experts` of its MoE experts."""
    mixer, ffn = kind or cfg.kinds[0]
    return (mixer_params(cfg, mixer) + norm_count(cfg, (mixer, ffn)) * _norm_params(cfg)
            + ffn_params(cfg, ffn, experts))


def layers_params(cfg: ModelConfig, experts: int | None = None,
                  layers: int | None = None) -> int:
    """Parameters of the first `layers` layers (default all), routed experts counted
    `experts` per MoE layer (default all)."""
    kinds = cfg.kinds[:layers] if layers is not None else cfg.kinds
    routed = cfg.experts if experts is None else experts
    counts: dict = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return sum(n * layer_params(cfg, routed, kind) for kind, n in counts.items())


def role_params(cfg: ModelConfig, experts: int | None = None) -> dict[str, int]:
    """Parameters by the role their format follows (simulator.frontends.hf.
    quantization): attention, mlp, experts, shared, ssm, router and "other" (norms,
    biases of the layers, embeddings, lm_head)."""
    routed = cfg.experts if experts is None else experts
    roles = dict.fromkeys(("attention", "mlp", "experts", "shared", "ssm", "router",
                           "lm_head", "other"), 0)
    for mixer, ffn in cfg.kinds:
        roles["ssm" if mixer == SSM else "attention"] += mixer_params(cfg, mixer)
        if ffn == "dense":
            roles["mlp"] += _mlp_params(cfg, cfg.intermediate)
        elif ffn == MOE:
            roles["router"] += router_params(cfg)
            roles["experts"] += routed * _mlp_params(cfg, cfg.moe_intermediate,
                                                     cfg.family.expert_bias)
            roles["shared"] += (_mlp_params(cfg, cfg.shared_intermediate)
                                if cfg.shared_intermediate else 0)
        roles["other"] += norm_count(cfg, (mixer, ffn)) * _norm_params(cfg)
    embed = cfg.vocab * cfg.hidden
    positions = (cfg.max_positions or 0) * cfg.hidden if cfg.family.learned_positions else 0
    roles["other"] += embed + positions + _norm_params(cfg)
    roles["lm_head"] = 0 if cfg.tie_embeddings else embed
    return roles


def weight_bytes(cfg: ModelConfig, params: dict[str, int], dtype_bytes: int,
                 weight_dtype: str | None) -> int:
    """Bytes of parameters by role: the run's weight dtype when it names one, else the
    format config.json declares for the role (packed, simulator.model.formats), else the
    activation dtype's bytes."""
    total = 0
    for role, count in params.items():
        fmt = weight_dtype or cfg.weight_format(role)
        total += packed_bytes(fmt, count) if fmt else count * dtype_bytes
    return total


def cache_layout(cfg: ModelConfig, kv_bytes: int) -> tuple[tuple, int]:
    """(mixer, layers, bytes per cached token) of the attention layers, and the state
    bytes of one request over the state-space layers."""
    per_token = (cfg.mla.cached if cfg.mla else 2 * cfg.kv_heads * cfg.head_dim) \
        * kv_bytes
    rows, state = [], 0
    for (mixer, _), layers in cfg.groups():
        if mixer == SSM:
            state += layers * cfg.ssm.state_elements * kv_bytes
        elif mixer != NONE:
            rows.append((mixer, layers, per_token))
    merged: dict = {}
    for mixer, layers, size in rows:
        merged[mixer] = merged.get(mixer, 0) + layers
    return tuple((m, n, per_token) for m, n in merged.items()), state


def model_stats(cfg: ModelConfig, *, dtype: str | None = None,
                weight_dtype: str | None = None, kv_dtype: str | None = None
                ) -> ModelStats:
    """Parameter counts, weight bytes, KV bytes and FLOPs per token (FORMULAS)."""
    e = whole_bytes(dtype or DEFAULT_DTYPE, field="--dtype")
    kv = whole_bytes(kv_dtype, field="--kv-dtype") if kv_dtype else e
    embed = cfg.vocab * cfg.hidden
    positions = (cfg.max_positions or 0) * cfg.hidden if cfg.family.learned_positions else 0
    lm_head = 0 if cfg.tie_embeddings else embed
    outer = embed + positions + _norm_params(cfg) + lm_head
    total = outer + layers_params(cfg)
    active = outer + layers_params(cfg, cfg.experts_per_token)
    norms = _norm_params(cfg) * (1 + sum(norm_count(cfg, kind) for kind in cfg.kinds))
    # A token multiplies by every active weight but the embedding tables (looked up) and
    # the norms (elementwise); a tied lm_head multiplies by the embedding table.
    matmul = active - embed - positions - norms + (embed if cfg.tie_embeddings else 0)
    caches, state = cache_layout(cfg, kv)
    uniform = not cfg.layer_kinds
    attention_layers = sum(n for _, n, _ in caches)
    return ModelStats(
        params_total=total, params_active=active, matmul_params_active=matmul,
        weight_bytes=weight_bytes(cfg, role_params(cfg), e, weight_dtype),
        kv_bytes_per_token=sum(n * size for _, n, size in caches),
        flops_per_token=2 * matmul, layers=cfg.layers, heads=cfg.heads,
        head_dim=cfg.head_dim, sliding_window=cfg.sliding_window,
        params_active_no_embedding=active - embed - positions,
        state_bytes_per_request=state, params_vision=cfg.vision_params,
        cache_bytes_by_mixer=() if uniform else caches, chunk=cfg.chunk,
        attention_layers=None if uniform else attention_layers)
