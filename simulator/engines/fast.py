"""The fast engine: a compiled (Numba, cache=True) replay of a tile program.

It gives the same per-step times and breakdown as the SimPy engine (engines.des), which
is the model of record; DESIGN.md section 3 ("Engines: times of each step" and
"Accounting per operator") is the contract both implement. The public `run_fast`
validates the program and calls the private kernel `_replay` with flat arrays and a few
scalars, as stumpy does; `replay_stream` feeds it a program block by block (a
StreamedProgram, simulator.program.streamed), its state carried in arrays between calls. The per-step arithmetic (service_cycles, input_stall) is
imported from simulator.model.timing, so the semantics are written once.

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
    number, bytes, reloaded): a ring buffer that starts at 16 entries and doubles when
    full. It stays within about `slots` entries for programs whose acquisitions and
    releases pair up (each unserved release holds a slot); only releases beyond the last
    acquisition can grow it.

Streaming. The kernel replays a window of steps (the whole program, or the steps a
window left plus the next block) and, in a window that is not the last, stops at the
first server decision that could depend on a step after the window: a head load past
it, or (with reloads) a load request it cannot yet make. The loop up to that point is
exactly the whole program's, and the state carried (all of the above, in arrays) lets
the next call continue it, so the outcome is the same whatever the blocks. What a
window leaves is the steps from the next compute on: at most `depth` of them, since
loads are requested at most `depth` steps ahead of the computes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.kernels.jit import njit
from simulator.engines.outcome import Breakdown, EngineOutcome, StepTimes
from simulator.errors import UnfinishedStepError
from simulator.program.tile_program import (MAX_DEPTH, MemoryParams, ProgramBound,
                                            StepArrays, TileProgram, check_program,
                                            validate_memory)
from simulator.program.validity import header_valid, validate_fast
from simulator.program.streamed import (DEFAULT_BLOCK_STEPS, StreamChecker,
                                        StreamedProgram, as_streamed, joined,
                                        power_of_two_above, reload_tables, unconsumed)
from simulator.model.timing import input_stall, service_cycles

# Rows of the kernel's (10, S) per-step output, in StepTimes field order.
_LOAD_REQUEST, _LOAD_START, _LOAD_USABLE = 0, 1, 2
_COMPUTE_START, _COMPUTE_END, _VECTOR_END = 3, 4, 5
_STORE_REQUEST, _STORE_START, _STORE_SERVED, _STORE_COMPLETE = 6, 7, 8, 9
_N_STEP_FIELDS = 10

# Columns of the kernel's store FIFO rows: a row carries what its service needs (bytes,
# whether a later step reloads it), so a stream never looks back at an earlier block.
_Q_STEP, _Q_REQUEST, _Q_RELEASE, _Q_VECTOR, _Q_BYTES, _Q_RELOADED = range(6)
_Q_COLUMNS = 6

# Load ring size: a power of two >= MAX_DEPTH, so `i & _LOAD_RING_MASK` replaces i % depth.
_LOAD_RING = 4
_LOAD_RING_MASK = _LOAD_RING - 1
assert MAX_DEPTH <= _LOAD_RING

_STORE_FIFO_START = 16

# The kernel's scalar state, carried from one window of steps to the next.
(_NEXT_COMPUTE, _N_REQUESTED, _N_RESOLVED, _LAST_REQUEST, _SERVER_FREE, _PREV_END,
 _PREV_VE, _N_ACQUIRED, _N_RELEASED, _LAST_COMPLETE, _BUSY, _FILL, _STALL_IN, _STALL_OUT,
 _STALL_OUT_VECTOR, _OFFCHIP_BUSY, _VECTOR_BUSY, _EVACUATION_BUSY, _Q_HEAD, _Q_TAIL,
 _N_STATE) = range(21)




class ReplayState(NamedTuple):
    """What the replay carries from one window of steps to the next: the scalar
    `state` (the _NEXT_COMPUTE .. entries), the load rings (request, usable time,
    compute end, by step & 3), the completions (done_*), the releases (rel_*) and the
    store FIFO, which a window may grow (replay_window returns the record with it)."""

    state: np.ndarray
    load_req: np.ndarray
    load_use: np.ndarray
    comp_end: np.ndarray
    done_step: np.ndarray
    done_time: np.ndarray
    rel_free: np.ndarray
    rel_vector: np.ndarray
    fifo: np.ndarray


class ReplayRun(NamedTuple):
    """A program's replay, the same for each of its windows: its steps, prefetch depth
    and output-buffer slots, the memory's bytes per cycle and access cycles, whether
    each step's times are kept, and the (_N_STEP_FIELDS, steps or 0) array they go in."""

    n_steps: int
    depth: int
    slots: int
    bytes_per_cycle: float
    access_cycles: int
    keep: bool
    out: np.ndarray


