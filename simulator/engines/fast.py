"""The fast engine: a compiled (Numba, cache=True) replay of a tile program.

It gives the same per-step times and breakdown as the SimPy engine (engines.des), which
is the model of record; DESIGN.md section 3 ("Engines: times of each step" and
"Accounting per operator") is the contract both implement. The public `run_fast`
validates the program and calls the private kernel `_replay` with flat arrays and a few
scalars, as stumpy does. The per-step arithmetic (service_cycles, input_stall) is
imported from simulator.timing, so the semantics are written once.

How the kernel walks time. Everything is causal: every time is a max/sum of earlier
times, and only the off-chip server couples the load and store streams. Loads are
requested in step order at non-decreasing times (a running max), and stores too (store
i is requested at ve[i], which is non-decreasing), so each stream is a FIFO and the
server only ever compares the two heads. The kernel repeats:
  1. resolve everything whose inputs are known: the next load requests (each once
     compute of step - depth has ended and, for a partial-sum reload, the spill store
     it reads has completed), 0-byte loads at the head of the load FIFO, then computes
     in order (each needs its load usable, the previous compute's
     end, and, when it acquires, the service end of the store that frees its slot); a
     compute gives its vector end, its store request (a 0-byte store is resolved on the
     spot, a store with bytes joins the store FIFO);
  2. make the next server decision at t = max(server free, min(head requests) + 1),
     serving the store head if it was requested by t - 1, else the load head.
Why a request still unknown at step 2 cannot be eligible at t (so deciding from the
heads alone is exact): every unknown time is, through max and non-negative sums, at
least the service end of some transfer not yet decided. A service not yet decided starts
at or after the server is free and at or after its own request + 1, and lasts at least
one cycle. Take the smallest unknown request u: it is at least the end of an undecided
service whose request r is either known, so r >= min(head requests) and u >= r + 2 >= t + 1
when t = min + 1, or unknown, so r < u, contradicting u's minimality. And u >= server
free + 1 = t + 1 when t = server free. So every unknown request is > t - 1, and neither
the choice nor the start t depends on it. (A reload's request waits on a spill store's
completion, service end + latency: the same kind of time, so the argument holds.)
If step 1 resolves nothing and both FIFOs are empty while steps remain, the program is
deadlocked: the kernel stops and reports the unfinished steps.

What the kernel keeps when per-step times are not asked for (keep=False): no array of
length S. It streams the breakdown totals and keeps
  - rings of 4 entries (MAX_DEPTH) with the request and usable time of the loads
    between the next compute and the last requested load (at most depth of them), and
    the compute ends of the last steps;
  - a ring of store completions spanning the longest reload distance (1 entry when
    nothing spills; the live C tiles when partial sums spill), and, only for a program
    that reloads partial sums, one flag per step saying whether a later step reloads it;
  - a ring of the next power of two >= slots entries with, per release number, the
    service end of its store (the cycle its output slot is free; -1 while unknown) and
    whether that store waited on the vector unit;
  - the FIFO of stores with bytes requested but not yet served (step, request, release
    number): a ring buffer that starts at 16 entries and doubles when full. It stays
    within about `slots` entries for programs whose acquisitions and releases pair up
    (each unserved release holds a slot); only releases beyond the last acquisition can
    grow it.
"""

from __future__ import annotations

import numpy as np

from simulator.jit import njit
from simulator.engines.outcome import Breakdown, EngineOutcome, StepTimes
from simulator.errors import UnfinishedStepError
from simulator.program import (MAX_DEPTH, MemoryParams, TileProgram, check_program,
                               validate_memory, validate_program)
from simulator.timing import input_stall, service_cycles

# Rows of the kernel's (10, S) per-step output, in StepTimes field order.
_LOAD_REQUEST, _LOAD_START, _LOAD_USABLE = 0, 1, 2
_COMPUTE_START, _COMPUTE_END, _VECTOR_END = 3, 4, 5
_STORE_REQUEST, _STORE_START, _STORE_SERVED, _STORE_COMPLETE = 6, 7, 8, 9
_N_STEP_FIELDS = 10

# Columns of the kernel's store FIFO rows.
_Q_STEP, _Q_REQUEST, _Q_RELEASE, _Q_VECTOR = 0, 1, 2, 3

# Load ring size: a power of two >= MAX_DEPTH, so `i & _LOAD_RING_MASK` replaces i % depth.
_LOAD_RING = 4
_LOAD_RING_MASK = _LOAD_RING - 1
assert MAX_DEPTH <= _LOAD_RING

