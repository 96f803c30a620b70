"""A GEMM's tile program generated block by block (issue 26): the compiled step kernel
(`steps.gemm_block`) writes each block into the same few arrays, its LRU and counter
state carried from block to block, so a program of 1e9 steps takes the memory of one
block. Identical, step for step, to `steps.gemm_steps` on the whole program.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simulator.config import Platform
from simulator.lowering import steps as kernel
from simulator.lowering.evacuation import evacuation_steps
from simulator.program import TileProgram
from simulator.stream import ProgramBlock, StreamedProgram, power_of_two_above


class GemmStream(StreamedProgram):
    """One GEMM instance's program: `args` are gemm_steps' arguments in order."""

    def __init__(self, args: tuple, platform: Platform, *, depth: int, slots: int,
                 overhead_cycles: int):
        self.args = args
        m, n, k, tm, tn, tk, order = args[:7]
        self.counts = (-(-m // tm), -(-n // tn), -(-k // tk))
        self.steps = self.counts[0] * self.counts[1] * self.counts[2]
        self.depth, self.slots, self.overhead_cycles = depth, slots, overhead_cycles
        self.platform = platform
        self.spill = bool(args[22])
        # Steps between two visits of one C tile's k tiles: the dims inside k.
        inner = list(order).index(2)
        self.k_stride = int(np.prod([self.counts[d] for d in order[inner + 1:]],
                                    dtype=np.int64))
        self.reloads = self.spill and self.counts[2] > 1
        self.reload_ring = power_of_two_above(self.k_stride + 1) if self.reloads else 1
        self.has_evacuation = platform.systolic_array.output_path != "direct"

    def _raw_blocks(self, size: int):
        """(begin, length, the kernel's arrays, its state) per block; the arrays are
        reused: each block is overwritten by the next."""
        m, n, k, tm, tn, tk = self.args[:6]
        state = kernel.gemm_state(m, n, k, tm, tn, tk)
        size = max(1, min(size, self.steps))
        arrays = (np.zeros(size, np.int64), np.zeros(size, np.int64),
                  np.zeros(size, np.int64), np.zeros(size, np.bool_),
                  np.zeros(size, np.bool_), np.zeros(size, np.int64),
                  np.full(size, -1, np.int64))
        for begin in range(0, self.steps, size):
            length = min(size, self.steps - begin)
            kernel.gemm_block(begin, length, *self.args, *state, *arrays)
            yield begin, length, arrays, state

    def counters(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's float and integer counters over the whole program (one pass)."""
        state = None
        for _, _, _, state in self._raw_blocks(size):
            pass
        return state[5], state[6]

    def blocks(self, size: int) -> Iterator[ProgramBlock]:
        m, n, k, tm, tn, tk, order, dataflow = self.args[:8]
        nk = self.counts[2]
        for begin, length, arrays, _ in self._raw_blocks(size):
            load, compute, vector, acquire, release, store, reload_of = \
                (a[:length] for a in arrays)
            evacuation = evacuation_steps(self.platform, m, n, k, tm, tn, tk,
                                          tuple(int(d) for d in order), dataflow,
                                          release, begin) if self.has_evacuation else None
            reloaded = None
            if self.reloads:  # every visit but a C tile's last k tile is reloaded
                ki = np.arange(begin, begin + length, dtype=np.int64) // self.k_stride % nk
                reloaded = ki != nk - 1
            yield ProgramBlock(begin, TileProgram(
                load, compute, vector, acquire, release, store, reload_of,
                depth=self.depth, slots=self.slots, overhead_cycles=self.overhead_cycles,
                evacuation_cycles=evacuation), reloaded)
