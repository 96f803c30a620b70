"""Pipelined replicas in the compiled serving loop: engine.PipelinedReplica's lanes (one
process per micro-batch, each a continuous-batching scheduler over the replica's
shared queue and KV cache) and their micro-batches' passes through the stages, as the
reference runs them (simulator.serving.engine; the layout: loop_state).

SimPy's events of it, each queued with SimPy's (time, priority, id): a lane's
arrival news (EV_ARRIVED), the `news` condition it waits on when it has nothing to
run (arrival news | `freed`: EV_NEWS once met), the replica's `freed` (EV_FREED, one
per commit; it meets the conditions waiting on it in the order they were made), and
the end of a micro-batch's iteration on the last stage (EV_STAGE: `at`'s event, taken
from the queue and queued again by `_drain` as the reference's is)."""

from __future__ import annotations

from simulator.kernels.jit import njit
from simulator.serving.loop_batching import commit, plan, price
from simulator.serving.loop_state import (DONE, EV_FREED, EV_NEWS, EV_STAGE, F_NOW,
                                          G_ACTIVE_SINCE, G_END, G_LAST, G_PIPE_ACTIVE,
                                          G_PLAN_START, G_SHARE, G_SPENT, G_STAGE_BUSY,
                                          INLINED, I_LANES, I_NDROP, I_NFIN, I_PENDING,
                                          I_PENDING_REP, I_QLEN, I_REG, I_REPORTS,
                                          I_REPORT_NEXT, I_STAGES, LOOP, L_COMMIT, L_DRAIN,
                                          L_PRICE, L_STAGE_END, L_TOP, NORMAL, PROGRESS,
                                          REPORT_EVERY, S_EV_EID, S_FREED_GEN, S_GEN,
                                          S_INDEX, S_INTERRUPT, S_IN_FLIGHT, S_REG,
                                          S_RESUME, S_RUN, S_TRIG, S_WAIT, S_WAIT_FREED,
                                          S_WAIT_GEN, W_CONDITION, W_NEWS, W_STAGE,
                                          batch_of, pop, schedule)


@njit(**LOOP)
def _goes_on(s):
    """StageRun.goes_on: the plan has another iteration, and no arrival (where it may
    join) stops the run there."""
    return s[S_INDEX] + 1 < s[S_RUN] and not (s[S_INTERRUPT] and s[S_TRIG])


@njit(**LOOP)
def _left(s, g, now):
    """StageRun.left: the last iteration entered ends on the last stage `now`."""
    g[G_SPENT] += g[G_SHARE]
    g[G_END] = now
    s[S_INDEX] += 1


@njit(**LOOP)
def _enter_next(si, sf, s, g, p_ends, stage_free, queue, lane):
    """PipelinedReplica._enter_next: the run's next iteration enters the first stage
    now, each stage held its share behind the iteration ahead of it there; its end on
    the last stage queued (the event's new id)."""
    end = p_ends[s[S_INDEX]]
    share = (end - g[G_LAST]) / si[I_STAGES]
    g[G_SHARE] = share
    g[G_LAST] = end
    leave = sf[F_NOW]
    for stage in range(si[I_STAGES]):
        ahead = stage_free[stage]
        leave = (leave if leave >= ahead else ahead) + share
        stage_free[stage] = leave
    s[S_EV_EID] = schedule(queue, leave, NORMAL, EV_STAGE, lane, 0)


@njit(**LOOP)
def _drain(si, sf, lane_state, stage_free, queue, lane):
    """PipelinedReplica._drain: the queue's head processed while it is the end of an
    iteration of this replica's that another of its run follows; True where the head
    is then the lane's own (taken: the lane goes on at its time)."""
    rs, rg, ends = lane_state.ints, lane_state.floats, lane_state.ends
    hq_t, hq_i = queue.times, queue.rows
    lanes = si[I_LANES]
    replica = lane // lanes
    head = hq_t.shape[0] - 1
    while si[I_QLEN] > 0:
        if hq_i[0, 2] != EV_STAGE:
            return False
        other = hq_i[0, 3]
        if other == lane:
            pop(queue)
            sf[F_NOW] = hq_t[head]
            return True
        if other // lanes != replica or not _goes_on(rs[other]):
            return False
        pop(queue)
        sf[F_NOW] = hq_t[head]
        _left(rs[other], rg[other], sf[F_NOW])
        _enter_next(si, sf, rs[other], rg[other], ends[other], stage_free, queue, other)
    return False


