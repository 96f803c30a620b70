"""LLMServingSim's performance bundle (its format since v1.1.0) from accsim's simulated
operator times.

Checked against casys-kaist/LLMServingSim at commit 5daddb2 (2026-08-21; after tag
v1.1.0): docs/docs/profiler/output-bundle.md (the contract) and
serving/core/trace_generator.py (_load_perf_db, the lookups, the sequence walk).
Layout, relative to a clone's root:

- `profiler/perf/<hardware>/<org>/<model>/<variant>/meta.yaml`, `tp<N>/dense.csv`
  (layer,tokens,time_us), `tp<N>/per_sequence.csv` (layer,sequences,time_us),
  `tp<N>/attention.csv` (prefill_chunk,kv_prefill,n_decode,kv_decode,time_us); times
  are microseconds of one layer on one chip. The simulator interpolates linearly along
  every axis (extrapolating past the top two points), so the grids run from the
  smallest size it asks for to the largest: tokens to --max-tokens, sequences and
  decode batches to --max-batch (default 512), KV sizes to the model's context
  (powers of two, and for decodes one less: a decode reading 2^n keys), with every
  (prefill_chunk, n_decode) corner
  present (a missing one falls back to the nearest profiled pair).
- kv_prefill and kv_decode count the tokens already in the cache (the scheduler's
  num_computed_tokens before the step): the decode row at K reads K + 1 keys.
- Mixed rows (a chunk and decodes in one step) are the sum of the two attentions, as
  accsim's iteration runs them as two operators.
- `configs/model/<org>/<model>.json`: the model's config.json as read (LLMServingSim
  sizes memory and picks profiler/models/<model_type>.yaml from it), and
  `configs/cluster/accsim_<hardware>_<org>_<model>_tp<N>.json`: one instance of the
  chip.

Layer names are those of LLMServingSim's architecture catalogs (profiler/models/
llama.yaml, qwen3.yaml). Times are fused as `accsim run` fuses them
(simulator.export.profile): an operator fused into a GEMM is in that GEMM's row and
counts 0 in its own, so an iteration's rows add up to accsim's. `layernorm` (run twice
a layer) is half the layer's norms and residual adds (vLLM fuses each add into the
RMSNorm after it); the final norm runs over the requests' rows, in `lm_head` where it
is fused there; `embedding` and `sampler` have no accsim operator and are 0 (read back
as 1 ns).
"""

from __future__ import annotations

import json

import yaml

from simulator.errors import AccsimError
from simulator.export.profile import ModelProfile, check_size, grid_points
from simulator.export.tables import Earlier, csv_text

# Dense architectures LLMServingSim ships a catalog for (profiler/models/*.yaml at
# 5daddb2; its MoE catalogs need moe.csv, which this export does not write).
ARCHITECTURES = ("llama", "qwen3")
# LLMServingSim's layer -> the accsim operators (one layer, one chip) it is the time of.
# `layernorm` runs twice a layer: each time half of the layer's two norms and two
# residual adds (vLLM fuses each add into the RMSNorm after it).
DENSE_LAYERS = {
    "embedding": (),
    "layernorm": ("input_norm", "post_attention_norm", "attn_residual", "mlp_residual"),
    "qkv_proj": ("qkv",), "qk_norm": (), "rotary_emb": ("rope",),
    "o_proj": ("o_proj",), "gate_up_proj": ("mlp_gate_up",),
    "act_fn": ("mlp_act", "mlp_gate_mul"), "down_proj": ("mlp_down",),
    "final_layernorm": ("final_norm",),
}
RUNS_PER_LAYER = {"layernorm": 2}
PER_SEQUENCE_LAYERS = {"lm_head": ("lm_head",), "sampler": ()}
# The variant folder is the weights' dtype as its resolve_variant shortens it.
VARIANTS = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "int8": "int8",
            "int4": "int4", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
# Host memory of a node: only read when KV blocks are offloaded to it, which an
# exported run does not do; the values of LLMServingSim's own single-instance example
# (configs/cluster/rtx4090_single_instance.json at 5daddb2).
HOST_MEMORY = {"mem_size": 64, "mem_bw": 50, "mem_latency": 0}


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 6)


