"""The fast engine on a streamed GEMM (issue 26): one compiled call generates each
block of steps from the loop nest (lowering.nest_steps.fill_steps) and replays it with
the fast kernel (engines.fast._replay), its state carried as between blocks of any
stream, so no Python runs per block and the blocks stay small enough for the cache.
The nest's validity rules and cycle bound are checked in closed form first
(LoopNest.follows_the_rules, LoopNest.totals); a nest they do not clear is checked on
its generated steps by the stream checker, which names the rule it breaks.

Once the replay's state repeats from one period of the nest to the next (relative to
the time and step reached), and the steps of the next periods repeat too, those
periods are added in closed form instead of replayed (engines.steady): the same
outcome, so a regular 1e8-step GEMM replays a few thousand steps. Not when per-step
times are kept: those need every step.

`run_streamed` is the fast engine's replay for any program: a GemmStream this way,
anything else through engines.fast.run_fast. Results are identical either way.
"""

from __future__ import annotations

import numpy as np

from simulator.engines.fast import (_LOAD_REQUEST, _N_REQUESTED, _N_STEP_FIELDS,
                                    _NEXT_COMPUTE, _initial_state, _replay,
                                    finished_outcome, replay_stream, run_fast)
from simulator.engines.outcome import EngineOutcome
from simulator.engines.steady import advance, period_shift, snapshot
from simulator.kernels.jit import njit
from simulator.lowering.nest_steps import (P_NM, P_ORDER0, P_ORDER1, P_ORDER2,
                                           fill_steps, repeating_runs)
from simulator.lowering.gemm_stream import GemmStream, step_buffers
from simulator.program.tile_program import MAX_DEPTH, MemoryParams, check_totals, validate_memory
from simulator.program.streamed import DEFAULT_BLOCK_STEPS, StreamChecker

# Steps generated and replayed per kernel window: small enough that the window's arrays
# stay in the CPU's cache, large enough that the per-window cost does not show.
NEST_BLOCK_STEPS = 1 << 12


