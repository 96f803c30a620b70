"""Streamed tile programs: a program handed to the engines block by block, so what a
run holds is bounded by the block size, not by the step count (issue 26).

A `StreamedProgram` knows its header (steps, depth, slots, overhead) and how far back a partial-sum reload reaches; `blocks(size)` yields
its steps in order as `ProgramBlock`s of at most `size` steps. A whole `TileProgram`
streams too (`program_blocks` slices it), so the engines have one streamed path.
`StreamChecker` applies validate_program's rules block by block with the state they
need carried across blocks (a few counters and a ring of recent release flags).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simulator.errors import InvalidProgramError
from simulator.program.tile_program import MAX_DEPTH, TileProgram

# Steps per block when nothing else decides it: about 40 MiB held while replaying.
DEFAULT_BLOCK_STEPS = 1 << 18


@dataclass(frozen=True)
class ProgramBlock:
    """Steps begin .. begin + program.steps - 1 of a program; `reloaded[i]`: a later
    step reloads step begin + i's spilled partial sums (None when nothing reloads)."""

    begin: int
    program: TileProgram
    reloaded: np.ndarray | None


class StreamedProgram:
    """A tile program generated block by block (subclasses define `blocks`)."""

    steps: int
    depth: int
    slots: int
    overhead_cycles: int
    reload_ring: int     # a power of two above every reload's distance to its source
    reloads: bool        # some step reloads spilled partial sums
    has_evacuation: bool

    def blocks(self, size: int) -> Iterator[ProgramBlock]:
        raise NotImplementedError

    def materialize(self) -> TileProgram:
        """The whole program in memory (for callers that need every array at once)."""
        names = ("load_bytes", "compute_cycles", "vector_cycles", "acquire", "release",
                 "store_bytes", "reload_of", "evacuation_cycles")
        parts: dict[str, list] = {name: [] for name in names}
        for block in self.blocks(DEFAULT_BLOCK_STEPS):  # copied: blocks reuse arrays
            for name in names:
                array = getattr(block.program, name)
                if array is not None:
                    parts[name].append(array.copy())
        whole = {name: np.concatenate(arrays) if arrays else None
                 for name, arrays in parts.items()}
        return TileProgram(**whole, depth=self.depth, slots=self.slots,
                           overhead_cycles=self.overhead_cycles)


def power_of_two_above(span: int) -> int:
    size = 1
    while size < span:
        size *= 2
    return size


def reload_tables(program: TileProgram) -> tuple[np.ndarray | None, int]:
    """Which steps a later step reloads from (None when nothing reloads, so no S-long
    array), and a power of two above the largest distance from a reload to its source."""
    if program.steps == 0 or program.reload_of.max() < 0:  # the common case
        return None, 1
    reloads = np.flatnonzero(program.reload_of >= 0)
    reloaded = np.zeros(program.steps, dtype=np.bool_)
    sources = program.reload_of[reloads]
    reloaded[sources[(sources >= 0) & (sources < program.steps)]] = True
    span = int((reloads - sources).max()) + 1
    return reloaded, power_of_two_above(max(span, 1))


def _slice(program: TileProgram, begin: int, end: int) -> TileProgram:
    evac = program.evacuation_cycles
    return TileProgram(load_bytes=program.load_bytes[begin:end],
                       compute_cycles=program.compute_cycles[begin:end],
                       vector_cycles=program.vector_cycles[begin:end],
                       acquire=program.acquire[begin:end],
                       release=program.release[begin:end],
                       store_bytes=program.store_bytes[begin:end],
                       reload_of=program.reload_of[begin:end], depth=program.depth,
                       slots=program.slots, overhead_cycles=program.overhead_cycles,
                       evacuation_cycles=None if evac is None else evac[begin:end])


