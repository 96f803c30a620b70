"""What a batch or an iteration costs: the protocols serving depends on, and the one
function that asks the operator simulator.

Serving never builds tile programs: `OperatorCosts` calls
`simulator.simulate.simulate` once per distinct fusion unit (an operator alone, or a
producer with the epilogue the fusion planner gives it, search.resolve.fusion_units)
and keeps the answer, so a workload's cost is the sum of its units' (operators run one
after another in the core, and with the default mapping nothing else couples
neighbours; a test checks the sum against a whole-workload run under each fusion mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import json
from functools import lru_cache
from typing import Protocol

import numpy as np

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.invocation import invocation_cycles
from simulator.metrics.totals import invocation_totals
from simulator.mapping.plan import Mapping, merged_spec
from simulator.search.default import SearchCache
from simulator.search.resolve import fusion_units, walk_key
from simulator.serving.precision import ServingPrecision
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload


@dataclass(frozen=True)
class Cost:
    """Duration and energy of one batch or iteration on one replica."""

    seconds: float
    energy_j: float

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.seconds + other.seconds, self.energy_j + other.energy_j)

    def scaled(self, factor: float) -> Cost:
        return Cost(self.seconds * factor, self.energy_j * factor)


ZERO = Cost(0.0, 0.0)


@dataclass(frozen=True)
class CostRun:
    """Costs of consecutive iterations as one 2 x n array, seconds then joules (no
    object per iteration); iterating it yields Cost for readers that want them one
    by one."""

    table: np.ndarray

    @property
    def seconds(self) -> np.ndarray:
        return self.table[0]

    @property
    def energy_j(self) -> np.ndarray:
        return self.table[1]

    @classmethod
    def of(cls, costs: Sequence[Cost]) -> CostRun:
        return cls(np.array([[c.seconds for c in costs], [c.energy_j for c in costs]],
                            dtype=np.float64).reshape(2, len(costs)))

    @classmethod
    def joined(cls, runs: Sequence[CostRun]) -> CostRun:
        return cls(np.concatenate([r.table for r in runs], axis=1))

    def __len__(self) -> int:
        return self.table.shape[1]

    def __iter__(self):
        seconds, energy = self.table.tolist()
        return (Cost(s, e) for s, e in zip(seconds, energy))


class BatchCost(Protocol):
    """Plain workloads: a batch of `size` requests, each one inference."""

    def batch(self, size: int) -> Cost: ...


class TokenCost(Protocol):
    """LLMs: one continuous-batching iteration, `prefill` holding (new_tokens,
    cached_tokens) per request chunk and `decode` each decoding request's context
    length; and a run of decode-only iterations in which every context grows by one
    token per iteration (one call, so the event loop need not step per token)."""

    def iteration(self, prefill: Sequence[tuple[int, int]],
                  decode: Sequence[int]) -> Cost: ...

    def decode_run(self, decode: Sequence[int], iterations: int) -> CostRun: ...


class DecodeRunByIteration:
    """decode_run for cost models with no faster way: one iteration at a time."""

    def decode_run(self, decode: Sequence[int], iterations: int) -> CostRun:
        return CostRun.of([self.iteration((), [c + step for c in decode])
                           for step in range(iterations)])


def sets_tilings(mapping: Mapping) -> bool:
    """Whether the plan has entries of its own (by operator name, by layer_type, or
    default fields besides the heuristic), which each unit must carry."""
    return bool(mapping.operators or mapping.layer_types or mapping.default.model_dump(
        exclude_none=True, exclude={"heuristic"}))


class UnitCosts:
    """Fusion units' costs kept by content for several OperatorCosts (a deployment
    search's T x P splits of one platform: a pipeline stage's layers are the units of
    the unsplit replica's): one table per platform and plan by content, so a unit is
    simulated once whichever cost model meets it first, and one default-search cache
    (`searches`) for their simulations. Passed explicitly to the cost models that share
    it; never global."""

    def __init__(self):
        self._tables: dict[str, dict[tuple, Cost]] = {}
        self.searches = SearchCache()

    def table(self, platform: Platform, mapping: Mapping) -> dict[tuple, Cost]:
        """The units' costs on `platform` under `mapping` (a unit's key holds
        neither)."""
        key = json.dumps([platform.model_dump(mode="json"),
                          mapping.model_dump(mode="json")], sort_keys=True)
        return self._tables.setdefault(key, {})


class OperatorCosts:
    """Simulated cost of workloads on one platform under one plan (--mapping, else the
    default mapping: its fusion mode, its open fields filled by its default's heuristic,
    None: the search), memoised per fusion unit's content (its entries for the unit's
    operators included), in a table of its own or one of `shared`'s; the default
    search's results in `searches`, its own or `shared`'s."""

    def __init__(self, platform: Platform, mapping: Mapping | None = None, *,
                 plan_file: str | None = None, shared: UnitCosts | None = None):
        self.platform = platform
        self.mapping = mapping or Mapping()
        self.plan_file = plan_file  # --mapping's file, named by an entry's error
        self._entries = sets_tilings(self.mapping)
        self._seconds_per_cycle = platform.seconds(1.0)
        self._units: dict[tuple, Cost] = {} if shared is None else \
            shared.table(platform, self.mapping)
        self.searches = SearchCache() if shared is None else shared.searches
        self._walks: dict[tuple, list[tuple[int, ...]]] = {}  # walk key -> fusion units

    def _simulate_unit(self, operators: list, plan: Mapping) -> Cost:
        result = simulate(Inputs(self.platform, Workload(name="serving",
                                                         operators=operators), plan),
                          fusion_report=False, searches=self.searches)
        total = result.operators_total  # the call's cost is charged once per batch
        return Cost(total.cycles * self._seconds_per_cycle, total.energy_pj * 1e-12)

    def _unit_plan(self, operators: list, names: dict[str, str]) -> Mapping:
        """The plan of one unit under its canonical names: each operator's merged entry
        (default, layer_type, its own) as its own entry, a `fuse` renamed with it."""
        if not self._entries:
            return self.mapping
        entries = {}
        for op in operators:
            spec = merged_spec(self.mapping, op)
            if spec.fuse in names:
                spec = spec.model_copy(update={"fuse": names[spec.fuse]})
            entries[names[op.name]] = spec
        return self.mapping.model_copy(update={"operators": entries, "layer_types": {},
                                               "row_parallel": []})

    def _unit(self, operators: list) -> Cost:
        """One unit's cost; names are canonical and only edges inside it kept, so equal
        shapes (under equal plan entries) share a simulation wherever they sit. The key
        holds each canonical operator's class and field values (a float tagged as one:
        1 and 1.0 key apart, as their JSON does), and the plan's JSON where it has
        entries: equal keys are equal operators (and plans) field by field."""
        names = {op.name: f"op{i}" for i, op in enumerate(operators)}
        edges = [[names[n] for n in op.inputs or () if n in names] or None
                 for op in operators]
        try:
            plan = self._unit_plan(operators, names)
            rows = []
            for op, inputs in zip(operators, edges):
                fields = op.__dict__.copy()
                fields["name"], fields["inputs"] = names[op.name], inputs and tuple(inputs)
                rows.append((type(op), *[(float, value) if type(value) is float else value
                                         for value in fields.values()]))
            key = tuple(rows)
            if self._entries:
                key += (json.dumps(plan.model_dump(mode="json"), sort_keys=True),)
            found = self._units.get(key)
            if found is None:
                found = self._units[key] = self._simulate_unit(
                    [op.model_copy(update={"name": names[op.name], "inputs": inputs})
                     for op, inputs in zip(operators, edges)], plan)
        except AccsimError as exc:
            raise self._entry_error(exc, names) from None
        return found

    def _entry_error(self, exc: AccsimError, names: dict[str, str]) -> AccsimError:
        """An error of a plan entry, naming the operator as the workload does and the
        plan's file (as `accsim run --mapping` names them); any other error as it is."""
        field = exc.field or ""
        if not self._entries or not field.startswith("operators."):
            return exc
        original = {canonical: name for name, canonical in names.items()}
        name = field.removeprefix("operators.")
        return AccsimError(exc.rule, file=exc.file or self.plan_file,
                           field=f"operators.{original.get(name, name)}")

    def unit(self, operators: list) -> Cost:
        """The cost of `operators` run as one fusion unit (edges to operators outside
        it dropped), memoised as every unit is."""
        return self._unit(operators)

    def units(self, workload: Workload) -> list[tuple[int, ...]]:
        """The workload's fusion units (indices), as a whole run groups them: walked
        once per walk key (search.resolve.walk_key: serving's grid points differ in
        their attention sizes, the walk reads none), the list shared (not to be
        changed)."""
        key = walk_key(workload)
        found = self._walks.get(key)
        if found is None:
            found = self._walks[key] = fusion_units(workload, self.mapping)
        return found

    def workload(self, workload: Workload, units: list[tuple[int, ...]] | None = None
                 ) -> Cost:
        """The workload's cost: the sum of its units' (`units`: a subset of its fusion
        units, default all)."""
        ops = workload.operators
        cost = ZERO
        for unit in self.units(workload) if units is None else units:
            cost = cost + self._unit([ops[i] for i in unit])
        return cost

    @property
    def distinct_operators(self) -> int:
        return len(self._units)


