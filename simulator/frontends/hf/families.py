"""What each Hugging Face `model_type` implies beyond its config keys (DESIGN.md
sections 9 and 21): the MLP's form, norms, biases, position embeddings, the defaults
its configuration class fills in where a published config.json leaves a key out, and
how its layers are laid out (which attention or state-space mixer, dense or MoE).

Data, not branches: a family is a row of FAMILIES; a layout rule is a function of the
raw config returning one (mixer, ffn) pair per layer, named by the family's row.
Mixers: "full", "sliding" (window), "chunked" (attention inside fixed chunks), "ssm"
(a state-space scan), "none"; ffns: "dense", "moe", "none".
"""

from __future__ import annotations

from dataclasses import dataclass, field

FULL, SLIDING, CHUNKED, SSM, NONE = "full", "sliding", "chunked", "ssm", "none"
DENSE, MOE = "dense", "moe"
MIXERS = (FULL, SLIDING, CHUNKED, SSM, NONE)


@dataclass(frozen=True)
class Family:
    """What a model_type implies beyond its config keys."""

    gated_mlp: bool          # gate and up projections (else one up)
    norm: str                # "rms" (scale only) or "layer" (scale and bias)
    rotary: bool             # RoPE on q and k
    tie_default: bool        # tie_word_embeddings when the config omits it
    qkv_bias: bool           # biases on the q, k, v projections
    dense_bias: bool         # biases on every projection (GPT-2)
    qk_norm: bool            # RMSNorm on each head's q and k (Qwen3, Gemma 3)
    activation: str = "silu"  # the MLP's activation (an elementwise op)
    layout: str = "uniform"  # the LAYOUTS rule that places mixers and MoE layers
    sandwich_norms: bool = False  # norms before and after each block (Gemma 2/3)
    o_bias: bool = False     # a bias on the output projection (gpt-oss)
    expert_bias: bool = False  # biases on the experts' and router's projections
    sinks: bool = False      # one learned sink logit per head and layer (gpt-oss)
    router_bias: bool = False  # a per-expert score bias (DeepSeek-V3)
    ssm: str | None = None   # "mamba1" or "mamba2": the family's state-space layer
    learned_positions: bool = False  # a position embedding table (GPT-2)
    # Keys the family's configuration class fills in when config.json leaves them out
    # (published multimodal configs list only the values that differ).
    defaults: dict = field(default_factory=dict)
    # Canonical field -> keys, looked up before the shared SPELLINGS.
    spellings: dict = field(default_factory=dict)


_LLAMA = Family(True, "rms", True, False, False, False, False)
# transformers' Gemma3TextConfig defaults (configuration_gemma3.py): the 4B/12B/27B
# config.json files list only what differs from them.
_GEMMA3_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "sliding_window": 4096, "sliding_window_pattern": 6,
    "max_position_embeddings": 131072, "tie_word_embeddings": True,
}
_GEMMA = dict(activation="gelu", sandwich_norms=True)
_MAMBA2_KEYS = {"ssm_heads": ("mamba_n_heads", "mamba_num_heads", "num_heads"),
                "ssm_head_dim": ("mamba_d_head", "mamba_head_dim", "head_dim"),
                "ssm_state": ("mamba_d_state", "ssm_state_size", "state_size"),
                "ssm_groups": ("mamba_n_groups", "n_groups"),
                "ssm_conv": ("mamba_d_conv", "conv_kernel"),
                "ssm_expand": ("mamba_expand", "expand"),
                "ssm_chunk": ("mamba_chunk_size", "chunk_size")}
