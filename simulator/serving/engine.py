"""The event loop: SimPy processes that only move requests. An arrival process hands
each request to the router's replica; each replica process asks its scheduler what to
run, waits that long (or until an arrival, when the plan allows), and reports back.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

import simpy

from simulator.errors import AccsimError

from simulator.serving.arrivals import Arrivals
from simulator.serving.metrics import MetricsStore
from simulator.serving.requests import Request
from simulator.serving.routing import ROUTERS
from simulator.serving.schedulers import REPLICA_SCHEDULERS, Plan

Progress = Callable[[int, int], None]


REPORT_EVERY = 1024  # requests done between progress reports


class Replica:
    """One serving replica: its scheduler and the event that signals an arrival."""

    def __init__(self, env: simpy.Environment, scheduler, report: Callable[[], None]):
        self.env = env
        self.scheduler = scheduler
        self.report = report
        self.arrived = env.event()

    @property
    def outstanding(self) -> int:
        return self.scheduler.outstanding

    def wake(self) -> None:
        """Tell the replica a request has arrived for it."""
        if not self.arrived.triggered:
            self.arrived.succeed()

    def serving(self):
        env = self.env
        while True:
            if self.arrived.triggered:
                self.arrived = env.event()
            plan = self.scheduler.plan(env.now)
            if not isinstance(plan, Plan):  # nothing to run: wait for an arrival or a deadline
                yield self.arrived if plan is None else \
                    self.arrived | env.timeout(max(0.0, plan - env.now))
                continue
            end = plan.ends_s[-1]
            done = len(plan.ends_s)
            if plan.interruptible:
                yield self.arrived | env.timeout(max(0.0, end - env.now))
                if env.now < end:  # finish the iteration under way, then let it join
                    done = bisect_left(plan.ends_s, env.now) + 1
                    yield env.timeout(max(0.0, plan.ends_s[done - 1] - env.now))
            else:
                yield env.timeout(max(0.0, end - env.now))
            self.scheduler.commit(plan, done)
            self.report()


def arriving(env: simpy.Environment, arrivals: Arrivals, router, replicas: list[Replica],
             store: MetricsStore):
    shared = getattr(router, "shared", False)
    times = arrivals.times_s.tolist()
    prompts = arrivals.prompt_tokens.tolist()
    outputs = arrivals.output_tokens.tolist()
    for index, at in enumerate(times):
        if at > env.now:  # requests of the same instant all arrive before anyone plans
            yield env.timeout(at - env.now)
        request = Request(index, at, prompts[index], outputs[index])
        store.on_arrival(request, at)
        target = replicas[router.pick(replicas)]
        target.scheduler.enqueue(request, at)
        for replica in replicas if shared else (target,):
            replica.wake()
    for replica in replicas:  # the end of arrivals is news too (static batching)
        replica.scheduler.closed = True
        replica.wake()


def run_serving(spec, arrivals: Arrivals, cost, make_kv: Callable[[], object], *,
                llm: bool, store: MetricsStore, progress: Progress | None = None) -> None:
    """Serve every arrival on spec.replicas replicas until all are done or dropped."""
    env = simpy.Environment()
    policy = REPLICA_SCHEDULERS.get(spec.batching, field="batching")
    total = len(arrivals)
    next_report = [REPORT_EVERY]

    def report() -> None:
        done = len(store.finished) + len(store.dropped)
        if progress and done >= next_report[0]:
            progress(done, total)
            next_report[0] = done + REPORT_EVERY

    replicas = [Replica(env, policy(i, spec, cost, make_kv(), store, llm=llm), report)
                for i in range(spec.replicas)]
    router = ROUTERS.get(spec.routing, field="routing")()
    if getattr(router, "shared", False):
        queue = replicas[0].scheduler.waiting
        for replica in replicas:
            replica.scheduler.waiting = queue
    env.process(arriving(env, arrivals, router, replicas, store))
    for replica in replicas:
        env.process(replica.serving())
    env.run()
    unfinished = total - len(store.finished) - len(store.dropped)
    if unfinished:  # a policy left requests behind: say so rather than drop them
        raise AccsimError(f"{unfinished} of {total} requests never finished under "
                          f"{spec.batching} batching", field="batching")
    if progress:
        progress(total, total)