def simulated_cost(platform: Platform, workload: Workload,
                   mapping: Mapping | None = None, *,
                   searches: SearchCache | None = None) -> Cost:
    """One whole-workload run of the operator simulator (no memo of costs) under the
    plan: the reference the memoised sums and the bucketing are checked against
    (`searches`: a cost model's default-search cache, which changes no figure)."""
    total = simulate(Inputs(platform, workload, mapping or Mapping()),
                     fusion_report=False, searches=searches).total
    return Cost(platform.seconds(total.cycles), total.energy_pj * 1e-12)


# The per-sample dimension of each operator kind: what a batch of b requests multiplies.
# A GEMM's `batch` counts independent instances (heads), so scaling it would drop the
# weight reuse a real batch has; its rows `m` are the samples.
SAMPLE_FIELD = {"gemm": "m", "conv2d": "batch", "pool": "batch", "elementwise": "elements",
                "reduction": "rows", "softmax": "rows", "norm": "rows", "scan": "batch"}


def batched_workload(workload: Workload, size: int, *, file: str | None = None) -> Workload:
    """The workload for `size` requests: every operator's sample dimension x size."""
    if size == 1:
        return workload
    operators = []
    for op in workload.operators:
        field = SAMPLE_FIELD[op.kind]
        raw = op.model_dump() | {field: getattr(op, field) * size}
        try:
            operators.append(type(op).model_validate(raw))
        except ValueError as exc:
            raise AccsimError(f"a batch of {size} is too large for this operator: "
                              f"{str(exc).splitlines()[-1].strip()}", file=file,
                              field=f"operators.{op.name}") from None
    return workload.model_copy(update={"operators": operators})