FAMILIES: dict[str, Family] = {
    "llama": _LLAMA, "mistral": _LLAMA, "mixtral": _LLAMA,
    "qwen2": Family(True, "rms", True, False, True, False, False),
    "qwen2_moe": Family(True, "rms", True, False, True, False, False),
    "qwen3": Family(True, "rms", True, False, False, False, True),
    "qwen3_moe": Family(True, "rms", True, False, False, False, True),
    "gpt2": Family(False, "layer", False, True, True, True, False, activation="gelu",
                   learned_positions=True),
    "deepseek_v2": Family(True, "rms", True, False, False, False, False,
                          layout="deepseek",
                          spellings={"experts": ("n_routed_experts",)}),
    "deepseek_v3": Family(True, "rms", True, False, False, False, False,
                          layout="deepseek", router_bias=True,
                          spellings={"experts": ("n_routed_experts",)}),
    "gemma2": Family(True, "rms", True, True, False, False, False, layout="gemma2",
                     **_GEMMA),
    "gemma3_text": Family(True, "rms", True, True, False, False, True, layout="gemma3",
                          defaults=_GEMMA3_DEFAULTS, **_GEMMA),
    "gpt_oss": Family(True, "rms", True, False, True, False, False, layout="gpt_oss",
                      o_bias=True, expert_bias=True, sinks=True),
    "llama4_text": Family(True, "rms", True, False, False, False, False, layout="llama4",
                          spellings={"intermediate": ("intermediate_size_mlp",),
                                     "moe_intermediate": ("intermediate_size",),
                                     "shared_intermediate": ("intermediate_size",)}),
    "jamba": Family(True, "rms", False, False, False, False, False, layout="jamba",
                    ssm="mamba1",
                    spellings={"ssm_state": ("mamba_d_state",),
                               "ssm_conv": ("mamba_d_conv",),
                               "ssm_expand": ("mamba_expand",)}),
    "mamba": Family(True, "rms", False, True, False, False, False, layout="ssm_only",
                    ssm="mamba1",
                    spellings={"ssm_state": ("state_size",), "ssm_conv": ("conv_kernel",),
                               "ssm_expand": ("expand",)}),
    "mamba2": Family(True, "rms", False, True, False, False, False, layout="ssm_only",
                     ssm="mamba2", spellings=_MAMBA2_KEYS),
    # Granite 4.0: intermediate_size is the experts' width, the dense (shared) MLP's
    # is shared_intermediate_size.
    "granitemoehybrid": Family(True, "rms", True, False, False, False, False,
                               layout="granite", ssm="mamba2", spellings={
                                   **_MAMBA2_KEYS,
                                   "intermediate": ("shared_intermediate_size",),
                                   "moe_intermediate": ("intermediate_size",)}),
    "nemotron_h": Family(False, "rms", True, False, False, False, False,
                         layout="nemotron_h", ssm="mamba2", activation="relu",
                         spellings={**_MAMBA2_KEYS,
                                    "head_dim": ("attention_head_dim", "head_dim")}),
}
# A multimodal config names its language model's family in text_config.model_type; a
# config whose text_config has none takes the outer model_type's text family.
TEXT_FAMILIES = {"gemma3": "gemma3_text", "llama4": "llama4_text"}

Layer = tuple[str, str]   # (mixer, ffn)


def _types(raw: dict, layers: int, names: dict[str, Layer]) -> list[Layer] | None:
    """A `layer_types` list as transformers writes it, read through `names`."""
    listed = raw.get("layer_types")
    if not isinstance(listed, list) or len(listed) != layers:
        return None
    if any(not isinstance(kind, str) or kind not in names for kind in listed):
        return None
    return [names[kind] for kind in listed]


def _moe(raw: dict, layer: int) -> str:
    return MOE if raw.get("_experts") else DENSE


def _uniform(raw: dict, layers: int) -> list[Layer]:
    mixer = SLIDING if raw.get("_window") else FULL
    return [(mixer, _moe(raw, i)) for i in range(layers)]


def _deepseek(raw: dict, layers: int) -> list[Layer]:
    """MoE from layer first_k_dense_replace on, every moe_layer_freq-th layer."""
    first = raw.get("first_k_dense_replace") or 0
    freq = raw.get("moe_layer_freq") or 1
    return [(FULL, MOE if raw.get("_experts") and i >= first and i % freq == 0
             else DENSE) for i in range(layers)]


def _every_nth_global(pattern: int, layers: int, offset: int) -> list[Layer]:
    """Sliding layers with every `pattern`-th one (from `offset`) global."""
    return [(FULL if (i + offset) % pattern == 0 else SLIDING, DENSE)
            for i in range(layers)]