_STORE_FIFO_START = 16


# One signature: left to itself, Numba first compiles a specialisation for the literal
# zeros the kernel starts its FIFO indices at, then another for int64 (about 2 s cold).
@njit("int64[:, ::1](int64[:, ::1], int64, int64)", cache=True)
def _grow_fifo(fifo, head, tail):
    """Copy the FIFO's live rows, oldest first, into a ring of twice the capacity."""
    mask = fifo.shape[0] - 1
    bigger = np.empty((2 * fifo.shape[0], fifo.shape[1]), np.int64)
    for k in range(tail - head):
        bigger[k, :] = fifo[(head + k) & mask, :]
    return bigger


@njit(cache=True)
def _replay(load_bytes, compute_cycles, vector_cycles, acquire, release, store_bytes,
            reload_of, reloaded, depth, slots, bytes_per_cycle, access_cycles, overhead,
            reload_ring, keep, evacuation):
    """Replay a valid tile program; return (per-step times, breakdown totals, unfinished).

    Per-step times are a (10, S) int64 array in StepTimes field order when `keep`, else
    (10, 0). Totals are a 13-entry int64 array in Breakdown field order (the 13th:
    evacuation cycles). `unfinished`
    counts the steps whose compute never ran (0 unless the program deadlocks).
    reload_ring: a power of two above every reload's distance to its source step;
    reloaded[i]: a later step reloads step i's spill; None when nothing reloads, so that
    Numba compiles a second specialisation without any of the reload bookkeeping.
    evacuation: per-step evacuation cycles run on the vector unit before the epilogue,
    or None (output_path: direct; a specialisation without them).
    """
    n_steps = load_bytes.shape[0]
    out = np.empty((_N_STEP_FIELDS, n_steps if keep else 0), np.int64)

    # Loads between the next compute and the last requested one, indexed by step & mask.
    load_req = np.zeros(_LOAD_RING, np.int64)
    load_use = np.zeros(_LOAD_RING, np.int64)
    # Compute ends of the last steps (a load waits for that of step - depth).
    comp_end = np.zeros(_LOAD_RING, np.int64)
    # Store completion of recent reloaded steps, for the reloads that wait on them: row
    # step & (reload_ring - 1) holds (step, complete); another step there: unknown. Only
    # reloaded steps write (a 0-byte store completes before an earlier queued one, so
    # other steps could overwrite a row still to be read); a reloaded step's row is read
    # before the next reloaded step mapping to it can compute.
    done_step = np.full(reload_ring, -1, np.int64)
    done_time = np.zeros(reload_ring, np.int64)
    done_mask = reload_ring - 1
    # Per release number (masked): service end of its store, -1 while unknown.
    rel_size = 1
    while rel_size < slots:
        rel_size *= 2  # a power of two so a mask replaces the modulo on every acquisition
    rel_mask = rel_size - 1
    rel_free = np.full(rel_size, -1, np.int64)
    rel_vector = np.zeros(rel_size, np.bool_)
    # Stores with bytes, requested and not yet served: a growable ring of rows.
    fifo = np.empty((_STORE_FIFO_START, 4), np.int64)
    q_head = 0  # both counters only grow; the row is counter & (capacity - 1)
    q_tail = 0

    next_compute = 0
    # Loads [0, n_requested) have known requests. Without reloads, load i + depth is
    # requested at the end of compute i (the first `depth` at cycle 0); with them, the
    # loop below requests each load once both of its conditions are known.
    n_requested = min(depth, n_steps) if reloaded is None else 0
    if keep and reloaded is None:
        for i in range(n_requested):
            out[_LOAD_REQUEST, i] = 0
    n_resolved = 0   # loads [0, n_resolved) have known usable times
    last_request = 0
    server_free = 0
    prev_end = 0
    prev_ve = 0
    n_acquired = 0
    n_released = 0
    last_complete = 0
    busy = 0
    fill = 0
    stall_in = 0
    stall_out = 0
    stall_out_vector = 0
    offchip_busy = 0
    vector_busy = 0
    evacuation_busy = 0

    while True:
        # 1. Resolve what is known: load requests whose compute (step - depth) has ended
        # and whose partial-sum source is stored, 0-byte loads at the FIFO head, then
        # computes in order.
        while True:
            while reloaded is not None and n_requested < n_steps:
                j = n_requested
                gate = 0
                if j >= depth:
                    if next_compute <= j - depth:
                        break
                    gate = comp_end[(j - depth) & _LOAD_RING_MASK]
                source = reload_of[j]
                if source >= 0:
                    if done_step[source & done_mask] != source:
                        break  # the spill store it reloads has not completed yet
                    gate = max(gate, done_time[source & done_mask])
                last_request = max(last_request, gate)
                load_req[j & _LOAD_RING_MASK] = last_request
                if keep:
                    out[_LOAD_REQUEST, j] = last_request
                n_requested = j + 1
            while n_resolved < n_requested and load_bytes[n_resolved] == 0:
                r = load_req[n_resolved & _LOAD_RING_MASK]
                load_use[n_resolved & _LOAD_RING_MASK] = r
                if keep:
                    out[_LOAD_START, n_resolved] = r
                    out[_LOAD_USABLE, n_resolved] = r
                n_resolved += 1
            i = next_compute
            if i >= n_resolved:
                break
            slot_free = 0
            slot_vector = False
            if acquire[i]:
                if n_acquired >= slots:
                    k = (n_acquired - slots) & rel_mask
                    slot_free = rel_free[k]
                    if slot_free < 0:
                        break  # the store freeing this slot is not served yet
                    slot_vector = rel_vector[k]
                    rel_free[k] = -1  # consumed: release n_acquired + rel_size - slots reuses it
                n_acquired += 1
            usable = load_use[i & _LOAD_RING_MASK]
            start = max(usable, prev_end, slot_free)
            end = start + compute_cycles[i]
            busy += compute_cycles[i]
            if i == 0:
                fill = start
            elif start > prev_end:
                gap = start - prev_end
                waited_load = input_stall(usable, start, prev_end)
                stall_in += waited_load
                stall_out += gap - waited_load
                if slot_vector:
                    stall_out_vector += gap - waited_load
            ve = max(end, prev_ve) + vector_cycles[i]
            vector_busy += vector_cycles[i]
            if evacuation is not None:
                ve += evacuation[i]
                evacuation_busy += evacuation[i]
            rel_no = -1
            if release[i]:
                rel_no = n_released
                n_released += 1
            if store_bytes[i] == 0:
                # Never touches the server: served and complete at its request.
                last_complete = max(last_complete, ve)
                if reloaded is not None and reloaded[i]:
                    done_step[i & done_mask] = i
                    done_time[i & done_mask] = ve
                if rel_no >= 0:
                    rel_free[rel_no & rel_mask] = ve
                    rel_vector[rel_no & rel_mask] = ve > end
                if keep:
                    out[_STORE_START, i] = ve
                    out[_STORE_SERVED, i] = ve
                    out[_STORE_COMPLETE, i] = ve
            else:
                if q_tail - q_head == fifo.shape[0]:
                    fifo = _grow_fifo(fifo, q_head, q_tail)
                    q_tail -= q_head
                    q_head = 0
                row = q_tail & (fifo.shape[0] - 1)
                fifo[row, _Q_STEP] = i
                fifo[row, _Q_REQUEST] = ve
                fifo[row, _Q_RELEASE] = rel_no
                fifo[row, _Q_VECTOR] = 1 if ve > end else 0
                q_tail += 1
            if keep:
                out[_COMPUTE_START, i] = start
                out[_COMPUTE_END, i] = end
                out[_VECTOR_END, i] = ve
                out[_STORE_REQUEST, i] = ve
            if reloaded is not None:
                comp_end[i & _LOAD_RING_MASK] = end
            else:
                j = i + depth  # the load this compute's end lets be requested
                if j < n_steps:
                    last_request = max(last_request, end)
                    load_req[j & _LOAD_RING_MASK] = last_request
                    n_requested = j + 1
                    if keep:
                        out[_LOAD_REQUEST, j] = last_request
            prev_end = end
            prev_ve = ve
            next_compute = i + 1

        # 2. The next server decision, from the heads of the two FIFOs.
        has_store = q_tail > q_head
        has_load = n_resolved < n_requested  # the head is a load with bytes (step 1)
        if not has_store and not has_load:
            break  # all done, or deadlocked if computes remain
        store_req = fifo[q_head & (fifo.shape[0] - 1), _Q_REQUEST] if has_store else 0
        load_r = load_req[n_resolved & _LOAD_RING_MASK] if has_load else 0
        if has_store and has_load:
            earliest = min(store_req, load_r)
        elif has_store:
            earliest = store_req
        else:
            earliest = load_r
        t = max(server_free, earliest + 1)
        if has_store and store_req <= t - 1:
            row = q_head & (fifo.shape[0] - 1)
            s = fifo[row, _Q_STEP]
            q_head += 1
            served = t + service_cycles(store_bytes[s], bytes_per_cycle)
            offchip_busy += served - t
            server_free = served
            last_complete = max(last_complete, served + access_cycles)
            if reloaded is not None and reloaded[s]:
                done_step[s & done_mask] = s
                done_time[s & done_mask] = served + access_cycles
            rel_no = fifo[row, _Q_RELEASE]
            if rel_no >= 0:
                rel_free[rel_no & rel_mask] = served
                rel_vector[rel_no & rel_mask] = fifo[row, _Q_VECTOR] != 0
            if keep:
                out[_STORE_START, s] = t
                out[_STORE_SERVED, s] = served
                out[_STORE_COMPLETE, s] = served + access_cycles
        else:
            li = n_resolved
            served = t + service_cycles(load_bytes[li], bytes_per_cycle)
            offchip_busy += served - t
            server_free = served
            load_use[li & _LOAD_RING_MASK] = served + access_cycles
            if keep:
                out[_LOAD_START, li] = t
                out[_LOAD_USABLE, li] = served + access_cycles
            n_resolved = li + 1

    totals = np.zeros(13, np.int64)
    unfinished = n_steps - next_compute
    if unfinished == 0:
        total = max(last_complete, prev_ve)
        drain = total - prev_end
        vector_tail = max(0, prev_ve - prev_end)
        totals[0] = total + overhead
        totals[1] = busy
        totals[2] = fill
        totals[3] = stall_in
        totals[4] = stall_out
        totals[5] = stall_out_vector
        totals[6] = drain
        totals[7] = vector_tail
        totals[8] = drain - vector_tail
        totals[9] = offchip_busy
        totals[10] = vector_busy
        totals[11] = overhead
        totals[12] = evacuation_busy
    return out, totals, unfinished