@njit(**LOOP)
def on_freed(queue, rs, now, replica, freed):
    """The replica's `freed` event `freed` processed: each lane's `news` condition
    waiting on it is met, in the order the conditions were made (its callbacks')."""
    lanes = queue.ints[I_LANES]
    first = replica * lanes
    while True:
        chosen, order = -1, -1
        for lane in range(first, first + lanes):
            s = rs[lane]
            if s[S_WAIT] == W_NEWS and s[S_WAIT_FREED] == freed and \
                    (chosen < 0 or s[S_REG] < order):
                chosen, order = lane, s[S_REG]
        if chosen < 0:
            return
        rs[chosen, S_WAIT] = W_CONDITION
        schedule(queue, now, NORMAL, EV_NEWS, chosen, 0)


@njit(**LOOP)
def on_arrived(queue, s, now, lane, gen):
    """The lane's arrival news `gen` processed: its `news` condition, where it waits
    on it, is met."""
    if s[S_WAIT] == W_NEWS and s[S_WAIT_GEN] == gen:
        s[S_WAIT] = W_CONDITION
        schedule(queue, now, NORMAL, EV_NEWS, lane, 0)


@njit(**INLINED)
def lane_process(label, lane, state, tables):
    """Lane `lane`'s PipelinedReplica.serving from `label` until it waits (DONE) or
    the driver is needed (the label to go on from is then I_PENDING)."""
    si, sf, queue, lanes = state.ints, state.floats, state.queue, state.lanes
    requests, work = state.requests, state.work
    replica = lane // si[I_LANES]
    batch = batch_of(lanes, lane, si[I_LANES])
    s, g, p, gp = batch.s, batch.g, batch.p, batch.gp
    p_ends, free = batch.ends, lanes.stage_free[replica]
    while True:
        if label == L_TOP:
            if s[S_TRIG]:  # a new event for the next arrival
                s[S_GEN] += 1
                s[S_TRIG] = 0
            if not plan(si, sf, batch, requests, work):
                s[S_WAIT], s[S_WAIT_GEN] = W_NEWS, s[S_GEN]  # arrived | freed
                s[S_WAIT_FREED], s[S_REG] = p[S_FREED_GEN], si[I_REG]
                si[I_REG] += 1
                s[S_RESUME] = L_TOP
                return DONE
            label = L_PRICE
        if label == L_PRICE:
            status = price(si, sf, batch, requests, work, tables)
            if status != DONE:
                si[I_PENDING], si[I_PENDING_REP] = L_PRICE, lane
                return status
            if p[S_IN_FLIGHT] == 0:  # _enter
                gp[G_ACTIVE_SINCE] = sf[F_NOW]
            p[S_IN_FLIGHT] += 1
            s[S_INDEX] = 0
            g[G_LAST], g[G_SHARE], g[G_SPENT] = g[G_PLAN_START], 0.0, 0.0
            _enter_next(si, sf, s, g, p_ends, free, queue, lane)
            label = L_DRAIN
        while label == L_DRAIN or label == L_STAGE_END:  # L_STAGE_END: its own end,
            if label == L_DRAIN and not _drain(si, sf, lanes, free, queue,
                                               lane):  # processed by the loop
                s[S_WAIT], s[S_RESUME] = W_STAGE, L_STAGE_END
                return DONE
            going_on = _goes_on(s)
            _left(s, g, sf[F_NOW])
            if going_on:
                _enter_next(si, sf, s, g, p_ends, free, queue, lane)
                label = L_DRAIN
            else:
                label = L_COMMIT
        if label == L_COMMIT:
            now = sf[F_NOW]
            p[S_IN_FLIGHT] -= 1  # _leave
            if p[S_IN_FLIGHT] == 0:
                gp[G_PIPE_ACTIVE] += now - gp[G_ACTIVE_SINCE]
            gp[G_STAGE_BUSY] += g[G_SPENT] * si[I_STAGES]
            commit(si, batch, requests, s[S_INDEX], g[G_END], g[G_SPENT])
            freed = p[S_FREED_GEN]  # freed, self.freed = self.freed, env.event()
            p[S_FREED_GEN] = freed + 1
            schedule(queue, now, NORMAL, EV_FREED, replica, freed)
            label = L_TOP
            finished = si[I_NFIN] + si[I_NDROP]
            if si[I_REPORTS] and finished >= si[I_REPORT_NEXT]:  # engine.reporter
                si[I_REPORT_NEXT] = finished + REPORT_EVERY
                si[I_PENDING], si[I_PENDING_REP] = L_TOP, lane
                return PROGRESS