def joined(rest: ProgramBlock | None, block: ProgramBlock) -> ProgramBlock:
    """The steps a window left unconsumed followed by the next block."""
    if rest is None or rest.program.steps == 0:
        return block
    a, b = rest.program, block.program
    evac = None if a.evacuation_cycles is None else \
        np.concatenate((a.evacuation_cycles, b.evacuation_cycles))
    program = TileProgram(*(np.concatenate((getattr(a, name), getattr(b, name))) for name in
                            ("load_bytes", "compute_cycles", "vector_cycles", "acquire",
                             "release", "store_bytes", "reload_of")),
                          depth=a.depth, slots=a.slots, overhead_cycles=a.overhead_cycles,
                          evacuation_cycles=evac)
    reloaded = None if rest.reloaded is None else \
        np.concatenate((rest.reloaded, block.reloaded))
    return ProgramBlock(rest.begin, program, reloaded)


def unconsumed(window: ProgramBlock, first: int) -> ProgramBlock | None:
    """Copies of steps `first` on of a window (those the kernel has still to compute: a
    few steps; a stream may overwrite the window's arrays with its next block); None
    when it computed them all."""
    cut = first - window.begin
    p = window.program
    if cut >= p.steps:
        return None

    def tail(array):
        return None if array is None else array[cut:].copy()
    program = TileProgram(*(tail(getattr(p, name)) for name in
                            ("load_bytes", "compute_cycles", "vector_cycles", "acquire",
                             "release", "store_bytes", "reload_of")),
                          depth=p.depth, slots=p.slots, overhead_cycles=p.overhead_cycles,
                          evacuation_cycles=tail(p.evacuation_cycles))
    return ProgramBlock(first, program, tail(window.reloaded))


class WholeProgram(StreamedProgram):
    """A TileProgram already in memory, streamed as slices of it."""

    def __init__(self, program: TileProgram):
        self.program = program
        self.steps = program.steps
        self.depth, self.slots = program.depth, program.slots
        self.overhead_cycles = program.overhead_cycles
        self._reloaded, self.reload_ring = reload_tables(program)
        self.reloads = self._reloaded is not None
        self.has_evacuation = program.evacuation_cycles is not None


    def blocks(self, size: int) -> Iterator[ProgramBlock]:
        for begin in range(0, max(self.steps, 1), size):
            end = min(begin + size, self.steps)
            yield ProgramBlock(begin, _slice(self.program, begin, end),
                               None if self._reloaded is None
                               else self._reloaded[begin:end])

    def materialize(self) -> TileProgram:
        return self.program


def as_streamed(program) -> StreamedProgram:
    """A StreamedProgram for a TileProgram or a StreamedProgram."""
    return WholeProgram(program) if isinstance(program, TileProgram) else program