@njit(cache=True)
def _skipped(before, steps, runs, begin, last_run, inner, slots, reloads, params,
             run_classes, a_runs, b_runs, state, load_req, load_use, comp_end, done_step,
             done_time, rel_free, rel_vector, fifo):
    """At a bound `begin`, with `before` the state `steps` steps (`runs` runs of the
    innermost loop) back: when the state repeats it and so will the steps of the next
    whole periods of that length up to last_run, move the state past them
    (engines.steady) and return the steps skipped, else 0."""
    delta, acquired = period_shift(before, steps, slots, reloads, state, load_req,
                                   load_use, comp_end, done_step, done_time, rel_free,
                                   rel_vector, fifo)
    first = state[_NEXT_COMPUTE] // inner   # the first run still to compute
    if delta < 0 or first < runs:
        return 0
    differs = repeating_runs(first, runs, last_run, params, run_classes[0],
                             run_classes[1], run_classes[2], a_runs, b_runs)
    periods = max(0, differs - begin // inner) // runs
    if periods > 0:
        advance(periods, before, steps, delta, acquired, state, load_req, load_use,
                comp_end, done_step, done_time, rel_free, rel_vector, fifo)
    return periods * steps


@njit(cache=True)
def _replay_nest(params, a_runs, b_runs, shapes, cycles, run_classes, skip, block,
                 n_steps, depth, slots, bytes_per_cycle, access_cycles, keep, out, state,
                 load_req, load_use, comp_end, done_step, done_time, rel_free, rel_vector,
                 fifo, load, compute, vector, acquire, release, store, reload_of,
                 evac_buffer, reloaded_buffer, reloaded, evacuation):
    """Generate and replay all n_steps steps, `block` at a time, in buffers of at least
    block + MAX_DEPTH steps: each window is the steps the one before left (moved to the
    front) and the next block. `reloaded`, `evacuation`: None, or the same arrays as
    the buffers (the kernel's specialisation without that bookkeeping, or with it).

    Periods: whole iterations of the outer loop (where the steps repeat, but for the
    first and last) when one fits in `block` steps, else whole runs of the innermost
    loop; up to `block` steps and a quarter of the loop around them, so a few periods
    fit in it; windows end on their bounds. With `skip`, at each bound the state is
    compared with the one a period back (engines.steady) and, when it repeats and so
    do the next periods' steps (nest_steps.repeating_runs, with `run_classes`:
    LoopNest.run_classes), those periods are added in closed form. Returns the store
    FIFO and the steps skipped."""
    skipped = 0
    inner = params[P_NM + params[P_ORDER2]]
    middle = params[P_NM + params[P_ORDER1]]
    outer = inner * middle   # steps of an outer iteration
    if outer <= block:
        period = outer * max(1, min(block // outer, params[P_NM + params[P_ORDER0]] // 4))
    else:
        period = inner * max(1, min(block // inner, middle // 4))
    period_runs = period // inner
    last_run = (n_steps - MAX_DEPTH - 1) // inner   # a skip ends before the end effects
    before = snapshot(state, load_req, load_use, comp_end, done_step, done_time,
                      rel_free, rel_vector, fifo)   # at the last bound, once there was one
    has_before = False
    begin = 0
    rest = 0
    capacity = load.shape[0]
    while begin < n_steps:
        length = min(block, period - begin % period, n_steps - begin, capacity - rest)
        if length <= 0:
            break  # the kernel keeps a whole window back: a deadlock, reported by caller
        fill_steps(begin, length, rest, params, a_runs[0], a_runs[1], a_runs[2],
                   b_runs[0], b_runs[1], b_runs[2], shapes, cycles, load, compute,
                   vector, acquire, release, store, reload_of, evac_buffer,
                   reloaded_buffer)
        window = rest + length
        base = begin - rest
        if reloaded is None:
            if evacuation is None:
                fifo = _replay(load[:window], compute[:window], vector[:window],
                               acquire[:window], release[:window], store[:window],
                               reload_of[:window], None, None, base, n_steps, depth,
                               slots, bytes_per_cycle, access_cycles, keep, out, state,
                               load_req, load_use, comp_end, done_step, done_time,
                               rel_free, rel_vector, fifo)
            else:
                fifo = _replay(load[:window], compute[:window], vector[:window],
                               acquire[:window], release[:window], store[:window],
                               reload_of[:window], None, evacuation[:window], base,
                               n_steps, depth, slots, bytes_per_cycle, access_cycles, keep,
                               out, state, load_req, load_use, comp_end, done_step,
                               done_time, rel_free, rel_vector, fifo)
        elif evacuation is None:
            fifo = _replay(load[:window], compute[:window], vector[:window],
                           acquire[:window], release[:window], store[:window],
                           reload_of[:window], reloaded[:window], None, base, n_steps,
                           depth, slots, bytes_per_cycle, access_cycles, keep, out, state,
                           load_req, load_use, comp_end, done_step, done_time, rel_free,
                           rel_vector, fifo)
        else:
            fifo = _replay(load[:window], compute[:window], vector[:window],
                           acquire[:window], release[:window], store[:window],
                           reload_of[:window], reloaded[:window], evacuation[:window],
                           base, n_steps, depth, slots, bytes_per_cycle, access_cycles,
                           keep, out, state, load_req, load_use, comp_end, done_step,
                           done_time, rel_free, rel_vector, fifo)
        cut = state[_NEXT_COMPUTE] - base
        rest = window - cut
        for j in range(rest):  # the steps still to compute move to the front
            load[j] = load[cut + j]
            compute[j] = compute[cut + j]
            vector[j] = vector[cut + j]
            acquire[j] = acquire[cut + j]
            release[j] = release[cut + j]
            store[j] = store[cut + j]
            reload_of[j] = reload_of[cut + j]
            evac_buffer[j] = evac_buffer[cut + j]
            reloaded_buffer[j] = reloaded_buffer[cut + j]
        begin += length
        if not skip or begin % period != 0:
            continue
        if has_before:
            moved = _skipped(before, period, period_runs, begin, last_run, inner, slots,
                             reloaded is not None, params, run_classes, a_runs, b_runs,
                             state, load_req, load_use, comp_end, done_step, done_time,
                             rel_free, rel_vector, fifo)
            if moved > 0:
                begin += moved
                skipped += moved
                fill_steps(state[_NEXT_COMPUTE], rest, 0, params, a_runs[0],
                           a_runs[1], a_runs[2], b_runs[0], b_runs[1], b_runs[2],
                           shapes, cycles, load, compute, vector, acquire, release,
                           store, reload_of, evac_buffer, reloaded_buffer)
        before = snapshot(state, load_req, load_use, comp_end, done_step, done_time,
                          rel_free, rel_vector, fifo)
        has_before = True
    return fifo, skipped


def replay_nest(program: GemmStream, memory: MemoryParams, *,
                block_steps: int = DEFAULT_BLOCK_STEPS,
                keep_steps: bool = False) -> EngineOutcome:
    """Check and replay a streamed GEMM with the generator and the kernel in one
    compiled call: the outcome of replaying its whole program at once."""
    return replay_nest_counted(program, memory, block_steps=block_steps,
                               keep_steps=keep_steps)[0]


def replay_nest_counted(program: GemmStream, memory: MemoryParams, *,
                        block_steps: int = DEFAULT_BLOCK_STEPS, keep_steps: bool = False,
                        skip: bool = True) -> tuple[EngineOutcome, int]:
    """replay_nest's outcome and how many of the steps were skipped, periods of a
    steady state added in closed form (never when keep_steps: each step's times are
    asked for); skip=False replays every step."""
    validate_memory(memory)
    nest = program.nest
    StreamChecker(program)   # the header's rules (depth, slots, overhead)
    if not nest.follows_the_rules(program.slots):
        return replay_stream(program, memory, block_steps=block_steps,
                             keep_steps=keep_steps), 0  # checked step by step
    check_totals(memory, program.steps, *nest.totals())
    block = max(1, min(block_steps, NEST_BLOCK_STEPS))
    buffers = step_buffers(block + MAX_DEPTH)
    state, *rings, fifo = _initial_state(program)
    out = np.empty((_N_STEP_FIELDS, program.steps if keep_steps else 0), np.int64)
    if keep_steps and not program.reloads:
        out[_LOAD_REQUEST, :int(state[_N_REQUESTED])] = 0  # the first `depth` loads
    skip = skip and not keep_steps
    classes = nest.run_classes() if skip else \
        tuple(np.zeros(8, np.int64) for _ in range(3))   # not read
    _, skipped = _replay_nest(
        nest.params, nest.a_runs.arrays, nest.b_runs.arrays, nest.shapes, nest.cycles,
        classes, skip, block, program.steps, program.depth, program.slots,
        float(memory.bytes_per_cycle), int(memory.access_cycles), bool(keep_steps), out,
        state, *rings, fifo, *buffers,
        buffers[8] if program.reloads else None,
        buffers[7] if program.has_evacuation else None)
    return finished_outcome(program, state, out, keep_steps), int(skipped)


def run_streamed(program, memory: MemoryParams, *, keep_steps: bool = False,
                 block_steps: int | None = None) -> EngineOutcome:
    """engines.fast.run_fast, with a streamed GEMM generated inside the compiled
    replay (replay_nest)."""
    if isinstance(program, GemmStream):
        return replay_nest(program, memory, block_steps=block_steps or DEFAULT_BLOCK_STEPS,
                           keep_steps=keep_steps)
    return run_fast(program, memory, keep_steps=keep_steps, block_steps=block_steps)