# One signature: left to itself, Numba first compiles a specialisation for the literal
# zeros the kernel starts its FIFO indices at, then another for int64 (about 2 s cold).
@njit("int64[:, ::1](int64[:, ::1], int64, int64)", cache=True)
def _grow_fifo(fifo, head, tail):
    """Copy the FIFO's live rows, oldest first, into a ring of twice the capacity."""
    mask = fifo.shape[0] - 1
    bigger = np.empty((2 * fifo.shape[0], fifo.shape[1]), np.int64)
    for k in range(tail - head):
        for column in range(fifo.shape[1]):  # a slice copy compiles its error text: 2 s
            bigger[k, column] = fifo[(head + k) & mask, column]
    return bigger


# The argument types of a replay without partial-sum reloads or evacuation (reloaded and
# evacuation None), compiled ahead on a machine's first run (simulator.kernels.ahead).
_REPLAY_TYPES = ("(" + ", ".join(["int64[::1]"] * 3 + ["boolean[::1]"] * 2
                                 + ["int64[::1]"] * 2 + ["none", "none"] + ["int64"] * 4
                                 + ["float64", "int64", "boolean", "int64[:, ::1]"]
                                 + ["int64[::1]"] * 7 + ["boolean[::1]", "int64[:, ::1]"])
                 + ")")


