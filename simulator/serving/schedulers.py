"""Replica schedulers: which waiting requests run next on one replica, as what batch.

- static: a fixed batch of max_batch; waits to fill, or until the first waiting
  request has waited max_wait (if set); a plain batch always costs max_batch (the
  empty slots are padding). LLM batches run prefill, then decode until all are done.
- dynamic: when idle, runs up to max_batch as soon as max_batch are waiting or the
  first has waited max_wait; costs the batch it runs.
- continuous (LLMs): iteration-level (Orca, vLLM): requests join and leave at
  iteration boundaries, prompts are prefilled in chunks under a per-iteration token
  budget (Sarathi), KV blocks grow as tokens are produced, and when they run out the
  most recently admitted request is preempted and later recomputed.

A scheduler plans one or more iterations (`Plan`) from the current time; the replica
process waits for them and hands back how many ran (`commit`). Runs of decode-only
iterations with nothing to admit are planned as one Plan (the replica cuts it short at
an arrival's iteration boundary when the arrival could join), so the event loop
advances per scheduling decision, not per token.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.serving.iteration_cost import Cost, CostRun
from simulator.serving.kv_cache import blocks_for
from simulator.serving.metrics import MetricsStore
from simulator.serving.registry import Registry
from simulator.serving.requests import Request
from simulator.serving.tails import (KvBlockedClock, on_admitted, on_enqueued,
                                     on_preempted, on_recovered)

# Longest decode-only run planned at once (bounds the plan's lists).
MAX_RUN_ITERATIONS = 4096


@dataclass
class Plan:
    """Iterations to run from `start_s`: each one's end time and the energy used by
    its end (lists, or NumPy arrays for a run: read them through `end` and `energy`);
    `work` is the scheduler's own record of what runs. `busy_s`, where set, is the
    replica's busy time by each iteration's end (a pipelined replica's stages share
    it); otherwise the time since `start_s`."""

    start_s: float
    ends_s: Sequence[float]
    energy_j: Sequence[float]
    interruptible: bool
    work: object
    busy_s: list[float] | None = None

    def end(self, index: int) -> float:
        """The end time of iteration `index` (negative: from the last)."""
        return float(self.ends_s[index])

    def end_times(self) -> list[float]:
        """Every iteration's end time (as `end` reads them, without one call each)."""
        ends = self.ends_s
        return ends.tolist() if isinstance(ends, np.ndarray) else list(ends)

    def energy(self, done: int) -> float:
        """Energy of the first `done` iterations."""
        return float(self.energy_j[done - 1])

    def busy(self, done: int) -> float:
        """Busy seconds of the first `done` iterations."""
        return self.busy_s[done - 1] if self.busy_s else self.end(done - 1) - self.start_s


def _plan(now: float, costs: CostRun, *, interruptible: bool, work) -> Plan:
    """Running sums in iteration order, end times from `now` and energy from 0
    (accumulate adds left to right, as a loop)."""
    sums = np.empty((2, len(costs) + 1))
    sums[:, 0] = now, 0.0
    sums[:, 1:] = costs.table
    ends, energy = np.add.accumulate(sums, axis=1)[:, 1:]
    return Plan(now, ends, energy, interruptible, work)


def _one(now: float, cost: Cost, *, work) -> Plan:
    """A plan of one iteration (the sums of _plan, without arrays)."""
    return Plan(now, [now + cost.seconds], [cost.energy_j], False, work)


REPLICA_SCHEDULERS: Registry = Registry("batching policy")


