"""The deployment search's serving runs kept by content (DESIGN.md section 18): each
(deployment point, offered rate) run's summary - percentiles, throughput, tokens,
energy, preemptions - less what the SLA decides, keyed by the sha256 of everything the
run depends on (the point's inputs without the SLA, the rate search's start and the
pruning, plus the rate). A search whose SLA changed searches over the runs already
simulated, judging each against the new SLA from its stored percentiles, and simulates
only the rates it lacks.

Goodput counts the requests that each meet the SLA's targets, so it is kept per SLA:
where the SLA capacity found is a stored run without this SLA's goodput, that one run
is simulated again (runs are deterministic: the same figures, and its requests)."""

from __future__ import annotations

import json
from typing import Protocol

from simulator.serving.curves import run_at
from simulator.serving.serve import Setup
from simulator.serving.sla import sla_report
from simulator.serving.spec import ServeSpec
from simulator.sweep.rows import stored_key

# The summary's figures the SLA decides (every other figure is the run's alone).
SLA_FIGURES = ("sla", "goodput_rps")
# Spec fields a run at a given rate does not depend on.
SEARCH_FIELDS = ("sla", "rate", "find_max_rate", "sweep_rate")


class RunStore(Protocol):
    """Where runs are kept by key (simulator.sweep.deploy_store.PointStore)."""

    def get_run(self, key: str) -> dict | None: ...

    def put_run(self, key: str, inputs: dict, outcome: dict) -> None: ...


def run_inputs(point_inputs: dict, rate: float) -> dict:
    """What one run of a point at `rate` depends on."""
    spec = {k: v for k, v in point_inputs["spec"].items() if k not in SEARCH_FIELDS}
    return {**{k: v for k, v in point_inputs.items() if k not in ("spec", "prune")},
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


class PointRuns:
    """The runs of one point under one SLA: read back from the store where they were
    simulated before, else simulated and stored (the store counts them)."""

    def __init__(self, setup: Setup, spec: ServeSpec, point_inputs: dict | None,
                 store: RunStore | None):
        self.setup, self.spec, self.store = setup, spec, store
        self.point_inputs = point_inputs
        self.sla = sla_id(spec.sla)
        self.stored: dict[float, dict] = {}   # rate -> the run read back

    def _key(self, rate: float) -> tuple[str, dict]:
        inputs = run_inputs(self.point_inputs, rate)
        return stored_key(inputs), inputs

    def simulate(self, rate: float) -> dict:
        """A fresh run's summary, stored with this SLA's goodput beside any other's."""
        figures = run_at(self.setup, self.spec, rate)
        if self.store is not None:
            key, inputs = self._key(rate)
            before = self.stored.get(rate, {}).get("goodput", {})
            goodput = before | {self.sla: figures["goodput_rps"]}
            self.store.put_run(key, inputs, {
                "figures": {k: v for k, v in figures.items() if k not in SLA_FIGURES},
                "goodput": goodput})
        return figures

    def __call__(self, rate: float) -> dict:
        """The summary of the run at `rate`, judged against this SLA (its goodput None
        where only another SLA's is stored: see with_goodput)."""
        stored = self.store.get_run(self._key(rate)[0]) if self.store is not None else None
        if stored is None:
            return self.simulate(rate)
        self.stored[rate] = stored
        figures = {**stored["figures"], "goodput_rps": stored["goodput"].get(self.sla)}
        return {**figures, "sla": sla_report(self.spec.sla, figures)}

    def with_goodput(self, rate: float, figures: dict) -> dict:
        """`figures` of the run at `rate` (less its SLA report) with this SLA's
        goodput, the run simulated again where the store has only another SLA's."""
        if figures.get("goodput_rps") is not None or not self.spec.sla:
            return figures
        return {k: v for k, v in self.simulate(rate).items() if k != "sla"}