def reload_tables(program: TileProgram) -> tuple[np.ndarray | None, int]:
    """For the fast kernel's store-completion ring: which steps a later step reloads
    from (None when nothing reloads, so no S-long array), and a power of two above the
    largest distance from a reload to its source."""
    if program.reload_of.max() < 0:  # the common case, one cheap pass
        return None, 1
    reloads = np.flatnonzero(program.reload_of >= 0)
    reloaded = np.zeros(program.steps, dtype=np.bool_)
    reloaded[program.reload_of[reloads]] = True
    span = int((reloads - program.reload_of[reloads]).max()) + 1
    size = 1
    while size < span:
        size *= 2
    return reloaded, size


def run_fast(program: TileProgram, memory: MemoryParams, *,
             keep_steps: bool = False) -> EngineOutcome:
    """Replay a tile program with the compiled kernel: the breakdown, and per-step times
    when keep_steps is true (cycle-identical to engines.des).

    Raises InvalidProgramError for a program that breaks a validity rule, AccsimError for
    memory parameters validate_memory rejects, and UnfinishedStepError if steps are left
    unfinished (a deadlock).
    """
    validate_program(program)
    validate_memory(memory)
    check_program(program, memory)
    reloaded, reload_ring = reload_tables(program)
    steps, totals, unfinished = _replay(
        np.ascontiguousarray(program.load_bytes, dtype=np.int64),
        np.ascontiguousarray(program.compute_cycles, dtype=np.int64),
        np.ascontiguousarray(program.vector_cycles, dtype=np.int64),
        np.ascontiguousarray(program.acquire, dtype=np.bool_),
        np.ascontiguousarray(program.release, dtype=np.bool_),
        np.ascontiguousarray(program.store_bytes, dtype=np.int64),
        np.ascontiguousarray(program.reload_of, dtype=np.int64), reloaded,
        int(program.depth), int(program.slots), float(memory.bytes_per_cycle),
        int(memory.access_cycles), int(program.overhead_cycles), reload_ring,
        bool(keep_steps), None if program.evacuation_cycles is None
        else np.ascontiguousarray(program.evacuation_cycles, dtype=np.int64),
    )
    if unfinished:
        raise UnfinishedStepError(
            f"{unfinished} of {program.steps} steps never computed: the program "
            "deadlocked", file="tile program", field="acquire")
    breakdown = Breakdown(*(int(v) for v in totals[:12]),
                          evacuation_cycles=int(totals[12]))
    times = StepTimes(*steps) if keep_steps else None
    return EngineOutcome(breakdown=breakdown, steps=times)
