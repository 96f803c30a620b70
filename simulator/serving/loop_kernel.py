"""The compiled serving loop's kernel: the reference event loop (simulator.serving.engine)
over the loop's arrays (the layout: simulator.serving.loop_state): the arrival process
(round robin over the replicas), each replica's process (Replica.serving) or, for a
replica of pipeline stages, each of its micro-batches' (loop_pipeline), their
continuous batching with a paged KV cache and preemption by recompute (loop_batching)
and SimPy's event queue. The driver (simulator.serving.compiled_loop) says why and when.

Every float is computed as the reference computes it: the same operations in the same
order (no fastmath; a NumPy accumulate is a sequential loop here). The event queue
holds the events SimPy would hold (timeouts, an arrival's news, first_of's and the
conditions' events, stale ones), each with SimPy's (time, priority, id), so ties
resolve as there.

The kernel returns to its driver where it lacks an iteration cost (MISS: the driver
asks the cost model, as the reference would at that point, and calls again) and every
REPORT_EVERY finished requests (PROGRESS); it resumes where it stopped (`I_PENDING`).

Two kernels share the event loop's parts (inlined): serve_loop for replicas of one
stage, serve_pipelined for replicas of pipeline stages. Each process's plan and pricing
are inlined into it (their records passed by value cost more than their work), so
compiling a replica kind's process is most of a cold compile: a run compiles only its
own kind's.
"""

from __future__ import annotations

from simulator.kernels.jit import njit
from simulator.serving.loop_batching import commit, enqueue, plan, price
from simulator.serving.loop_pipeline import lane_process, on_arrived, on_freed
from simulator.serving.loop_state import (DONE, EV_ARRIVED, EV_ARR_END, EV_ARR_TIMEOUT,
                                          EV_EITHER, EV_FREED, EV_INIT_ARR, EV_INIT_REP,
                                          EV_NEWS, EV_REP_TIMEOUT, EV_STAGE, F_NOW,
                                          G_PLAN_START, INLINED, I_ARR_INDEX, I_ARR_WAITED,
                                          I_LANES, I_N, I_NDROP, I_NEXT, I_NFIN, I_PENDING,
                                          I_PENDING_REP, I_QLEN, I_REPLICAS, I_REPORTS,
                                          I_REPORT_NEXT, I_STARTED, LOOP,
                                          L_AFTER_FIRST, L_COMMIT, L_DISPATCH, L_PRICE,
                                          L_TOP, NORMAL, PROGRESS, Q_ARRIVAL, REPORT_EVERY,
                                          S_DONE, S_EV_EID, S_GEN, S_INTERRUPT, S_RESUME,
                                          S_RUN, S_TRIG, S_WAIT, S_WAIT_EID, S_WAIT_GEN,
                                          URGENT, W_ARRIVED, W_CONDITION, W_EITHER,
                                          W_FIRST, W_NONE, W_STAGE, W_TIMEOUT, batch_of,
                                          carry_on, pop, schedule)


@njit(**LOOP)
def _wake(queue, s, now, replica):
    if not s[S_TRIG]:
        s[S_TRIG] = 1
        schedule(queue, now, NORMAL, EV_ARRIVED, replica, s[S_GEN])


@njit(**INLINED)
def _arrivals(state):
    """engine.arriving from where it stopped, until it waits or ends; round robin
    over the replicas (routing.RoundRobin), each request enqueued on its replica's
    first lane and every lane of it woken (PipelinedReplica.wake)."""
    si, sf, queue, lane_state, requests = (state.ints, state.floats, state.queue,
                                           state.lanes, state.requests)
    rs, rf = lane_state.ints, requests.floats
    replicas, lanes = si[I_REPLICAS], si[I_LANES]
    n = si[I_N]
    while si[I_ARR_INDEX] < n:
        r = si[I_ARR_INDEX]
        at = rf[r, Q_ARRIVAL]
        if not si[I_ARR_WAITED] and at > sf[F_NOW]:
            delay = at - sf[F_NOW]
            if not carry_on(queue, sf, sf[F_NOW] + delay):
                schedule(queue, sf[F_NOW] + delay, NORMAL, EV_ARR_TIMEOUT, 0, 0)
                si[I_ARR_WAITED] = 1
                return
        si[I_ARR_WAITED] = 0
        target = si[I_NEXT] % replicas
        si[I_NEXT] += 1
        pool = target * lanes
        enqueue(si, requests, lane_state, target, r, at)
        for lane in range(pool, pool + lanes):
            _wake(queue, rs[lane], sf[F_NOW], lane)
        si[I_ARR_INDEX] = r + 1
    for lane in range(replicas * lanes):  # close(), wake(); then the process ends
        _wake(queue, rs[lane], sf[F_NOW], lane)
    schedule(queue, sf[F_NOW], NORMAL, EV_ARR_END, 0, 0)
    si[I_ARR_INDEX] = n + 1


