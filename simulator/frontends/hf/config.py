"""Reading a Hugging Face `config.json` into a ModelConfig (DESIGN.md section 9).

A config is read as Hugging Face writes it: the keys the model's shape needs are looked
up under each family's spelling and validated, everything else (token ids, rope
scaling, torch_dtype, transformers_version, ...) is ignored. The family (by
`model_type`) says what the config leaves implicit: the MLP's form, the norm, biases,
position embeddings and the default of `tie_word_embeddings`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from simulator.errors import AccsimError
from simulator.frontends.hf.families import (CHUNKED, FAMILIES, FULL, LAYOUTS, MOE, NONE,
                                             SLIDING, SSM, TEXT_FAMILIES, Family, Layer)
from simulator.frontends.hf.quantization import declared_formats
from simulator.frontends.hf.vision import vision_params
from simulator.frontends.llm_choices import SHIPPED_SUBFOLDER, shipped_configs
from simulator.inputs.loader import (excerpt, parse_json, path_exists, read_source,
                                     refuse_empty_name, shipped_folder)

# Canonical field -> the keys that spell it, in the order they are looked up.
SPELLINGS: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden_size", "n_embd"),
    "layers": ("num_hidden_layers", "n_layer"),
    "heads": ("num_attention_heads", "n_head"),
    "vocab": ("vocab_size",),
    "kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "intermediate": ("intermediate_size", "n_inner"),
    "experts": ("num_local_experts", "num_experts"),
    "experts_per_token": ("num_experts_per_tok",),
    "moe_intermediate": ("moe_intermediate_size",),
    "shared_intermediate": ("shared_expert_intermediate_size",),
    "max_positions": ("max_position_embeddings", "n_positions"),
    "sliding_window": ("sliding_window",),
    "chunk": ("attention_chunk_size",),
    "shared_experts": ("n_shared_experts",),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "ssm_heads": (), "ssm_head_dim": (), "ssm_groups": (), "ssm_chunk": (),
    "ssm_state": (), "ssm_conv": (), "ssm_expand": (),
    "ssm_dt_rank": ("mamba_dt_rank", "time_step_rank"),
}
REQUIRED = ("hidden", "layers", "heads", "vocab")
# Largest value read per field, far above any released model (the largest have ~130
# layers, hidden 2**14, 2**18 tokens of vocabulary, 10M positions), so that a forged
# size is refused by name before any product of sizes is formed.
LIMITS: dict[str, tuple[int, str]] = {
    "hidden": (2**20, "hidden size"), "layers": (2**16, "layer count"),
    "heads": (2**16, "head count"), "vocab": (2**24, "vocabulary"),
    "kv_heads": (2**16, "key/value head count"), "head_dim": (2**20, "head size"),
    "intermediate": (2**22, "MLP width"), "experts": (2**16, "expert count"),
    "experts_per_token": (2**16, "experts per token"),
    "moe_intermediate": (2**22, "expert MLP width"),
    "shared_intermediate": (2**22, "shared expert MLP width"),
    "max_positions": (2**31 - 1, "position count"),
    "sliding_window": (2**31 - 1, "sliding window"),
    "chunk": (2**31 - 1, "attention chunk"),
    "shared_experts": (2**16, "shared expert count"),
    "q_lora_rank": (2**20, "query latent rank"), "kv_lora_rank": (2**20, "KV latent rank"),
    "qk_nope_head_dim": (2**16, "head size"), "qk_rope_head_dim": (2**16, "head size"),
    "v_head_dim": (2**16, "head size"),
    "ssm_heads": (2**16, "state-space head count"),
    "ssm_head_dim": (2**16, "state-space head size"),
    "ssm_groups": (2**16, "state-space group count"),
    "ssm_chunk": (2**20, "scan chunk"), "ssm_state": (2**16, "state size"),
    "ssm_conv": (2**10, "convolution width"), "ssm_expand": (2**6, "expansion"),
    "ssm_dt_rank": (2**20, "time-step rank"),
}


@dataclass(frozen=True)
class Mla:
    """Multi-head latent attention (DeepSeek-V2/V3): queries through a q_lora_rank
    latent (0: projected directly), keys and values up-projected from one
    kv_lora_rank latent, plus a shared qk_rope_head_dim RoPE key; the cache holds the
    latent and the RoPE key."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cached(self) -> int:
        """Elements cached per token per layer: the latent and the RoPE key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class Ssm:
    """A state-space (Mamba) mixer: `inner` channels (mamba2: heads x head_dim), a
    `state`-wide state per channel, a depthwise convolution `conv` wide over
    conv_dim channels; mamba1 projects dt through a dt_rank bottleneck (x_proj,
    dt_proj) with a per-channel A, mamba2 has one A and dt per head and `groups`
    shared B/C, and scans in chunks of `chunk` (SSD)."""

    kind: str                # "mamba1" or "mamba2"
    inner: int
    state: int
    conv: int
    heads: int               # mamba2 heads (mamba1: one per channel)
    groups: int              # B/C groups (mamba1: 1)
    dt_rank: int             # mamba1 (mamba2: 0)
    chunk: int               # mamba2 SSD chunk (mamba1: 0)
    conv_bias: bool
    proj_bias: bool
    inner_norms: bool        # Jamba's RMSNorms on dt, B and C

    @property
    def conv_dim(self) -> int:
        """Channels the convolution runs over: x, and for mamba2 B and C too."""
        return self.inner + (2 * self.groups * self.state if self.kind == "mamba2" else 0)

    @property
    def state_elements(self) -> int:
        """The cache of one sequence in one layer: the scan state and the last
        conv - 1 inputs of the convolution."""
        return self.inner * self.state + (self.conv - 1) * self.conv_dim


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only model, dense or MoE, as accsim needs it."""

    name: str
    model_type: str
    family: Family
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int          # dense MLP width (MoE models: unused unless shared)
    vocab: int
    tie_embeddings: bool
    max_positions: int | None = None
    max_positions_key: str = "max_position_embeddings"  # how the config spells it
    sliding_window: int | None = None
    experts: int = 0           # 0: dense
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0
    source: str | None = None  # the file it was read from
    # (mixer, ffn) of every layer (simulator.frontends.hf.families); empty: every layer
    # full attention (sliding with a window) and MoE when experts are configured.
    layer_kinds: tuple[Layer, ...] = ()
    chunk: int | None = None   # attention_chunk_size of "chunked" layers
    mla: Mla | None = None
    ssm: Ssm | None = None
    attn_softcap: float | None = None   # Gemma 2: cap x tanh(score / cap)
    final_softcap: float | None = None  # Gemma 2: on the logits
    weight_formats: tuple[tuple[str, str], ...] = ()  # declared role -> format
    vision_params: int = 0     # a multimodal config's vision tower (not simulated)

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def group(self) -> int:
        """Query heads per K/V head (GQA)."""
        return self.heads // self.kv_heads

    def kv_len(self, tokens: int) -> int:
        """Keys attention reads for `tokens` of context: capped by the sliding window."""
        return min(tokens, self.sliding_window) if self.sliding_window else tokens

    @property
    def kinds(self) -> tuple[Layer, ...]:
        """(mixer, ffn) of every layer."""
        if self.layer_kinds:
            return self.layer_kinds
        mixer = SLIDING if self.sliding_window else FULL
        return ((mixer, MOE if self.moe else "dense"),) * self.layers

    def groups(self) -> list[tuple[Layer, int]]:
        """Each distinct (mixer, ffn) with its layer count, in order of first use."""
        counts: dict[Layer, int] = {}
        for kind in self.kinds:
            counts[kind] = counts.get(kind, 0) + 1
        return list(counts.items())

    def cached_tokens(self, mixer: str, tokens: int) -> int:
        """Tokens of K/V (or latent) a layer of this mixer keeps for a request that has
        seen `tokens`: all, the window, or the current chunk; none for a scan."""
        if mixer == SLIDING:
            return min(tokens, self.sliding_window)
        if mixer == CHUNKED:
            return (tokens - 1) % self.chunk + 1 if tokens else 0
        return 0 if mixer in (SSM, NONE) else tokens

    def weight_format(self, role: str) -> str | None:
        """The format config.json declares for a role's weights (None: the run's)."""
        return dict(self.weight_formats).get(role)


