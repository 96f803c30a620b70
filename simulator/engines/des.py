"""The SimPy engine: the model of record (DESIGN.md sections 3 and 5).

One class per hardware block, each with one generator process named for its activity,
as in SimPy's machine-shop example: the load DMA raises one load per step, the off-chip
memory serves raised transfers one at a time, the compute unit (systolic array, or vector
unit for vector operators) runs the steps in order, the vector unit runs fused epilogues,
and the store DMA raises one store per step. The output buffer's slots are a passive
block the compute unit waits on. Blocks pass one SimPy event per tile or transfer, never
per cycle, and only when one block actually has to wait for another (`Milestones`).

Same-cycle events may run in either order: the memory only serves requests raised
before the current cycle, and every other block acts on cycles already recorded, so the
outcome never depends on SimPy's tie order (a test reverses it).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import simpy

from simulator.engines.outcome import Breakdown, EngineOutcome, StepTimes
from simulator.errors import UnfinishedStepError
from simulator.program.tile_program import (MemoryParams, TileProgram, check_program, validate_memory,
                               validate_program)
from simulator.model.timing import input_stall, service_cycles

NOT_YET = -1  # cycle of an event that has not happened


class Milestones:
    """The cycle at which each item (a step, a residency) passed one point of a block.

    Another block that must wait for an item that has not passed gets an event for it,
    made only then: a block running ahead of another costs no events.
    """

    def __init__(self, env: simpy.Environment, count: int):
        self.env = env
        self.cycle = [NOT_YET] * count
        self._waiting: dict[int, simpy.Event] = {}

    def until(self, index: int):
        """Wait (`yield from`) until item `index` has passed; free if it already has."""
        if self.cycle[index] == NOT_YET:
            event = self._waiting.get(index)
            if event is None:
                event = self._waiting[index] = self.env.event()
            yield event

    def mark(self, index: int) -> None:
        """Item `index` passes now: record the cycle and wake whoever waits for it."""
        self.cycle[index] = self.env.now
        event = self._waiting.pop(index, None)
        if event is not None:
            event.succeed()


class Transfer:
    """One raised off-chip transfer of > 0 bytes, and the DMA to tell when it is served."""

    __slots__ = ("requested", "step", "nbytes", "dma")

    def __init__(self, requested: int, step: int, nbytes: int, dma: LoadDma | StoreDma):
        self.requested = requested
        self.step = step
        self.nbytes = nbytes
        self.dma = dma


class OffchipMemory:
    """The one off-chip server: serves raised transfers one at a time.

    When free at cycle t it serves, among requests raised at t - 1 or before, stores
    before loads, then the earlier request, then the lower step. Each DMA raises its
    requests in step order at non-decreasing cycles, so the head of its queue is its
    earliest, lowest-step request.
    """

    def __init__(self, env: simpy.Environment, bytes_per_cycle: float):
        self.env = env
        self.bytes_per_cycle = bytes_per_cycle
        self.pending_stores: deque[Transfer] = deque()
        self.pending_loads: deque[Transfer] = deque()
        self.busy_cycles = 0
        self._idle: simpy.Event | None = None
        env.process(self.serving())

    def request(self, transfer: Transfer, is_store: bool) -> None:
        """Raise a transfer at the current cycle."""
        (self.pending_stores if is_store else self.pending_loads).append(transfer)
        if self._idle is not None:
            self._idle.succeed()
            self._idle = None

    def _next_eligible(self) -> Transfer | None:
        last_eligible = self.env.now - 1
        for queue in (self.pending_stores, self.pending_loads):
            if queue and queue[0].requested <= last_eligible:
                return queue.popleft()
        return None

    def serving(self):
        env = self.env
        while True:
            if not (self.pending_stores or self.pending_loads):
                self._idle = env.event()
                yield self._idle
            transfer = self._next_eligible()
            if transfer is None:
                # Everything pending was raised this very cycle: it may start on the next.
                yield env.timeout(1)
                transfer = self._next_eligible()
            start = env.now
            service = service_cycles(transfer.nbytes, self.bytes_per_cycle)
            yield env.timeout(service)
            self.busy_cycles += service
            transfer.dma.on_served(transfer.step, start)


class LoadDma:
    """Raises step i's load when compute of step i - depth ends (prefetch depth) and, if
    it reloads spilled partial sums, once the store that spilled them has completed."""

    def __init__(self, env: simpy.Environment, program: TileProgram, server: OffchipMemory,
                 access_cycles: int, compute_ends: Milestones,
                 spills_complete: Milestones):
        steps = program.steps
        self.env = env
        self.nbytes = program.load_bytes.tolist()
        self.reload_of = program.reload_of.tolist()
        self.spills_complete = spills_complete
        self.depth = program.depth
        self.server = server
        self.access_cycles = access_cycles
        self.compute_ends = compute_ends
        self.requested = [NOT_YET] * steps
        self.started = [NOT_YET] * steps
        self.usable = [NOT_YET] * steps
        self.served = Milestones(env, steps)
        env.process(self.requesting())

    def requesting(self):
        env = self.env
        for step, nbytes in enumerate(self.nbytes):
            if step >= self.depth:
                yield from self.compute_ends.until(step - self.depth)
            if self.reload_of[step] >= 0:
                yield from self.spills_complete.until(self.reload_of[step])
            self.requested[step] = env.now
            if nbytes == 0:
                self.started[step] = self.usable[step] = env.now
                self.served.mark(step)
            else:
                self.server.request(Transfer(env.now, step, nbytes, self), is_store=False)

    def on_served(self, step: int, start: int) -> None:
        """The server ended this load's service now: usable after the access latency."""
        self.started[step] = start
        self.usable[step] = self.env.now + self.access_cycles
        self.served.mark(step)


