"""Exact steady-state skipping for the fast kernel (issue 26): when the kernel's state
at the end of a period of steps is the state one period earlier moved on in time, the
next periods repeat it exactly, so they are added in closed form instead of replayed.

Why it is exact. The kernel (engines.fast._replay) only takes maxima and sums of
earlier times and per-step durations, and compares times with times, step indices with
step indices. Relabel a state: step indices + P (step counters, queued steps,
completion tags), times + delta (every time it holds; -1, "unknown", stays), release
and acquisition numbers + d (rings indexed by them rotated with them), rings indexed by
step rotated by P. Replaying relabelled inputs (the steps P later, a reload's source +
P) from a relabelled state gives the relabelled result, as long as no comparison with
an absolute bound changes along the way: step 0's fill, the first `depth` loads, the
first `slots` acquisitions (before the first period compared, or none in it) and the
program's end (the caller stops skipping a few steps before it). So if the state after one
period is the one before relabelled (`period_shift`), and the steps of the next k
periods are those of the last one (the caller checks the nest's runs), the state k
periods on is the state now relabelled k times (`advance`), each running total
(busy, stalls, off-chip and vector busy) grown by k times its growth over the period.
The whole state is compared, ring entries no step will read included: stricter than
needed, never looser.
"""

from __future__ import annotations

import numpy as np

from simulator.engines.fast import (_BUSY, _EVACUATION_BUSY, _FILL, _LAST_COMPLETE,
                                    _LAST_REQUEST, _N_ACQUIRED, _N_RELEASED,
                                    _N_REQUESTED, _N_RESOLVED, _NEXT_COMPUTE,
                                    _OFFCHIP_BUSY, _PREV_END, _PREV_VE, _Q_HEAD,
                                    _Q_RELEASE, _Q_REQUEST, _Q_STEP, _Q_TAIL,
                                    _SERVER_FREE, _STALL_IN, _STALL_OUT,
                                    _STALL_OUT_VECTOR, _VECTOR_BUSY, ReplayState)
from simulator.kernels.jit import njit
from simulator.program.tile_program import MAX_DEPTH

# State entries by what they hold: step counters move by the period's steps, times by
# its cycles, running totals by their own growth over it.
_STEP_COUNTERS = (_NEXT_COMPUTE, _N_REQUESTED, _N_RESOLVED)
_TIMES = (_LAST_REQUEST, _SERVER_FREE, _PREV_END, _PREV_VE, _LAST_COMPLETE)
_TOTALS = (_BUSY, _STALL_IN, _STALL_OUT, _STALL_OUT_VECTOR, _OFFCHIP_BUSY, _VECTOR_BUSY,
           _EVACUATION_BUSY)


@njit(cache=True)
def snapshot(carried: ReplayState) -> ReplayState:
    """Copies of the kernel's state, to compare with it one period later."""
    return ReplayState(state=carried.state.copy(), load_req=carried.load_req.copy(),
                       load_use=carried.load_use.copy(), comp_end=carried.comp_end.copy(),
                       done_step=carried.done_step.copy(),
                       done_time=carried.done_time.copy(),
                       rel_free=carried.rel_free.copy(),
                       rel_vector=carried.rel_vector.copy(), fifo=carried.fifo.copy())


@njit(cache=True, inline="always")
def _time_matches(new: int, old: int, delta: int) -> bool:
    """new is old moved on by delta cycles (-1, unknown, stays -1)."""
    return new == old if old < 0 else new == old + delta


