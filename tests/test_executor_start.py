"""Executors' `start`: a process pool's workers run the warm-up they are given (the
deployment search's: loading the compiled kernels) before any task, while the
coordinator is still planning the tasks."""

from __future__ import annotations

import os
from types import SimpleNamespace

from simulator.sweep.executors import Processes, Serial

WARMED = "ACCSIM_TEST_WARMED"


def warmed() -> None:
    """The warm-up: marks the worker that ran it (module-level: pickled by name)."""
    os.environ[WARMED] = str(os.getpid())


def seen(job) -> dict:
    return {"warmed": os.environ.get(WARMED), "pid": str(os.getpid())}


def test_started_workers_warm_up_before_their_first_task():
    jobs = [SimpleNamespace(key=str(i)) for i in range(6)]
    with Processes(2) as executor:
        executor.start(warmed)
        found = [outcome for _, outcome in executor.outcomes(jobs, task=seen)]
    assert len(found) == 6
    assert all(outcome["warmed"] == outcome["pid"] for outcome in found)


def test_a_pool_started_without_a_warm_up_runs_none():
    with Processes(1) as executor:
        executor.start()
        (_, outcome), = executor.outcomes([SimpleNamespace(key="0")], task=seen)
    assert outcome["warmed"] is None


def test_the_serial_executor_starts_nothing():
    with Serial() as executor:
        executor.start(warmed)
        (_, outcome), = executor.outcomes([SimpleNamespace(key="0")], task=seen)
    assert outcome["warmed"] is None
