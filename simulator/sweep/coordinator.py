"""The coordinator: the one process that decides what is missing, hands it to an
executor and writes each outcome to the store as it arrives.

What is missing is decided by key alone: a rerun of a finished sweep computes nothing,
an interrupted one (killed, Ctrl-C, a lost machine) computes only the keys not stored.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from contextlib import closing, contextmanager
from dataclasses import dataclass

import simulator
from simulator.errors import AccsimError
from simulator.sweep.jobs import Job, Plan, canonical_json
from simulator.sweep.store import Store

OnStored = Callable[[dict], None]


@dataclass(frozen=True)
class Summary:
    """What a run of the coordinator did."""

    jobs: int              # point x workload jobs in the plan
    already_stored: int    # of those, found in the store
    computed: int          # stored by this run (failed ones included)
    failed: int            # of those computed, failed
    interrupted: bool
    elapsed_s: float

    @property
    def missing(self) -> int:
        return self.jobs - self.already_stored - self.computed


@contextmanager
def uninterrupted():
    """Hold Ctrl-C back while a row is written and counted, so an interrupt never leaves
    a stored row uncounted: SIGINT is recorded meanwhile and handled right after.
    Only the main thread can swap the handler; elsewhere SIGINT is not delivered."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(signal.SIGINT, None)


def stored_row(sweep: str, job: Job, outcome: dict) -> dict:
    """The store row of one job's outcome."""
    return {"key": job.key, "sweep": sweep, "workload": job.workload.name,
            "point": canonical_json(job.point), "inputs": canonical_json(job.inputs),
            **outcome}


def missing_jobs(plan: Plan, store: Store, *, retry_failed: bool = False) -> list[Job]:
    """The plan's jobs whose key the store lacks (or holds as failed, when retrying)."""
    stored = store.keys(status="ok") if retry_failed else store.keys()
    return [job for job in plan.jobs if job.key not in stored]


def run_sweep(plan: Plan, store: Store, executor, *, retry_failed: bool = False,
              on_stored: OnStored | None = None) -> Summary:
    """Compute every job of the plan the store lacks (with `retry_failed`, also those
    stored as failed). Ctrl-C stops it; every outcome stored so far stays stored."""
    started = time.perf_counter()
    name = plan.sweep.spec.name
    store.record_sweep(name, plan.sweep.spec.model_dump(mode="json"))
    missing = missing_jobs(plan, store, retry_failed=retry_failed)
    kept: dict[str, str] = {}  # key -> status of each row this run stored
    interrupted = False

    def keep(job: Job, outcome: dict) -> None:
        worker_version = outcome.get("model_version", simulator.MODEL_VERSION)
        if worker_version != simulator.MODEL_VERSION:
            raise AccsimError(f"a worker runs accsim MODEL_VERSION {worker_version}, this "
                              f"coordinator {simulator.MODEL_VERSION}: install the same "
                              "accsim on every machine", field="--scheduler")
        row = stored_row(name, job, outcome)
        with uninterrupted():
            store.put(row)
            kept[job.key] = row["status"]
        if on_stored:
            on_stored(row)

    try:
        for job in missing:
            if job.platform is None:  # an invalid combination of values: no task to run
                keep(job, {"status": "failed", "error": job.error})
        runnable = [job for job in missing if job.platform is not None]
        with closing(executor.outcomes(runnable)) as outcomes:
            for job, outcome in outcomes:
                keep(job, outcome)
    except KeyboardInterrupt:
        interrupted = True
    failed = sum(status == "failed" for status in kept.values())
    return Summary(len(plan.jobs), len(plan.jobs) - len(missing), len(kept), failed,
                   interrupted, time.perf_counter() - started)