@njit(cache=True, ahead=(_REPLAY_TYPES,))
def _replay(load_bytes, compute_cycles, vector_cycles, acquire, release, store_bytes,
            reload_of, reloaded, evacuation, base, n_steps, depth, slots, bytes_per_cycle,
            access_cycles, keep, out, state, load_req, load_use, comp_end, done_step,
            done_time, rel_free, rel_vector, fifo):
    """Replay steps base .. base + len(load_bytes) - 1 (a window) of a valid tile
    program of n_steps steps, carrying `state`, the load rings (request, usable time,
    compute end by step & 3), the completions (`done_*`), the releases (`rel_*`) and the
    store `fifo` (returned: it may grow) from the window before; the whole program is one
    window. A window that is not the last stops as soon as its next decision could
    depend on a step after it; the caller passes the steps from state[_NEXT_COMPUTE] on
    again with the next block.

    out: per-step times, a (10, n_steps) int64 array in StepTimes field order when
    `keep` (one window only), else (10, 0).
    reloaded[i]: a later step reloads step base + i's spill; None when nothing reloads,
    so that Numba compiles a specialisation without any of the reload bookkeeping.
    done_step, done_time: store completions of recent reloaded steps: entry
    step & (ring - 1) holds (step, complete); another step there: unknown. Only reloaded
    steps write (a 0-byte store completes before an earlier queued one, so other steps
    could overwrite a column still to be read); a reloaded step's column is read before
    the next reloaded step mapping to it can compute.
    rel_free, rel_vector: (power of two >= slots) per release number (masked): the
    service end of its store (-1 while unknown) and whether that store waited on the
    vector unit.
    evacuation: per-step evacuation cycles run on the vector unit before the epilogue,
    or None (output_path: direct; a specialisation without them).
    """
    end = base + load_bytes.shape[0]
    last_window = end >= n_steps
    done_mask = done_step.shape[0] - 1
    rel_mask = rel_free.shape[0] - 1
    next_compute = state[_NEXT_COMPUTE]
    n_requested = state[_N_REQUESTED]
    n_resolved = state[_N_RESOLVED]
    last_request = state[_LAST_REQUEST]
    server_free = state[_SERVER_FREE]
    prev_end = state[_PREV_END]
    prev_ve = state[_PREV_VE]
    n_acquired = state[_N_ACQUIRED]
    n_released = state[_N_RELEASED]
    last_complete = state[_LAST_COMPLETE]
    busy = state[_BUSY]
    fill = state[_FILL]
    stall_in = state[_STALL_IN]
    stall_out = state[_STALL_OUT]
    stall_out_vector = state[_STALL_OUT_VECTOR]
    offchip_busy = state[_OFFCHIP_BUSY]
    vector_busy = state[_VECTOR_BUSY]
    evacuation_busy = state[_EVACUATION_BUSY]
    q_head = state[_Q_HEAD]  # both counters only grow; the row is counter & (capacity - 1)
    q_tail = state[_Q_TAIL]

    while True:
        # 1. Resolve what is known: load requests whose compute (step - depth) has ended
        # and whose partial-sum source is stored, 0-byte loads at the FIFO head, then
        # computes in order.
        while True:
            while reloaded is not None and n_requested < end:
                j = n_requested
                gate = 0
                if j >= depth:
                    if next_compute <= j - depth:
                        break
                    gate = comp_end[(j - depth) & _LOAD_RING_MASK]
                source = reload_of[j - base]
                if source >= 0:
                    if done_step[source & done_mask] != source:
                        break  # the spill store it reloads has not completed yet
                    gate = max(gate, done_time[source & done_mask])
                last_request = max(last_request, gate)
                load_req[j & _LOAD_RING_MASK] = last_request
                if keep:
                    out[_LOAD_REQUEST, j] = last_request
                n_requested = j + 1
            while (n_resolved < n_requested and n_resolved < end
                   and load_bytes[n_resolved - base] == 0):
                r = load_req[n_resolved & _LOAD_RING_MASK]
                load_use[n_resolved & _LOAD_RING_MASK] = r
                if keep:
                    out[_LOAD_START, n_resolved] = r
                    out[_LOAD_USABLE, n_resolved] = r
                n_resolved += 1
            i = next_compute
            if i >= n_resolved:
                break
            at = i - base
            slot_free = 0
            slot_vector = False
            if acquire[at]:
                if n_acquired >= slots:
                    k = (n_acquired - slots) & rel_mask
                    slot_free = rel_free[k]
                    if slot_free < 0:
                        break  # the store freeing this slot is not served yet
                    slot_vector = rel_vector[k]
                    rel_free[k] = -1  # consumed: release n_acquired + size - slots reuses it
                n_acquired += 1
            usable = load_use[i & _LOAD_RING_MASK]
            start = max(usable, prev_end, slot_free)
            end_i = start + compute_cycles[at]
            busy += compute_cycles[at]
            if i == 0:
                fill = start
            elif start > prev_end:
                gap = start - prev_end
                waited_load = input_stall(usable, start, prev_end)
                stall_in += waited_load
                stall_out += gap - waited_load
                if slot_vector:
                    stall_out_vector += gap - waited_load
            ve = max(end_i, prev_ve) + vector_cycles[at]
            vector_busy += vector_cycles[at]
            if evacuation is not None:
                ve += evacuation[at]
                evacuation_busy += evacuation[at]
            rel_no = -1
            if release[at]:
                rel_no = n_released
                n_released += 1
            is_reloaded = reloaded is not None and reloaded[at]
            if store_bytes[at] == 0:
                # Never touches the server: served and complete at its request.
                last_complete = max(last_complete, ve)
                if is_reloaded:
                    done_step[i & done_mask] = i
                    done_time[i & done_mask] = ve
                if rel_no >= 0:
                    rel_free[rel_no & rel_mask] = ve
                    rel_vector[rel_no & rel_mask] = ve > end_i
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
                fifo[row, _Q_VECTOR] = 1 if ve > end_i else 0
                fifo[row, _Q_BYTES] = store_bytes[at]
                fifo[row, _Q_RELOADED] = 1 if is_reloaded else 0
                q_tail += 1
            if keep:
                out[_COMPUTE_START, i] = start
                out[_COMPUTE_END, i] = end_i
                out[_VECTOR_END, i] = ve
                out[_STORE_REQUEST, i] = ve
            if reloaded is not None:
                comp_end[i & _LOAD_RING_MASK] = end_i
            else:
                j = i + depth  # the load this compute's end lets be requested
                if j < n_steps:
                    last_request = max(last_request, end_i)
                    load_req[j & _LOAD_RING_MASK] = last_request
                    n_requested = j + 1
                    if keep:
                        out[_LOAD_REQUEST, j] = last_request
            prev_end = end_i
            prev_ve = ve
            next_compute = i + 1

        # 2. The next server decision, from the heads of the two FIFOs.
        has_store = q_tail > q_head
        has_load = n_resolved < n_requested  # the head is a load with bytes (step 1)
        if not last_window and (n_resolved >= end or (reloaded is not None
                                                      and n_requested >= end)):
            break  # the head load, or a request that might come first, is past the window
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
            served = t + service_cycles(fifo[row, _Q_BYTES], bytes_per_cycle)
            offchip_busy += served - t
            server_free = served
            last_complete = max(last_complete, served + access_cycles)
            if fifo[row, _Q_RELOADED] != 0:
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
            served = t + service_cycles(load_bytes[li - base], bytes_per_cycle)
            offchip_busy += served - t
            server_free = served
            load_use[li & _LOAD_RING_MASK] = served + access_cycles
            if keep:
                out[_LOAD_START, li] = t
                out[_LOAD_USABLE, li] = served + access_cycles
            n_resolved = li + 1

    state[_NEXT_COMPUTE] = next_compute
    state[_N_REQUESTED] = n_requested
    state[_N_RESOLVED] = n_resolved
    state[_LAST_REQUEST] = last_request
    state[_SERVER_FREE] = server_free
    state[_PREV_END] = prev_end
    state[_PREV_VE] = prev_ve
    state[_N_ACQUIRED] = n_acquired
    state[_N_RELEASED] = n_released
    state[_LAST_COMPLETE] = last_complete
    state[_BUSY] = busy
    state[_FILL] = fill
    state[_STALL_IN] = stall_in
    state[_STALL_OUT] = stall_out
    state[_STALL_OUT_VECTOR] = stall_out_vector
    state[_OFFCHIP_BUSY] = offchip_busy
    state[_VECTOR_BUSY] = vector_busy
    state[_EVACUATION_BUSY] = evacuation_busy
    state[_Q_HEAD] = q_head
    state[_Q_TAIL] = q_tail
    return fifo