def dense_rows(profile: ModelProfile, tokens: list[int]) -> list[list]:
    rows = []
    for count in tokens:
        times = profile.dense(count)
        for layer, names in DENSE_LAYERS.items():
            if layer == "qk_norm" and not profile.config.family.qk_norm:
                continue
            seconds = sum(times[n] for n in names if n in times)
            rows.append([layer, count, _us(seconds / RUNS_PER_LAYER.get(layer, 1))])
    return rows


def per_sequence_rows(profile: ModelProfile, sequences: list[int]) -> list[list]:
    rows = []
    for count in sequences:
        times = profile.times((), [1] * count)  # one token each: logits per request
        for layer, names in PER_SEQUENCE_LAYERS.items():
            seconds = sum(times[n] for n in names)
            rows.append([layer, count, _us(seconds)])
    return rows


def decode_caches(caches: list[int]) -> list[int]:
    """The kv_decode axis: each grid size K and K - 1, so a decode reading exactly a
    power-of-two number of keys (K - 1 cached, the new token) is a row of its own:
    accsim's attention steps up by a tile of keys past such sizes, and linear
    interpolation between the points after two steps would charge the step early."""
    return sorted({k - 1 for k in caches if k > 1} | set(caches))


def attention_rows(profile: ModelProfile, chunks: list[int], batches: list[int],
                   prefill_caches: list[int], decode_caches: list[int]) -> list[list]:
    """Every (prefill_chunk, kv_prefill, n_decode, kv_decode) of the grids: a prefill
    chunk after kv_prefill cached tokens, n_decode decodes after kv_decode each
    (reading kv_decode + 1 keys); 0 chunks or 0 decodes leave that part out."""
    prefill = {(c, k): profile.prefill_attention(c, k)
               for c in chunks for k in [0, *prefill_caches]}
    decode = {(n, k): profile.decode_attention(n, k + 1)
              for n in batches for k in decode_caches}
    rows = [[0, 0, n, k, _us(decode[(n, k)])] for n in batches for k in decode_caches]
    for (chunk, cached), seconds in prefill.items():
        rows.append([chunk, cached, 0, 0, _us(seconds)])
        rows += [[chunk, cached, n, k, _us(seconds + decode[(n, k)])]
                 for n in batches for k in decode_caches]
    return rows


def variant(profile: ModelProfile) -> str:
    dtype = profile.dtype or profile.platform.systolic_array.input_dtypes[0]
    if dtype not in VARIANTS:
        raise AccsimError(f"LLMServingSim names its profiles by a dtype of "
                          f"{', '.join(sorted(set(VARIANTS.values())))}; {dtype} is "
                          "none of them", field="--dtype")
    return VARIANTS[dtype]


def meta_yaml(profile: ModelProfile, *, hardware: str, model_id: str, degrees: list[int],
              max_tokens: int, max_batch: int, max_context: int) -> str:
    """meta.yaml: what the simulator reads (engine_effective's two bounds, for its
    extrapolation warning) and provenance; no skew_fit (no skew measurements, so
    the simulator applies none)."""
    meta = {
        "profiler_version": "accsim-export", "vllm_version": "n/a",
        "gpu": f"n/a (simulated by accsim: platform {profile.platform.name})",
        "hardware": hardware, "model": model_id, "variant": variant(profile),
        "tp_degrees": degrees,
        "engine_effective": {"max_num_batched_tokens": max_tokens,
                             "max_num_seqs": max_batch, "block_size": 16},
        "attention_grid": {"max_kv": max_context, "chunks": f"0, 1-{max_tokens}",
                           "n_decode": f"0, 1-{max_batch}",
                           "kv": f"0, 1-{max_context} x2",
                           "kv_decode": "also each size less one"},
    }
    return yaml.safe_dump(meta, sort_keys=False)


def earlier_degrees(data: bytes | None, shown: str) -> set[int]:
    """The TP degrees an earlier export listed in meta.yaml (none if it wrote none)."""
    if data is None:
        return set()
    try:
        degrees = yaml.safe_load(data)["tp_degrees"]
        return {int(d) for d in degrees}
    except (yaml.YAMLError, KeyError, TypeError, ValueError, RecursionError):
        raise AccsimError("an earlier export's meta.yaml has no tp_degrees list",
                          file=shown, field="--output") from None


