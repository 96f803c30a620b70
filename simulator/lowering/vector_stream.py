"""A vector operator's tile program (a vector run's, with the members fused after it),
tile by tile: each row tile loads its share of the input (and of the streamed second
operands), computes on the vector unit and stores its share of the output (DESIGN.md
section 3, Lowering). `vector_steps` gives any range of tiles from the tiles' indices
alone, so a program of more steps than a block is a `VectorStream`, generated block by
block when an engine replays it (issue 41: a one-million-token prefill's elementwise
operators have 1.5e10 elements), its counters in closed form: the tiles' shares of a
tensor add up to the tensor.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from simulator.inputs.platform import Platform
from simulator.mapping.footprint import operand_bytes, row_edges, vector_run_tiles
from simulator.mapping.plan import EpilogueMember
from simulator.program.streamed import DEFAULT_BLOCK_STEPS, ProgramBlock, StreamedProgram
from simulator.program.tile_program import TileProgram


def vector_steps(op, members: tuple[EpilogueMember, ...], rows_per_tile: int,
                 platform: Platform, onchip: bool, tiles: tuple[int, int]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(load bytes, compute cycles, store bytes) of tiles first .. last - 1: each
    member's timing.vector_cycles on its share, on all the tiles at once."""
    shape = op.vector()
    elements, in_bytes, out_bytes = vector_run_tiles(op, members, rows_per_tile,
                                                     platform, tiles)
    costs = platform.vector_unit.cycles_per_element
    lanes = platform.vector_unit.lanes
    rows = np.diff(row_edges(shape.rows, rows_per_tile, tiles))
    compute = -(-(rows * shape.cols) // lanes) * getattr(costs, shape.cost_kind) \
        * shape.passes
    for member in members:
        kind = member.op.vector()
        compute = compute + -(-elements.astype(np.int64) // lanes) * \
            getattr(costs, kind.cost_kind) * kind.passes
    if onchip:
        return np.zeros_like(compute), compute, np.zeros_like(compute)
    return in_bytes.astype(np.int64), compute, out_bytes.astype(np.int64)


def vector_program(load: np.ndarray, compute: np.ndarray, store: np.ndarray, *,
                   depth: int, slots: int, overhead_cycles: int) -> TileProgram:
    """The tile program of row tiles: each acquires an output slot, and releases it
    with its store; nothing on the vector unit after the step, nothing reloaded."""
    steps = compute.shape[0]
    always = np.ones(steps, dtype=bool)
    return TileProgram(load_bytes=load, compute_cycles=compute,
                       vector_cycles=np.zeros(steps, dtype=np.int64), acquire=always,
                       release=always.copy(), store_bytes=store,
                       reload_of=np.full(steps, -1, dtype=np.int64), depth=depth, slots=slots, overhead_cycles=overhead_cycles)


def vector_totals(op, members: tuple[EpilogueMember, ...],
                  platform: Platform) -> tuple[int, int, int]:
    """(bytes loaded, bytes stored, element-ops) over every tile, in closed form: the
    tiles' shares of each tensor add up to the tensor (footprint.row_shares)."""
    shape = op.vector()
    e = operand_bytes(op, platform)[0]
    if not members:
        return shape.input_elements * e, shape.output_elements * e, \
            shape.rows * shape.cols * shape.passes
    out = shape.output_elements
    loads = shape.input_elements * e + sum(out * operand_bytes(m.op, platform)[0]
                                           for m in members if m.streamed)
    work = shape.rows * shape.cols * shape.passes + sum(out * m.op.vector().passes
                                                        for m in members)
    return loads, out * operand_bytes(members[-1].op, platform)[0], work


class VectorStream(StreamedProgram):
    """A vector run's program generated block by block (vector_steps per block)."""

    reload_ring = 1
    reloads = False
    has_evacuation = False

    def __init__(self, op, members: tuple[EpilogueMember, ...], rows_per_tile: int,
                 platform: Platform, onchip: bool, *, depth: int, slots: int,
                 overhead_cycles: int):
        self.op, self.members, self.rows_per_tile = op, members, rows_per_tile
        self.platform, self.onchip = platform, onchip
        self.steps = -(-op.vector().rows // rows_per_tile)
        self.depth, self.slots, self.overhead_cycles = depth, slots, overhead_cycles

    def tiles(self, first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(load, compute, store) of tiles first .. last - 1."""
        return vector_steps(self.op, self.members, self.rows_per_tile, self.platform,
                            self.onchip, (first, last))

    def blocks(self, size: int) -> Iterator[ProgramBlock]:
        size = max(1, min(size, self.steps))
        for begin in range(0, self.steps, size):
            load, compute, store = self.tiles(begin, min(begin + size, self.steps))
            yield ProgramBlock(begin, vector_program(
                load, compute, store, depth=self.depth, slots=self.slots,
                overhead_cycles=self.overhead_cycles), None)

    def compute_total(self) -> int:
        """The vector unit's cycles over every tile, summed block by block."""
        return sum(int(self.tiles(begin, min(begin + DEFAULT_BLOCK_STEPS, self.steps))[1]
                       .sum()) for begin in range(0, self.steps, DEFAULT_BLOCK_STEPS))
