"""The deployment search's serving runs kept by content (DESIGN.md section 18): each
(deployment point, offered rate) run's summary - percentiles, throughput, tokens,
energy, preemptions - less what the SLA decides, keyed by the sha256 of everything the
run depends on (the point's inputs without the SLA, the rate search's start and the
pruning, plus the rate). A search whose SLA changed searches over the runs already
simulated, judging each against the new SLA from its stored percentiles, and simulates
only the rates it lacks.

Goodput counts the requests that each meet the SLA's targets, so a run also keeps what
goodput judges of each completed request (its latency, TTFT and TPOT, as exact
float64) and its duration: any SLA's goodput is counted from them, as the run itself
would count it. A run stored without them (by an earlier accsim) keeps the goodput of
the SLAs it was judged under; where the SLA capacity found is such a run, that one run
is simulated again (runs are deterministic: the same figures, and its requests)."""

from __future__ import annotations

import base64
import binascii
import copy
import json
from typing import Protocol

import numpy as np

from simulator.serving.metrics import RequestTimes
from simulator.serving.serve import Setup, simulate_serving, summary
from simulator.serving.sla import goodput_columns, goodput_rps, sla_report
from simulator.serving.spec import ServeSpec
from simulator.sweep.power_budget import BUDGET_KEY, judged
from simulator.sweep.rows import stored_key

# The summary's figures the SLA decides (every other figure is the run's alone).
SLA_FIGURES = ("sla", "goodput_rps")
# Spec fields a run at a given rate does not depend on.
SEARCH_FIELDS = ("sla", "rate", "find_max_rate", "sweep_rate")
# A point's inputs a run does not depend on: its spec (less SEARCH_FIELDS, kept), the
# pruning and the power budget (judged from the run's figures, as the SLA is).
POINT_ONLY = ("spec", "prune", BUDGET_KEY)


class RunStore(Protocol):
    """Where runs are kept by key (simulator.sweep.deploy_store.PointStore)."""

    def get_run(self, key: str) -> dict | None: ...

    def put_run(self, key: str, inputs: dict, outcome: dict) -> None: ...


def run_inputs(point_inputs: dict, rate: float) -> dict:
    """What one run of a point at `rate` depends on."""
    spec = {k: v for k, v in point_inputs["spec"].items() if k not in SEARCH_FIELDS}
    return {**{k: v for k, v in point_inputs.items() if k not in POINT_ONLY},
            "spec": spec, "rate": rate}


def runs_key(run: dict) -> str:
    """What the runs of one point share: the sha256 of a run's inputs less its rate."""
    return stored_key({k: v for k, v in run.items() if k != "rate"})


class StoredRuns:
    """The runs of one point as a task takes them to any process: those the store
    held (key -> outcome), read back; those simulated kept in `simulated` (key,
    inputs, outcome) for the process that owns the store to write."""

    def __init__(self, stored: dict[str, dict]):
        self.stored = stored
        self.read = 0
        self.simulated: list[tuple[str, dict, dict]] = []

    def get_run(self, key: str) -> dict | None:
        found = self.stored.get(key)
        self.read += found is not None
        return found

    def put_run(self, key: str, inputs: dict, outcome: dict) -> None:
        self.simulated.append((key, inputs, outcome))


def sla_id(sla: dict[str, float]) -> str:
    return json.dumps(sla, sort_keys=True)


def packed_requests(times: RequestTimes, horizon_s: float) -> dict:
    """What goodput judges of a run (goodput_columns), as JSON: each column's float64
    bytes (little-endian) in base64, and the run's duration."""
    return {"horizon_s": horizon_s, **{
        metric: base64.b64encode(column.astype("<f8").tobytes()).decode("ascii")
        for metric, column in goodput_columns(times).items()}}


def unpacked_requests(packed: dict) -> tuple[dict[str, np.ndarray], float]:
    """packed_requests' columns and duration; ValueError saying what is wrong where
    `packed` is not what it writes (a stored row is untrusted)."""
    horizon = packed.get("horizon_s")
    if isinstance(horizon, bool) or not isinstance(horizon, (int, float)) or \
            not np.isfinite(horizon) or horizon < 0:
        raise ValueError("horizon_s is not a duration")
    columns = {}
    for metric in ("latency", "ttft", "tpot"):
        try:
            raw = base64.b64decode(packed[metric], validate=True)
        except (KeyError, TypeError, binascii.Error):
            raise ValueError(f"{metric} is not base64 text") from None
        if len(raw) % 8:
            raise ValueError(f"{metric} is not float64 values")
        columns[metric] = np.frombuffer(raw, dtype="<f8").astype(float)
    if len({column.size for column in columns.values()}) != 1:
        raise ValueError("the columns differ in length")
    return columns, float(horizon)