@njit(cache=True)
def _head(array, length: int):
    """The first `length` entries of an array; None for None (Numba compiles each
    specialisation with only its own branch)."""
    if array is None:
        return None
    return array[:length]


@njit(cache=True, inline="always")
def replay_window(steps: StepArrays, length: int, base: int, run: ReplayRun,
                  carried: ReplayState) -> ReplayState:
    """_replay, for compiled callers, on the first `length` entries of `steps`: steps
    base .. base + length - 1 of the program, with `evacuation` and `reloaded` None
    where it has none (the kernel's specialisation without them). The kernel's
    positional arguments (scalars and arrays, as the kernel library exports it) stay in
    this module. Returns the carried state, with its FIFO as the window left it."""
    fifo = _replay(steps.load_bytes[:length], steps.compute_cycles[:length],
                   steps.vector_cycles[:length], steps.acquire[:length],
                   steps.release[:length], steps.store_bytes[:length],
                   steps.reload_of[:length], _head(steps.reloaded, length),
                   _head(steps.evacuation, length), base, run.n_steps, run.depth,
                   run.slots, run.bytes_per_cycle, run.access_cycles, run.keep, run.out,
                   carried.state, carried.load_req, carried.load_use, carried.comp_end,
                   carried.done_step, carried.done_time, carried.rel_free,
                   carried.rel_vector, carried.fifo)
    return ReplayState(carried.state, carried.load_req, carried.load_use,
                       carried.comp_end, carried.done_step, carried.done_time,
                       carried.rel_free, carried.rel_vector, fifo)


