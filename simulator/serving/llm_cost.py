"""The one place serving meets the Hugging Face frontend (simulator.frontends.hf):
model sizes for the KV cache, and the cost of a continuous-batching iteration.

An iteration's workload (DESIGN.md section 10) runs the projections and MLP over the
iteration's T tokens and attention per request, so its cost is

    dense(T) + sum over prefill chunks of attention(new, cached)
             + sum over decode requests of attention(context)

This module learns which operators of the frontend's workload are per request (those
whose shape changes with a request's cached tokens or context while T stays fixed),
simulates the three parts only at grid points (numbers with at most `bits`
significant bits: every integer below 2^bits, then 2^(bits-1) points per octave) and
interpolates linearly between them (bilinearly over new and cached tokens): the parts
are smooth in their sizes, and a run touches a few hundred grid points instead of
thousands of distinct shapes. `exact` simulates the whole iteration as one workload;
the bucketing error is measured against it on a sample of the run's iterations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, is_dataclass

import numpy as np

from simulator.config import Platform
from simulator.errors import AccsimError
from simulator.frontends import hf as hf_frontend
from simulator.invocation import call_cycles
from simulator.mapping.plan import Mapping
from simulator.search.fusion import fusion_mode
from simulator.serving.cost import (ZERO, Cost, CostRun, OperatorCosts, call_cost,
                                    sets_tilings, simulated_cost)
from simulator.serving.cost_cache import CostCache, cache_key
from simulator.serving.kv_cache import kv_capacity_blocks
from simulator.serving.precision import ServingPrecision
from simulator.workload import Workload

# Shapes used to tell per-request operators from shared ones: equal total tokens,
# different cached tokens (prefill) or context (decode).
PROBE_TOKENS = 64


def grid_cell(value: int, bits: int) -> tuple[int, int]:
    """The grid points at or below and above `value` (equal when it is one): numbers
    with at most `bits` significant bits, so a cell spans at most 2^(1-bits) of it."""
    if value < 1 << bits:
        return value, value
    shift = value.bit_length() - bits
    low = (value >> shift) << shift
    return (low, low) if low == value else (low, low + (1 << shift))


def as_pairs(table: dict) -> dict:
    return {key: (cost.seconds, cost.energy_j) for key, cost in table.items()}


def grid_cells(values: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """grid_cell of every value of an integer array."""
    length = np.frexp(values.astype(np.float64))[1]  # bit length (values < 2^53)
    shift = np.maximum(length - bits, 0)
    low = (values >> shift) << shift
    return low, np.where(low == values, low, low + (np.int64(1) << shift))


def _between(low: Cost, high: Cost, fraction: float) -> Cost:
    return Cost(low.seconds + (high.seconds - low.seconds) * fraction,
                low.energy_j + (high.energy_j - low.energy_j) * fraction)


def _shape(op) -> object:
    """An operator's shape: its name and its edges aside (an operator reading a
    request's attention is not the request's for that)."""
    return op.model_copy(update={"name": "op", "inputs": None})


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


# Bytes of one token id: an iteration's call takes its new tokens' ids in and gives
# one sampled id per request out (weights and KV cache stay on the device).
TOKEN_ID_BYTES = 4


class LlmCost:
    """TokenCost of one model on one platform (see the module docstring); `precision`
    is applied to every iteration workload before it is costed."""

    def __init__(self, platform: Platform, config, *, dtype: str | None, bits: int,
                 hf=None, cache: CostCache | None = None, mapping: Mapping | None = None,
                 precision: ServingPrecision | None = None, plan_file: str | None = None):
        self.platform = platform
        self.config = config
        self.dtype = dtype
        self.bits = bits
        self.hf = hf or hf_frontend
        self.precision = precision
        self.costs = OperatorCosts(platform, mapping, plan_file=plan_file)
        p = PROBE_TOKENS
        self._prefill_own = per_request_positions(self._workload([(p, 0)], ()),
                                                  self._workload([(p, p)], ()))
        self._decode_own = per_request_positions(self._workload((), [p]),
                                                 self._workload((), [2 * p]))
        self.cache = cache or CostCache(None)
        self.key = cache_key(self._identity())
        stored = self.cache.load(self.key)
        self._dense: dict[int, Cost] = {k: Cost(*v) for k, v in stored["dense"].items()}
        self._prefill: dict[tuple[int, int], Cost] = {
            k: Cost(*v) for k, v in stored["prefill"].items()}
        self._decode: dict[int, Cost] = {k: Cost(*v) for k, v in stored["decode"].items()}
        self._saved = self._sizes()

    def _identity(self) -> dict:
        """What the grid costs depend on: the cache key's content."""
        config = self.config
        config = asdict(config) if is_dataclass(config) else \
            config.model_dump(mode="json") if hasattr(config, "model_dump") else repr(config)
        p = PROBE_TOKENS
        probes = [self._workload([(p, p)], ()), self._workload((), [p])]
        frontend = getattr(self.hf, "plan", None)
        identity = {"platform": self.platform.model_dump(mode="json"), "config": config,
                    "dtype": self.dtype, "fusion": fusion_mode(self.costs.mapping),
                    "frontend": [getattr(self.hf, "__name__", type(self.hf).__qualname__),
                                 frontend.model_dump(mode="json") if frontend else None],
                    "probes": [w.model_dump(mode="json") for w in probes]}
        heuristic = self.costs.mapping.default.heuristic
        if heuristic is not None:  # keys without these are those of before they existed
            identity["heuristic"] = heuristic
        if self.precision is not None:
            identity["precision"] = self.precision.identity()
        if sets_tilings(self.costs.mapping):  # a tiling plan: by content, not path
            identity["mapping"] = self.costs.mapping.model_dump(mode="json")
        return identity

    def _sizes(self) -> tuple[int, int, int]:
        return len(self._dense), len(self._prefill), len(self._decode)

    def save(self) -> None:
        """Write the grid points simulated since the last save to the cache."""
        if self._sizes() == self._saved:
            return
        self.cache.store(self.key, {"dense": as_pairs(self._dense),
                                    "prefill": as_pairs(self._prefill),
                                    "decode": as_pairs(self._decode)})
        self._saved = self._sizes()

    def _frontend_workload(self, prefill, decode) -> Workload:
        """The frontend's iteration workload, before any precision plan."""
        return self.hf.iteration_workload(self.config, prefill=list(prefill),
                                          decode=list(decode), dtype=self.dtype)

    def _workload(self, prefill, decode) -> Workload:
        """The iteration workload that is costed (the plan applied)."""
        workload = self._frontend_workload(prefill, decode)
        return workload if self.precision is None else self.precision.apply(workload)

    def _part(self, workload: Workload, positions: frozenset[int], own: bool) -> Cost:
        """The cost of the fusion units that belong to a request (`own`) or are shared:
        a unit is a request's when any of its operators is (a group is costed whole,
        as a run fuses it)."""
        units = [unit for unit in self.costs.units(workload)
                 if any(i in positions for i in unit) == own]
        return self.costs.workload(workload, units) if units else ZERO

    def _dense_at(self, tokens: int) -> Cost:
        """Shared operators (projections, MLP, norms, head) over `tokens` tokens."""
        found = self._dense.get(tokens)
        if found is None:
            found = self._part(self._workload([(tokens, 0)], ()), self._prefill_own, False)
            self._dense[tokens] = found
        return found

    def _prefill_at(self, new: int, cached: int) -> Cost:
        key = (new, cached)
        found = self._prefill.get(key)
        if found is None:
            found = self._part(self._workload([key], ()), self._prefill_own, True)
            self._prefill[key] = found
        return found

    def _decode_at(self, context: int) -> Cost:
        found = self._decode.get(context)
        if found is None:
            found = self._part(self._workload((), [context]), self._decode_own, True)
            self._decode[context] = found
        return found

    def dense(self, tokens: int) -> Cost:
        low, high = grid_cell(tokens, self.bits)
        at = self._dense_at
        return at(low) if low == high else \
            _between(at(low), at(high), (tokens - low) / (high - low))

    def decode_attention(self, context: int) -> Cost:
        low, high = grid_cell(context, self.bits)
        at = self._decode_at
        return at(low) if low == high else \
            _between(at(low), at(high), (context - low) / (high - low))

    def prefill_attention(self, new: int, cached: int) -> Cost:
        """Bilinear between the grid points around (new, cached)."""
        n0, n1 = grid_cell(new, self.bits)
        c0, c1 = grid_cell(cached, self.bits)
        at = self._prefill_at
        across = (new - n0) / (n1 - n0) if n1 != n0 else 0.0
        low = at(n0, c0) if n1 == n0 else _between(at(n0, c0), at(n1, c0), across)
        if c1 == c0:
            return low
        high = at(n0, c1) if n1 == n0 else _between(at(n0, c1), at(n1, c1), across)
        return _between(low, high, (cached - c0) / (c1 - c0))

    def _decode_points(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Seconds and energy of decode attention at each of `points` (grid points),
        each distinct point looked up (or simulated) once."""
        distinct, where = np.unique(points, return_inverse=True)
        found = [self._decode_at(p) for p in distinct.tolist()]
        seconds = np.array([c.seconds for c in found], dtype=np.float64)
        energy = np.array([c.energy_j for c in found], dtype=np.float64)
        return seconds[where], energy[where]

    def _decode_parts(self, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """decode_attention of every context, as arrays (same arithmetic as _between)."""
        low, high = grid_cells(contexts, self.bits)
        s0, e0 = self._decode_points(low)
        s1, e1 = self._decode_points(high)
        fraction = (contexts - low) / np.where(high == low, 1, high - low)
        return s0 + (s1 - s0) * fraction, e0 + (e1 - e0) * fraction

    def iteration(self, prefill: Sequence[tuple[int, int]],
                  decode: Sequence[int]) -> Cost:
        dense = self.dense(len(decode) + sum(new for new, _ in prefill))
        seconds, energy = dense.seconds, dense.energy_j
        for new, cached in prefill:
            part = self.prefill_attention(new, cached)
            seconds += part.seconds
            energy += part.energy_j
        if decode:  # added left to right, as one at a time
            part_s, part_e = self._decode_parts(np.asarray(decode, dtype=np.int64))
            seconds = float(np.add.accumulate(np.concatenate(([seconds], part_s)))[-1])
            energy = float(np.add.accumulate(np.concatenate(([energy], part_e)))[-1])
        tokens = len(decode) + sum(new for new, _ in prefill)
        return Cost(seconds, energy) + self._call(tokens, len(decode) + len(prefill))

    def _call(self, tokens: int, requests: int) -> Cost:
        """One iteration's call: launch, token ids in, sampled ids out."""
        return call_cost(self.platform, call_cycles(self.platform, TOKEN_ID_BYTES * tokens,
                                                    TOKEN_ID_BYTES * requests))

    def decode_run(self, decode: Sequence[int], iterations: int) -> CostRun:
        """Each of `iterations` decode-only iterations, contexts growing by one per
        iteration. Between two grid points a request's attention cost is linear in its
        context, so each such stretch is added once, as a start value and a slope
        (difference arrays over the run), rather than once per iteration; every
        request's stretches are found together, one stretch of each per round."""
        contexts = np.asarray(decode, dtype=np.int64)
        step = np.zeros(len(contexts), dtype=np.int64)
        live = np.arange(len(contexts))
        rounds = [tuple(np.zeros(0, dtype=t) for t in (np.int64,) * 3 + (np.float64,) * 4)]
        while live.size:
            context, start = contexts[live], step[live]
            low, high = grid_cells(context + start, self.bits)
            point = low == high  # a grid point: this one iteration at its cost
            end = np.where(point, start + 1, np.minimum(high - context, iterations))
            s0, e0 = self._decode_points(low)
            s1, e1 = self._decode_points(high)
            span = np.where(point, 1, high - low)
            b_s = np.where(point, 0.0, (s1 - s0) / span)
            b_e = np.where(point, 0.0, (e1 - e0) / span)
            a_s = np.where(point, s0, s0 + b_s * (context - low))
            a_e = np.where(point, e0, e0 + b_e * (context - low))
            rounds.append((live, start, end, a_s, b_s, a_e, b_e))
            step[live] = end
            live = live[end < iterations]
        owner, start, end, a_s, b_s, a_e, b_e = (np.concatenate(column)
                                                 for column in zip(*rounds))
        order = np.argsort(owner, kind="stable")  # request by request, stretch by stretch
        at = np.empty(2 * len(order), dtype=np.int64)
        at[0::2], at[1::2] = start[order], end[order]

        def running(values: np.ndarray) -> np.ndarray:
            change = np.zeros(iterations + 1)
            signed = np.empty(2 * len(order))
            signed[0::2], signed[1::2] = values[order], -values[order]
            np.add.at(change, at, signed)  # in order, as the loop added them
            return np.add.accumulate(change[:iterations])

        dense = self.dense(len(decode)) + self._call(len(decode), len(decode))
        steps = np.arange(iterations)
        return CostRun(dense.seconds + running(a_s) + running(b_s) * steps,
                       dense.energy_j + running(a_e) + running(b_e) * steps)

    def exact(self, prefill: Sequence[tuple[int, int]], decode: Sequence[int]) -> Cost:
        """The whole iteration simulated as one workload, nothing bucketed."""
        return simulated_cost(self.platform, self._workload(prefill, decode),
                              self.costs.mapping)

    def reference_workload(self) -> Workload:
        """One decode iteration of one request: what the result's manifest embeds."""
        return self._workload((), [PROBE_TOKENS])

    def shared_names(self) -> frozenset[str]:
        """The names every iteration's operators have (a per-request attention operator
        is named by its shape): what a tiling plan may name."""
        p = PROBE_TOKENS
        return frozenset(op.name for op in self._workload((), [p]).operators) & \
            frozenset(op.name for op in self._workload([(p, p)], [p + 1]).operators)

    def precision_record(self) -> dict | None:
        """What the plan chose for the reference workload's operators (the result's
        `precision` block), None without a plan."""
        if self.precision is None:
            return None
        return self.precision.record(self._frontend_workload((), [PROBE_TOKENS]))


def load_model(name_or_path: str, *, dtype: str | None, hf=None):
    """The model's frontend config and its facts (weights, KV bytes per token)."""
    hf = hf or hf_frontend
    config = hf.load_model_config(name_or_path)
    stats = hf.model_stats(config, dtype=dtype)
    return config, ModelFacts(str(name_or_path), int(stats.weight_bytes),
                              int(stats.kv_bytes_per_token))


def kv_blocks(platform: Platform, facts: ModelFacts, block_tokens: int, *,
              file: str | None, weights_elsewhere: bool = False) -> int:
    """KV blocks one replica holds: HBM capacity minus the weights (the whole capacity
    in a what-if whose weights do not fit and were let through by --ignore-capacity:
    they are taken to live elsewhere)."""
    capacity = getattr(platform.offchip, "capacity_bytes", None)
    if capacity is None:
        raise AccsimError(f"serving {facts.name} needs the platform's HBM capacity for "
                          "its weights and KV cache", file=file,
                          field="offchip.capacity_bytes")
    weights = 0 if weights_elsewhere else facts.weight_bytes
    return kv_capacity_blocks(capacity, weights, facts.kv_bytes_per_token,
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