class ReplicaScheduler:
    """Shared state: the replica's waiting queue, cost model, KV cache and metrics."""

    def __init__(self, index: int, spec, cost, kv, store: MetricsStore, *, llm: bool):
        self.index = index
        self.spec = spec
        self.cost = cost
        self.kv = kv
        self.store = store
        self.llm = llm
        self.waiting: deque[Request] = deque()
        self.max_wait_s = None if spec.max_wait_ms is None else spec.max_wait_ms / 1e3
        self.closed = False  # no more arrivals will come
        self.kv_clock = KvBlockedClock()  # admission stopped on KV blocks (tails)

    @property
    def running_count(self) -> int:
        """Requests admitted and not yet finished."""
        raise NotImplementedError

    @property
    def outstanding(self) -> int:
        return len(self.waiting) + self.running_count

    def enqueue(self, request: Request, now: float) -> None:
        if self.llm and blocks_for(request.max_kv_tokens, self.kv.block_tokens) \
                > self.kv.total_blocks:
            self.store.on_drop(request, now)  # its KV alone exceeds the cache: never fits
            return
        if not request.produced:  # new (one whose KV came from a prefill pool keeps it)
            request.prefill_target = request.prompt_tokens
            request.prefilled = request.prefix_tokens
        on_enqueued(request, self.kv_clock, now)
        self.waiting.append(request)

    def _finish(self, request: Request, now: float) -> None:
        if self.llm:
            self.kv.release(request)
        self.store.on_finish(request, now)


class RequestBatching(ReplicaScheduler):
    """Static and dynamic batching: one batch at a time, run to completion."""

    pads = False  # True: a plain batch costs max_batch whatever its fill (padding)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.running: list[Request] = []  # the batch under way

    @property
    def running_count(self) -> int:
        return len(self.running)

    def _ready(self, now: float) -> bool | float | None:
        """True to run now; else the time to look again (None: at the next arrival)."""
        raise NotImplementedError

    def plan(self, now: float) -> Plan | float | None:
        if not self.waiting:
            return None
        ready = self._ready(now)
        if ready is not True:
            return ready
        batch = self._take()
        self.kv_clock.set(now, self.llm and bool(self.waiting)
                          and len(batch) < self.spec.max_batch)  # _take stopped on KV
        if not batch:  # a pipelined replica's other micro-batches hold the KV blocks
            return None
        for request in batch:
            on_admitted(request, self.kv_clock, now)
        self.running = batch
        if not self.llm:
            size = self.spec.max_batch if self.pads else len(batch)
            return _one(now, self.cost.batch(size), work=batch)
        return self._llm_plan(now, batch)

    def _take(self) -> list[Request]:
        """Up to max_batch from the head; LLM requests only as far as their whole KV
        fits (the cache is empty between batches, so the head always fits)."""
        batch: list[Request] = []
        while self.waiting and len(batch) < self.spec.max_batch:
            if self.llm and not self.kv.grow(self.waiting[0],
                                             self.waiting[0].max_kv_tokens):
                break
            batch.append(self.waiting.popleft())
        return batch

    def _llm_plan(self, now: float, batch: list[Request]) -> Plan:
        """One prefill iteration over every prompt, then decode iterations while any
        request still has tokens to produce (finished ones leave the batch)."""
        costs = [CostRun.of([self.cost.iteration([(r.prompt_tokens, 0) for r in batch],
                                                 ())])]
        step = 1  # decode iteration `step` feeds token `step`: context prompt + step
        for output in sorted({r.output_tokens for r in batch}):
            if output > step:  # the requests still active until `output` tokens exist
                active = [r.prompt_tokens + step for r in batch
                          if r.output_tokens >= output]
                costs.append(self.cost.decode_run(active, output - step))
                step = output
        return _plan(now, CostRun.joined(costs), interruptible=False, work=batch)

    def commit(self, plan: Plan, done: int) -> None:
        batch = plan.work
        self.running = []
        self.store.on_iterations(self.index, plan.busy(done), plan.energy(done),
                                 done, len(batch))
        for request in batch:
            if self.llm:
                request.first_token_s = plan.end(0)
                request.produced = request.output_tokens
                self._finish(request, plan.end(request.output_tokens - 1))
            else:
                self._finish(request, plan.end(-1))


