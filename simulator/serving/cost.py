"""What a batch or an iteration costs: the protocols serving depends on, and the one
function that asks the operator simulator.

Serving never builds tile programs: `simulated_cost` calls
`simulator.simulate.simulate` once per distinct operator shape and keeps the answer, so
a workload's cost is the sum of its operators' (operators run one after another in the
core, and with the default mapping nothing couples neighbours; a test checks the sum
against a whole-workload run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from simulator.config import Platform
from simulator.errors import AccsimError
from simulator.invocation import invocation_cycles, invocation_totals
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.workload import Workload


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

    def decode_run(self, decode: Sequence[int], iterations: int) -> list[Cost]: ...


class DecodeRunByIteration:
    """decode_run for cost models with no faster way: one iteration at a time."""

    def decode_run(self, decode: Sequence[int], iterations: int) -> list[Cost]:
        return [self.iteration((), [c + step for c in decode])
                for step in range(iterations)]


class OperatorCosts:
    """Simulated cost of workloads on one platform, memoised per operator shape."""

    def __init__(self, platform: Platform):
        self.platform = platform
        self._seconds_per_cycle = 1.0 / (platform.clock_ghz * 1e9)
        self._operator = lru_cache(maxsize=None)(self._simulate_operator)

    def _simulate_operator(self, op) -> Cost:
        result = simulate(Inputs(self.platform, Workload(name="serving", operators=[op]),
                                 Mapping()))
        total = result.operators_total  # the call's cost is charged once per batch
        return Cost(total.cycles * self._seconds_per_cycle, total.energy_pj * 1e-12)

    def workload(self, workload: Workload) -> Cost:
        """The workload's cost: the sum of its operators' (names and edges do not
        matter to one operator alone; a list of edges would not hash)."""
        cost = ZERO
        for op in workload.operators:
            cost = cost + self._operator(op.model_copy(update={"name": "op",
                                                               "inputs": None}))
        return cost

    @property
    def distinct_operators(self) -> int:
        return self._operator.cache_info().currsize


def simulated_cost(platform: Platform, workload: Workload) -> Cost:
    """One whole-workload run of the operator simulator (no memo): the reference the
    memoised sums and the bucketing are checked against."""
    total = simulate(Inputs(platform, workload, Mapping())).total
    return Cost(total.cycles / (platform.clock_ghz * 1e9), total.energy_pj * 1e-12)


# The per-sample dimension of each operator kind: what a batch of b requests multiplies.
# A GEMM's `batch` counts independent instances (heads), so scaling it would drop the
# weight reuse a real batch has; its rows `m` are the samples.
SAMPLE_FIELD = {"gemm": "m", "conv2d": "batch", "pool": "batch", "elementwise": "elements",
                "reduction": "rows", "softmax": "rows", "norm": "rows"}


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
    no bucketing, batch sizes are few)."""

    def __init__(self, platform: Platform, workload: Workload, *, file: str | None = None):
        self.platform = platform
        self.workload = workload
        self.file = file
        self._costs = OperatorCosts(platform)
        self.batch = lru_cache(maxsize=None)(self._batch)

    def _batch(self, size: int) -> Cost:
        """The batched workload's operators plus one call (invocation.py)."""
        workload = batched_workload(self.workload, size, file=self.file)
        return self._costs.workload(workload) + call_cost(
            self.platform, invocation_cycles(workload, self.platform))


def call_cost(platform: Platform, cycles: int) -> Cost:
    """One call's launch and host transfers as a Cost (ZERO when it costs nothing)."""
    if not cycles:
        return ZERO
    totals = invocation_totals(cycles, platform)
    return Cost(cycles / (platform.clock_ghz * 1e9), totals.energy_pj * 1e-12)