class OutputBuffer:
    """The output buffer's slots, one C-tile residency each.

    Residencies end in the order they begin; acquisition n takes the slot of residency
    n - slots, free once the store ending that residency is served.
    """

    def __init__(self, env: simpy.Environment, program: TileProgram):
        self.slots = program.slots
        self.ended = Milestones(env, int(np.count_nonzero(program.release)))

    def until_free(self, acquisition: int):
        """Wait (with `yield from`) until the slot for this acquisition is free."""
        if acquisition >= self.slots:
            yield from self.ended.until(acquisition - self.slots)

    def free_cycle(self, acquisition: int) -> int:
        """Cycle at which the slot for this acquisition became free (0: never taken)."""
        if acquisition < self.slots:
            return 0
        return self.ended.cycle[acquisition - self.slots]


class ComputeUnit:
    """The systolic array (or the vector unit of a vector operator), one step at a time.

    Step i starts once its load is usable, step i - 1 has ended, and, if it starts a
    residency, its output slot is free.
    """

    def __init__(self, env: simpy.Environment, program: TileProgram, load_dma: LoadDma,
                 output_buffer: OutputBuffer, ends: Milestones):
        self.env = env
        self.cycles = program.compute_cycles.tolist()
        self.acquire = program.acquire.tolist()
        self.load_dma = load_dma
        self.output_buffer = output_buffer
        self.started = [NOT_YET] * program.steps
        self.ends = ends
        env.process(self.computing())

    def computing(self):
        env = self.env
        acquisitions = 0
        for step, cycles in enumerate(self.cycles):
            yield from self.load_dma.served.until(step)
            start = max(env.now, self.load_dma.usable[step])
            if self.acquire[step]:
                yield from self.output_buffer.until_free(acquisitions)
                start = max(start, self.output_buffer.free_cycle(acquisitions))
                acquisitions += 1
            self.started[step] = start
            yield env.timeout(start + cycles - env.now)
            self.ends.mark(step)


class VectorUnit:
    """Runs each step's evacuation (output_path: vector) then its fused epilogue, in
    order, after the step's compute ends."""

    def __init__(self, env: simpy.Environment, program: TileProgram,
                 compute_ends: Milestones):
        self.env = env
        self.cycles = program.vector_work().tolist()
        self.compute_ends = compute_ends
        self.ends = Milestones(env, program.steps)
        env.process(self.working())

    def working(self):
        for step, cycles in enumerate(self.cycles):
            yield from self.compute_ends.until(step)
            if cycles > 0:
                yield self.env.timeout(cycles)
            self.ends.mark(step)


class StoreDma:
    """Raises step i's store when its vector work ends; a releasing store frees a slot;
    a store whose partial sums a later step reloads marks its completion."""

    def __init__(self, env: simpy.Environment, program: TileProgram, server: OffchipMemory,
                 access_cycles: int, vector_ends: Milestones, output_buffer: OutputBuffer,
                 spills_complete: Milestones):
        steps = program.steps
        self.env = env
        self.nbytes = program.store_bytes.tolist()
        self.spills_complete = spills_complete
        self.reloaded = set(program.reload_of[program.reload_of >= 0].tolist())
        # Residency each releasing step ends (its ordinal among releases), -1 elsewhere.
        self.residency_ended = np.where(program.release,
                                        np.cumsum(program.release) - 1, -1).tolist()
        self.server = server
        self.access_cycles = access_cycles
        self.vector_ends = vector_ends
        self.output_buffer = output_buffer
        self.requested = [NOT_YET] * steps
        self.started = [NOT_YET] * steps
        self.served = [NOT_YET] * steps
        self.complete = [NOT_YET] * steps
        env.process(self.storing())

    def storing(self):
        env = self.env
        for step, nbytes in enumerate(self.nbytes):
            yield from self.vector_ends.until(step)
            self.requested[step] = env.now
            if nbytes == 0:
                self._finish(step, env.now, complete=env.now)
            else:
                self.server.request(Transfer(env.now, step, nbytes, self), is_store=True)

    def on_served(self, step: int, start: int) -> None:
        """The server ended this store's service now: complete after the access latency."""
        self._finish(step, start, complete=self.env.now + self.access_cycles)

    def _finish(self, step: int, start: int, complete: int) -> None:
        self.started[step] = start
        self.served[step] = self.env.now
        self.complete[step] = complete
        residency = self.residency_ended[step]
        if residency >= 0:
            self.output_buffer.ended.mark(residency)
        if step in self.reloaded:
            if complete == self.env.now:
                self.spills_complete.mark(step)
            else:
                later = self.env.timeout(complete - self.env.now)
                later.callbacks.append(lambda _, step=step: self.spills_complete.mark(step))