@REPLICA_SCHEDULERS.register("static")
class StaticBatching(RequestBatching):
    """Fixed batch: waits to fill max_batch, or for max_wait after the first request;
    with no max_wait, the last partial batch runs once arrivals have ended (rather
    than wait forever)."""

    pads = True

    def _ready(self, now: float) -> bool | float | None:
        if len(self.waiting) >= self.spec.max_batch:
            return True
        if self.max_wait_s is None:
            return True if self.closed else None
        deadline = self.waiting[0].arrival_s + self.max_wait_s
        return True if now >= deadline else deadline


@REPLICA_SCHEDULERS.register("dynamic")
class DynamicBatching(RequestBatching):
    """Runs what is waiting (up to max_batch) once it is full or the first request has
    waited max_wait (0: at once)."""

    def _ready(self, now: float) -> bool | float | None:
        deadline = self.waiting[0].arrival_s + (self.max_wait_s or 0.0)
        if len(self.waiting) >= self.spec.max_batch or now >= deadline:
            return True
        return deadline


@dataclass
class Iterations:
    """What a continuous-batching plan runs: prefill chunks (request, new tokens) and
    the requests decoding one token per iteration."""

    chunks: list[tuple[Request, int]]
    decoding: list[Request]


@REPLICA_SCHEDULERS.register("continuous")
class ContinuousBatching(ReplicaScheduler):
    """Iteration-level batching with chunked prefill and preemption by recompute.

    The running requests, in the order they were admitted, are `decoding` then
    `prefilling`: prefill completes in that order (the oldest chunk takes the token
    budget first, a later one gets what it leaves), so a request that finishes its
    prefill follows every decoding one. Each plan then reads the decoding requests
    without a pass over all of them to find them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.decoding: list[Request] = []
        self.prefilling: list[Request] = []
        self.swap_s = 0.0  # host-tier moves the next iteration waits for

    @property
    def running_count(self) -> int:
        return len(self.decoding) + len(self.prefilling)

    def _below_cap(self) -> bool:
        """Whether another request may run (running < max_batch): the one place this
        policy reads max_batch, reported to the store (on_cap_check), so a run can say
        under which other max_batch values it would have been the same run."""
        running = len(self.decoding) + len(self.prefilling)
        below = running < self.spec.max_batch
        self.store.on_cap_check(running, below)
        return below

    def _preempt_until_decodes_fit(self, now: float) -> list[Request]:
        """The decoding requests whose next token needs one more block (at most one),
        once those blocks are free, preempting the most recently admitted request
        (LIFO, as vLLM) while they are not."""
        short = [r for r in self.decoding if r.kv_tokens >= r.kv_held]
        if len(short) <= self.kv.free_blocks:  # the usual case: nobody is preempted
            return short
        while len(short) > self.kv.free_blocks:
            victim = (self.prefilling or self.decoding).pop()
            if short and short[-1] is victim:
                short.pop()
            self.kv.release(victim)
            victim.preemptions += 1
            on_preempted(victim, now)
            self.waiting.appendleft(victim)
            if self.kv.host is not None and not victim.in_prefill:  # out to host memory
                victim.swapped_tokens = victim.kv_tokens
                self.swap_s += self.kv.host.seconds(victim.kv_tokens)
                self.store.on_swap(victim)
                continue
            victim.prefill_target = victim.prompt_tokens + victim.produced
            victim.prefilled, victim.kv_tokens = victim.prefix_tokens, 0
            self.store.on_preempt(victim)
        return short

    def plan(self, now: float) -> Plan | None:
        if not self.running_count and not self.waiting:
            return None
        short = self._preempt_until_decodes_fit(now)
        if short:
            grow = self.kv.grow
            for request in short:
                grow(request, request.kv_tokens + 1)
        decoding = self.decoding
        budget = self.spec.max_tokens - len(decoding)
        chunks: list[tuple[Request, int]] = []
        for request in self.prefilling:
            if budget <= 0:
                break
            left = request.prefill_target - request.prefilled
            new = left if left < budget else budget
            chunks.append((request, new))
            budget -= new
        refused = False  # the head refused KV blocks: admission stops on memory
        while budget > 0 and self.waiting and self._below_cap():
            head = self.waiting[0]
            if not head.in_prefill:  # its KV comes whole: from a prefill pool, or host
                if not self.kv.grow(head, head.kv_tokens + 1):
                    refused = True
                    break
                on_admitted(head, self.kv_clock, now)
                if head.swapped_tokens:  # back in from host memory
                    back = self.kv.host.seconds(head.swapped_tokens)
                    self.swap_s += back
                    head.swapped_tokens = 0
                    on_recovered(head, now + back, swapped=True)
                self.decoding.append(self.waiting.popleft())
                budget -= 1
                continue
            if not self.kv.admit(head):
                refused = True
                break  # first come, first served: the head waits for blocks
            on_admitted(head, self.kv_clock, now)
            self.prefilling.append(self.waiting.popleft())
            new = min(head.prefill_target - head.prefilled, budget)
            chunks.append((head, new))
            budget -= new
        self.kv_clock.set(now, refused)
        if not chunks and not decoding:  # the KV blocks are held by other micro-batches
            return None
        contexts = [r.kv_tokens + 1 for r in decoding]
        if chunks or self.swap_s:
            prefill = [(n, r.prefilled) for r, n in chunks]
            self.store.offer_shape(lambda: (tuple(prefill), tuple(contexts)))
            cost = self.cost.iteration(prefill, contexts)
            if self.swap_s:  # the iteration waits for the host tier's moves
                cost, self.swap_s = cost + Cost(self.swap_s, 0.0), 0.0
            return _one(now, cost, work=Iterations(chunks, decoding))
        return self._decode_run(now, decoding, contexts)

    def _decode_run(self, now: float, decoding: list[Request],
                    contexts: list[int]) -> Plan:
        """Decode-only iterations until the first request finishes or the KV blocks
        for one more would run out; an arrival that could join cuts it short."""
        left = min([r.output_tokens - r.produced for r in decoding])  # (a list: faster)
        run = min(MAX_RUN_ITERATIONS, left)
        run = self._iterations_that_fit(decoding, run)
        self.store.offer_shape(lambda: ((), tuple(contexts)))
        costs = self.cost.decode_run(contexts, run)
        interruptible = not self.waiting and self._below_cap()
        return _plan(now, costs, interruptible=interruptible,
                     work=Iterations([], decoding))

    def _iterations_that_fit(self, decoding: list[Request], most: int) -> int:
        """The most decode iterations (1..most) whose KV growth fits the free blocks
        (the first one's blocks are already held)."""
        def fits(steps: int) -> bool:
            return self.kv.extra_blocks_after(decoding, steps) <= self.kv.free_blocks
        if fits(most):  # the usual case: enough free blocks for the whole run
            return most
        low, high = 1, most - 1
        while low < high:  # largest steps with fits(steps); fits(1) holds
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(middle) else (low, middle - 1)
        return low

    def commit(self, plan: Plan, done: int) -> None:
        work: Iterations = plan.work
        end = plan.end(done - 1)
        self.store.on_iterations(self.index, plan.busy(done), plan.energy(done),
                                 done, self.running_count)
        finished = []
        grow = self.kv.grow
        for request in work.decoding:
            kv_tokens = request.kv_tokens + done
            if kv_tokens > request.kv_held:
                grow(request, kv_tokens)
            request.kv_tokens = kv_tokens
            produced = request.produced = request.produced + done
            if produced == request.output_tokens:
                finished.append(request)
        if finished:
            self.decoding = [r for r in self.decoding
                             if r.produced != r.output_tokens]
        prefilled = 0  # chunks that completed their prefill: the first ones
        for request, new in work.chunks:
            request.prefilled += new
            if not request.in_prefill:
                prefilled += 1
                request.kv_tokens = request.prefill_target
                request.produced += 1
                on_recovered(request, end, swapped=False)
                if request.first_token_s is None:
                    request.first_token_s = end
                if request.produced == request.output_tokens:
                    finished.append(request)
                else:
                    self.decoding.append(request)
        del self.prefilling[:prefilled]
        for request in finished:
            self._finish(request, end)