@njit(cache=True)
def period_shift(before: ReplayState, steps, slots, reloads, carried: ReplayState):
    """(delta, acquired): the cycles and acquisitions of a period when the state now,
    `carried`, is `before` (a snapshot `steps` steps earlier) relabelled, else (-1, 0).
    `reloads`: the comparison includes the rings only a reloading program uses."""
    (state, load_req, load_use, comp_end, done_step, done_time, rel_free, rel_vector,
     fifo) = carried
    (old, old_req, old_use, old_comp, old_tag, old_done, old_free, old_vector,
     old_fifo) = before
    no = (np.int64(-1), np.int64(0))
    acquired = state[_N_ACQUIRED] - old[_N_ACQUIRED]
    if old[_NEXT_COMPUTE] < MAX_DEPTH or (old[_N_ACQUIRED] < slots and acquired > 0):
        return no   # step 0's fill, the first loads or acquisitions still ahead
    for entry in _STEP_COUNTERS:
        if state[entry] - old[entry] != steps:
            return no
    delta = state[_PREV_END] - old[_PREV_END]
    for entry in _TIMES:
        if state[entry] - old[entry] != delta:
            return no
    if state[_N_RELEASED] - old[_N_RELEASED] != acquired or state[_FILL] != old[_FILL]:
        return no
    ring = load_req.shape[0] - 1
    for x in range(load_req.shape[0]):
        y = (x + steps) & ring
        if load_req[y] != old_req[x] + delta or load_use[y] != old_use[x] + delta:
            return no
        if reloads and comp_end[y] != old_comp[x] + delta:
            return no
    if reloads:
        ring = done_step.shape[0] - 1
        for x in range(done_step.shape[0]):
            y = (x + steps) & ring
            if old_tag[x] < 0:
                if done_step[y] != old_tag[x]:
                    return no
            elif done_step[y] != old_tag[x] + steps or done_time[y] != old_done[x] + delta:
                return no
    ring = rel_free.shape[0] - 1
    for x in range(rel_free.shape[0]):
        y = (x + acquired) & ring
        if not _time_matches(rel_free[y], old_free[x], delta) or \
                rel_vector[y] != old_vector[x]:
            return no
    queued = state[_Q_TAIL] - state[_Q_HEAD]
    if queued != old[_Q_TAIL] - old[_Q_HEAD]:
        return no
    for r in range(queued):
        new_row = fifo[(state[_Q_HEAD] + r) & (fifo.shape[0] - 1)]
        old_row = old_fifo[(old[_Q_HEAD] + r) & (old_fifo.shape[0] - 1)]
        for column in range(fifo.shape[1]):
            shift = steps if column == _Q_STEP else delta if column == _Q_REQUEST else \
                acquired if column == _Q_RELEASE and old_row[column] >= 0 else 0
            if new_row[column] != old_row[column] + shift:
                return no
    return delta, acquired


@njit(cache=True)
def _rotate(ring, by, shift):
    """Move entry x of the ring to (x + by) & (size - 1), adding `shift` to each entry
    but a negative one (unknown), in place. (Element loops: an array expression or a
    slice copy costs seconds of compilation.)"""
    moved = np.empty_like(ring)
    mask = ring.shape[0] - 1
    for x in range(ring.shape[0]):
        moved[(x + by) & mask] = ring[x] + shift if ring[x] >= 0 else ring[x]
    for x in range(ring.shape[0]):
        ring[x] = moved[x]


@njit(cache=True)
def advance(periods, before: ReplayState, steps, delta, acquired, carried: ReplayState):
    """Move the state `carried` on by `periods` periods of `steps` steps, `delta` cycles
    and `acquired` acquisitions (period_shift's), in place: the state the kernel would
    reach replaying them. `before`: the snapshot one period back (the totals' growth)."""
    (state, load_req, load_use, comp_end, done_step, done_time, rel_free, rel_vector,
     fifo) = carried
    old = before.state
    moved, later, more = periods * steps, periods * delta, periods * acquired
    for entry in _TOTALS:
        state[entry] += periods * (state[entry] - old[entry])
    for entry in _STEP_COUNTERS:
        state[entry] += moved
    for entry in _TIMES:
        state[entry] += later
    state[_N_ACQUIRED] += more
    state[_N_RELEASED] += more
    _rotate(load_req, moved, later)
    _rotate(load_use, moved, later)
    _rotate(comp_end, moved, later)   # read only when reloading: moved all the same
    _rotate(done_time, moved, later)   # the time of an unknown tag is never read
    _rotate(done_step, moved, moved)
    _rotate(rel_free, more, later)
    flags = rel_vector.copy()
    for x in range(flags.shape[0]):
        rel_vector[(x + more) & (flags.shape[0] - 1)] = flags[x]
    for r in range(state[_Q_TAIL] - state[_Q_HEAD]):
        row = (state[_Q_HEAD] + r) & (fifo.shape[0] - 1)
        fifo[row, _Q_STEP] += moved
        fifo[row, _Q_REQUEST] += later
        if fifo[row, _Q_RELEASE] >= 0:
            fifo[row, _Q_RELEASE] += more