def run_des(program, memory: MemoryParams, *, keep_steps: bool = False,
            block_steps: int | None = None) -> EngineOutcome:
    """Replay a tile program on the SimPy model; per-step times only if keep_steps.

    A StreamedProgram is gathered whole first (`block_steps` is not used): the model
    keeps Python objects per step, so it is for programs that fit in memory.

    Raises InvalidProgramError for a program that breaks a validity rule, AccsimError for
    memory parameters validate_memory rejects, and UnfinishedStepError if steps are left
    unfinished (a deadlock).
    """
    if not isinstance(program, TileProgram):
        program = program.materialize()
    validate_program(program)
    validate_memory(memory)
    check_program(program, memory)
    env = simpy.Environment()
    server = OffchipMemory(env, memory.bytes_per_cycle)
    compute_ends = Milestones(env, program.steps)
    spills_complete = Milestones(env, program.steps)
    load_dma = LoadDma(env, program, server, memory.access_cycles, compute_ends,
                       spills_complete)
    output_buffer = OutputBuffer(env, program)
    compute = ComputeUnit(env, program, load_dma, output_buffer, compute_ends)
    vector = VectorUnit(env, program, compute_ends)
    store_dma = StoreDma(env, program, server, memory.access_cycles, vector.ends,
                         output_buffer, spills_complete)
    env.run()

    blocks = (("load", load_dma.usable), ("compute unit", compute_ends.cycle),
              ("vector unit", vector.ends.cycle), ("store", store_dma.complete))
    for block, cycles in blocks:
        if NOT_YET in cycles:
            raise UnfinishedStepError(
                f"step {cycles.index(NOT_YET)} never finished its {block}: the tile "
                "program deadlocked")

    times = StepTimes(**{name: np.asarray(cycles, dtype=np.int64) for name, cycles in (
        ("load_request", load_dma.requested), ("load_start", load_dma.started),
        ("load_usable", load_dma.usable), ("compute_start", compute.started),
        ("compute_end", compute_ends.cycle), ("vector_end", vector.ends.cycle),
        ("store_request", store_dma.requested), ("store_start", store_dma.started),
        ("store_served", store_dma.served), ("store_complete", store_dma.complete))})
    breakdown = _account(program, times, server.busy_cycles)
    return EngineOutcome(breakdown=breakdown, steps=times if keep_steps else None)


def _account(program: TileProgram, times: StepTimes, offchip_busy: int) -> Breakdown:
    """Attribute every idle cycle of the compute unit once (DESIGN.md section 3)."""
    start = times.compute_start.tolist()
    end = times.compute_end.tolist()
    usable = times.load_usable.tolist()
    vector_end = times.vector_end.tolist()
    acquire = program.acquire.tolist()
    release_steps = np.flatnonzero(program.release).tolist()
    slots = program.slots

    input_stalled = output_stalled = output_stalled_vector = 0
    acquisitions = 1 if acquire[0] else 0
    for step in range(1, program.steps):
        acquisition = acquisitions
        acquisitions += acquire[step]
        gap = start[step] - end[step - 1]
        if gap <= 0:
            continue
        waited_for_load = input_stall(usable[step], start[step], end[step - 1])
        input_stalled += waited_for_load
        output_stalled += gap - waited_for_load
        if gap > waited_for_load and acquire[step] and acquisition >= slots:
            freed_by = release_steps[acquisition - slots]
            if vector_end[freed_by] > end[freed_by]:
                output_stalled_vector += gap - waited_for_load

    last_end = end[-1]
    total = max(int(times.store_complete.max()), vector_end[-1])
    drain = total - last_end
    vector_tail = max(0, vector_end[-1] - last_end)
    return Breakdown(
        total_cycles=total + program.overhead_cycles,
        busy_cycles=int(program.compute_cycles.sum()),
        fill_cycles=start[0],
        input_stall_cycles=input_stalled,
        output_stall_cycles=output_stalled,
        output_stall_vector_cycles=output_stalled_vector,
        drain_cycles=drain,
        vector_tail_cycles=vector_tail,
        store_tail_cycles=drain - vector_tail,
        offchip_busy_cycles=offchip_busy,
        vector_busy_cycles=int(program.vector_cycles.sum()),
        overhead_cycles=program.overhead_cycles,
        evacuation_cycles=0 if program.evacuation_cycles is None
        else int(program.evacuation_cycles.sum()),
    )