def _fail(rule: str, file: str | None, key: str | None = None) -> AccsimError:
    return AccsimError(rule, file=file, field=key)


def _lookup(raw: dict, field: str, family: Family | None = None
            ) -> tuple[str | None, object]:
    """(the key that spells `field`, its value), or (None, None) when absent or null:
    the family's own spellings first, then the shared ones, then the family's
    defaults (as its configuration class fills them in)."""
    own = family.spellings.get(field, ()) if family else ()
    keys = own + tuple(k for k in SPELLINGS[field] if k not in own)
    for key in keys:
        if raw.get(key) is not None:
            return key, raw[key]
    for key in keys:
        if family and family.defaults.get(key) is not None:
            return key, family.defaults[key]
    return None, None


def _positive(raw: dict, field: str, file: str | None, default=None,
              family: Family | None = None) -> int | None:
    key, value = _lookup(raw, field, family)
    if key is None:
        return default
    largest, meaning = LIMITS[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"must be a whole number, found {excerpt(value)}", file, key)
    if value <= 0:
        raise _fail(f"must be positive, found {value}", file, key)
    if value > largest:
        raise _fail(f"a {meaning} of at most {largest:,} is read, found "
                    f"{excerpt(value, 40)}", file, key)
    return value


def text_part(raw: dict) -> dict:
    """The language model's keys of a config: a multimodal config's `text_config`
    (its model_type, or the outer one's text family, when it names none), with the
    outer quantization_config and tie_word_embeddings where the text part has none."""
    text = raw.get("text_config")
    if not isinstance(text, dict):
        return raw
    merged = {key: raw[key] for key in ("quantization_config", "tie_word_embeddings",
                                        "_name_or_path", "name") if key in raw}
    merged.update(text)
    if not isinstance(merged.get("model_type"), str):
        merged["model_type"] = TEXT_FAMILIES.get(raw.get("model_type"),
                                                 raw.get("model_type"))
    return merged