@njit(**LOOP)
def _bisect_left(values, n, x):
    low, high = 0, n
    while low < high:
        middle = (low + high) // 2
        if values[middle] < x:
            low = middle + 1
        else:
            high = middle
    return low


@njit(**INLINED)
def _replica(label, replica, state, tables):
    """Replica `replica`'s Replica.serving from `label` until it waits (DONE) or the
    driver is needed (the label to go on from is then I_PENDING); its one lane is its
    pool."""
    si, sf, queue = state.ints, state.floats, state.queue
    requests, work = state.requests, state.work
    batch = batch_of(state.lanes, replica, si[I_LANES])
    s, g, p_ends = batch.s, batch.g, batch.ends
    while True:
        if label == L_TOP:
            if s[S_TRIG]:  # a new event for the next arrival
                s[S_GEN] += 1
                s[S_TRIG] = 0
            if not plan(si, sf, batch, requests, work):
                s[S_WAIT], s[S_WAIT_GEN] = W_ARRIVED, s[S_GEN]
                s[S_RESUME] = L_TOP
                return DONE
            label = L_PRICE
        if label == L_PRICE:
            status = price(si, sf, batch, requests, work, tables)
            if status != DONE:
                si[I_PENDING], si[I_PENDING_REP] = L_PRICE, replica
                return status
            label = L_DISPATCH
        if label == L_DISPATCH:
            run = s[S_RUN]
            end = p_ends[run - 1]
            s[S_DONE] = run
            delay = max(0.0, end - sf[F_NOW])
            if s[S_INTERRUPT]:
                if not carry_on(queue, sf, sf[F_NOW] + delay):  # first_of
                    eid = schedule(queue, sf[F_NOW] + delay, NORMAL, EV_REP_TIMEOUT,
                                   replica, 0)
                    s[S_WAIT], s[S_WAIT_GEN], s[S_WAIT_EID] = W_FIRST, s[S_GEN], eid
                    s[S_RESUME] = L_AFTER_FIRST
                    return DONE
                label = L_AFTER_FIRST
            else:
                if not carry_on(queue, sf, sf[F_NOW] + delay):
                    eid = schedule(queue, sf[F_NOW] + delay, NORMAL, EV_REP_TIMEOUT,
                                   replica, 0)
                    s[S_WAIT], s[S_WAIT_EID] = W_TIMEOUT, eid
                    s[S_RESUME] = L_COMMIT
                    return DONE
                label = L_COMMIT
        if label == L_AFTER_FIRST:
            run = s[S_RUN]
            now = sf[F_NOW]
            if now < p_ends[run - 1]:  # finish the iteration under way
                done = _bisect_left(p_ends, run, now) + 1
                s[S_DONE] = done
                delay = max(0.0, p_ends[done - 1] - now)
                if not carry_on(queue, sf, now + delay):
                    eid = schedule(queue, now + delay, NORMAL, EV_REP_TIMEOUT, replica, 0)
                    s[S_WAIT], s[S_WAIT_EID] = W_TIMEOUT, eid
                    s[S_RESUME] = L_COMMIT
                    return DONE
            label = L_COMMIT
        if label == L_COMMIT:
            done = s[S_DONE]
            end = p_ends[done - 1]
            commit(si, batch, requests, done, end, end - g[G_PLAN_START])
            label = L_TOP
            finished = si[I_NFIN] + si[I_NDROP]
            if si[I_REPORTS] and finished >= si[I_REPORT_NEXT]:  # engine.reporter
                si[I_REPORT_NEXT] = finished + REPORT_EVERY
                si[I_PENDING], si[I_PENDING_REP] = L_TOP, replica
                return PROGRESS


