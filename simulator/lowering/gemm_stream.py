"""A GEMM's tile program from its loop nest (issue 26): its counters come in closed
form (lowering.nest), and its steps are generated from each block's first step's index
alone (`nest_steps.fill_steps`): block by block when an engine replays it, so a
program of 1e9 steps takes the memory of one block, or all at once (`materialize`) for
a program lowering keeps in memory. Tests hold it, step for step, to the step-by-step
LRU model (tests/lru_steps.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simulator.inputs.platform import Platform
from simulator.lowering.nest import GemmArgs, LoopNest
from simulator.program.tile_program import StepArrays, TileProgram
from simulator.program.streamed import ProgramBlock, StreamedProgram, power_of_two_above


def step_buffers(size: int) -> StepArrays:
    """Arrays for `size` steps, every field an array (LoopNest.fill writes evacuation
    and reloaded only where the nest has them)."""
    return StepArrays(
        load_bytes=np.zeros(size, np.int64), compute_cycles=np.zeros(size, np.int64),
        vector_cycles=np.zeros(size, np.int64), acquire=np.zeros(size, np.bool_),
        release=np.zeros(size, np.bool_), store_bytes=np.zeros(size, np.int64),
        reload_of=np.full(size, -1, np.int64), evacuation=np.zeros(size, np.int64),
        reloaded=np.zeros(size, np.bool_))


class GemmStream(StreamedProgram):
    """One GEMM instance's program: `args` name its loop nest (GemmArgs); `nest`: its
    LoopNest when already built (lowering's, shared by tilings that differ only in the
    program's header)."""

    def __init__(self, args: GemmArgs, platform: Platform, *, depth: int, slots: int,
                 overhead_cycles: int, nest: LoopNest | None = None):
        self.nest = LoopNest(args, platform) if nest is None else nest
        self.steps = self.nest.steps
        self.depth, self.slots, self.overhead_cycles = depth, slots, overhead_cycles
        self.reloads = self.nest.reloads
        # A reload reads the step one k stride back.
        self.reload_ring = power_of_two_above(self.nest.k_stride + 1) if self.reloads \
            else 1
        self.has_evacuation = self.nest.evacuates

    def counters(self) -> tuple[np.ndarray, np.ndarray]:
        """The float and integer counters over the whole program (LoopNest.counters)."""
        return self.nest.counters()

    def materialize(self) -> TileProgram:
        """The whole program in memory, its steps generated in one call (which writes
        every entry: the arrays start empty, and with no entry where the nest has no
        evacuation or reload)."""
        steps = self.steps
        load, compute, vector, store, reload_of = (np.empty(steps, np.int64)
                                                   for _ in range(5))
        acquire, release = np.empty(steps, np.bool_), np.empty(steps, np.bool_)
        evacuation = np.empty(steps if self.has_evacuation else 0, np.int64)
        reloaded = np.empty(steps if self.reloads else 0, np.bool_)
        self.nest.fill(0, steps, StepArrays(
            load_bytes=load, compute_cycles=compute, vector_cycles=vector,
            acquire=acquire, release=release, store_bytes=store, reload_of=reload_of,
            evacuation=evacuation, reloaded=reloaded))
        return TileProgram(load_bytes=load, compute_cycles=compute, vector_cycles=vector,
                           acquire=acquire, release=release, store_bytes=store,
                           reload_of=reload_of, depth=self.depth, slots=self.slots,
                           overhead_cycles=self.overhead_cycles,
                           evacuation_cycles=evacuation if self.has_evacuation else None)

    def blocks(self, size: int) -> Iterator[ProgramBlock]:
        size = max(1, min(size, self.steps))
        buffers = step_buffers(size)   # reused: each block overwrites the one before
        for begin in range(0, self.steps, size):
            length = min(size, self.steps - begin)
            self.nest.fill(begin, length, buffers)
            load, compute, vector, acquire, release, store, reload_of, evacuation, \
                reloaded = (a[:length] for a in buffers)
            yield ProgramBlock(begin, TileProgram(
                load_bytes=load, compute_cycles=compute, vector_cycles=vector,
                acquire=acquire, release=release, store_bytes=store, reload_of=reload_of,
                depth=self.depth, slots=self.slots, overhead_cycles=self.overhead_cycles,
                evacuation_cycles=evacuation if self.has_evacuation else None),
                reloaded if self.reloads else None)
