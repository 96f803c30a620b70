"""The compiled serving loop's state in arrays (simulator.serving.loop_kernel): the
layout of its scalar, per-lane (per-replica) and per-request arrays, the statuses and labels its
kernels share, and SimPy's event queue as a heap of (time, priority, id) rows, so
events are processed in the order SimPy processes them. The heap's room is the
driver's (queue_room): its last row is where `pop` leaves the head."""

from __future__ import annotations

from simulator.kernels.jit import njit

# Statuses the kernel returns.
DONE, MISS, PROGRESS, GROW = 0, 1, 2, 3
# Which cost a MISS asks for (I_MISS_KIND), keyed by I_MISS_A (and I_MISS_B): a
# call's, or a grid point's (decode, dense part, prefill attention).
K_CALL, K_GRID, K_DENSE_GRID, K_PREFILL_GRID = 0, 1, 2, 3

# Scalar ints of the run (si). Lanes: the processes of a replica, one per micro-batch
# (I_LANES of them; 1 where a replica is one stage); I_STAGES its pipeline stages.
(I_N, I_ARR_INDEX, I_ARR_WAITED, I_EID, I_QLEN, I_PENDING, I_PENDING_REP,
 I_TOTAL_BLOCKS, I_BLOCK, I_MAX_BATCH, I_MAX_TOKENS, I_BITS, I_CAP_CALLED, I_CAP_LOW,
 I_CAP_HIGH, I_PREEMPTIONS, I_NFIN, I_NDROP, I_NCHANGES, I_SEEN, I_STRIDE, I_NSHAPES,
 I_SHAPE_USED, I_REPORT_NEXT, I_MISS_KIND, I_MISS_A, I_MISS_B, I_ARRIVED, I_LIMIT,
 I_REPORTS, I_NTOUCHED, I_STARTED, I_REPLICAS, I_NEXT, I_LANES, I_STAGES,
 I_REG) = range(37)
INTS = 37
# Scalar floats of the run (sf).
F_NOW = 0
FLOATS = 1
# Each lane's ints (a row of rs) and floats (a row of rg): its scheduler, its process
# and, pipelined, its micro-batch's run through the stages. A replica's shared state
# (its queue, KV blocks, the store's per-replica totals, the pipeline's occupancy) is
# held in the row of its first lane (`pool`): the fields marked so.
(S_GEN, S_TRIG, S_WAIT, S_WAIT_GEN, S_WAIT_EID, S_RESUME, S_FREE, S_WHEAD, S_WCOUNT,
 S_NDEC, S_NPRE, S_NCHUNK, S_PLAN_KIND, S_RUN, S_INTERRUPT, S_DONE, S_OFFERED, S_ITERS,
 S_RUNNING_MAX, S_INDEX, S_EV_EID, S_WAIT_FREED, S_REG, S_IN_FLIGHT,
 S_FREED_GEN) = range(25)
REPLICA_INTS = 25
# pool: S_FREE, S_WHEAD, S_WCOUNT, S_ITERS, S_RUNNING_MAX, S_IN_FLIGHT, S_FREED_GEN
(G_CLOCK_SINCE, G_CLOCK_SECONDS, G_PLAN_START, G_BUSY, G_ENERGY, G_LAST, G_SHARE,
 G_SPENT, G_END, G_STAGE_BUSY, G_PIPE_ACTIVE, G_ACTIVE_SINCE) = range(12)
REPLICA_FLOATS = 12
# pool: G_BUSY, G_ENERGY, G_STAGE_BUSY, G_PIPE_ACTIVE, G_ACTIVE_SINCE
# Per request ints (ri) and floats (rf); NaN stands for None.
R_PROMPT, R_OUTPUT, R_TARGET, R_PREFILLED, R_KV_TOKENS, R_PRODUCED, R_KV_HELD, \
    R_PREEMPT, R_DROPPED = range(9)
REQUEST_INTS = 9
Q_ARRIVAL, Q_FIRST, Q_FINISH, Q_ADMITTED, Q_KV_MARK, Q_LOST_SINCE, Q_KV_WAIT, \
    Q_KV_WAIT_FIRST, Q_PREEMPT_LOST = range(9)