@njit(**INLINED)
def _resumed(state, event, now):
    """The popped event (its queue row) handled, as engine.run_serving's env.run()
    does: the label of the process it resumes (-1 where none)."""
    queue, rs = state.queue, state.lanes.ints
    eid, kind, lane, ref = event[1], event[2], event[3], event[4]
    s = rs[lane]  # (EV_FREED: `lane` is the replica)
    label = -1
    if kind == EV_INIT_ARR or kind == EV_ARR_TIMEOUT:
        _arrivals(state)
    elif kind == EV_INIT_REP:
        label = L_TOP
    elif kind == EV_ARRIVED:
        if s[S_WAIT] == W_ARRIVED and s[S_WAIT_GEN] == ref:
            label = s[S_RESUME]
        elif s[S_WAIT] == W_FIRST and s[S_WAIT_GEN] == ref:  # first_of fires
            s[S_WAIT] = W_EITHER
            schedule(queue, now, NORMAL, EV_EITHER, lane, 0)
        else:
            on_arrived(queue, s, now, lane, ref)
    elif kind == EV_REP_TIMEOUT:
        if s[S_WAIT] == W_TIMEOUT and s[S_WAIT_EID] == eid:
            label = s[S_RESUME]
        elif s[S_WAIT] == W_FIRST and s[S_WAIT_EID] == eid:
            s[S_WAIT] = W_EITHER
            schedule(queue, now, NORMAL, EV_EITHER, lane, 0)
    elif kind == EV_EITHER:
        if s[S_WAIT] == W_EITHER:
            label = s[S_RESUME]
    elif kind == EV_FREED:
        on_freed(queue, rs, now, lane, ref)
    elif kind == EV_NEWS:
        if s[S_WAIT] == W_CONDITION:
            label = s[S_RESUME]
    elif kind == EV_STAGE:
        if s[S_WAIT] == W_STAGE and s[S_EV_EID] == eid:
            label = s[S_RESUME]
    if label >= 0:
        s[S_WAIT] = W_NONE
    return label


@njit(**INLINED)
def _started(state):
    """The arrival process's and each lane's first events scheduled on the first
    call; the (label, lane) a previous call left pending."""
    si, queue = state.ints, state.queue
    if not si[I_STARTED]:  # the arrival process, then each lane's (engine order)
        si[I_STARTED] = 1
        schedule(queue, 0.0, URGENT, EV_INIT_ARR, 0, 0)
        for lane in range(si[I_REPLICAS] * si[I_LANES]):
            schedule(queue, 0.0, URGENT, EV_INIT_REP, lane, 0)
    label, lane = si[I_PENDING], si[I_PENDING_REP]
    si[I_PENDING] = -1
    return label, lane


@njit(**LOOP)
def serve_loop(state, tables):
    """engine.run_serving's env.run() over the loop's state (a LoopState) and the cost
    model's tables (loop_prices.CostTables), each replica one lane (_replica): DONE
    when the queue is empty; MISS, PROGRESS or GROW where the driver must act first
    (call again after). A kernel of its own, as serve_pipelined is: each compiles only
    its replicas' process (inlined, with its plan and pricing: most of the compile)."""
    si, sf, queue = state.ints, state.floats, state.queue
    hq_t, hq_i = queue.times, queue.rows
    label, lane = _started(state)
    while True:
        if label >= 0:
            status = _replica(label, lane, state, tables)
            if status != DONE:
                return status
        if si[I_QLEN] == 0:
            return DONE
        pop(queue)
        head = hq_t.shape[0] - 1
        now = hq_t[head]
        sf[F_NOW] = now
        lane = hq_i[head, 3]
        label = _resumed(state, hq_i[head], now)


@njit(**LOOP)
def serve_pipelined(state, tables):
    """serve_loop where each replica's stages are lanes (loop_pipeline.lane_process)."""
    si, sf, queue = state.ints, state.floats, state.queue
    hq_t, hq_i = queue.times, queue.rows
    label, lane = _started(state)
    while True:
        if label >= 0:
            status = lane_process(label, lane, state, tables)
            if status != DONE:
                return status
        if si[I_QLEN] == 0:
            return DONE
        pop(queue)
        head = hq_t.shape[0] - 1
        now = hq_t[head]
        sf[F_NOW] = now
        lane = hq_i[head, 3]
        label = _resumed(state, hq_i[head], now)