class SharedRuns:
    """The runs simulated for the points of one group (one setup: platform, plan,
    precision plan), each kept with the max_batch values under which it is the same
    run (MetricsStore.same_under_max_batch: every batch-cap check of the run answers
    alike for them, and a continuous-batching run reads max_batch nowhere else), so
    points that differ only in max_batch and offer the same rate share that run rather
    than simulate it again. Exact by construction: a run shared is the run the point
    would simulate. Per search (passed to each point's PointRuns), never global."""

    def __init__(self):
        # the run's spec less max_batch (its rate included) -> (lowest, highest,
        # figures, request times, horizon)
        self.runs: dict[str, list[tuple]] = {}
        self.shared = 0   # runs a point took from another point's

    @staticmethod
    def _key(spec: ServeSpec) -> str:
        return json.dumps(spec.model_dump(mode="json", exclude={"max_batch"}),
                          sort_keys=True)

    def run(self, setup: Setup, spec: ServeSpec) -> tuple[dict, RequestTimes, float]:
        """The summary, request times and duration of the run of `spec` (at its
        rate): another point's where one holds for spec.max_batch, else simulated."""
        listed = self.runs.setdefault(self._key(spec), [])
        for lowest, highest, figures, times, horizon in listed:
            if lowest <= spec.max_batch <= highest:
                self.shared += 1
                return copy.deepcopy(figures), times, horizon
        served, came = simulate_serving(setup, spec)
        figures = summary(setup, spec, served, came)
        times = RequestTimes.of(served.finished, tokens=setup.llm)
        same = served.same_under_max_batch
        if same is not None:
            listed.append((*same, copy.deepcopy(figures), times, served.horizon_s))
        return figures, times, served.horizon_s


class PointRuns:
    """The runs of one point under one SLA: read back from the store where they were
    simulated before, else taken from `shared` (SharedRuns: another point's same run)
    or simulated, and stored (the store counts them). `budget`: (chips per replica,
    watts) of a power budget each run is judged against beside the SLA
    (simulator.sweep.power_budget), None without one."""

    def __init__(self, setup: Setup, spec: ServeSpec, point_inputs: dict | None,
                 store: RunStore | None, shared: SharedRuns | None = None,
                 budget: tuple[int, float] | None = None):
        self.setup, self.spec, self.store = setup, spec, store
        self.shared = shared
        self.budget = budget
        self.point_inputs = point_inputs
        self.sla = sla_id(spec.sla)
        self.stored: dict[float, dict] = {}   # rate -> the run read back

    def _key(self, rate: float) -> tuple[str, dict]:
        inputs = run_inputs(self.point_inputs, rate)
        return stored_key(inputs), inputs

    def simulate(self, rate: float) -> dict:
        """A fresh run's summary (serve's run_at), stored with this SLA's goodput
        beside any other's and what any SLA's goodput is counted from."""
        at = self.spec.at_rate(rate)
        if self.shared is not None:
            figures, times, horizon = self.shared.run(self.setup, at)
        else:
            served, came = simulate_serving(self.setup, at)
            figures = summary(self.setup, at, served, came)
            times, horizon = RequestTimes.of(served.finished, tokens=self.setup.llm), \
                served.horizon_s
        if self.store is not None:
            key, inputs = self._key(rate)
            before = self.stored.get(rate, {}).get("goodput", {})
            goodput = before | {self.sla: figures["goodput_rps"]}
            self.store.put_run(key, inputs, {
                "figures": {k: v for k, v in figures.items() if k not in SLA_FIGURES},
                "goodput": goodput,
                "requests": packed_requests(times, horizon)})
        return self._judged(figures)

    def _judged(self, figures: dict) -> dict:
        """A run's summary with its SLA report judging the power budget too."""
        if self.budget is None:
            return figures
        return {**figures, "sla": judged(figures["sla"], figures, *self.budget)}

    def __call__(self, rate: float) -> dict:
        """The summary of the run at `rate`, judged against this SLA (its goodput None
        where the run was stored without its requests and only another SLA's goodput:
        see with_goodput)."""
        stored = self.store.get_run(self._key(rate)[0]) if self.store is not None else None
        if stored is None:
            return self.simulate(rate)
        self.stored[rate] = stored
        goodput = stored["goodput"].get(self.sla)
        if goodput is None and "requests" in stored and self.spec.sla:
            goodput = goodput_rps(self.spec.sla, *unpacked_requests(stored["requests"]))
        figures = {**stored["figures"], "goodput_rps": goodput}
        return self._judged({**figures, "sla": sla_report(self.spec.sla, figures)})

    def with_goodput(self, rate: float, figures: dict) -> dict:
        """`figures` of the run at `rate` (less its SLA report) with this SLA's
        goodput, the run simulated again where the store has only another SLA's."""
        if figures.get("goodput_rps") is not None or not self.spec.sla:
            return figures
        return {k: v for k, v in self.simulate(rate).items() if k != "sla"}
