"""The one place serving meets the Hugging Face frontend (simulator.frontends.hf):
model sizes for the KV cache, and the cost of a continuous-batching iteration.

An iteration's workload (DESIGN.md section 10) runs the projections and MLP over the
iteration's T tokens and attention per request, so its cost is

    dense(T) + sum over prefill chunks of attention(new, cached)
             + sum over decode requests of variable(context) + fixed(longest context)

A decode batch's attention runs as one launch per layer (a paged, ragged decode
kernel): its K/V reads and products add up request by request, its fixed costs
(dispatch, the first K/V tile's load, the pipeline's fill and last products) are paid
once. Both parts come from the model: a request's own operators at one context cost
single(c), two requests' at that context (which the frontend runs as one operator of
batch 2, its K/V head groups chained in one program) pair(c); variable(c) = pair(c) -
single(c) is what one more request adds, fixed(c) = 2 single(c) - pair(c) what it does
not (0 where a frontend runs each request's attention apart). The fixed part is priced
at the batch's longest context.

This module learns which operators of the frontend's workload are per request (those
whose shape changes with a request's cached tokens or context while T stays fixed),
simulates the parts only at grid points (numbers with at most `bits`
significant bits: every integer below 2^bits, then 2^(bits-1) points per octave) and
interpolates linearly between them (bilinearly over new and cached tokens): the parts
are smooth in their sizes, and a run touches a few hundred grid points instead of
thousands of distinct shapes. `exact` simulates the whole iteration as one workload;
the bucketing error is measured against it on a sample of the run's iterations.
On a multi-chip replica whose plan overlaps collectives with compute, each part is
its units' sum less the collective time the overlap hides in them
(simulator.system.serving.hidden_seconds), as in a run of the same operators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.frontends import hf as hf_frontend
from simulator.frontends.hf.quantization import fit_formats
from simulator.invocation import call_cycles
from simulator.mapping.plan import Mapping
from simulator.search.fusion import fusion_mode
from simulator.search.default import SearchCache
from simulator.serving.iteration_cost import (ZERO, Cost, CostRun, OperatorCosts, UnitCosts,
                                    call_cost, sets_tilings, simulated_cost)
from simulator.serving.cost_cache import CostCache, cache_key, model_identity
from simulator.serving.kv_cache import kv_capacity_blocks
from simulator.serving.precision import ServingPrecision
from simulator.system.serving import hidden_seconds
from simulator.inputs.workload import Workload

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


Pair = tuple[float, float]  # seconds and joules of one part at one size
# A decode run's stretch of one request between grid points: the iterations [start,
# end) from the run's start, and the start values and slopes (seconds, joules) of its
# attention cost (variable or fixed part) over them.
Stretch = tuple[int, int, float, float, float, float]
# The two parts of a decode batch's attention (module docstring), as indices.
VARIABLE, FIXED = 0, 1


def _between(low: Pair, high: Pair, fraction: float) -> Pair:
    """Linear interpolation between two pairs (the arithmetic every lookup uses)."""
    return (low[0] + (high[0] - low[0]) * fraction,
            low[1] + (high[1] - low[1]) * fraction)


def _split(single: Pair, pair: Pair) -> tuple[Pair, Pair]:
    """(variable, fixed) of a decode's attention from single(c) and pair(c) (module
    docstring)."""
    return ((pair[0] - single[0], pair[1] - single[1]),
            (2 * single[0] - pair[0], 2 * single[1] - pair[1]))


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
    is applied to every iteration workload before it is costed; `units`: fusion units'
    costs shared with other cost models (serving.iteration_cost.UnitCosts)."""

    def __init__(self, platform: Platform, config, *, dtype: str | None, bits: int,
                 hf=None, cache: CostCache | None = None, mapping: Mapping | None = None,
                 precision: ServingPrecision | None = None, plan_file: str | None = None,
                 units: UnitCosts | None = None):
        self.platform = platform
        self.config = config
        self.dtype = dtype
        self.bits = bits
        self.hf = hf or hf_frontend
        self.precision = precision
        self.costs = OperatorCosts(platform, mapping, plan_file=plan_file, shared=units)
        p = PROBE_TOKENS
        self._prefill_own = per_request_positions(self._workload([(p, 0)], ()),
                                                  self._workload([(p, p)], ()))
        self._decode_own = per_request_positions(self._workload((), [p]),
                                                 self._workload((), [2 * p]))
        self._pair_own = per_request_positions(self._workload((), [p, p]),
                                               self._workload((), [2 * p, 2 * p]))
        self.cache = cache or CostCache(None)
        self.key = cache_key(self._identity(), self.cache.code)
        stored = self.cache.load(self.key)
        # Grid points (seconds, joules) and whole iterations simulated exactly, as the
        # cache holds them; then memos of interpolated parts (pure functions of those).
        self._dense: dict[int, Pair] = stored["dense"]
        self._prefill: dict[tuple[int, int], Pair] = stored["prefill"]
        self._decode: dict[int, Pair] = stored["decode"]
        self._pair: dict[int, Pair] = stored["decode_pair"]
        self._exact: dict[tuple, Pair] = stored["exact"]
        self._saved = (self._sizes(), len(self._exact))
        self._dense_memo: dict[int, Pair] = {}
        self._decode_memo: dict[int, tuple[Pair, Pair]] = {}
        self._variable_memo: dict[int, Pair] = {}  # the first of each _decode_memo pair
        self._prefill_memo: dict[tuple[int, int], Pair] = {}
        self._call_memo: dict[tuple[int, int], Cost] = {}
        self._stretch_memo: dict[tuple[int, int], list[Stretch]] = {}
        self._steps = np.arange(0)  # 0, 1, ...: iteration numbers of a decode run
        # These memos as the compiled serving loop's tables (loop_tables.KeptTables),
        # kept from run to run.
        self.kept_tables = None

    def _identity(self) -> dict:
        """What the grid costs depend on: the cache key's content."""
        p = PROBE_TOKENS
        probes = [self._workload([(p, p)], ()), self._workload((), [p])]
        frontend = getattr(self.hf, "plan", None)
        identity = {"platform": self.platform.model_dump(mode="json"),
                    "config": model_identity(self.config),
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

    def _sizes(self) -> tuple[int, int, int, int]:
        return len(self._dense), len(self._prefill), len(self._decode), len(self._pair)

    def save(self) -> None:
        """Write the grid points and exact iterations simulated since the last save to
        the cache."""
        sizes = (self._sizes(), len(self._exact))
        if sizes == self._saved:
            return
        self.cache.store(self.key, {"dense": self._dense, "prefill": self._prefill,
                                    "decode": self._decode, "decode_pair": self._pair,
                                    "exact": self._exact})
        self._saved = sizes

    def _frontend_workload(self, prefill, decode) -> Workload:
        """The frontend's iteration workload, before any precision plan."""
        return self.hf.iteration_workload(self.config, prefill=list(prefill),
                                          decode=list(decode), dtype=self.dtype)

    def _workload(self, prefill, decode) -> Workload:
        """The iteration workload that is costed (the plan applied)."""
        workload = self._frontend_workload(prefill, decode)
        return workload if self.precision is None else self.precision.apply(workload)

    def _part(self, workload: Workload, positions: frozenset[int], own: bool) -> Pair:
        """The cost of the fusion units that belong to a request (`own`) or are shared:
        a unit is a request's when any of its operators is (a group is costed whole,
        as a run fuses it)."""
        units = [unit for unit in self.costs.units(workload)
                 if any(i in positions for i in unit) == own]
        if not units:
            return 0.0, 0.0
        cost = self.costs.workload(workload, units) + self._hidden(workload, units)
        return cost.seconds, cost.energy_j

    def _hidden(self, workload: Workload, units: list[tuple[int, ...]]) -> Cost:
        """Minus the collective time the replica plan's overlap hides in `units` (a
        run lists a unit under its first operator); ZERO without overlap."""
        plan = getattr(self.hf, "plan", None)
        mode = getattr(plan, "overlap", "none")
        if mode == "none":
            return ZERO
        ops = workload.operators
        timed = [(ops[unit[0]], self.costs.workload(workload, [unit]).seconds)
                 for unit in units]
        return Cost(-hidden_seconds(mode, timed, self.platform.clock_ghz), 0.0)

    def _dense_at(self, tokens: int) -> Pair:
        """Shared operators (projections, MLP, norms, head) over `tokens` tokens."""
        found = self._dense.get(tokens)
        if found is None:
            found = self._part(self._workload([(tokens, 0)], ()), self._prefill_own, False)
            self._dense[tokens] = found
        return found

    def _prefill_at(self, new: int, cached: int) -> Pair:
        key = (new, cached)
        found = self._prefill.get(key)
        if found is None:
            found = self._part(self._workload([key], ()), self._prefill_own, True)
            self._prefill[key] = found
        return found

    def _single(self, context: int) -> Pair:
        """One decoding request's own operators at `context` (a grid point's
        simulation, or exact's at any context)."""
        return self._part(self._workload((), [context]), self._decode_own, True)

    def _double(self, context: int) -> Pair:
        """Two decoding requests' own operators, both at `context`."""
        return self._part(self._workload((), [context, context]), self._pair_own, True)

    def _decode_at(self, context: int) -> tuple[Pair, Pair]:
        """(variable, fixed) at a grid point (module docstring)."""
        single = self._decode.get(context)
        if single is None:
            single = self._decode[context] = self._single(context)
        pair = self._pair.get(context)
        if pair is None:
            pair = self._pair[context] = self._double(context)
        return _split(single, pair)

    def _dense_cost(self, tokens: int) -> Pair:
        """The shared operators over `tokens` tokens, linear between grid points."""
        found = self._dense_memo.get(tokens)
        if found is None:
            low, high = grid_cell(tokens, self.bits)
            at = self._dense_at
            found = at(low) if low == high else \
                _between(at(low), at(high), (tokens - low) / (high - low))
            self._dense_memo[tokens] = found
        return found

    def _decode_cost(self, context: int) -> tuple[Pair, Pair]:
        """A decoding request's (variable, fixed) attention at `context`, linear
        between grid points (at a point, the fraction 0 / 1: the arithmetic of every
        other context)."""
        found = self._decode_memo.get(context)
        if found is None:
            low, high = grid_cell(context, self.bits)
            fraction = (context - low) / (high - low if high != low else 1)
            (v0, f0), (v1, f1) = self._decode_at(low), self._decode_at(high)
            found = self._decode_memo[context] = (_between(v0, v1, fraction),
                                                  _between(f0, f1, fraction))
            self._variable_memo[context] = found[VARIABLE]
        return found

    def _prefill_cost(self, new: int, cached: int) -> Pair:
        """A prefill chunk's attention: bilinear between the grid points around
        (new, cached) (memoised: runs meet the same chunks again and again)."""
        found = self._prefill_memo.get((new, cached))
        if found is None:
            found = self._prefill_memo[new, cached] = self._prefill_between(new, cached)
        return found

    def _prefill_between(self, new: int, cached: int) -> Pair:
        n0, n1 = grid_cell(new, self.bits)
        c0, c1 = grid_cell(cached, self.bits)
        at = self._prefill_at
        across = (new - n0) / (n1 - n0) if n1 != n0 else 0.0
        low = at(n0, c0) if n1 == n0 else _between(at(n0, c0), at(n1, c0), across)
        if c1 == c0:
            return low
        high = at(n0, c1) if n1 == n0 else _between(at(n0, c1), at(n1, c1), across)
        return _between(low, high, (cached - c0) / (c1 - c0))

    def iteration(self, prefill: Sequence[tuple[int, int]],
                  decode: Sequence[int]) -> Cost:
        """The dense part, then each chunk's attention and each decode's variable part
        added left to right, the decode batch's fixed part at its longest context, then
        the call."""
        tokens = len(decode) + sum(new for new, _ in prefill)
        seconds, energy = self._dense_memo.get(tokens) or self._dense_cost(tokens)
        memo = self._prefill_memo  # (the memos read first: the hot path of a run)
        for new, cached in prefill:
            part_s, part_e = memo.get((new, cached)) or self._prefill_cost(new, cached)
            seconds += part_s
            energy += part_e
        memo = self._variable_memo
        for context in decode:
            part_s, part_e = memo.get(context) or self._decode_cost(context)[VARIABLE]
            seconds += part_s
            energy += part_e
        if decode:
            fixed_s, fixed_e = self._decode_cost(max(decode))[FIXED]
            seconds += fixed_s
            energy += fixed_e
        requests = len(decode) + len(prefill)
        call = self._call_memo.get((tokens, requests)) or self._call(tokens, requests)
        return Cost(seconds + call.seconds, energy + call.energy_j)

    def _call(self, tokens: int, requests: int) -> Cost:
        """One iteration's call: launch, token ids in, sampled ids out."""
        key = (tokens, requests)
        found = self._call_memo.get(key)
        if found is None:
            found = self._call_memo[key] = call_cost(self.platform, call_cycles(
                self.platform, TOKEN_ID_BYTES * tokens, TOKEN_ID_BYTES * requests))
        return found

    def decode_run(self, decode: Sequence[int], iterations: int) -> CostRun:
        """Each of `iterations` decode-only iterations, contexts growing by one per
        iteration. Between two grid points a request's variable part is linear in its
        context (and so is the batch's fixed part in its longest context, the same
        request's in every iteration), so each such stretch is added once, as a start
        value and a slope, where it starts and taken off where it ends (part by part,
        stretch by stretch); their running sums are constant between those
        iterations, so they are summed once per change (as a running sum over every
        iteration would: the iterations between add 0) and repeated; each iteration's
        cost is then the dense part and the call, plus the sum of starts, plus the sum
        of slopes times the iteration's number. Every part's first stretch starts at
        iteration 0, so that change is summed in one loop over the parts; only parts
        whose first stretch ends within the run add later changes."""
        memo = self._stretch_memo
        first_s = first_e = slope_s = slope_e = 0.0  # the change at iteration 0
        crossing = []  # (part, context) whose first stretch ends within the run
        parts = [(VARIABLE, context) for context in decode]
        if decode:
            parts.append((FIXED, max(decode)))
        for part in parts:
            found = memo.get(part) or self._stretches(part, 1)
            _, end, a_s, a_e, b_s, b_e = found[0]
            first_s += a_s
            first_e += a_e
            slope_s += b_s
            slope_e += b_e
            if end < iterations:
                crossing.append(part)
        if len(self._steps) < iterations:
            self._steps = np.arange(max(iterations, 2 * len(self._steps)))
        steps = self._steps[:iterations]
        dense_s, dense_e = self._dense_cost(len(decode))
        call = self._call(len(decode), len(decode))
        base_s, base_e = dense_s + call.seconds, dense_e + call.energy_j
        if not crossing:  # one stretch for every part: one row for every iteration
            return CostRun(np.array([[base_s + first_s], [base_e + first_e]])
                           + np.array([[slope_s], [slope_e]]) * steps)
        changes = self._later_changes(crossing, iterations)
        starts = [0, *sorted(changes)]
        totals = np.add.accumulate(np.array(
            [(first_s, first_e, slope_s, slope_e)] + [changes[k] for k in starts[1:]]),
            axis=0)  # the running sums, once per change
        totals[:, 0] += base_s
        totals[:, 1] += base_e
        lengths = [end - start for start, end in zip(starts, [*starts[1:], iterations])]
        rows = np.repeat(totals.T, lengths, axis=1)
        return CostRun(rows[:2] + rows[2:] * steps)

    def _later_changes(self, parts: list[tuple[int, int]], iterations: int
                       ) -> dict[int, list[float]]:
        """The changes after iteration 0 (iteration -> change of the start values and
        slopes), part by part, stretch by stretch: a stretch is taken off where it
        ends within the run, the next one added where it starts."""
        changes: dict[int, list[float]] = {}
        for part in parts:
            stretches = self._stretches(part, iterations)
            for index, (start, end, a_s, a_e, b_s, b_e) in enumerate(stretches):
                if start >= iterations:
                    break
                if index:
                    row = changes.get(start)
                    if row is None:
                        row = changes[start] = [0.0, 0.0, 0.0, 0.0]
                    row[0] += a_s
                    row[1] += a_e
                    row[2] += b_s
                    row[3] += b_e
                if end < iterations:  # a stretch ending with the run is never undone
                    row = changes.get(end)
                    if row is None:
                        row = changes[end] = [0.0, 0.0, 0.0, 0.0]
                    row[0] -= a_s
                    row[1] -= a_e
                    row[2] -= b_s
                    row[3] -= b_e
        return changes

    def _stretches(self, part: tuple[int, int], iterations: int) -> list[Stretch]:
        """The stretches of one part (VARIABLE or FIXED, at a context) from its
        context on, covering at least `iterations` iterations (memoised and extended
        as longer runs ask: pure functions of the grid points)."""
        found = self._stretch_memo.setdefault(part, [])
        which, context = part
        end = found[-1][1] if found else 0
        bits, at = self.bits, self._decode_at
        while end < iterations:
            low, high = grid_cell(context + end, bits)
            s0, e0 = at(low)[which]
            if low == high:  # a grid point: this one iteration at its cost
                found.append((end, end + 1, s0, e0, 0.0, 0.0))
            else:
                s1, e1 = at(high)[which]
                span = high - low
                b_s, b_e = (s1 - s0) / span, (e1 - e0) / span
                found.append((end, high - context, s0 + b_s * (context - low),
                              e0 + b_e * (context - low), b_s, b_e))
            end = found[-1][1]
        return found

    def exact(self, prefill: Sequence[tuple[int, int]], decode: Sequence[int]) -> Cost:
        """The whole iteration simulated as one workload, nothing bucketed, less the
        collective time the plan's overlap hides in it, and with its decode batch's
        attention run as one launch (`_launches_beyond_one`); kept in the cost cache by
        its shape, as the grid points are."""
        key = (tuple(tuple(chunk) for chunk in prefill), tuple(decode))
        found = self._exact.get(key)
        if found is None:
            workload = self._workload(prefill, decode)
            units = self.costs.units(workload)
            cost = simulated_cost(self.platform, workload, self.costs.mapping,
                                  searches=self.costs.searches) + \
                self._hidden(workload, units) + \
                self._launches_beyond_one(workload, units, decode).scaled(-1.0)
            found = self._exact[key] = (cost.seconds, cost.energy_j)
        return Cost(*found)

    def _launches_beyond_one(self, workload: Workload, units: list[tuple[int, ...]],
                             decode: Sequence[int]) -> Cost:
        """The fixed parts the whole workload's decode attention pays beyond one launch:
        each q_len-1 attention operator's fixed part (twice its cost less its cost at
        twice its batch: what another request at its contexts would not add), less
        the batch's, at its longest context (module docstring); ZERO without decodes
        or where the frontend runs no such operator."""
        if not decode:
            return ZERO
        ops = workload.operators
        launches = [[ops[i] for i in unit] for unit in units
                    if all(ops[i].kind == "attention" and ops[i].q_len == 1 for i in unit)]
        if not launches:
            return ZERO
        paid = ZERO
        for members in launches:
            once = self.costs.unit(members)
            twice = self.costs.unit([op.model_copy(update={"batch": 2 * op.batch})
                                     for op in members])
            paid = paid + once.scaled(2.0) + twice.scaled(-1.0)
        longest = max(decode)
        _, (fixed_s, fixed_e) = _split(self._single(longest), self._double(longest))
        return paid + Cost(-fixed_s, -fixed_e)

    def reference_workload(self) -> Workload:
        """One decode iteration of one request: what the result's manifest embeds."""
        return self._workload((), [PROBE_TOKENS])

    def shared_names(self) -> frozenset[str]:
        """The names every iteration's operators have (a per-request attention operator
        is named by its shape): what a tiling plan may name."""
        p = PROBE_TOKENS
        return frozenset(op.name for op in self._workload((), [p]).operators) & \
            frozenset(op.name for op in self._workload([(p, p)], [p + 1]).operators)

    @property
    def searches(self) -> SearchCache:
        """The default search's cache its simulations use."""
        return self.costs.searches

    def precision_record(self) -> dict | None:
        """What the plan chose for the reference workload's operators (the result's
        `precision` block), None without a plan."""
        if self.precision is None:
            return None
        return self.precision.record(self._frontend_workload((), [PROBE_TOKENS]))


def load_model(name_or_path: str, *, dtype: str | None, hf=None,
               platform: Platform | None = None):
    """The model's frontend config and its facts (weights, KV bytes per token); on a
    platform, the weight formats config.json declares fall back where its array lacks
    them (simulator.frontends.hf.quantization.fit_formats)."""
    hf = hf or hf_frontend
    config = hf.load_model_config(name_or_path)
    # (a frontend's config without declared formats, as a test's fake one, has none)
    if platform is not None and getattr(config, "weight_formats", ()):
        fitted, _ = fit_formats(dict(config.weight_formats),
                                tuple(platform.systolic_array.input_dtypes))
        config = replace(config, weight_formats=tuple(sorted(fitted.items())))
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