def _initial_state(program: StreamedProgram | TileProgram, reloads: bool,
                   reload_ring: int) -> ReplayState:
    """The kernel's state before step 0 (`reloads`: whether a step reloads a partial
    sum; `reload_ring`: the completions' ring): without reloads the first `depth`
    loads are requested at cycle 0."""
    state = np.zeros(_N_STATE, np.int64)
    if not reloads:
        state[_N_REQUESTED] = min(program.depth, program.steps)
    # Release numbers are read `slots` acquisitions later; where the slots outnumber
    # the steps none is read, and a ring as long as the steps will do (a buffer of
    # 2**44 bytes holds 4e9 small C tiles: a ring of them would take 32 GiB).
    rel_size = power_of_two_above(min(program.slots, max(program.steps, 1)))
    return ReplayState(
        state=state, load_req=np.zeros(_LOAD_RING, np.int64),
        load_use=np.zeros(_LOAD_RING, np.int64), comp_end=np.zeros(_LOAD_RING, np.int64),
        done_step=np.full(reload_ring, -1, np.int64),
        done_time=np.zeros(reload_ring, np.int64),
        rel_free=np.full(rel_size, -1, np.int64), rel_vector=np.zeros(rel_size, np.bool_),
        fifo=np.empty((_STORE_FIFO_START, _Q_COLUMNS), np.int64))


def _contiguous(array, dtype):
    return np.ascontiguousarray(array, dtype=dtype)


def replay_stream(program: StreamedProgram, memory: MemoryParams, *,
                  block_steps: int = DEFAULT_BLOCK_STEPS, keep_steps: bool = False,
                  checked: bool = False) -> EngineOutcome:
    """Check program and memory (unless `checked`: done already) and replay a program block by block
    with the compiled kernel, its state carried from block to block: the outcome of
    replaying the whole program at once."""
    if not checked:
        validate_memory(memory)
    checker = None if checked else StreamChecker(program)
    bound = None if checked else ProgramBound(memory)
    state, *rings, fifo = _initial_state(program, program.reloads, program.reload_ring)
    out = _step_times(program, state, keep_steps, program.reloads)
    rest = None
    for block in program.blocks(block_steps):
        if checker is not None:
            checker.check(block)
            bound.add(block.program)
        window = joined(rest, block)
        fifo = _replay_window(window.program, window.reloaded, window.begin, program,
                              memory, keep_steps, out, state, rings, fifo)
        rest = unconsumed(window, int(state[_NEXT_COMPUTE]))
    if checker is not None:
        checker.finish()
    return finished_outcome(program, state, out, keep_steps)


def _step_times(program, state: np.ndarray, keep_steps: bool,
                reloads: bool) -> np.ndarray:
    """The kernel's per-step times array: (fields, steps) when kept, else empty."""
    out = np.empty((_N_STEP_FIELDS, program.steps if keep_steps else 0), np.int64)
    if keep_steps and not reloads:
        out[_LOAD_REQUEST, :int(state[_N_REQUESTED])] = 0
    return out


def _replay_window(p: TileProgram, reloaded, begin: int, program, memory: MemoryParams,
                   keep_steps: bool, out: np.ndarray, state: np.ndarray, rings,
                   fifo: np.ndarray) -> np.ndarray:
    """The kernel on one window `p` (steps `begin` on, `reloaded` its reload flags) of
    `program`; returns the store FIFO."""
    return _replay(
        _contiguous(p.load_bytes, np.int64), _contiguous(p.compute_cycles, np.int64),
        _contiguous(p.vector_cycles, np.int64), _contiguous(p.acquire, np.bool_),
        _contiguous(p.release, np.bool_), _contiguous(p.store_bytes, np.int64),
        _contiguous(p.reload_of, np.int64),
        None if reloaded is None else _contiguous(reloaded, np.bool_),
        None if p.evacuation_cycles is None
        else _contiguous(p.evacuation_cycles, np.int64),
        begin, program.steps, program.depth, program.slots,
        float(memory.bytes_per_cycle), int(memory.access_cycles), bool(keep_steps), out,
        state, *rings, fifo)