class StreamChecker:
    """validate_program's rules applied block by block, in step order: the first broken
    rule raises InvalidProgramError naming its field (on a stream the rule found first
    is the one met first in step order, so it may differ from validate_program's)."""

    def __init__(self, program: StreamedProgram, source: str = "tile program"):
        self.source = source
        self.slots = program.slots
        self.ring = program.reload_ring
        self.released = np.zeros(self.ring, dtype=np.bool_)  # release flag by step & mask
        self.acquired = 0
        self.releases = 0
        self.early: tuple[int, int] | None = None   # (release number, step)
        if program.steps < 1:
            self._fail("load_bytes", "a program needs at least one step")
        if not 1 <= program.depth <= MAX_DEPTH:
            self._fail("depth", f"{program.depth} is outside 1..{MAX_DEPTH}")
        if program.slots < program.depth:
            self._fail("slots", f"{program.slots} output slots < depth {program.depth}")
        if program.overhead_cycles < 0:
            self._fail("overhead_cycles", f"{program.overhead_cycles} is negative")

    def _fail(self, field: str, rule: str) -> None:
        raise InvalidProgramError(rule, file=self.source, field=field)

    def check(self, block: ProgramBlock) -> None:
        """Check one block (blocks must come in order)."""
        p, begin = block.program, block.begin
        arrays = {"load_bytes": p.load_bytes, "compute_cycles": p.compute_cycles,
                  "vector_cycles": p.vector_cycles, "acquire": p.acquire,
                  "release": p.release, "store_bytes": p.store_bytes,
                  "reload_of": p.reload_of, "evacuation_cycles": p.evacuation_cycles}
        steps = p.steps
        for name, arr in arrays.items():
            if arr is not None and (arr.ndim != 1 or arr.shape[0] != steps):
                self._fail(name, f"length {arr.shape} differs from load_bytes ({steps} "
                           "steps) in the block at step {begin}")
        for name in ("load_bytes", "vector_cycles", "store_bytes", "evacuation_cycles"):
            arr = arrays[name]
            if arr is not None and (arr < 0).any():
                self._fail(name, f"negative at step {begin + int(np.argmax(arr < 0))}")
        if (p.compute_cycles < 1).any():
            self._fail("compute_cycles",
                       f"below 1 at step {begin + int(np.argmax(p.compute_cycles < 1))}")
        stores_without_release = (p.store_bytes > 0) & ~p.release
        if stores_without_release.any():
            self._fail("release", f"step {begin + int(np.argmax(stores_without_release))} "
                       "stores bytes but does not release its residency")
        self._residencies(p, begin)
        self._reloads(p, begin)

    def _residencies(self, p: TileProgram, begin: int) -> None:
        releasing = np.flatnonzero(p.release)
        acquiring = np.flatnonzero(p.acquire)
        if self.early is None and releasing.size:
            # Acquisitions at or before each release against its release number.
            acquired_upto = self.acquired + np.searchsorted(acquiring, releasing, "right")
            numbers = self.releases + np.arange(releasing.size)
            early = acquired_upto <= numbers
            if early.any():
                n = int(np.argmax(early))
                self.early = (int(numbers[n]), begin + int(releasing[n]))
        if acquiring.size:
            numbers = self.acquired + np.arange(acquiring.size)
            if self.early is not None and (numbers == self.early[0]).any():
                step = int(acquiring[np.argmax(numbers == self.early[0])])
                number = self.early[0]
                self._fail("release", f"release {number} at step {self.early[1]} comes "
                           f"before acquisition {number} at step {begin + step}")
            # Releases strictly before each acquisition.
            released_before = self.releases + np.searchsorted(releasing, acquiring, "left")
            late = (numbers >= self.slots) & (released_before <= numbers - self.slots)
            if late.any():
                n = int(np.argmax(late))
                number = int(numbers[n])
                self._fail("acquire", f"acquisition {number} at step "
                           f"{begin + int(acquiring[n])} waits for release "
                           f"{number - self.slots}, which is not before it ({self.slots} "
                           "slots): deadlock")
        self.acquired += int(acquiring.size)
        self.releases += int(releasing.size)

    def _reloads(self, p: TileProgram, begin: int) -> None:
        mask = self.ring - 1
        reloads = np.flatnonzero(p.reload_of >= 0)
        if reloads.size:
            sources = p.reload_of[reloads]
            distance = begin + reloads - sources
            ok = (distance > 0) & (distance < self.ring)
            inside = sources >= begin
            ok &= np.where(inside, p.release[np.clip(sources - begin, 0, p.steps - 1)],
                           self.released[sources & mask])
            if not ok.all():
                n = int(np.argmax(~ok))
                self._fail("reload_of", f"step {begin + int(reloads[n])} reloads partial "
                           f"sums from step {int(sources[n])}, which is not an earlier "
                           "releasing step")
        tail = min(p.steps, self.ring)
        steps = np.arange(begin + p.steps - tail, begin + p.steps, dtype=np.int64)
        self.released[steps & mask] = p.release[p.steps - tail:]

    def finish(self) -> None:
        """After the last block: every acquisition was released."""
        if self.releases < self.acquired:
            self._fail("release", f"{self.releases} releases < {self.acquired} "
                       "acquisitions")