def cluster_json(profile: ModelProfile, hardware: str, model_id: str) -> str:
    """One instance of the chip serving the model over T chips (the interconnect's
    per-link bandwidth and hop latency for ASTRA-sim's network)."""
    platform, tp = profile.platform, profile.tp
    link = platform.interconnect
    capacity = platform.offchip.capacity_bytes
    if capacity is None:
        raise AccsimError("LLMServingSim's memory model needs the chip's memory: the "
                          "platform gives no offchip.capacity_bytes", field="--arch")
    config = {
        "num_nodes": 1,
        "link_bw": link.link_bandwidth_gbps if link else 1,
        "link_latency": round(link.link_latency_cycles / platform.clock_ghz, 3)
        if link else 0,
        "nodes": [{"num_instances": 1, "cpu_mem": dict(HOST_MEMORY), "instances": [{
            "model_name": model_id, "hardware": hardware,
            "npu_mem": {"mem_size": capacity / 2**30,
                        "mem_bw": platform.offchip.bandwidth_gbps, "mem_latency": 0},
            "num_npus": tp, "tp_size": tp, "pd_type": None}]}],
    }
    return json.dumps(config, indent=4) + "\n"


def cluster_path(hardware: str, model_id: str, tp: int) -> str:
    return f"configs/cluster/accsim_{hardware}_{model_id.replace('/', '_')}_tp{tp}.json"


def llmservingsim_files(profiles: list[ModelProfile], *, hardware: str, model_id: str,
                        config_text: str, max_tokens: int, max_batch: int,
                        bits: int, attention_bits: int, earlier: Earlier
                        ) -> dict[str, str]:
    """Relative path -> text of the bundle of every TP degree in `profiles`."""
    first = profiles[0]
    cfg = first.config
    if cfg.moe:
        raise AccsimError("the LLMServingSim export writes dense models only (its moe.csv "
                          f"is not written); {cfg.name} is a mixture of experts",
                          field="--model")
    if cfg.model_type not in ARCHITECTURES:
        raise AccsimError(f"LLMServingSim has no architecture catalog for model_type "
                          f"{cfg.model_type!r} (profiler/models/ has "
                          f"{', '.join(ARCHITECTURES)} for dense models)", field="--model")
    if "TPU" in hardware:
        raise AccsimError(f"LLMServingSim drops the rotary_emb layer of hardware named "
                          f"with 'TPU' (trace_generator._emit_sequence): name it "
                          f"otherwise, e.g. {hardware.replace('TPU', 'Tpu')!r}",
                          field="--hardware")
    max_context = cfg.max_positions or max_tokens
    tokens, sequences = grid_points(max_tokens, bits), grid_points(max_batch, bits)
    chunks = grid_points(max_tokens, attention_bits)
    batches = grid_points(max_batch, attention_bits)
    caches = grid_points(max_context, 1)
    kv_decode = decode_caches(caches)
    check_size(len(profiles) * (len(tokens) * len(DENSE_LAYERS) + len(sequences)
                                + len(chunks) * (len(caches) + 1)
                                + len(batches) * len(kv_decode)),
               len(profiles) * (len(chunks) * (len(caches) + 1)
                                * (len(batches) * len(kv_decode) + 1)))
    root = f"profiler/perf/{hardware}/{model_id}/{variant(first)}"
    degrees = sorted(earlier_degrees(earlier(f"{root}/meta.yaml"),
                                     earlier.shown(f"{root}/meta.yaml"))
                     | {p.tp for p in profiles})
    files = {f"{root}/meta.yaml": meta_yaml(
        first, hardware=hardware, model_id=model_id, degrees=degrees,
        max_tokens=max_tokens, max_batch=max_batch, max_context=max_context),
        f"configs/model/{model_id}.json": config_text}
    for profile in profiles:
        folder = f"{root}/tp{profile.tp}"
        files[f"{folder}/dense.csv"] = csv_text(["layer", "tokens", "time_us"],
                                                dense_rows(profile, tokens))
        files[f"{folder}/per_sequence.csv"] = csv_text(
            ["layer", "sequences", "time_us"], per_sequence_rows(profile, sequences))
        files[f"{folder}/attention.csv"] = csv_text(
            ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"],
            attention_rows(profile, chunks, batches, caches, kv_decode))
        files[cluster_path(hardware, model_id, profile.tp)] = cluster_json(
            profile, hardware, model_id)
    return files
