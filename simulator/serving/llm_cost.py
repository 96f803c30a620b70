"""The one place serving meets the Hugging Face frontend (simulator.frontends.hf):
model sizes for the KV cache, and the cost of a continuous-batching iteration.

An iteration's workload (DESIGN.md section 10) runs the projections and MLP over the
iteration's T tokens and attention per request, so its cost is

    dense(T) + sum over prefill chunks of attention(new, cached)
             + sum over decode requests of attention(context)

This module learns which operators of the frontend's workload are per request (those
whose shape changes with a request's cached tokens or context while T stays fixed),
memoises the three parts on bucketed shapes (each kept to `bits` significant bits, so
a shape moves by at most 2^-bits; total tokens exact up to EXACT_TOKENS). `exact` simulates the whole iteration unbucketed; the bucketing error is
measured against it on a sample of the run's iterations.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.config import Platform
from simulator.errors import AccsimError
from simulator.serving.cost import ZERO, Cost, OperatorCosts, simulated_cost
from simulator.serving.kv_cache import kv_capacity_blocks
from simulator.workload import Workload

FRONTEND = "simulator.frontends.hf"
# Shapes used to tell per-request operators from shared ones: equal total tokens,
# different cached tokens (prefill) or context (decode).
PROBE_TOKENS = 64
# An iteration's total tokens are kept exact up to here: the shared GEMMs' cost steps
# at every array-width multiple of the tokens, which a bucket could straddle, and
# iterations this small are few distinct shapes.
EXACT_TOKENS = 4096


def frontend():
    """The Hugging Face frontend module; a clear error where it is missing."""
    try:
        return importlib.import_module(FRONTEND)
    except ModuleNotFoundError:
        raise AccsimError(f"serving an LLM needs the Hugging Face frontend ({FRONTEND}), "
                          "which this installation lacks", field="model") from None


def bucket(value: int, bits: int) -> int:
    """`value` kept to `bits` significant bits, rounded to nearest (exact below 2^bits)."""
    if value < 1 << bits:
        return value
    shift = value.bit_length() - bits
    return ((value + (1 << (shift - 1))) >> shift) << shift


def bucket_stretch(value: int, bits: int) -> tuple[int, int]:
    """value's bucket, and a value above it below which the bucket stays the same (the
    next bucket's first value, or earlier when rounding crosses a power of two)."""
    if value < 1 << bits:
        return value, value + 1
    shift = value.bit_length() - bits
    half = 1 << (shift - 1)
    kept = ((value + half) >> shift) << shift
    return kept, kept + half


def _shape(op) -> object:
    return op.model_copy(update={"name": "op"})


def per_request_positions(fixed: Workload, varied: Workload) -> frozenset[int]:
    """Indices of the operators whose shape differs between two workloads of the same
    total tokens: those belong to a request, the rest are shared by the iteration."""
    if len(fixed.operators) != len(varied.operators):
        raise AccsimError(f"the frontend's iteration workloads for {PROBE_TOKENS} tokens "
                          f"differ in operator count ({len(fixed.operators)} vs "
                          f"{len(varied.operators)}); serving cannot split their cost",
                          field="model")
    return frozenset(i for i, (a, b) in enumerate(zip(fixed.operators, varied.operators))
                     if _shape(a) != _shape(b))


@dataclass(frozen=True)
class ModelFacts:
    """What serving needs to know of a model besides iteration costs."""

    name: str
    weight_bytes: int
    kv_bytes_per_token: int