def _replay_whole(program: TileProgram, memory: MemoryParams,
                  keep_steps: bool) -> EngineOutcome:
    """replay_stream of a checked TileProgram in one block: the whole program as the
    kernel's one window, without a stream's slicing (a search replays thousands of
    short programs, where that costs more than the kernel)."""
    reloaded, reload_ring = reload_tables(program)
    state, *rings, fifo = _initial_state(program, reloaded is not None, reload_ring)
    out = _step_times(program, state, keep_steps, reloaded is not None)
    _replay_window(program, reloaded, 0, program, memory, keep_steps, out, state, rings,
                   fifo)
    return finished_outcome(program, state, out, keep_steps)


def finished_outcome(program, state: np.ndarray, out: np.ndarray,
                     keep_steps: bool) -> EngineOutcome:
    """The outcome of a replay from the kernel's final state (and its step times when
    kept); UnfinishedStepError when steps were left unfinished (a deadlock)."""
    unfinished = program.steps - int(state[_NEXT_COMPUTE])
    if unfinished:
        raise UnfinishedStepError(
            f"{unfinished} of {program.steps} steps never computed: the program "
            "deadlocked", file="tile program", field="acquire")
    return EngineOutcome(breakdown=_breakdown(state, program.overhead_cycles),
                         steps=StepTimes(*out) if keep_steps else None)


def _breakdown(state: np.ndarray, overhead: int) -> Breakdown:
    """The totals of a finished replay from the kernel's final state."""
    prev_end, prev_ve = int(state[_PREV_END]), int(state[_PREV_VE])
    total = max(int(state[_LAST_COMPLETE]), prev_ve)
    drain = total - prev_end
    vector_tail = max(0, prev_ve - prev_end)
    return Breakdown(
        total_cycles=total + overhead, busy_cycles=int(state[_BUSY]),
        fill_cycles=int(state[_FILL]), input_stall_cycles=int(state[_STALL_IN]),
        output_stall_cycles=int(state[_STALL_OUT]),
        output_stall_vector_cycles=int(state[_STALL_OUT_VECTOR]), drain_cycles=drain,
        vector_tail_cycles=vector_tail, store_tail_cycles=drain - vector_tail,
        offchip_busy_cycles=int(state[_OFFCHIP_BUSY]),
        vector_busy_cycles=int(state[_VECTOR_BUSY]), overhead_cycles=overhead,
        evacuation_cycles=int(state[_EVACUATION_BUSY]))


def run_fast(program, memory: MemoryParams, *, keep_steps: bool = False,
             block_steps: int | None = None, arrays_checked: bool = False
             ) -> EngineOutcome:
    """Replay a tile program (a TileProgram, or a StreamedProgram generated block by
    block) with the compiled kernel: the breakdown, and per-step times when keep_steps
    is true (cycle-identical to engines.des). block_steps: steps per block (default:
    a TileProgram in one block, a stream in DEFAULT_BLOCK_STEPS). arrays_checked: a
    TileProgram whose arrays and slots passed these checks under `memory` already (the
    search's lowering of one tiling at another depth), so only its header is checked
    again, the rest being the same.

    Raises InvalidProgramError for a program that breaks a validity rule, AccsimError for
    memory parameters validate_memory rejects, and UnfinishedStepError if steps are left
    unfinished (a deadlock).
    """
    whole = isinstance(program, TileProgram)
    if whole:
        # Checked whole first, so a broken program names the rule validate_program finds.
        if not (arrays_checked and header_valid(program)):
            validate_fast(program)
            validate_memory(memory)
            check_program(program, memory)
        if block_steps is None or block_steps >= program.steps:
            return _replay_whole(program, memory, keep_steps)
    return replay_stream(as_streamed(program), memory,
                         block_steps=block_steps or DEFAULT_BLOCK_STEPS,
                         keep_steps=keep_steps, checked=whole)