REQUEST_FLOATS = 9

# SimPy's priorities, and the events of the processes: the arrivals', each lane's
# start, its arrival news, a replica's timeout and first_of event; pipelined, a
# replica's news of a commit (`freed`), a lane's `news` condition and the end of its
# micro-batch's iteration on the last stage.
URGENT, NORMAL = 0, 1
EV_INIT_ARR, EV_INIT_REP, EV_ARR_TIMEOUT, EV_ARR_END, EV_ARRIVED, EV_REP_TIMEOUT, \
    EV_EITHER, EV_FREED, EV_NEWS, EV_STAGE = range(10)
# What a lane waits for (W_NEWS: its `news` condition, pending; W_CONDITION: met).
W_NONE, W_ARRIVED, W_FIRST, W_EITHER, W_TIMEOUT, W_NEWS, W_CONDITION, \
    W_STAGE = range(8)
# Where a lane's process goes on (Replica.serving's and PipelinedReplica.serving's
# points).
L_TOP, L_PRICE, L_DISPATCH, L_AFTER_FIRST, L_COMMIT, L_STAGE_END, L_DRAIN = range(7)
PLAN_ITERATION, PLAN_DECODE_RUN = 1, 2
MAX_RUN_ITERATIONS = 4096  # simulator.serving.schedulers.MAX_RUN_ITERATIONS
REPORT_EVERY = 1024        # simulator.serving.engine.REPORT_EVERY
VARIABLE, FIXED = 0, 1


@njit(cache=True)
def _less(hq_t, hq_i, a, b):
    if hq_t[a] != hq_t[b]:
        return hq_t[a] < hq_t[b]
    if hq_i[a, 0] != hq_i[b, 0]:
        return hq_i[a, 0] < hq_i[b, 0]
    return hq_i[a, 1] < hq_i[b, 1]


@njit(cache=True)
def _swap(hq_t, hq_i, a, b):
    hq_t[a], hq_t[b] = hq_t[b], hq_t[a]
    for k in range(5):
        hq_i[a, k], hq_i[b, k] = hq_i[b, k], hq_i[a, k]


@njit(cache=True)
def schedule(si, hq_t, hq_i, when, priority, kind, replica, ref):
    """env.schedule: queued at `when` with the next event id; returns the id."""
    n = si[I_QLEN]
    if n >= hq_t.shape[0] - 1:
        raise RuntimeError("the compiled serving loop's event queue is full")
    eid = si[I_EID]
    si[I_EID] = eid + 1
    hq_t[n] = when
    hq_i[n, 0], hq_i[n, 1], hq_i[n, 2], hq_i[n, 3], hq_i[n, 4] = \
        priority, eid, kind, replica, ref
    si[I_QLEN] = n + 1
    while n > 0:
        parent = (n - 1) // 2
        if not _less(hq_t, hq_i, n, parent):
            break
        _swap(hq_t, hq_i, n, parent)
        n = parent
    return eid


@njit(cache=True)
def pop(si, hq_t, hq_i):
    """Removes the queue's head (left in the last row for the caller)."""
    n = si[I_QLEN] - 1
    last = hq_t.shape[0] - 1
    hq_t[last] = hq_t[0]
    for k in range(5):
        hq_i[last, k] = hq_i[0, k]
    hq_t[0] = hq_t[n]
    for k in range(5):
        hq_i[0, k] = hq_i[n, k]
    si[I_QLEN] = n
    i = 0
    while True:
        left, right, small = 2 * i + 1, 2 * i + 2, i
        if left < n and _less(hq_t, hq_i, left, small):
            small = left
        if right < n and _less(hq_t, hq_i, right, small):
            small = right
        if small == i:
            break
        _swap(hq_t, hq_i, i, small)
        i = small


@njit(cache=True)
def carry_on(si, sf, hq_t, when):
    """engine.carry_on."""
    if si[I_QLEN] > 0 and hq_t[0] <= when:
        return False
    sf[F_NOW] = when
    return True

