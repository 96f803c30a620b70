"""ModelConfig + phase -> Workload: the operators of one decoder layer, repeated over the
layers, then the final norm and lm_head (DESIGN.md section 9).

Per layer, in order: input norm; q, k and v projections as one GEMM (GQA: kv_heads x
head_dim columns each for k and v); rotary embedding on q and k (RoPE families); the
attention; o projection; residual add; post-attention norm; then the MLP (gate+up as
one GEMM, the activation, for gated MLPs the gate x up product, down) or the MoE block
(router GEMM, the experts' gate+up, activation, product and down as batched GEMMs over
the experts touched, sized by the busiest expert); residual add. Layers are identical:
each per-layer operator carries `repeat: layers`, so one layer is simulated.

Tokens T: batch x seq in prefill, batch in decode (one new token each), the chunks' and
decodes' sum in a continuous-batching iteration. lm_head runs on the last token of each
sequence in prefill (all tokens when `all_logits`), on every token in decode.

MoE: with T tokens, top-k routing over E experts, the experts touched are min(E, T x k)
and the busiest expert's tokens ceil(T x k / E x imbalance) (at most T, at least 1).
Every touched expert's GEMM is sized by the busiest, so imbalance > 1 costs time.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from simulator.errors import AccsimError
from simulator.frontends.hf.config import ModelConfig
from simulator.inputs.loader import validation_error
from simulator.inputs.workload import Workload


@dataclass(frozen=True)
class Precision:
    """Per-operand dtypes (None: the platform's default) and the MoE imbalance."""

    dtype: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    imbalance: float = 1.0


@dataclass(frozen=True)
class AttentionShape:
    """One attention operator: `batch` requests with the same query and key lengths."""

    batch: int
    q_len: int
    kv_len: int
    causal: bool


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AccsimError(f"must be a positive whole number, found {value!r}",
                              field=name)


def busiest_expert_tokens(cfg: ModelConfig, tokens: int, imbalance: float) -> int:
    """ceil(T x k / E x imbalance), within 1 .. T."""
    busiest = math.ceil(tokens * cfg.experts_per_token / cfg.experts * imbalance)
    return max(1, min(tokens, busiest))


def experts_touched(cfg: ModelConfig, tokens: int) -> int:
    """min(E, T x k): the experts whose weights a step reads."""
    return min(cfg.experts, tokens * cfg.experts_per_token)


class _Builder:
    """Operator dicts in order, each given the precision fields that apply to it."""

    def __init__(self, precision: Precision) -> None:
        self.precision = precision
        self.ops: list[dict] = []

    def add(self, name: str, layer_type: str, kind: str, repeat: int,
            inputs: Sequence[str] = (), **shape) -> None:
        op = {"name": name, "layer_type": layer_type, "kind": kind, **shape}
        if inputs:   # the edges the fusion planner follows (DESIGN.md section 15)
            op["inputs"] = list(inputs)
        p = self.precision
        if p.dtype:
            op["dtype"] = p.dtype
        if kind == "gemm" and p.weight_dtype:
            op["weight_dtype"] = p.weight_dtype
        if kind == "attention" and p.kv_dtype:
            op["kv_dtype"] = p.kv_dtype
        if kind == "attention":  # an LLM's K and V stay on the chip across steps
            op["kv_cache"] = True
        if repeat > 1:
            op["repeat"] = repeat
            if kind == "gemm":  # one repeat per layer, each with its own weights
                op["weights"] = "distinct"
        self.ops.append(op)

    def gemm(self, name: str, layer_type: str, m: int, n: int, k: int, repeat: int,
             batch: int = 1, inputs: Sequence[str] = ()) -> None:
        shape = {"batch": batch} if batch > 1 else {}
        self.add(name, layer_type, "gemm", repeat, inputs, **shape, m=m, n=n, k=k)


def _mlp(b: _Builder, cfg: ModelConfig, prefix: str, label: str, tokens: int,
         width: int, repeat: int, experts: int = 1) -> str:
    """gate+up (or up), activation, gate x up, down; `experts` batched instances.
    Returns the name of the down projection (the MLP's output)."""
    gated = cfg.family.gated_mlp
    b.gemm(f"{prefix}gate_up", f"{label}.gate_up" if experts == 1 else label, tokens,
           (2 if gated else 1) * width, cfg.hidden, repeat, experts,
           inputs=["post_attention_norm"])
    act_label = f"{label}.act" if experts == 1 else label
    b.add(f"{prefix}act", act_label, "elementwise", repeat, [f"{prefix}gate_up"],
          elements=experts * tokens * width, op="silu" if gated else "gelu")
    if gated:  # silu(gate) x up: the up half read from gate_up's output
        b.add(f"{prefix}gate_mul", act_label, "elementwise", repeat,
              [f"{prefix}act", f"{prefix}gate_up"], elements=experts * tokens * width,
              op="mul")
    b.gemm(f"{prefix}down", f"{label}.down" if experts == 1 else label, tokens,
           cfg.hidden, width, repeat, experts,
           inputs=[f"{prefix}gate_mul" if gated else f"{prefix}act"])
    return f"{prefix}down"


def _norm(b: _Builder, name: str, rows: int, cfg: ModelConfig, repeat: int,
          inputs: Sequence[str] = ()) -> None:
    b.add(name, "norm", "norm", repeat, inputs, rows=rows, cols=cfg.hidden)


def _layers(b: _Builder, cfg: ModelConfig, tokens: int,
            attention: Sequence[AttentionShape]) -> None:
    """One decoder layer over `tokens`, each operator repeated over the layers."""
    n, d = cfg.layers, cfg.head_dim
    # Edges (`inputs`) within the layer; the layer's input (the previous layer's
    # residual, or the embeddings) is outside the list, so it is not named.
    _norm(b, "input_norm", tokens, cfg, n)
    b.gemm("qkv", "attention.qkv", tokens, (cfg.heads + 2 * cfg.kv_heads) * d,
           cfg.hidden, n, inputs=["input_norm"])
    attn_inputs = ["qkv"]
    if cfg.family.rotary:  # x * cos + rotate(x) * sin on q and k, read with the table
        b.add("rope", "rope", "elementwise", n, ["qkv"],
              elements=tokens * (cfg.heads + cfg.kv_heads) * d, op="mul")
        attn_inputs = ["rope", "qkv"]
    names = []
    for shape in attention:
        name = "attn" if len(attention) == 1 else f"attn_q{shape.q_len}_kv{shape.kv_len}"
        names.append(name)
        b.add(name, "attention.core", "attention", n, attn_inputs, batch=shape.batch,
              heads=cfg.heads, kv_heads=cfg.kv_heads, q_len=shape.q_len,
              kv_len=shape.kv_len, head_dim=d, causal=shape.causal)
    b.gemm("o_proj", "attention.o", tokens, cfg.hidden, cfg.heads * d, n, inputs=names)
    b.add("attn_residual", "residual", "elementwise", n, ["o_proj"],
          elements=tokens * cfg.hidden, op="add")
    _norm(b, "post_attention_norm", tokens, cfg, n, ["attn_residual"])
    if not cfg.moe:
        outputs = [_mlp(b, cfg, "mlp_", "mlp", tokens, cfg.intermediate, n)]
    else:
        b.gemm("router", "moe.router", tokens, cfg.experts, cfg.hidden, n,
               inputs=["post_attention_norm"])
        busiest = busiest_expert_tokens(cfg, tokens, b.precision.imbalance)
        outputs = [_mlp(b, cfg, "experts_", "moe.experts", busiest, cfg.moe_intermediate,
                        n, experts_touched(cfg, tokens))]
        if cfg.shared_intermediate:
            outputs.append(_mlp(b, cfg, "shared_", "mlp", tokens, cfg.shared_intermediate,
                                n))
    b.add("mlp_residual", "residual", "elementwise", n, outputs,
          elements=tokens * cfg.hidden, op="add")


def _workload(cfg: ModelConfig, name: str, description: str, tokens: int,
              logits_rows: int, attention: Sequence[AttentionShape],
              precision: Precision) -> Workload:
    if not precision.imbalance >= 1.0 or not math.isfinite(precision.imbalance):
        raise AccsimError(f"must be a finite number >= 1 (busiest expert over the mean), "
                          f"found {precision.imbalance!r}", field="imbalance")
    b = _Builder(precision)
    _layers(b, cfg, tokens, attention)
    _norm(b, "final_norm", logits_rows, cfg, 1, ["mlp_residual"])
    b.gemm("lm_head", "lm_head", logits_rows, cfg.vocab, cfg.hidden, 1,
           inputs=["final_norm"])
    raw = {"name": name, "description": description, "operators": b.ops}
    try:
        return Workload.model_validate(raw)
    except ValidationError as exc:  # sizes the config and options multiply out of range
        raise validation_error(exc, raw, file=cfg.source) from None


def _shape_note(cfg: ModelConfig) -> str:
    moe = (f", {cfg.experts} experts top-{cfg.experts_per_token}" if cfg.moe else "")
    return (f"{cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads / "
            f"{cfg.kv_heads} KV heads of {cfg.head_dim}{moe}; one layer simulated, "
            f"repeated {cfg.layers}x")


def _prefill_attention(cfg: ModelConfig, batch: int, new: int,
                       cached: int) -> AttentionShape:
    """A chunk of `new` tokens after `cached` ones: causal over all of them, unless the
    sliding window is shorter, when each query reads the window (a band, costed as
    full attention over window keys)."""
    keys = cfg.kv_len(new + cached)
    # One query sees every key it may: causal and full attention are the same work.
    return AttentionShape(batch, new, keys, new > 1 and new <= keys)


def prefill_workload(cfg: ModelConfig, *, batch: int, seq: int, dtype: str | None = None,
                     weight_dtype: str | None = None, kv_dtype: str | None = None,
                     imbalance: float = 1.0, all_logits: bool = False) -> Workload:
    """The prompt of `seq` tokens for `batch` sequences: K and V written for all of
    them, logits for the last token of each (every token with `all_logits`)."""
    _check_positive(batch=batch, seq=seq)
    precision = Precision(dtype, weight_dtype, kv_dtype, imbalance)
    return _workload(cfg, f"{cfg.name}_prefill_b{batch}_s{seq}",
                     f"{cfg.name} prefill, batch {batch}, prompt {seq} tokens: "
                     f"{_shape_note(cfg)}.", batch * seq,
                     batch * seq if all_logits else batch,
                     [_prefill_attention(cfg, batch, seq, 0)], precision)


def decode_workload(cfg: ModelConfig, *, batch: int, context: int,
                    dtype: str | None = None, weight_dtype: str | None = None,
                    kv_dtype: str | None = None, imbalance: float = 1.0) -> Workload:
    """One new token for each of `batch` sequences holding `context` tokens of KV cache
    (the new token's included): attention reads min(context, window) keys."""
    _check_positive(batch=batch, context=context)
    precision = Precision(dtype, weight_dtype, kv_dtype, imbalance)
    return _workload(cfg, f"{cfg.name}_decode_b{batch}_c{context}",
                     f"{cfg.name} decode, batch {batch}, context {context} tokens: "
                     f"{_shape_note(cfg)}.", batch, batch,
                     [AttentionShape(batch, 1, cfg.kv_len(context), False)], precision)


def iteration_workload(cfg: ModelConfig, *, prefill: Sequence[tuple[int, int]],
                       decode: Sequence[int], dtype: str | None = None,
                       weight_dtype: str | None = None, kv_dtype: str | None = None,
                       imbalance: float = 1.0) -> Workload:
    """One continuous-batching iteration: each prefill item is one request's chunk as
    (new_tokens, cached_tokens), each decode item one request's context length.
    Projections and MLP run over all the iteration's tokens; attention per request with
    its own lengths, identical shapes grouped into one operator's batch; lm_head on one
    token per request."""
    for index, (new, cached) in enumerate(prefill):
        _check_positive(**{f"prefill[{index}].new_tokens": new})
        if isinstance(cached, bool) or not isinstance(cached, int) or cached < 0:
            raise AccsimError(f"must be a whole number >= 0, found {cached!r}",
                              field=f"prefill[{index}].cached_tokens")
    for index, context in enumerate(decode):
        _check_positive(**{f"decode[{index}]": context})
    if not prefill and not decode:
        raise AccsimError("an iteration needs at least one prefill or decode request",
                          field="prefill")
    shapes: Counter = Counter()
    for new, cached in prefill:
        shape = _prefill_attention(cfg, 1, new, cached)
        shapes[(shape.q_len, shape.kv_len, shape.causal)] += 1
    for context in decode:
        shapes[(1, cfg.kv_len(context), False)] += 1
    attention = [AttentionShape(count, q, kv, causal)
                 for (q, kv, causal), count in sorted(shapes.items())]
    tokens = sum(new for new, _ in prefill) + len(decode)
    requests = len(prefill) + len(decode)
    precision = Precision(dtype, weight_dtype, kv_dtype, imbalance)
    return _workload(cfg, f"{cfg.name}_iteration_p{len(prefill)}_d{len(decode)}_t{tokens}",
                     f"{cfg.name} iteration: {len(prefill)} prefill chunks, "
                     f"{len(decode)} decodes, {tokens} tokens: {_shape_note(cfg)}.",
                     tokens, requests, attention, precision)
