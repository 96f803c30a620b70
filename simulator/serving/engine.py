"""The event loop: SimPy processes that only move requests. An arrival process hands
each request to the router's replica; each replica process asks its scheduler what to
run, waits that long (or until an arrival, when the plan allows), and reports back.
A replica of P > 1 pipeline stages (DESIGN.md section 14) is a PipelinedReplica: its
micro-batches' iterations overlap across the stages.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heappop, heappush

import simpy
from simpy.events import NORMAL

from simulator.errors import AccsimError

from simulator.serving import compiled_loop
from simulator.serving.arrivals import Arrivals
from simulator.serving.metrics import MetricsStore
from simulator.serving.requests import Request
from simulator.serving.routing import ROUTERS
from simulator.serving.schedulers import REPLICA_SCHEDULERS, Plan

Progress = Callable[[int, int], None]


REPORT_EVERY = 1024  # requests done between progress reports


def first_of(env: simpy.Environment, one: simpy.Event, other: simpy.Event) -> simpy.Event:
    """An event that fires when the first of two pending events is processed: the
    event SimPy's `one | other` schedules, at the same point, without the value it
    builds (nobody reads it)."""
    either = env.event()

    def fire(fired: simpy.Event) -> None:
        (other if fired is one else one).callbacks.remove(fire)
        either.succeed()

    one.callbacks.append(fire)
    other.callbacks.append(fire)
    return either


def at(env: simpy.Environment, when: float) -> simpy.Event:
    """An event processed at time `when` exactly. A Timeout lands at now + (when - now),
    which can differ from `when` in the last bit; this one is queued as SimPy queues a
    Timeout (normal priority, after the events already queued for that instant),
    through the Environment's own queue: SimPy has no public call that schedules at an
    absolute time."""
    event = env.event()
    event._ok, event._value = True, None
    heappush(env._queue, (when, NORMAL, next(env._eid), event))
    return event


def carry_on(env: simpy.Environment, when: float) -> bool:
    """Whether a process can go on at `when` without waiting for an event: nothing is
    queued at or before `when`, so the event it would wait for (at `when`, on it
    alone) would be the next one processed. The clock is then set to `when`, as
    processing that event would set it, and the process carries on; events it queues
    later take the next ids, so every other event keeps its order. Only for a process
    resumed by an event no other process waits on (SimPy would otherwise still run
    their callbacks at the current time); SimPy has no public call for it."""
    queue = env._queue
    if queue and queue[0][0] <= when:
        return False
    env._now = when
    return True


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

    def share_queue(self, queue) -> None:
        self.scheduler.waiting = queue

    def close(self) -> None:
        """No more arrivals will come."""
        self.scheduler.closed = True

    def start(self) -> None:
        self.env.process(self.serving())

    def serving(self):
        env = self.env
        while True:
            if self.arrived.triggered:
                self.arrived = env.event()
            plan = self.scheduler.plan(env.now)
            if not isinstance(plan, Plan):  # nothing to run: wait for an arrival or deadline
                yield self.arrived if plan is None else \
                    first_of(env, self.arrived, env.timeout(max(0.0, plan - env.now)))
                continue
            end = plan.end(-1)
            done = len(plan.ends_s)
            # a Timeout's delay, as SimPy adds it to the clock (the wake-up can differ
            # from `end` in the last bit)
            delay = max(0.0, end - env.now)
            if plan.interruptible:
                if not carry_on(env, env.now + delay):  # no arrival comes first
                    yield first_of(env, self.arrived, env.timeout(delay))
                if env.now < end:  # finish the iteration under way, then let it join
                    done = bisect_left(plan.ends_s, env.now) + 1
                    delay = max(0.0, plan.end(done - 1) - env.now)
                    if not carry_on(env, env.now + delay):
                        yield env.timeout(delay)
            elif not carry_on(env, env.now + delay):
                yield env.timeout(delay)
            self.scheduler.commit(plan, done)
            self.report()


class PipelinedReplica:
    """A replica of P pipeline stages fed by micro-batches: one scheduler per
    micro-batch (as vLLM's virtual engines), all sharing the replica's waiting queue
    and KV cache. Each iteration a micro-batch plans passes the stages in order, each
    stage held for 1 / P of the iteration's cost (stages balanced), so one
    micro-batch's iteration on stage s overlaps another's on stage s - 1. With one
    micro-batch the stages run in turn. The bubble is the stages' idle share of the
    time any micro-batch is in the pipeline.

    Each stage serves the micro-batches first come, first served, so they keep the
    order in which they entered the first stage (a tandem of FIFO queues): an
    iteration's start on stage s is the later of its end on stage s - 1 and the end of
    the iteration ahead of it there. All its stage times are known when it enters, and
    its lane waits for its end on the last stage; where the queue's next event is the
    end of another lane's iteration, the waiting lane processes it (_drain), so the
    lanes take turns without a SimPy step per iteration."""

    def __init__(self, env: simpy.Environment, schedulers: list, stages: int,
                 report: Callable[[], None], store: MetricsStore):
        self.env = env
        self.lanes = schedulers
        for lane in schedulers[1:]:
            lane.waiting = schedulers[0].waiting
        self.stage_free = [0.0] * stages  # when the last iteration to enter leaves each
        self.report = report
        self.store = store
        self.arrived = [env.event() for _ in schedulers]
        self.freed = env.event()  # a micro-batch committed: KV blocks may be free
        self.in_flight = 0
        self.active_since = 0.0
        self.stages = stages
        self.runs: list[StageRun | None] = [None] * len(schedulers)  # each lane's

    @property
    def scheduler(self):
        """The scheduler arrivals are enqueued on (its queue is every lane's)."""
        return self.lanes[0]

    @property
    def outstanding(self) -> int:
        return len(self.scheduler.waiting) + sum(s.running_count for s in self.lanes)

    def wake(self) -> None:
        for event in self.arrived:
            if not event.triggered:
                event.succeed()

    def share_queue(self, queue) -> None:
        for lane in self.lanes:
            lane.waiting = queue

    def close(self) -> None:
        for lane in self.lanes:
            lane.closed = True

    def start(self) -> None:
        for index in range(len(self.lanes)):
            self.env.process(self.serving(index))

    def _enter(self) -> None:
        if self.in_flight == 0:
            self.active_since = self.env.now
        self.in_flight += 1

    def _leave(self, replica: int) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self.store.on_pipeline_active(replica, self.env.now - self.active_since)

    def _enter_next(self, run: StageRun, event: simpy.Event | None = None) -> None:
        """The run's next iteration enters the first stage now, each stage held its
        share of the iteration's time behind the iteration ahead of it there; the
        event for its end on the last stage is queued: a new one (`run.event`), or
        `event` again (one taken from the queue unprocessed, which its lane still
        waits for), as `at` queues one."""
        env = self.env
        end = run.planned[run.index]
        share = run.share = (end - run.last) / self.stages
        run.last = end
        free, leave = self.stage_free, env._now
        for stage, ahead_leaves in enumerate(free):
            leave = (leave if leave >= ahead_leaves else ahead_leaves) + share
            free[stage] = leave
        if event is None:
            run.event = at(env, leave)
        else:
            heappush(env._queue, (leave, NORMAL, next(env._eid), event))

    def _drain(self, own: StageRun) -> bool:
        """Process the queue's head while it is the end of an iteration of this
        replica's that another iteration of its run follows, each as its lane would
        (taken from the queue and queued again for the next iteration's end: the
        lane waits on without a step of SimPy's), in the queue's order. True where
        the head is then `own`'s: taken, its lane carries on at its end (carry_on);
        False where it is any other event: the lane waits for its own."""
        env, queue, runs = self.env, self.env._queue, self.runs
        while queue:
            when, _, _, event = queue[0]
            if event is own.event:
                heappop(queue)
                env._now = when
                return True
            for other in runs:
                if other is not None and other.event is event:
                    break
            else:
                return False
            if not other.goes_on():
                return False
            heappop(queue)
            env._now = when
            other.left(when)
            self._enter_next(other, event)
        return False

    def serving(self, lane: int):
        env, scheduler = self.env, self.lanes[lane]
        while True:
            if self.arrived[lane].triggered:
                self.arrived[lane] = env.event()
            plan = scheduler.plan(env.now)
            if not isinstance(plan, Plan):  # wait for an arrival, a freeing or deadline
                news = self.arrived[lane] | self.freed
                yield news if plan is None else news | env.timeout(max(0.0, plan - env.now))
                continue
            self._enter()
            run = self.runs[lane] = StageRun(plan.end_times(), plan.interruptible,
                                             self.arrived[lane], plan.start_s)
            self._enter_next(run)
            while True:
                taken = self._drain(run)  # its event, unprocessed: queued again next
                if not taken:
                    yield run.event
                going_on = run.goes_on()
                run.left(env.now)
                if not going_on:  # the run's last, or an arrival may join here
                    break
                self._enter_next(run, run.event if taken else None)
            self.runs[lane] = None
            self._leave(scheduler.index)
            self.store.on_stage_busy(scheduler.index, run.spent * self.stages)
            plan.ends_s, plan.busy_s = run.ends, run.busy  # as the stages ran it
            scheduler.commit(plan, len(run.ends))
            freed, self.freed = self.freed, env.event()
            freed.succeed()
            self.report()


@dataclass(slots=True)
class StageRun:
    """A micro-batch's plan under way on a pipelined replica's stages: the plan's end
    times (each iteration's share of the stages comes from them), the iterations
    entered, and the event its lane waits for (the end of the last one entered on
    the last stage)."""

    planned: list[float]
    interruptible: bool
    arrived: simpy.Event        # its lane's news of an arrival
    last: float                 # the plan's end of the last iteration entered
    index: int = 0              # iterations entered, less one
    share: float = 0.0          # each stage's time for the last one entered
    spent: float = 0.0
    ends: list[float] = field(default_factory=list)  # on the last stage, as run
    busy: list[float] = field(default_factory=list)
    event: simpy.Event | None = None

    def goes_on(self) -> bool:
        """Whether another iteration follows the last one entered, once it ends: the
        plan has one, and no arrival (when it may join) stops the run there."""
        return self.index + 1 < len(self.planned) and \
            not (self.interruptible and self.arrived.triggered)

    def left(self, now: float) -> None:
        """The last iteration entered ends on the last stage `now`."""
        self.spent += self.share
        self.ends.append(now)
        self.busy.append(self.spent)
        self.index += 1


def arriving(env: simpy.Environment, arrivals: Arrivals, router, replicas: list[Replica],
             store: MetricsStore):
    shared = getattr(router, "shared", False)
    times = arrivals.times_s.tolist()
    prompts = arrivals.prompt_tokens.tolist()
    outputs = arrivals.output_tokens.tolist()
    prefixes = None if arrivals.prefix_tokens is None else arrivals.prefix_tokens.tolist()
    named = None if arrivals.prefix_ids is None else \
        list(zip(arrivals.prefix_ids.tolist(), arrivals.prefix_lens.tolist()))
    for index, at in enumerate(times):
        if at > env.now:  # requests of the same instant all arrive before anyone plans
            delay = at - env.now
            if not carry_on(env, env.now + delay):
                yield env.timeout(delay)
        request = Request(index, at, prompts[index], outputs[index])
        if prefixes is not None:
            request.prefix_tokens = prefixes[index]
        if named is not None:
            request.prefix_id, request.prefix_len = named[index]
        store.on_arrival(request, at)
        target = replicas[router.pick(replicas)]
        target.scheduler.enqueue(request, at)
        for replica in replicas if shared else (target,):
            replica.wake()
    for replica in replicas:  # the end of arrivals is news too (static batching)
        replica.close()
        replica.wake()


def make_replicas(env: simpy.Environment, spec, policy, cost, make_kv: Callable[[], object],
                  store: MetricsStore, report: Callable[[], None], *, llm: bool,
                  first: int = 0) -> list:
    """spec.replicas replicas of `policy` (a scheduler class), numbered from `first` in
    the store: one Replica each, or a PipelinedReplica of spec.pp stages."""
    stages = spec.system.pp
    micro_batches = spec.micro_batches or stages

    def replica(i: int):
        if stages == 1:
            return Replica(env, policy(i, spec, cost, make_kv(), store, llm=llm), report)
        kv = make_kv()  # one cache per replica, shared by its micro-batches
        return PipelinedReplica(env, [policy(i, spec, cost, kv, store, llm=llm)
                                      for _ in range(micro_batches)], stages, report, store)

    return [replica(first + i) for i in range(spec.replicas)]


def make_router(routing: str, replicas: list):
    """The routing policy over `replicas`; a shared queue joins their waiting queues."""
    router = ROUTERS.get(routing, field="routing")()
    if getattr(router, "shared", False):
        queue = replicas[0].scheduler.waiting
        for each in replicas:
            each.share_queue(queue)
    return router


def reporter(store: MetricsStore, total: int, progress: Progress | None
             ) -> Callable[[], None]:
    """What a replica calls after each commit: progress every REPORT_EVERY requests."""
    next_report = [REPORT_EVERY]

    def report() -> None:
        done = len(store.finished) + len(store.dropped)
        if progress and done >= next_report[0]:
            progress(done, total)
            next_report[0] = done + REPORT_EVERY

    return report


def check_all_done(store: MetricsStore, total: int, batching: str) -> None:
    unfinished = total - len(store.finished) - len(store.dropped)
    if unfinished:  # a policy left requests behind: say so rather than drop them
        raise AccsimError(f"{unfinished} of {total} requests never finished under "
                          f"{batching} batching", field="batching")


def run_serving(spec, arrivals: Arrivals, cost, make_kv: Callable[[], object], *,
                llm: bool, store: MetricsStore, progress: Progress | None = None,
                compiled: bool = True) -> None:
    """Serve every arrival on spec.replicas replicas until all are done or dropped: in
    the compiled loop where its scope holds (simulator.serving.compiled_loop, the
    same figures; `compiled` False: never), else in SimPy's."""
    if compiled:
        kv = make_kv()
        if compiled_loop.applies(spec, arrivals, cost, kv, store, llm=llm):
            compiled_loop.run_compiled(spec, arrivals, cost, kv, store, progress)
            check_all_done(store, len(arrivals), spec.batching)
            if progress:
                progress(len(arrivals), len(arrivals))
            return
    env = simpy.Environment()
    policy = REPLICA_SCHEDULERS.get(spec.batching, field="batching")
    total = len(arrivals)
    report = reporter(store, total, progress)
    replicas = make_replicas(env, spec, policy, cost, make_kv, store, report, llm=llm)
    router = make_router(spec.routing, replicas)
    env.process(arriving(env, arrivals, router, replicas, store))
    for each in replicas:
        each.start()
    env.run()
    check_all_done(store, total, spec.batching)
    if progress:
        progress(total, total)
