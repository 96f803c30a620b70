"""Reading a Hugging Face `config.json` into a ModelConfig (DESIGN.md section 9).

A config is read as Hugging Face writes it: the keys the model's shape needs are looked
up under each family's spelling and validated, everything else (token ids, rope
scaling, torch_dtype, transformers_version, ...) is ignored. The family (by
`model_type`) says what the config leaves implicit: the MLP's form, the norm, biases,
position embeddings and the default of `tie_word_embeddings`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from simulator.errors import AccsimError
from simulator.inputs.loader import excerpt, parse_json, read_source, shipped_folder

# Where the shipped configs live: workloads/hf/ (package simulator.workloads.hf).
SHIPPED_SUBFOLDER = "hf"


@dataclass(frozen=True)
class Family:
    """What a model_type implies beyond its config keys."""

    gated_mlp: bool          # gate and up projections, SiLU (else one up, GeLU)
    norm: str                # "rms" (scale only) or "layer" (scale and bias)
    rotary: bool             # RoPE on q and k (else learned position embeddings)
    tie_default: bool        # tie_word_embeddings when the config omits it
    qkv_bias: bool           # biases on the q, k, v projections
    dense_bias: bool         # biases on every projection (GPT-2)
    qk_norm: bool            # RMSNorm on each head's q and k (Qwen3)


_LLAMA = Family(True, "rms", True, False, False, False, False)
FAMILIES: dict[str, Family] = {
    "llama": _LLAMA, "mistral": _LLAMA, "mixtral": _LLAMA,
    "qwen2": Family(True, "rms", True, False, True, False, False),
    "qwen2_moe": Family(True, "rms", True, False, True, False, False),
    "qwen3": Family(True, "rms", True, False, False, False, True),
    "qwen3_moe": Family(True, "rms", True, False, False, False, True),
    "gpt2": Family(False, "layer", False, True, True, True, False),
}

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
}


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


def _fail(rule: str, file: str | None, key: str | None = None) -> AccsimError:
    return AccsimError(rule, file=file, field=key)


def _lookup(raw: dict, field: str) -> tuple[str | None, object]:
    """(the key that spells `field`, its value), or (None, None) when absent or null."""
    for key in SPELLINGS[field]:
        if raw.get(key) is not None:
            return key, raw[key]
    return None, None


def _positive(raw: dict, field: str, file: str | None, default=None) -> int | None:
    key, value = _lookup(raw, field)
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


def parse_config(raw: dict, *, file: str | None = None, name: str | None = None
                 ) -> ModelConfig:
    """A ModelConfig from the parsed JSON object of a config.json; one AccsimError
    naming the key for a missing key, a bad value or an inconsistent shape."""
    if not isinstance(raw, dict):
        raise _fail(f"expected a JSON object, found {type(raw).__name__}", file)
    absent = [f for f in REQUIRED if _lookup(raw, f)[0] is None]
    missing = [" or ".join(SPELLINGS[f]) for f in absent]
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
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
    family = FAMILIES[model_type]
    hidden = _positive(raw, "hidden", file)
    heads = _positive(raw, "heads", file)
    kv_heads = _positive(raw, "kv_heads", file, default=heads)
    head_dim = _positive(raw, "head_dim", file)
    if head_dim is None:
        if hidden % heads:
            raise _fail(f"{heads} heads do not divide hidden size {hidden} (and no "
                        "head_dim is given)", file, _lookup(raw, "heads")[0])
        head_dim = hidden // heads
    if heads % kv_heads:
        raise _fail(f"{kv_heads} key/value heads do not divide {heads} attention heads",
                    file, "num_key_value_heads")
    experts = _positive(raw, "experts", file, default=0)
    top_k = _positive(raw, "experts_per_token", file, default=0)
    if experts and not top_k:
        raise _fail(f"an MoE config ({experts} experts) needs num_experts_per_tok", file,
                    "num_experts_per_tok")
    if top_k > experts:
        raise _fail(f"{top_k} experts per token exceed the {experts} experts", file,
                    "num_experts_per_tok")
    # Layers must be identical (one is simulated and repeated): no dense layers among
    # sparse ones (Qwen's mlp_only_layers, decoder_sparse_step).
    if experts and raw.get("mlp_only_layers"):
        raise _fail("dense layers among MoE layers are not modelled (accsim simulates "
                    "one layer, repeated)", file, "mlp_only_layers")
    if experts and raw.get("decoder_sparse_step", 1) != 1:
        raise _fail("MoE on every n-th layer only is not modelled (accsim simulates one "
                    "layer, repeated)", file, "decoder_sparse_step")
    intermediate = _positive(raw, "intermediate", file,
                             default=None if family.gated_mlp else 4 * hidden)
    if intermediate is None:
        raise _fail(f"missing key for a {model_type} model: intermediate_size", file,
                    "intermediate_size")
    tie = raw.get("tie_word_embeddings", family.tie_default)
    if not isinstance(tie, bool):
        raise _fail(f"must be true or false, found {excerpt(tie, 40)}", file,
                    "tie_word_embeddings")
    window = _positive(raw, "sliding_window", file)
    if raw.get("use_sliding_window") is False:  # Qwen: the window is defined, not used
        window = None
    return ModelConfig(
        name=name or model_type, model_type=model_type, family=family, hidden=hidden,
        layers=_positive(raw, "layers", file), heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, intermediate=intermediate, vocab=_positive(raw, "vocab", file),
        tie_embeddings=tie, max_positions=_positive(raw, "max_positions", file),
        max_positions_key=_lookup(raw, "max_positions")[0] or "max_position_embeddings",
        sliding_window=window, experts=experts, experts_per_token=top_k,
        moe_intermediate=_positive(raw, "moe_intermediate", file,
                                   default=intermediate) if experts else 0,
        shared_intermediate=_positive(raw, "shared_intermediate", file, default=0),
        source=file)


def shipped_configs() -> list[str]:
    """Names of the config.json files shipped in workloads/hf/."""
    folder = shipped_folder("workload") / SHIPPED_SUBFOLDER
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir()
                  if p.name.endswith(".json"))


def locate_config(path_or_name: str | Path) -> Path:
    """A config path as given if it exists, else the shipped config of that name."""
    path = Path(path_or_name)
    if path.exists() or path.suffix == ".json" or "/" in str(path_or_name):
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
    return parse_config(raw, file=source.path, name=model_name(raw, path))


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
