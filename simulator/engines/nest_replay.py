"""The fast engine on a streamed GEMM (issue 26): one compiled call generates each
block of steps from the loop nest (lowering.nest_steps.fill_steps) and replays it with
the fast kernel (engines.fast._replay, through replay_window), its state carried as between blocks of any
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
                                    _NEXT_COMPUTE, ReplayRun, _initial_state,
                                    finished_outcome, replay_stream, replay_window,
                                    run_fast)
from simulator.engines.outcome import EngineOutcome
from simulator.engines.steady import advance, period_shift, snapshot
from simulator.kernels.jit import njit
from simulator.lowering.nest_steps import (P_NM, P_ORDER0, P_ORDER1, P_ORDER2,
                                           fill_compiled, repeating_runs)
from simulator.lowering.gemm_stream import GemmStream, step_buffers
from simulator.program.tile_program import MAX_DEPTH, MemoryParams, check_totals, validate_memory
from simulator.program.streamed import DEFAULT_BLOCK_STEPS, StreamChecker

# Steps generated and replayed per kernel window: small enough that the window's arrays
# stay in the CPU's cache, large enough that the per-window cost does not show.
NEST_BLOCK_STEPS = 1 << 12


@njit(cache=True)
def _skipped(before, steps, runs, begin, last_run, inner, slots, reloads, tables, classes,
             carried):
    """At a bound `begin`, with `before` the state `steps` steps (`runs` runs of the
    innermost loop) back: when the state `carried` repeats it and so will the steps of
    the next whole periods of that length up to last_run, move the state past them
    (engines.steady) and return the steps skipped, else 0."""
    delta, acquired = period_shift(before, steps, slots, reloads, carried)
    first = carried.state[_NEXT_COMPUTE] // inner   # the first run still to compute
    if delta < 0 or first < runs:
        return 0
    differs = repeating_runs(first, runs, last_run, tables, classes)
    periods = max(0, differs - begin // inner) // runs
    if periods > 0:
        advance(periods, before, steps, delta, acquired, carried)
    return periods * steps


@njit(cache=True, inline="always")
def _move_to_front(buffers, cut, rest):
    """Entries cut .. cut + rest - 1 of each of the buffers (a StepArrays) to 0 .. ."""
    for j in range(rest):
        buffers.load_bytes[j] = buffers.load_bytes[cut + j]
        buffers.compute_cycles[j] = buffers.compute_cycles[cut + j]
        buffers.vector_cycles[j] = buffers.vector_cycles[cut + j]
        buffers.acquire[j] = buffers.acquire[cut + j]
        buffers.release[j] = buffers.release[cut + j]
        buffers.store_bytes[j] = buffers.store_bytes[cut + j]
        buffers.reload_of[j] = buffers.reload_of[cut + j]
        buffers.evacuation[j] = buffers.evacuation[cut + j]
        buffers.reloaded[j] = buffers.reloaded[cut + j]


@njit(cache=True)
def _replay_nest(tables, classes, skip, block, run, carried, buffers, replayed):
    """Generate and replay all run.n_steps steps of the nest `tables`, `block` at a
    time, in `buffers` (a StepArrays, every field an array) of at least block +
    MAX_DEPTH steps: each window is the steps the one before left (moved to the front)
    and the next block. `replayed`: the same arrays, `reloaded` and `evacuation` None
    where the program has none (the kernel's specialisation without that bookkeeping).

    Periods: whole iterations of the outer loop (where the steps repeat, but for the
    first and last) when one fits in `block` steps, else whole runs of the innermost
    loop; up to `block` steps and a quarter of the loop around them, so a few periods
    fit in it; windows end on their bounds. With `skip`, at each bound the state is
    compared with the one a period back (engines.steady) and, when it repeats and so
    do the next periods' steps (nest_steps.repeating_runs, with `classes`:
    LoopNest.run_classes), those periods are added in closed form. Returns the carried
    state (its store FIFO as the last window left it) and the steps skipped."""
    params = tables.params
    n_steps = run.n_steps
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
    before = snapshot(carried)   # at the last bound, once there was one
    has_before = False
    begin = 0
    rest = 0
    capacity = buffers.load_bytes.shape[0]
    while begin < n_steps:
        length = min(block, period - begin % period, n_steps - begin, capacity - rest)
        if length <= 0:
            break  # the kernel keeps a whole window back: a deadlock, reported by caller
        fill_compiled(tables, begin, length, rest, buffers)
        window = rest + length
        base = begin - rest
        carried = replay_window(replayed, window, base, run, carried)
        cut = carried.state[_NEXT_COMPUTE] - base
        rest = window - cut
        _move_to_front(buffers, cut, rest)   # the steps still to compute
        begin += length
        if not skip or begin % period != 0:
            continue
        if has_before:
            moved = _skipped(before, period, period_runs, begin, last_run, inner,
                             run.slots, replayed.reloaded is not None, tables, classes,
                             carried)
            if moved > 0:
                begin += moved
                skipped += moved
                fill_compiled(tables, carried.state[_NEXT_COMPUTE], rest, 0, buffers)
        before = snapshot(carried)
        has_before = True
    return carried, skipped


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
    carried = _initial_state(program, program.reloads, program.reload_ring)
    out = np.empty((_N_STEP_FIELDS, program.steps if keep_steps else 0), np.int64)
    if keep_steps and not program.reloads:
        out[_LOAD_REQUEST, :int(carried.state[_N_REQUESTED])] = 0  # the first loads
    skip = skip and not keep_steps
    classes = nest.run_classes() if skip else \
        tuple(np.zeros(8, np.int64) for _ in range(3))   # not read
    run = ReplayRun(n_steps=program.steps, depth=program.depth, slots=program.slots,
                    bytes_per_cycle=float(memory.bytes_per_cycle),
                    access_cycles=int(memory.access_cycles), keep=bool(keep_steps),
                    out=out)
    buffers = step_buffers(block + MAX_DEPTH)
    replayed = buffers._replace(
        reloaded=buffers.reloaded if program.reloads else None,
        evacuation=buffers.evacuation if program.has_evacuation else None)
    _, skipped = _replay_nest(nest.tables, classes, skip, block, run, carried, buffers,
                              replayed)
    return finished_outcome(program, carried.state, out, keep_steps), int(skipped)


def run_streamed(program, memory: MemoryParams, *, keep_steps: bool = False,
                 block_steps: int | None = None) -> EngineOutcome:
    """engines.fast.run_fast, with a streamed GEMM generated inside the compiled
    replay (replay_nest)."""
    if isinstance(program, GemmStream):
        return replay_nest(program, memory, block_steps=block_steps or DEFAULT_BLOCK_STEPS,
                           keep_steps=keep_steps)
    return run_fast(program, memory, keep_steps=keep_steps, block_steps=block_steps)
