"""What happened, collected beside the event loop: per-request times, per-replica busy
time and energy, the number in the system over time, and a spread-out sample of
iteration shapes (for the bucketing error). The policies report to this store; nothing
here changes what they decide."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from simulator.serving.request_rows import RequestRows
from simulator.serving.requests import Request

PERCENTILES = (50, 90, 95, 99)

# Shape of one iteration as sampled: ((new, cached) per prefill chunk, decode contexts).
Shape = tuple[tuple[tuple[int, int], ...], tuple[int, ...]]


@dataclass
class ShapeSample:
    """Every `stride`-th iteration's shape, thinned (stride doubled) whenever the
    sample would exceed twice its limit, so it spans the whole run deterministically."""

    limit: int
    stride: int = 1
    seen: int = 0
    shapes: list[Shape] = field(default_factory=list)

    def offer(self, shape: Callable[[], Shape]) -> None:
        if self.seen % self.stride == 0:
            self.shapes.append(shape())
            if len(self.shapes) >= 2 * self.limit:
                self.shapes = self.shapes[::2]
                self.stride *= 2
        self.seen += 1


class MetricsStore:
    """Observer of one serving run."""

    def __init__(self, replicas: int, *, sample_limit: int = 0):
        self.busy_s = [0.0] * replicas
        self.energy_j = [0.0] * replicas
        self.iterations = [0] * replicas
        # lists the policies append to; the compiled loop's RequestRows after its run
        self.finished: list[Request] | RequestRows = []
        self.dropped: list[Request] | RequestRows = []
        self.arrived = 0
        self.preemptions = 0
        self.swaps = 0  # preemptions whose KV went out to host memory (a host tier)
        self.prefix_cache = None  # PrefixStats, where the trace names shared prefixes
        self.running_max = [0] * replicas
        # Pipelined replicas: seconds summed over stages, and seconds any micro-batch
        # was in the pipeline (their ratio over P is the stages' utilisation).
        self.stage_busy_s = [0.0] * replicas
        self.pipeline_active_s = [0.0] * replicas
        self.sample = ShapeSample(sample_limit)
        # The max_batch values under which every batch-cap check of the run would have
        # answered as it did (lowest, highest): the same run for each of them. None
        # where the policy reads max_batch unobserved (static and dynamic batching).
        self.same_under_max_batch: tuple[int, float] | None = None
        # Each change's time and its +1 (arrival) or -1 (departure): the number in
        # the system over time, integrated after the run (a batch reports its
        # finishes when it ends, later than some of them happened). Lists the
        # policies append to, or the compiled loop's arrays after its run (a
        # search's run has ~2 a request: no tuple, nor float object, for each).
        self.change_times: list[float] | np.ndarray = []
        self.change_deltas: list[int] | np.ndarray = []

    def _count(self, now: float, change: int) -> None:
        self.change_times.append(now)
        self.change_deltas.append(change)

    def on_arrival(self, request: Request, now: float) -> None:
        self.arrived += 1
        self._count(now, +1)

    def on_drop(self, request: Request, now: float) -> None:
        request.dropped = True
        request.finish_s = now
        self.dropped.append(request)
        self._count(now, -1)

    def on_finish(self, request: Request, now: float) -> None:
        request.finish_s = now
        self.finished.append(request)
        self._count(now, -1)

    def on_preempt(self, request: Request) -> None:
        self.preemptions += 1

    def on_swap(self, request: Request) -> None:
        self.swaps += 1

    def on_iterations(self, replica: int, busy_s: float, energy_j: float,
                      count: int, running: int) -> None:
        self.busy_s[replica] += busy_s
        self.energy_j[replica] += energy_j
        self.iterations[replica] += count
        self.running_max[replica] = max(self.running_max[replica], running)

    def on_cap_check(self, running: int, below: bool) -> None:
        """A continuous-batching check `running < max_batch` answered `below`: the
        answer is the same for every max_batch above `running` (below) or at most
        `running` (not below)."""
        lowest, highest = self.same_under_max_batch or (1, float("inf"))
        self.same_under_max_batch = (max(lowest, running + 1), highest) if below else \
            (lowest, min(highest, running))

    def on_stage_busy(self, replica: int, seconds: float) -> None:
        self.stage_busy_s[replica] += seconds

    def on_pipeline_active(self, replica: int, seconds: float) -> None:
        self.pipeline_active_s[replica] += seconds

    def pipeline_bubble_fraction(self, stages: int) -> float | None:
        """The stages' idle share of the time a micro-batch was in the pipeline. A share
        is >= 0: a pipeline with no bubble sums its stages' busy time in another order
        than its active time, which can round 1 - busy / (stages x active) to -4e-16,
        a negative physical value a reader (verify's strict models) refuses; so 0."""
        active = sum(self.pipeline_active_s)
        if active <= 0:
            return None
        return max(0.0, 1.0 - sum(self.stage_busy_s) / (stages * active))

    def offer_shape(self, shape: Callable[[], Shape]) -> None:
        if self.sample.limit:
            self.sample.offer(shape)

    @property
    def horizon_s(self) -> float:
        """From time 0 to the last arrival or departure (times are >= 0: 0 without
        any)."""
        return float(np.max(self.change_times, initial=0.0))

    @property
    def in_system_area(self) -> float:
        """Integral over time of the number of requests in the system (request-s)."""
        changes = sorted(zip(np.asarray(self.change_times, dtype=np.float64).tolist(),
                             np.asarray(self.change_deltas, dtype=np.int64).tolist()))
        area, count, last = 0.0, 0, 0.0
        for time, change in changes:
            area += count * (time - last)
            count += change
            last = time
        return area


def distribution(values_s: np.ndarray) -> dict[str, float] | None:
    """p50/p90/p95/p99, mean and max, in milliseconds; None when there are none."""
    if values_s.size == 0:
        return None
    ms = values_s * 1e3
    out = {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(ms, PERCENTILES))}
    return out | {"mean": float(ms.mean()), "max": float(ms.max())}


@dataclass(frozen=True)
class RequestTimes:
    """Per completed request (in finishing order of id): latency, TTFT and TPOT."""

    latency_s: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray          # requests with more than one output token
    tpot_index: np.ndarray      # which requests tpot_s belongs to
    output_tokens: np.ndarray

    @classmethod
    def of(cls, finished: Sequence[Request], *, tokens: bool) -> RequestTimes:
        columns = finished.columns(tokens=tokens) if isinstance(finished, RequestRows) \
            else None  # the compiled loop's rows: read without building records
        if columns is not None:
            arrival, finish, first, outputs = columns
        else:
            done = sorted(finished, key=lambda r: r.id)
            arrival = np.array([r.arrival_s for r in done])
            finish = np.array([r.finish_s for r in done])
            first = np.array([r.first_token_s if tokens else r.finish_s for r in done])
            outputs = np.array([r.output_tokens if tokens else 0 for r in done],
                               dtype=np.int64)
        multi = np.flatnonzero(outputs > 1)
        tpot = (finish[multi] - first[multi]) / (outputs[multi] - 1)
        return cls(finish - arrival, first - arrival, tpot, multi, outputs)
