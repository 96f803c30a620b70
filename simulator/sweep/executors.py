"""Executors: how a sweep's tasks are launched. Each one runs the same pure task
(`task.evaluate_point` on a sweep job's fields, or a task given for jobs of another
kind, such as the deployment search's groups of points) and hands the coordinator
(job, outcome) pairs as they finish; none of them writes anything. They differ only
in where the task runs:

- serial: in the coordinating process, one after another;
- processes: a local process pool; a worker that dies (killed, out of memory) breaks
  the pool, and every job it had not returned is resubmitted to a fresh pool;
- dask://HOST:PORT: a running Dask scheduler; dask-local: a Dask cluster of local
  worker processes started for the sweep. Dask itself reruns the tasks of a lost
  worker (up to its `distributed.scheduler.allowed-failures`).

A job whose worker dies MAX_WORKER_DEATHS times is returned as failed, so one point
that crashes every worker cannot stall a sweep.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from simulator.errors import AccsimError
from simulator.sweep.jobs import Job
from simulator.sweep.task import evaluate_point

MAX_WORKER_DEATHS = 3
DASK_PREFIX = "dask://"
DASK_INSTALL = "install it with pip install 'accsim[dask]'"
# Jobs handed to the pool beyond one per worker, so workers never wait for work while
# few enough are in flight that a broken pool or Ctrl-C loses little.
QUEUED_PER_WORKER = 1
# Local worker processes allowed per CPU (max_workers).
WORKERS_PER_CPU = 4
# How often a pool worker checks that its coordinator is still there (seconds).
PARENT_CHECK_S = 1.0
PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


# A task other than a sweep point's: called with its job (picklable, with a `key`).
Task = Callable[[object], dict]


def task_call(job, task: Task | None) -> tuple[Callable, tuple]:
    """What a job runs and with what: `task(job)`, or a sweep job's evaluate_point on
    its fields (they, not the whole job, travel to the worker)."""
    if task is not None:
        return task, (job,)
    return evaluate_point, (job.platform, job.workload, job.mapping, job.system,
                            job.ignore_capacity)


def worker_died(deaths: int) -> dict:
    return {"status": "failed", "error": f"the worker process died {deaths} times while "
            "computing this point (out of memory?); rerun with --retry-failed"}


class Serial:
    """Every task in the coordinating process."""

    description = "the coordinating process (serial)"

    def __enter__(self) -> Serial:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def start(self, warm: Callable[[], None] | None = None) -> None:
        """Nothing to start: tasks run here."""

    def outcomes(self, jobs: list[Job], task: Task | None = None
                 ) -> Iterator[tuple[Job, dict]]:
        for job in jobs:
            function, arguments = task_call(job, task)
            yield job, function(*arguments)


def ignore_interrupts() -> None:
    """Pool workers leave Ctrl-C to the coordinator, which stops them cleanly."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exit_with(coordinator: int) -> None:
    while os.getppid() == coordinator:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def _die_with_parent() -> None:
    """On Linux, ask the kernel to kill this process when its parent dies
    (PR_SET_PDEATHSIG): it acts even while a compiled kernel holds the GIL, which the
    watching thread would wait for."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the watching thread alone
        pass


def start_worker(coordinator: int | None = None,
                 warm: Callable[[], None] | None = None) -> None:
    """A pool worker ignores Ctrl-C (ignore_interrupts) and ends when its coordinator
    (the process that started the pool, given by it) is gone: one killed outright
    (SIGKILL, out of memory) cannot stop its pool, whose workers would otherwise wait
    for work for ever. A coordinator that died while the worker was still importing
    is noticed at once (the worker's parent is then another process). Then `warm`
    (Processes.start), before any task."""
    ignore_interrupts()
    coordinator = os.getppid() if coordinator is None else coordinator
    _die_with_parent()
    if os.getppid() != coordinator:
        os._exit(1)
    threading.Thread(target=_exit_with, args=(coordinator,), daemon=True).start()
    if warm is not None:
        warm()


class Processes:
    """A local process pool of `workers` processes (spawned: no state is inherited),
    started on the first task (or by `start`) and kept for every later call of
    `outcomes` until the `with` block ends (a worker's start, importing the simulator,
    costs about a second), or until it breaks (a worker died): the next pool starts
    afresh, its workers warmed as the first pool's were."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.description = f"{workers} local processes"
        self.pool: ProcessPoolExecutor | None = None
        self.warm: Callable[[], None] | None = None

    def start(self, warm: Callable[[], None] | None = None) -> None:
        """Start every worker now, each running `warm` (a module-level function: what
        its tasks will need loaded) before any task, so that they start while this
        process is still planning the tasks."""
        self.warm = warm
        pool = self._pool()
        for _ in range(self.workers):  # the pool starts a worker per task it is given
            pool.submit(os.getpid)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc) -> None:
        self._close(cancel=exc[0] is not None)

    def _close(self, *, cancel: bool) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=cancel)
            self.pool = None

    def _pool(self) -> ProcessPoolExecutor:
        if self.pool is None:
            self.pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=start_worker, initargs=(os.getpid(), self.warm))
        return self.pool

    def outcomes(self, jobs: list[Job], task: Task | None = None
                 ) -> Iterator[tuple[Job, dict]]:
        pending = deque(jobs)
        deaths: Counter[str] = Counter()
        barren_pools = 0  # pools in a row that broke before returning anything
        while pending:
            returned, lost = yield from self._run_pool(pending, task)
            barren_pools = 0 if returned else barren_pools + 1
            if barren_pools >= MAX_WORKER_DEATHS:
                raise AccsimError(f"the worker processes died {barren_pools} times before "
                                  "finishing any point; try --scheduler serial to see why",
                                  field="--scheduler")
            for job in lost:
                deaths[job.key] += 1
                if deaths[job.key] >= MAX_WORKER_DEATHS:
                    yield job, worker_died(deaths[job.key])
                else:
                    pending.appendleft(job)

    def _run_pool(self, pending: deque, task: Task | None):
        """Run jobs from `pending` on one pool until done or the pool breaks; return
        how many came back and the jobs in flight that never did."""
        window = self.workers * (1 + QUEUED_PER_WORKER)
        in_flight = {}
        returned = 0
        pool, broken = self._pool(), True  # until the loop ends without a break
        try:
            while pending or in_flight:
                try:
                    while pending and len(in_flight) < window:
                        job = pending[0]
                        function, arguments = task_call(job, task)
                        in_flight[pool.submit(function, *arguments)] = job
                        pending.popleft()
                except BrokenProcessPool:  # broke before this job was taken
                    break
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                    break
                for future in done:
                    returned += 1
                    yield in_flight.pop(future), future.result()
            else:
                broken = False
            # After a break, what finished before it still counts; the rest is lost.
            for future in [f for f in in_flight if f.done() and f.exception() is None]:
                returned += 1
                yield in_flight.pop(future), future.result()
            return returned, list(in_flight.values())
        finally:
            if broken:  # or the caller stopped early: the next pool starts afresh
                self._close(cancel=True)