def _gemma2(raw: dict, layers: int) -> list[Layer]:
    """Gemma 2: sliding and global layers alternate, sliding first."""
    names = {"sliding_attention": (SLIDING, DENSE), "full_attention": (FULL, DENSE)}
    return _types(raw, layers, names) or _every_nth_global(2, layers, 1)


def _gemma3(raw: dict, layers: int) -> list[Layer]:
    """Gemma 3: every sliding_window_pattern-th layer global, the rest sliding."""
    names = {"sliding_attention": (SLIDING, DENSE), "full_attention": (FULL, DENSE)}
    pattern = raw.get("sliding_window_pattern") or 6
    return _types(raw, layers, names) or _every_nth_global(pattern, layers, 1)


def _gpt_oss(raw: dict, layers: int) -> list[Layer]:
    """gpt-oss: sliding and full layers alternate (layer_types), every layer MoE."""
    names = {"sliding_attention": (SLIDING, MOE), "full_attention": (FULL, MOE)}
    return _types(raw, layers, names) or [(SLIDING if i % 2 == 0 else FULL, MOE)
                                          for i in range(layers)]


def _llama4(raw: dict, layers: int) -> list[Layer]:
    """Llama 4: RoPE layers attend inside chunks of attention_chunk_size, NoPE layers
    (no_rope_layers[i] == 0; by default every no_rope_layer_interval-th) attend to all;
    MoE on the layers moe_layers names (by default every interleave_moe_layer_step-th,
    the step-th first)."""
    interval = raw.get("no_rope_layer_interval") or 4
    rope = raw.get("no_rope_layers") or [int((i + 1) % interval != 0)
                                         for i in range(layers)]
    step = raw.get("interleave_moe_layer_step") or 1
    moe = raw.get("moe_layers") or list(range(step - 1, layers, step))
    chunked = raw.get("attention_chunk_size") is not None
    return [(CHUNKED if chunked and i < len(rope) and rope[i] else FULL,
             MOE if raw.get("_experts") and i in set(moe) else DENSE)
            for i in range(layers)]


def _jamba(raw: dict, layers: int) -> list[Layer]:
    """Jamba: attention where i % attn_layer_period == attn_layer_offset (Mamba
    elsewhere), MoE where i % expert_layer_period == expert_layer_offset."""
    a_period, a_offset = raw.get("attn_layer_period") or 8, raw.get("attn_layer_offset") or 0
    e_period = raw.get("expert_layer_period") or 2
    e_offset = raw.get("expert_layer_offset") or 0
    return [(FULL if i % a_period == a_offset else SSM,
             MOE if raw.get("_experts") and i % e_period == e_offset else DENSE)
            for i in range(layers)]


def _ssm_only(raw: dict, layers: int) -> list[Layer]:
    """Mamba / Mamba2: every layer a state-space mixer, no MLP."""
    return [(SSM, NONE)] * layers


def _granite(raw: dict, layers: int) -> list[Layer]:
    """Granite 4.0 hybrid: layer_types ("mamba" / "attention"), each layer followed by
    the MoE block when experts are configured, else a dense MLP."""
    ffn = MOE if raw.get("_experts") else DENSE
    names = {"mamba": (SSM, ffn), "attention": (FULL, ffn)}
    return _types(raw, layers, names) or [(SSM, ffn)] * layers


# Nemotron-H's hybrid_override_pattern: one character per layer, each layer one block.
NEMOTRON_BLOCKS = {"M": (SSM, NONE), "*": (FULL, NONE), "-": (NONE, DENSE),
                   "E": (NONE, MOE)}


def _nemotron_h(raw: dict, layers: int) -> list[Layer] | None:
    pattern = raw.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != layers or \
            any(c not in NEMOTRON_BLOCKS for c in pattern):
        return None
    return [NEMOTRON_BLOCKS[c] for c in pattern]


LAYOUTS = {"uniform": _uniform, "deepseek": _deepseek, "gemma2": _gemma2,
           "gemma3": _gemma3, "gpt_oss": _gpt_oss, "llama4": _llama4, "jamba": _jamba,
           "ssm_only": _ssm_only, "granite": _granite, "nemotron_h": _nemotron_h}