class PlainBatchCost:
    """BatchCost of a plain workload on a platform, memoised per batch size (exact:
    no bucketing, batch sizes are few); `precision` is applied to each batch."""

    def __init__(self, platform: Platform, workload: Workload, *, file: str | None = None,
                 mapping: Mapping | None = None,
                 precision: ServingPrecision | None = None, plan_file: str | None = None):
        self.platform = platform
        self.workload = workload
        self.file = file
        self.precision = precision
        self._costs = OperatorCosts(platform, mapping, plan_file=plan_file)
        self.batch = lru_cache(maxsize=None)(self._batch)

    @property
    def searches(self) -> SearchCache:
        """The default search's cache its simulations use."""
        return self._costs.searches

    def _batch(self, size: int) -> Cost:
        """The batched workload's operators plus one call (invocation.py)."""
        workload = batched_workload(self.workload, size, file=self.file)
        if self.precision is not None:
            workload = self.precision.apply(workload)
        return self._costs.workload(workload) + call_cost(
            self.platform, invocation_cycles(workload, self.platform))


def call_cost(platform: Platform, cycles: int) -> Cost:
    """One call's launch and host transfers as a Cost (ZERO when it costs nothing)."""
    if not cycles:
        return ZERO
    totals = invocation_totals(cycles, platform)
    return Cost(platform.seconds(cycles), totals.energy_pj * 1e-12)
