"""ModelConfig + phase -> Workload: the operators of each kind of decoder layer, each
repeated over the layers of that kind, then the final norm and lm_head (DESIGN.md
sections 9 and 21; the layers' operators: simulator.frontends.hf.layers).

Tokens T: batch x seq in prefill, batch in decode (one new token each), the chunks' and
decodes' sum in a continuous-batching iteration. lm_head runs on the last token of each
sequence in prefill (all tokens when `all_logits`), on every token in decode.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from pydantic import ValidationError

from simulator.errors import AccsimError
from simulator.frontends.hf.config import ModelConfig
from simulator.frontends.hf.layers import (AttentionShape, Builder, Precision, Step,
                                           busiest_expert_tokens, experts_touched,
                                           layer, prefixes)
from simulator.inputs.loader import validation_error
from simulator.inputs.workload import Workload

__all__ = ["AttentionShape", "Precision", "busiest_expert_tokens", "decode_workload",
           "experts_touched", "iteration_workload", "prefill_workload"]


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AccsimError(f"must be a positive whole number, found {value!r}",
                              field=name)


def _workload(cfg: ModelConfig, name: str, description: str, step: Step,
              logits_rows: int, precision: Precision) -> Workload:
    if not precision.imbalance >= 1.0 or not math.isfinite(precision.imbalance):
        raise AccsimError(f"must be a finite number >= 1 (busiest expert over the mean), "
                          f"found {precision.imbalance!r}", field="imbalance")
    b = Builder(cfg, precision)
    last = None
    for kind, count, prefix in prefixes(cfg):
        last = layer(b, kind, count, prefix, step, last)
    b.add("final_norm", "norm", "norm", 1, [last], rows=logits_rows, cols=cfg.hidden)
    b.gemm("lm_head", "lm_head", logits_rows, cfg.vocab, cfg.hidden, 1,
           inputs=["final_norm"], role="lm_head")
    raw = {"name": name, "description": description, "operators": b.ops}
    try:
        return Workload.model_validate(raw)
    except ValidationError as exc:  # sizes the config and options multiply out of range
        raise validation_error(exc, raw, file=cfg.source) from None


def _shape_note(cfg: ModelConfig) -> str:
    moe = (f", {cfg.experts} experts top-{cfg.experts_per_token}" if cfg.moe else "")
    groups = cfg.groups()
    if len(groups) == 1:
        return (f"{cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads / "
                f"{cfg.kv_heads} KV heads of {cfg.head_dim}{moe}; one layer simulated, "
                f"repeated {cfg.layers}x")
    kinds = ", ".join(f"{count} {mixer}/{ffn}" for (mixer, ffn), count in groups)
    return (f"{cfg.layers} layers ({kinds}), hidden {cfg.hidden}, {cfg.heads} heads / "
            f"{cfg.kv_heads} KV heads of {cfg.head_dim}{moe}; one layer of each kind "
            "simulated, repeated over its layers")


def prefill_workload(cfg: ModelConfig, *, batch: int, seq: int, dtype: str | None = None,
                     weight_dtype: str | None = None, kv_dtype: str | None = None,
                     imbalance: float = 1.0, all_logits: bool = False) -> Workload:
    """The prompt of `seq` tokens for `batch` sequences: K and V written for all of
    them, logits for the last token of each (every token with `all_logits`)."""
    _check_positive(batch=batch, seq=seq)
    precision = Precision(dtype, weight_dtype, kv_dtype, imbalance)
    return _workload(cfg, f"{cfg.name}_prefill_b{batch}_s{seq}",
                     f"{cfg.name} prefill, batch {batch}, prompt {seq} tokens: "
                     f"{_shape_note(cfg)}.", Step(Counter({(seq, 0): batch})),
                     batch * seq if all_logits else batch, precision)


def decode_workload(cfg: ModelConfig, *, batch: int, context: int,
                    dtype: str | None = None, weight_dtype: str | None = None,
                    kv_dtype: str | None = None, imbalance: float = 1.0) -> Workload:
    """One new token for each of `batch` sequences holding `context` tokens of KV cache
    (the new token's included): attention reads min(context, window) keys."""
    _check_positive(batch=batch, context=context)
    precision = Precision(dtype, weight_dtype, kv_dtype, imbalance)
    return _workload(cfg, f"{cfg.name}_decode_b{batch}_c{context}",
                     f"{cfg.name} decode, batch {batch}, context {context} tokens: "
                     f"{_shape_note(cfg)}.", Step(Counter({(1, context - 1): batch})),
                     batch, precision)


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
    requests: Counter = Counter()
    for new, cached in prefill:
        requests[(new, cached)] += 1
    for context in decode:
        requests[(1, context - 1)] += 1
    tokens = sum(new for new, _ in prefill) + len(decode)
    requests_count = len(prefill) + len(decode)
    precision = Precision(dtype, weight_dtype, kv_dtype, imbalance)
    return _workload(cfg, f"{cfg.name}_iteration_p{len(prefill)}_d{len(decode)}_t{tokens}",
                     f"{cfg.name} iteration: {len(prefill)} prefill chunks, "
                     f"{len(decode)} decodes, {tokens} tokens: {_shape_note(cfg)}.",
                     Step(requests), requests_count, precision)