def _flag(raw: dict, keys: tuple[str, ...], default: bool) -> bool:
    return next((raw[k] for k in keys if isinstance(raw.get(k), bool)), default)


def _cap(raw: dict, key: str, file: str | None) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 \
            or value > sys.float_info.max:  # float() of 10**400: OverflowError
        raise _fail(f"must be a positive number or null, found {excerpt(value, 40)}",
                    file, key)
    return float(value)


def _mla(raw: dict, file: str | None, family: Family) -> Mla | None:
    if _lookup(raw, "kv_lora_rank", family)[0] is None:
        return None
    get = lambda field: _positive(raw, field, file, family=family)  # noqa: E731
    missing = [f for f in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                           "v_head_dim") if get(f) is None]
    if missing:
        raise _fail(f"multi-head latent attention (kv_lora_rank) needs "
                    f"{', '.join(missing)}", file, missing[0])
    return Mla(get("q_lora_rank") or 0, get("kv_lora_rank"), get("qk_nope_head_dim"),
               get("qk_rope_head_dim"), get("v_head_dim"))


def _ssm(raw: dict, file: str | None, family: Family, hidden: int) -> Ssm:
    get = lambda field, default=None: _positive(raw, field, file, default,  # noqa: E731
                                               family)
    conv_bias = _flag(raw, ("mamba_conv_bias", "use_conv_bias"), True)
    proj_bias = _flag(raw, ("mamba_proj_bias", "use_bias"), False)
    if family.ssm == "mamba1":
        inner = (raw.get("intermediate_size") if family.layout == "ssm_only"
                 else None) or get("ssm_expand", 2) * hidden
        rank = raw.get("mamba_dt_rank", raw.get("time_step_rank", "auto"))
        dt_rank = -(-hidden // 16) if rank == "auto" else get("ssm_dt_rank")
        return Ssm("mamba1", inner, get("ssm_state", 16), get("ssm_conv", 4), inner, 1,
                   dt_rank, 0, conv_bias, proj_bias, family.layout == "jamba")
    heads = get("ssm_heads")
    if heads is None:
        raise _fail("a Mamba2 layer needs its head count", file,
                    family.spellings["ssm_heads"][0])
    head_dim = get("ssm_head_dim", 64)
    groups = get("ssm_groups", 1)
    if heads % groups:
        raise _fail(f"{groups} groups do not divide {heads} state-space heads", file,
                    _lookup(raw, "ssm_groups", family)[0])
    return Ssm("mamba2", heads * head_dim, get("ssm_state", 128), get("ssm_conv", 4),
               heads, groups, 0, get("ssm_chunk", 256), conv_bias, proj_bias, False)


# The whole numbers the layouts (simulator.frontends.hf.families) read to place layer
# kinds, each with the least it may be (an offset below its period, or no layer
# matches); the lists, of layer flags (0 or 1) or of layer numbers.
LAYOUT_NUMBERS = {"first_k_dense_replace": 0, "moe_layer_freq": 1,
                  "sliding_window_pattern": 1, "no_rope_layer_interval": 1,
                  "interleave_moe_layer_step": 1, "attn_layer_period": 1,
                  "attn_layer_offset": 0, "expert_layer_period": 1,
                  "expert_layer_offset": 0}
LAYOUT_OFFSETS = {"attn_layer_offset": ("attn_layer_period", 8),
                  "expert_layer_offset": ("expert_layer_period", 2)}
LAYOUT_LISTS = {"no_rope_layers": "a list of 0 or 1 per layer",
                "moe_layers": "a list of layer numbers"}
# The fields each layout reads (those of other layouts are no concern of its family).
LAYOUT_FIELDS = {"deepseek": ("first_k_dense_replace", "moe_layer_freq"),
                 "gemma3": ("sliding_window_pattern",),
                 "llama4": ("no_rope_layer_interval", "interleave_moe_layer_step",
                            "no_rope_layers", "moe_layers"),
                 "jamba": ("attn_layer_period", "attn_layer_offset",
                           "expert_layer_period", "expert_layer_offset")}


def _check_layout_fields(raw: dict, layout: str, layers: int, file: str | None) -> None:
    """The fields `layout` reads, where the config gives them, are whole numbers in
    range and lists of layer numbers or flags: a string or a list there was a
    TypeError deep inside, a negative offset or a period of 0 silently placed no layer
    or the default."""
    read = [key for key in LAYOUT_FIELDS.get(layout, ()) if raw.get(key) is not None]
    for key in read:
        value = raw[key]
        if key in LAYOUT_LISTS:
            top = 2 if key == "no_rope_layers" else layers
            if not (isinstance(value, list) and all(
                    isinstance(v, int) and not isinstance(v, bool) and 0 <= v < top
                    for v in value)):
                raise _fail(f"must be {LAYOUT_LISTS[key]} (of {layers}), found "
                            f"{excerpt(value)}", file, key)
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(f"must be a whole number, found {excerpt(value)}", file, key)
        if not LAYOUT_NUMBERS[key] <= value <= LIMITS["layers"][0]:
            raise _fail(f"must be from {LAYOUT_NUMBERS[key]} to {LIMITS['layers'][0]:,}, "
                        f"found {excerpt(value, 40)}", file, key)
    for key in read:
        period, default = LAYOUT_OFFSETS.get(key, (None, None))
        if period is not None and raw[key] >= (raw.get(period) or default):
            raise _fail(f"{raw[key]} is not below {period} "
                        f"({raw.get(period) or default}): no layer would match", file, key)


def _layout(raw: dict, family: Family, layers: int, experts: int,
            window: int | None, file: str | None) -> tuple[Layer, ...]:
    _check_layout_fields(raw, family.layout, layers, file)
    kinds = LAYOUTS[family.layout]({**raw, "_experts": experts, "_window": window},
                                   layers)
    if kinds is None:
        raise _fail(f"a {raw['model_type']} config needs one layer kind per layer "
                    f"({layers})", file, "hybrid_override_pattern")
    return tuple(kinds)


def parse_config(raw: dict, *, file: str | None = None, name: str | None = None
                 ) -> ModelConfig:
    """A ModelConfig from the parsed JSON object of a config.json; one AccsimError
    naming the key for a missing key, a bad value or an inconsistent shape."""
    if not isinstance(raw, dict):
        raise _fail(f"expected a JSON object, found {type(raw).__name__}", file)
    outer, raw = raw, text_part(raw)
    model_type = raw.get("model_type")
    family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    attention_free = family is not None and family.layout == "ssm_only"
    required = [f for f in REQUIRED if not (attention_free and f == "heads")]
    absent = [f for f in required if _lookup(raw, f, family)[0] is None]
    missing = [" or ".join(SPELLINGS[f]) for f in absent]
    if family is None:
        known = ", ".join(sorted(FAMILIES))
        rule = (f"unknown architecture {excerpt(model_type, 40)} (architectures "
                f"{excerpt(raw.get('architectures'), 80)}): accsim reads model_type "
                f"{known}")
        if missing:
            rule += f"; missing keys: {', '.join(missing)}"
        raise _fail(rule, file, "model_type")
    if missing:
        raise _fail(f"missing keys for a {model_type} model: {', '.join(missing)}", file,
                    SPELLINGS[absent[0]][0])
    get = lambda field, default=None: _positive(raw, field, file, default,  # noqa: E731
                                               family)
    hidden, layers = get("hidden"), get("layers")
    ssm = _ssm(raw, file, family, hidden) if family.ssm else None
    # An attention-free model's "heads" are its scan's heads (what TP splits).
    heads = get("heads") if not attention_free else ssm.heads
    kv_heads = get("kv_heads", heads) if not attention_free else heads
    head_dim = get("head_dim") if not attention_free else ssm.inner // ssm.heads
    mla = _mla(raw, file, family)
    if mla:  # the head size whose QK^T + PV MACs and K + V bytes are MLA's per head
        head_dim = -(-(mla.qk_head_dim + mla.v_head_dim) // 2)
    if head_dim is None:
        if hidden % heads:
            raise _fail(f"{heads} heads do not divide hidden size {hidden} (and no "
                        "head_dim is given)", file, _lookup(raw, "heads", family)[0])
        head_dim = hidden // heads
    if heads % kv_heads:
        raise _fail(f"{kv_heads} key/value heads do not divide {heads} attention heads",
                    file, "num_key_value_heads")
    experts = get("experts", 0)
    top_k = get("experts_per_token", 0)
    if experts and not top_k:
        raise _fail(f"an MoE config ({experts} experts) needs num_experts_per_tok", file,
                    "num_experts_per_tok")
    if top_k > experts:
        raise _fail(f"{top_k} experts per token exceed the {experts} experts", file,
                    "num_experts_per_tok")
    # Qwen's dense layers among sparse ones (mlp_only_layers, decoder_sparse_step) are
    # not read; the families whose layouts place dense and MoE layers read theirs.
    if family.layout == "uniform" and experts and raw.get("mlp_only_layers"):
        raise _fail("dense layers among MoE layers are not modelled for this family",
                    file, "mlp_only_layers")
    if family.layout == "uniform" and experts and raw.get("decoder_sparse_step", 1) != 1:
        raise _fail("MoE on every n-th layer only is not modelled for this family",
                    file, "decoder_sparse_step")
    window = get("sliding_window")
    if raw.get("use_sliding_window") is False:  # Qwen: the window is defined, not used
        window = None
    kinds = _layout(raw, family, layers, experts, window, file)
    ffns = {ffn for _, ffn in kinds}
    dense_needed = "dense" in ffns and family.gated_mlp
    intermediate = get("intermediate", None if dense_needed else (
        4 * hidden if not family.gated_mlp else 0))
    if intermediate is None:
        raise _fail(f"missing key for a {model_type} model: intermediate_size", file,
                    "intermediate_size")
    mixers = {mixer for mixer, _ in kinds}
    if SLIDING in mixers and not window:
        raise _fail("sliding-window layers need the window", file, "sliding_window")
    chunk = get("chunk")
    tie = raw.get("tie_word_embeddings", family.defaults.get("tie_word_embeddings",
                                                             family.tie_default))
    if not isinstance(tie, bool):
        raise _fail(f"must be true or false, found {excerpt(tie, 40)}", file,
                    "tie_word_embeddings")
    # Roles whose weights the model has: a declared format applies to those only.
    present = {"attention": mixers - {SSM, NONE}, "ssm": mixers & {SSM},
               "mlp": ffns & {"dense"}, "experts": ffns & {MOE}}
    moe_width = get("moe_intermediate", intermediate) if experts else 0
    shared = get("shared_intermediate", 0)
    if family.layout == "llama4" and experts:
        shared = moe_width               # Llama 4: one shared expert per MoE layer
    if _lookup(raw, "shared_experts", family)[0] is not None:
        shared = get("shared_experts") * moe_width   # DeepSeek: n_shared_experts
    return ModelConfig(
        name=name or model_type, model_type=model_type, family=family, hidden=hidden,
        layers=layers, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, intermediate=intermediate, vocab=get("vocab"),
        tie_embeddings=tie, max_positions=get("max_positions"),
        max_positions_key=_lookup(raw, "max_positions", family)[0]
        or "max_position_embeddings",
        sliding_window=window if family.layout == "uniform" or SLIDING in mixers
        else None,
        experts=experts, experts_per_token=top_k, moe_intermediate=moe_width,
        shared_intermediate=shared, source=file,
        layer_kinds=() if family.layout == "uniform" else kinds,
        chunk=chunk if CHUNKED in mixers else None,
        mla=mla, ssm=ssm,
        attn_softcap=_cap(raw, "attn_logit_softcapping", file),
        final_softcap=_cap(raw, "final_logit_softcapping", file),
        weight_formats=tuple(sorted(
            (role, fmt) for role, fmt in declared_formats(raw, file).items()
            if present.get(role) or (role == "shared" and shared and MOE in ffns))),
        vision_params=vision_params(outer, hidden))


def locate_config(path_or_name: str | Path) -> Path:
    """A config path as given if it exists, else the shipped config of that name."""
    refuse_empty_name(path_or_name, "model config")
    path = Path(path_or_name)
    if path_exists(path) or path.suffix == ".json" or "/" in str(path_or_name):
        return path
    if str(path_or_name) in shipped_configs():
        return Path(str(shipped_folder("workload") / SHIPPED_SUBFOLDER
                        / f"{path_or_name}.json"))
    raise AccsimError(f"no such file, and no shipped model config of that name "
                      f"(shipped: {', '.join(shipped_configs())})", file=str(path_or_name))


def load_model_config(path_or_shipped_name: str | Path) -> ModelConfig:
    """Read a config.json by path or shipped name (workloads/hf/NAME.json)."""
    path = locate_config(path_or_shipped_name)
    source = read_source(path)
    raw = parse_json(source.text, file=source.path, max_values=MAX_CONFIG_VALUES)
    return parse_config(raw, file=source.path,
                        name=model_name(text_part(raw) if isinstance(raw, dict) else raw,
                                        path))


# Values a config.json may hold (containers and list items): the shipped ones hold at
# most 36 (qwen3_30b_a3b.json), a hub config a few hundred; more is refused unparsed.
MAX_CONFIG_VALUES = 1_000_000
# Keys a config.json names its model by, in the order they are trusted.
NAME_KEYS = ("_name_or_path", "name")
# Longest model name kept (a hub id is far shorter).
MAX_NAME = 64


def model_name(raw, path: Path) -> str | None:
    """What the workloads are named after: the model, not the file (every Hugging Face
    config is called config.json). The last part of `_name_or_path` (a hub id
    org/model, or the folder it was saved in), else `name`, else the shipped model's
    name; None (the model_type is used) for an unnamed file of the user's. Kept to
    characters that print as themselves."""
    declared = [raw.get(key) for key in NAME_KEYS] if isinstance(raw, dict) else []
    text = next((value.rstrip("/").rsplit("/", 1)[-1] for value in declared
                 if isinstance(value, str) and value.strip("/ ")), None)
    shipped = shipped_folder("workload") / SHIPPED_SUBFOLDER
    if text is None and path.resolve().parent == shipped.resolve():
        text = path.stem
    if text is None:
        return None
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:MAX_NAME] or None