def import_distributed():
    """The optional `distributed` package, or an error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise AccsimError(f"Dask schedulers need the distributed package; {DASK_INSTALL}",
                          field="--scheduler") from None
    return distributed


class Dask:
    """Tasks on a Dask cluster: a running scheduler's address, or None to start a
    local cluster of `workers` single-threaded worker processes for this sweep."""

    def __init__(self, address: str | None, workers: int) -> None:
        self.distributed = import_distributed()
        self.address = address
        self.workers = workers
        self.cluster = self.client = None
        self.description = (f"the Dask scheduler at {address}" if address
                            else f"a local Dask cluster of {workers} workers")

    def __enter__(self) -> Dask:
        """Connect (or start the local cluster): only once the sweep is planned."""
        distributed = self.distributed
        try:
            if self.address is None:
                self.cluster = distributed.LocalCluster(
                    n_workers=self.workers, threads_per_worker=1, processes=True,
                    dashboard_address=None)
                self.client = distributed.Client(self.cluster)
            else:
                self.client = distributed.Client(self.address, timeout=10)
        except (OSError, TimeoutError) as exc:
            self.close()
            raise AccsimError(f"cannot reach {self.description}: {exc}",
                              field="--scheduler") from None
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, warm: Callable[[], None] | None = None) -> None:
        """Nothing: the cluster's workers are running already (they load what a task
        needs on its first call)."""

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def _launch(self, jobs: list[Job], task: Task | None) -> list:
        if task is not None:
            return [self.client.submit(task, job, key=f"accsim-task-{job.key}")
                    for job in jobs]
        # Each workload goes to every worker once, not inside each of its tasks.
        workloads = {job.workload.name: job.workload for job in jobs}
        shared = {name: self.client.scatter(workload, broadcast=True)
                  for name, workload in workloads.items()}
        return self.client.map(evaluate_point, [job.platform for job in jobs],
                               [shared[job.workload.name] for job in jobs],
                               [job.mapping for job in jobs],
                               [job.system for job in jobs],
                               [job.ignore_capacity for job in jobs],
                               key=[f"accsim-point-{job.key}" for job in jobs])

    def outcomes(self, jobs: list[Job], task: Task | None = None
                 ) -> Iterator[tuple[Job, dict]]:
        launched = self._launch(jobs, task)
        futures = dict(zip(launched, jobs))
        try:
            for future in self.distributed.as_completed(launched):
                job = futures.pop(future)
                try:
                    outcome = future.result()
                except self.distributed.KilledWorker as exc:
                    outcome = {"status": "failed", "error": f"Dask workers died computing "
                               f"this point ({exc}); rerun with --retry-failed"}
                future.release()
                yield job, outcome
        finally:
            if futures:
                self.client.cancel(list(futures))


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def max_workers() -> int:
    """The most local worker processes a sweep starts: WORKERS_PER_CPU per CPU. Beyond
    the CPUs, more processes only share them, each paying its own interpreter and
    compiled kernels (some 200 MB); tens of thousands would exhaust memory and process
    slots before the first point."""
    return WORKERS_PER_CPU * available_cpus()


def executor_for(scheduler: str, workers: int | None):
    """The executor a --scheduler value names (checked before any simulation)."""
    if workers is not None and workers < 1:
        raise AccsimError("needs at least 1 worker", field="--workers")
    if workers is not None and workers > max_workers():
        raise AccsimError(f"{workers:,} workers is more than {max_workers()} ("
                          f"{WORKERS_PER_CPU} x the {available_cpus()} CPUs available): "
                          "extra processes only share the same CPUs", field="--workers")
    if workers is not None and scheduler not in ("processes", "dask-local"):
        raise AccsimError(f"applies to the processes and dask-local schedulers, not "
                          f"{scheduler!r} (a Dask scheduler has the workers it has)",
                          field="--workers")
    count = workers or available_cpus()
    if scheduler == "serial":
        return Serial()
    if scheduler == "processes":
        return Processes(count)
    if scheduler == "dask-local":
        return Dask(None, count)
    if scheduler.startswith(DASK_PREFIX) and len(scheduler) > len(DASK_PREFIX):
        return Dask("tcp://" + scheduler.removeprefix(DASK_PREFIX), count)
    raise AccsimError(f"unknown scheduler {scheduler!r} (serial, processes, dask-local, "
                      "or dask://HOST:PORT)", field="--scheduler")
