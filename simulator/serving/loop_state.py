"""The compiled serving loop's state in arrays (simulator.serving.loop_kernel): the
layout of its scalar, per-lane (per-replica) and per-request arrays and the records
that carry them between its modules (LoopState, EventQueue, Lanes, Requests,
PriceWork; a lane's Batch), the statuses and labels its kernels share, and SimPy's
event queue as a heap of (time, priority, id) rows, so
events are processed in the order SimPy processes them. The heap's room is the
driver's (queue_room): its last row is where `pop` leaves the head.

The loop's kernels are compiled with LOOP's options: cached, and without Numba's
reference counting (`_nrt=False`). With it, a call of a kernel with array arguments
counted each array in and out where LLVM could not pair the counts away (two atomic
operations an array: a call with four arrays in a loop took ~86 ns, ~1 ns without),
and a profile of a run put two thirds of the kernel's samples in those counts
(NRT_incref, NRT_decref). The kernels allocate nothing and keep no array beyond a call
(every array, and every view of one, is the driver's, alive in it for the call), so
the counts guarded nothing; without them a kernel cannot allocate, nor use a typed
dictionary (hence loop_maps)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.kernels.jit import njit

LOOP = {"cache": True, "_nrt": False}  # the loop's kernels' options (module docstring)
# Those of the kernels a run calls once an event or a plan, with the loop's records: a
# call passes each array of them by value (seven words or more), hundreds of words,
# so each is compiled into its caller (Numba's inlining) instead.
INLINED = {**LOOP, "inline": "always"}
# Statuses the kernel returns.
DONE, MISS, PROGRESS, GROW = 0, 1, 2, 3
# Which cost a MISS asks for (I_MISS_KIND), keyed by I_MISS_A (and I_MISS_B): a
# call's, or a grid point's (decode, dense part, prefill attention); or room in the
# decode or dense table for row I_MISS_A (the driver enlarges the table).
K_CALL, K_GRID, K_DENSE_GRID, K_PREFILL_GRID, K_DECODE_ROOM, K_DENSE_ROOM = range(6)

# Scalar ints of the run (si). Lanes: the processes of a replica, one per micro-batch
# (I_LANES of them; 1 where a replica is one stage); I_STAGES its pipeline stages.
(I_N, I_ARR_INDEX, I_ARR_WAITED, I_EID, I_QLEN, I_PENDING, I_PENDING_REP,
 I_TOTAL_BLOCKS, I_BLOCK, I_MAX_BATCH, I_MAX_TOKENS, I_BITS, I_CAP_CALLED, I_CAP_LOW,
 I_CAP_HIGH, I_PREEMPTIONS, I_NFIN, I_NDROP, I_NCHANGES, I_SEEN, I_STRIDE, I_NSHAPES,
 I_SHAPE_USED, I_REPORT_NEXT, I_MISS_KIND, I_MISS_A, I_MISS_B, I_ARRIVED, I_LIMIT,
 I_REPORTS, I_NTOUCHED, I_STARTED, I_REPLICAS, I_NEXT, I_LANES, I_STAGES,
 I_REG, I_CALL_KEYED) = range(38)
INTS = 38
# I_CALL_KEYED: whether a call's cost depends on its tokens and requests (over a host
# link: invocation.call_cycles); else every call costs the same, keyed as CALL_ANY.
CALL_ANY = 0
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
# A queued event's order among those at its time: priority << ORDER_SHIFT | id (ids
# count a run's events: fewer than 2^40), one comparison for SimPy's two.
ORDER_SHIFT = 40
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


class EventQueue(NamedTuple):
    """SimPy's event queue as a heap: each event's time (`times`) and its (order
    (ORDER_SHIFT), id, kind, lane or replica, reference) row (`rows`); its length and
    next id are the run's ints (`ints`: I_QLEN, I_EID), the same array as
    LoopState.ints."""

    ints: np.ndarray
    times: np.ndarray
    rows: np.ndarray


class Lanes(NamedTuple):
    """Each lane's state: its ints and floats rows (S_*, G_*), its decoding requests
    and, at their positions, each one's context (its KV tokens + 1: its next decode's),
    slack (its blocks' room beyond its KV tokens) and output tokens left, its
    prefilling requests, its planned chunks (request, new tokens) and the running
    sums of its plan's ends and energies; each replica's waiting queue (a ring) and
    its stages' free times (pipelined). A decoding request's KV tokens, blocks and
    output produced are these three, in place: its row of Requests holds them again
    from when it stops decoding (finished or preempted) on, and is stale before
    (each plan and commit reads and writes a lane's few contiguous values instead of
    rows of an array as long as the run's requests). With them, each decoding
    request's decode-run stretch as last priced (loop_prices.price_decode_run): its
    grid cell (low, high; (0, 0) where none is kept) and its (seconds, joules) at low
    and slopes, which hold while its context lies strictly inside the cell."""

    ints: np.ndarray
    floats: np.ndarray
    waiting: np.ndarray
    decoding: np.ndarray
    contexts: np.ndarray
    slack: np.ndarray
    left: np.ndarray
    cells: np.ndarray
    stretches: np.ndarray
    prefilling: np.ndarray
    chunk_requests: np.ndarray
    chunk_tokens: np.ndarray
    ends: np.ndarray
    energies: np.ndarray
    stage_free: np.ndarray


class Requests(NamedTuple):
    """Each request's ints and floats (R_*, Q_*), and the store's lists the driver
    records: the finished and dropped requests in order, the number-in-system
    changes (time, +1 or -1)."""

    ints: np.ndarray
    floats: np.ndarray
    finished: np.ndarray
    dropped: np.ndarray
    change_times: np.ndarray
    change_deltas: np.ndarray


class PriceWork(NamedTuple):
    """What planning and pricing a plan write besides the lane's state: the decoding
    requests short of a block (loop_batching.plan), a decode run's stretches' changes
    by iteration (`rows`, `touched`, `touched_list`), the stretches that change
    within it (`crossings`), and the sampled shapes (`shapes` flat, `shape_offsets`;
    the driver enlarges `shapes`)."""

    shorts: np.ndarray
    rows: np.ndarray
    touched: np.ndarray
    touched_list: np.ndarray
    crossings: np.ndarray
    shapes: np.ndarray
    shape_offsets: np.ndarray


class LoopState(NamedTuple):
    """The whole loop's state: the run's scalar ints and floats (I_*, F_*), its event
    queue, lanes, requests and pricing buffers."""

    ints: np.ndarray
    floats: np.ndarray
    queue: EventQueue
    lanes: Lanes
    requests: Requests
    work: PriceWork


class Batch(NamedTuple):
    """One lane's scheduler, as continuous batching reads it: its rows (`s`, `g`),
    its replica's pool rows (`p`, `gp`: the same rows where the replica is one lane),
    the replica's waiting queue and the lane's requests (the decoding ones with their
    contexts, slack, tokens left and stretches), chunks and plan sums (rows of
    Lanes)."""

    s: np.ndarray
    p: np.ndarray
    g: np.ndarray
    gp: np.ndarray
    waiting: np.ndarray
    decoding: np.ndarray
    contexts: np.ndarray
    slack: np.ndarray
    left: np.ndarray
    cells: np.ndarray
    stretches: np.ndarray
    prefilling: np.ndarray
    chunk_requests: np.ndarray
    chunk_tokens: np.ndarray
    ends: np.ndarray
    energies: np.ndarray


@njit(**INLINED)
def batch_of(lanes, lane, lanes_per_replica):
    """Lane `lane`'s Batch (its replica's pool: the row of its first lane)."""
    replica = lane // lanes_per_replica
    pool = replica * lanes_per_replica
    return Batch(lanes.ints[lane], lanes.ints[pool], lanes.floats[lane],
                 lanes.floats[pool], lanes.waiting[replica], lanes.decoding[lane],
                 lanes.contexts[lane], lanes.slack[lane], lanes.left[lane],
                 lanes.cells[lane], lanes.stretches[lane],
                 lanes.prefilling[lane], lanes.chunk_requests[lane],
                 lanes.chunk_tokens[lane], lanes.ends[lane], lanes.energies[lane])


@njit(**LOOP)
def _less(hq_t, hq_i, a, b):
    """SimPy's order: by time, then priority, then id (a row's ORDER)."""
    if hq_t[a] != hq_t[b]:
        return hq_t[a] < hq_t[b]
    return hq_i[a, 0] < hq_i[b, 0]


@njit(**LOOP)
def _swap(hq_t, hq_i, a, b):
    hq_t[a], hq_t[b] = hq_t[b], hq_t[a]
    for k in range(5):
        hq_i[a, k], hq_i[b, k] = hq_i[b, k], hq_i[a, k]


@njit(**LOOP)
def schedule(queue, when, priority, kind, replica, ref):
    """env.schedule: queued at `when` with the next event id; returns the id."""
    si, hq_t, hq_i = queue.ints, queue.times, queue.rows
    n = si[I_QLEN]
    if n >= hq_t.shape[0] - 1:
        raise RuntimeError("the compiled serving loop's event queue is full")
    eid = si[I_EID]
    si[I_EID] = eid + 1
    hq_t[n] = when
    hq_i[n, 0], hq_i[n, 1], hq_i[n, 2], hq_i[n, 3], hq_i[n, 4] = \
        (priority << ORDER_SHIFT) | eid, eid, kind, replica, ref
    si[I_QLEN] = n + 1
    while n > 0:
        parent = (n - 1) // 2
        if not _less(hq_t, hq_i, n, parent):
            break
        _swap(hq_t, hq_i, n, parent)
        n = parent
    return eid


@njit(**INLINED)
def pop(queue):
    """Removes the queue's head (left in the last row for the caller)."""
    si, hq_t, hq_i = queue.ints, queue.times, queue.rows
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


@njit(**LOOP)
def carry_on(queue, sf, when):
    """engine.carry_on."""
    si, hq_t = queue.ints, queue.times
    if si[I_QLEN] > 0 and hq_t[0] <= when:
        return False
    sf[F_NOW] = when
    return True