class LlmCost:
    """TokenCost of one model on one platform (see the module docstring)."""

    def __init__(self, platform: Platform, config, *, dtype: str | None, bits: int,
                 hf=None):
        self.platform = platform
        self.config = config
        self.dtype = dtype
        self.bits = bits
        self.hf = hf or frontend()
        self.costs = OperatorCosts(platform)
        p = PROBE_TOKENS
        self._prefill_own = per_request_positions(self._workload([(p, 0)], ()),
                                                  self._workload([(p, p)], ()))
        self._decode_own = per_request_positions(self._workload((), [p]),
                                                 self._workload((), [2 * p]))
        self._dense: dict[int, Cost] = {}
        self._prefill: dict[tuple[int, int], Cost] = {}
        self._decode: dict[int, Cost] = {}

    def _workload(self, prefill, decode) -> Workload:
        return self.hf.iteration_workload(self.config, prefill=list(prefill),
                                          decode=list(decode), dtype=self.dtype)

    def _part(self, workload: Workload, positions: frozenset[int], own: bool) -> Cost:
        ops = [op for i, op in enumerate(workload.operators) if (i in positions) == own]
        return self.costs.workload(workload.model_copy(update={"operators": ops})) \
            if ops else ZERO

    def _tokens(self, tokens: int) -> int:
        return tokens if tokens <= EXACT_TOKENS else bucket(tokens, self.bits)

    def dense(self, tokens: int) -> Cost:
        """Shared operators (projections, MLP, norms, head) over `tokens` tokens."""
        found = self._dense.get(tokens)
        if found is None:
            found = self._part(self._workload([(tokens, 0)], ()), self._prefill_own, False)
            self._dense[tokens] = found
        return found

    def prefill_attention(self, new: int, cached: int) -> Cost:
        key = (new, cached)
        found = self._prefill.get(key)
        if found is None:
            found = self._part(self._workload([key], ()), self._prefill_own, True)
            self._prefill[key] = found
        return found

    def decode_attention(self, context: int) -> Cost:
        found = self._decode.get(context)
        if found is None:
            found = self._part(self._workload((), [context]), self._decode_own, True)
            self._decode[context] = found
        return found

    def iteration(self, prefill: Sequence[tuple[int, int]],
                  decode: Sequence[int]) -> Cost:
        bits = self.bits
        dense = self.dense(self._tokens(len(decode) + sum(new for new, _ in prefill)))
        seconds, energy = dense.seconds, dense.energy_j
        for new, cached in prefill:
            part = self.prefill_attention(bucket(new, bits), bucket(cached, bits))
            seconds += part.seconds
            energy += part.energy_j
        for context in decode:
            part = self._decode.get(bucket(context, bits)) or \
                self.decode_attention(bucket(context, bits))
            seconds += part.seconds
            energy += part.energy_j
        return Cost(seconds, energy)

    def decode_run(self, decode: Sequence[int], iterations: int) -> list[Cost]:
        """Each of `iterations` decode-only iterations, contexts growing by one per
        iteration. A request's bucketed attention cost is constant between bucket
        edges, so it is added once per stretch (a difference array over the run)
        rather than once per iteration."""
        seconds = [0.0] * (iterations + 1)
        energy = [0.0] * (iterations + 1)
        bits, known = self.bits, self._decode
        for context in decode:
            step = 0
            while step < iterations:
                kept, after = bucket_stretch(context + step, bits)
                part = known.get(kept) or self.decode_attention(kept)
                end = min(after - context, iterations)
                seconds[step] += part.seconds
                energy[step] += part.energy_j
                seconds[end] -= part.seconds
                energy[end] -= part.energy_j
                step = end
        dense = self.dense(self._tokens(len(decode)))
        run, s, e = [], 0.0, 0.0
        for step in range(iterations):
            s += seconds[step]
            e += energy[step]
            run.append(Cost(dense.seconds + s, dense.energy_j + e))
        return run

    def exact(self, prefill: Sequence[tuple[int, int]], decode: Sequence[int]) -> Cost:
        """The whole iteration simulated as one workload, nothing bucketed."""
        return simulated_cost(self.platform, self._workload(prefill, decode))

    def reference_workload(self) -> Workload:
        """One decode iteration of one request: what the result's manifest embeds."""
        return self._workload((), [PROBE_TOKENS])


def load_model(name_or_path: str, *, dtype: str | None, hf=None):
    """The model's frontend config and its facts (weights, KV bytes per token)."""
    hf = hf or frontend()
    config = hf.load_model_config(name_or_path)
    stats = hf.model_stats(config, dtype=dtype)
    return config, ModelFacts(str(name_or_path), int(stats.weight_bytes),
                              int(stats.kv_bytes_per_token))


def kv_blocks(platform: Platform, facts: ModelFacts, block_tokens: int, *,
              file: str | None) -> int:
    """KV blocks one replica holds: HBM capacity minus the weights."""
    capacity = getattr(platform.offchip, "capacity_bytes", None)
    if capacity is None:
        raise AccsimError(f"serving {facts.name} needs the platform's HBM capacity for "
                          "its weights and KV cache", file=file,
                          field="offchip.capacity_bytes")
    return kv_capacity_blocks(capacity, facts.weight_bytes, facts.kv_bytes_per_token,
                              block_tokens, file=file)


def bucketing_error(cost: LlmCost, shapes) -> dict:
    """Bucketed iteration cost against exact simulation on sampled shapes: relative
    error of each iteration (mean and max of its magnitude) and of their summed time."""
    errors, bucketed_total, exact_total = [], 0.0, 0.0
    for prefill, decode in shapes:
        exact = cost.exact(prefill, decode).seconds
        approx = cost.iteration(prefill, decode).seconds
        errors.append(abs(approx - exact) / exact)
        bucketed_total += approx
        exact_total += exact
    if not errors:
        return {"bits": cost.bits, "samples": 0, "mean_abs_error": None,
                "max_abs_error": None, "total_time_error": None}
    return {"bits": cost.bits, "samples": len(errors),
            "mean_abs_error": sum(errors) / len(errors), "max_abs_error": max(errors),
            "total_time_error": bucketed_total / exact_total - 1.0}
