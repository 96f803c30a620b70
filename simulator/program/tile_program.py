"""The tile program: what lowering emits and both engines replay.

A struct of arrays indexed by step, in loop order. Each step is one tile product with
one load transfer before it and at most one store transfer after it. The output buffer
is modelled by residencies: a step that `acquire`s takes a slot for a C tile, a step that
`release`s ends the oldest residency with its store (which may move 0 off-chip bytes when
C lives on chip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError, InvalidProgramError

MAX_DEPTH = 4
# Cycles, bytes and their sums over repeats stay below this (int64 holds 2**63 - 1;
# the margin leaves room for the totals of a whole workload and for float rounding).
INT64_BOUND = 2**62
# Steps per block when validate_program checks partial-sum reloads (bounds its scratch
# memory to a few MiB on programs of millions of steps).
_RELOAD_CHECK_BLOCK = 1 << 20


@dataclass(frozen=True)
class MemoryParams:
    """Off-chip memory and DMA as the engines see them."""

    bytes_per_cycle: float  # bandwidth GB/s divided by clock GHz
    latency_cycles: int
    dma_setup_cycles: int

    @property
    def access_cycles(self) -> int:
        """Latency L' from service end to usable (load) or complete (store)."""
        return self.latency_cycles + self.dma_setup_cycles


def validate_memory(memory: MemoryParams, *, source: str = "memory") -> None:
    """Raise AccsimError naming the first memory parameter the timing model cannot use.

    Both engines call this before replaying: the bandwidth must be a positive finite
    number (service cycles are ceil(bytes / bandwidth)), and the latency and DMA setup
    non-negative integers (they are added to integer cycles).
    """
    bandwidth = memory.bytes_per_cycle
    if (not isinstance(bandwidth, Real) or isinstance(bandwidth, bool)
            or not bandwidth > 0 or not math.isfinite(bandwidth)):
        raise AccsimError(f"{bandwidth!r} is not a positive finite bandwidth",
                          file=source, field="bytes_per_cycle")
    for name in ("latency_cycles", "dma_setup_cycles"):
        value = getattr(memory, name)
        if not isinstance(value, Integral) or isinstance(value, bool) or value < 0:
            raise AccsimError(f"{value!r} is not a non-negative integer number of cycles",
                              file=source, field=name)


@dataclass(frozen=True)
class TileProgram:
    """Arrays of length S (steps) plus the prefetch depth and output-buffer slots."""

    load_bytes: np.ndarray       # int64: off-chip bytes loaded before the step
    compute_cycles: np.ndarray   # int64: cycles of the array (or vector unit)
    vector_cycles: np.ndarray    # int64: fused epilogue cycles after the step
    acquire: np.ndarray          # bool: step starts a C-tile residency
    release: np.ndarray          # bool: step's store ends the oldest residency
    store_bytes: np.ndarray      # int64: off-chip bytes stored after the step
    reload_of: np.ndarray        # int64: step whose spilled partial sums this reloads, -1
    depth: int
    slots: int
    overhead_cycles: int = 0     # dispatch cost before the pipeline starts (its cycle 0)
    # int64 or None (no evacuation): vector-unit cycles copying the step's output tile
    # out of the accumulators (output_path: vector), run before its epilogue.
    evacuation_cycles: np.ndarray | None = None

    @property
    def steps(self) -> int:
        return int(self.load_bytes.shape[0])

    def compute_total(self) -> int:
        """Compute cycles over every step, exact (a stream sums them block by block)."""
        return int(self.compute_cycles.sum())

    def vector_work(self) -> np.ndarray:
        """Vector-unit cycles after each step: evacuation plus fused epilogue."""
        if self.evacuation_cycles is None:
            return self.vector_cycles
        return self.vector_cycles + self.evacuation_cycles


class StepArrays(NamedTuple):
    """A window of steps as the compiled kernels pass it: the step generator
    (lowering.nest_steps.fill_steps) writes one, the fast engine's replay
    (engines.fast.replay_window) reads one. A NamedTuple, so that compiled code builds
    and reads it by name; `evacuation` and `reloaded` are None where a replay has no
    such bookkeeping (its kernel's specialisation without it)."""

    load_bytes: np.ndarray       # int64, as TileProgram's fields
    compute_cycles: np.ndarray   # int64
    vector_cycles: np.ndarray    # int64
    acquire: np.ndarray          # bool
    release: np.ndarray          # bool
    store_bytes: np.ndarray      # int64
    reload_of: np.ndarray        # int64
    evacuation: np.ndarray | None   # int64: TileProgram.evacuation_cycles
    reloaded: np.ndarray | None     # bool: the step's partial sums are reloaded later


def make_program(load_bytes, compute_cycles, vector_cycles=None, acquire=None,
                 release=None, store_bytes=None, reload_of=None, *, depth: int,
                 slots: int, overhead_cycles: int = 0,
                 evacuation_cycles=None) -> TileProgram:
    """Build a TileProgram from sequences, defaulting the optional arrays to zeros.

    Defaults: no vector work, no stores, no reloads, and release wherever store_bytes > 0.
    """
    load = np.asarray(load_bytes, dtype=np.int64)
    steps = load.shape[0]
    zeros = np.zeros(steps, dtype=np.int64)
    store = zeros.copy() if store_bytes is None else np.asarray(store_bytes, dtype=np.int64)
    return TileProgram(
        load_bytes=load,
        compute_cycles=np.asarray(compute_cycles, dtype=np.int64),
        vector_cycles=zeros.copy() if vector_cycles is None
        else np.asarray(vector_cycles, dtype=np.int64),
        acquire=np.zeros(steps, dtype=bool) if acquire is None
        else np.asarray(acquire, dtype=bool),
        release=(store > 0) if release is None else np.asarray(release, dtype=bool),
        store_bytes=store,
        reload_of=np.full(steps, -1, dtype=np.int64) if reload_of is None
        else np.asarray(reload_of, dtype=np.int64),
        depth=int(depth),
        slots=int(slots),
        overhead_cycles=int(overhead_cycles),
        evacuation_cycles=None if evacuation_cycles is None
        else np.asarray(evacuation_cycles, dtype=np.int64),
    )


def validate_program(program: TileProgram, *, source: str = "tile program") -> None:
    """Raise InvalidProgramError naming the first validity rule the program breaks.

    Rules (DESIGN.md section 3, plus the no-deadlock rule they imply): equal-length
    arrays with S >= 1; non-negative bytes and cycles, compute >= 1; 1 <= depth <= 4;
    slots >= depth; a step with store bytes releases; releases >= acquisitions; the n-th
    release is at or after the n-th acquisition; the release freeing the slot of the n-th
    acquisition (release n - slots) comes strictly before it; a partial-sum reload comes
    after a releasing step that spilled it.
    """
    def fail(field: str, rule: str) -> None:
        raise InvalidProgramError(rule, file=source, field=field)

    arrays = {
        "load_bytes": program.load_bytes, "compute_cycles": program.compute_cycles,
        "vector_cycles": program.vector_cycles, "acquire": program.acquire,
        "release": program.release, "store_bytes": program.store_bytes,
        "reload_of": program.reload_of,
    }
    if program.evacuation_cycles is not None:
        arrays["evacuation_cycles"] = program.evacuation_cycles
    steps = program.steps
    if steps < 1:
        fail("load_bytes", "a program needs at least one step")
    for name, arr in arrays.items():
        if arr.ndim != 1 or arr.shape[0] != steps:
            fail(name, f"length {arr.shape} differs from load_bytes ({steps} steps)")
    for name in ("load_bytes", "vector_cycles", "store_bytes", "evacuation_cycles"):
        if name in arrays and (arrays[name] < 0).any():
            fail(name, f"negative at step {int(np.argmax(arrays[name] < 0))}")
    if (program.compute_cycles < 1).any():
        fail("compute_cycles", f"below 1 at step {int(np.argmax(program.compute_cycles < 1))}")
    if not 1 <= program.depth <= MAX_DEPTH:
        fail("depth", f"{program.depth} is outside 1..{MAX_DEPTH}")
    if program.slots < program.depth:
        fail("slots", f"{program.slots} output slots < depth {program.depth}")
    if program.overhead_cycles < 0:
        fail("overhead_cycles", f"{program.overhead_cycles} is negative")
    stores_without_release = (program.store_bytes > 0) & ~program.release
    if stores_without_release.any():
        fail("release", f"step {int(np.argmax(stores_without_release))} stores bytes "
             "but does not release its residency")
    acquiring = np.flatnonzero(program.acquire)
    releasing = np.flatnonzero(program.release)
    if releasing.size < acquiring.size:
        fail("release", f"{releasing.size} releases < {acquiring.size} acquisitions")
    early = releasing[: acquiring.size] < acquiring
    if early.any():
        n = int(np.argmax(early))
        fail("release", f"release {n} at step {int(releasing[n])} comes before "
             f"acquisition {n} at step {int(acquiring[n])}")
    if acquiring.size > program.slots:
        waits = acquiring[program.slots:]
        freed_by = releasing[: waits.size]
        late = freed_by >= waits
        if late.any():
            n = int(np.argmax(late))
            fail("acquire", f"acquisition {n + program.slots} at step {int(waits[n])} waits "
                 f"for the release at step {int(freed_by[n])}, which is not before it "
                 f"({program.slots} slots): deadlock")
    # Vectorized, block by block: a Python loop over reloads took seconds on spilling
    # programs of millions of steps, and one pass would hold several S-long arrays.
    for begin in range(0, steps, _RELOAD_CHECK_BLOCK):
        block = program.reload_of[begin:begin + _RELOAD_CHECK_BLOCK]
        reloads = np.flatnonzero(block >= 0)
        if reloads.size == 0:
            continue
        sources = block[reloads]
        reloads += begin
        bad = sources >= reloads
        bad |= ~program.release[np.where(bad, 0, sources)]  # index only earlier steps
        if bad.any():
            n = int(np.argmax(bad))
            fail("reload_of", f"step {int(reloads[n])} reloads partial sums from step "
                 f"{int(sources[n])}, which is not an earlier releasing step")


def memory_params(platform: Platform) -> MemoryParams:
    """The off-chip memory and DMA figures the engines need."""
    return MemoryParams(platform.bytes_per_cycle, platform.offchip.latency_cycles,
                        platform.dma.setup_cycles)


class ProgramBound:
    """check_program on a program met block by block: the bound of the steps so far is
    checked before each block is replayed (a step's times depend only on earlier
    steps, so no time the replay computes exceeds it)."""

    def __init__(self, memory: MemoryParams):
        self.memory = memory
        self.access = memory.latency_cycles + memory.dma_setup_cycles
        self.steps = 0
        self.moved = 0.0
        self.compute = 0.0
        self.vector = 0.0

    def add(self, program: TileProgram) -> None:
        """Add one block's steps; raise AccsimError once the bound could pass int64."""
        def total(array) -> float:
            return float(np.sum(array, dtype=np.float64))
        self.steps += program.steps
        self.moved += total(program.load_bytes) + total(program.store_bytes)
        self.compute += total(program.compute_cycles)
        self.vector += total(program.vector_work())
        _check_bound(self.memory, self.access, self.steps, self.moved, self.compute,
                     self.vector)


def _check_bound(memory: MemoryParams, access: int, steps: int, transferred: float,
                 compute: float, vector: float) -> None:
    if access >= INT64_BOUND:
        raise AccsimError(f"latency + DMA setup = {access} cycles, past int64 (2**62 "
                          "allowed)", file="memory", field="latency_cycles")
    bound = (compute + vector + transferred / memory.bytes_per_cycle
             + steps * (2.0 * access + 4.0))
    if not bound < INT64_BOUND:
        raise AccsimError(f"cycles could reach {bound:.3g}, past int64 (2**62 allowed): "
                          f"{transferred:.3g} bytes at {memory.bytes_per_cycle:g} bytes "
                          f"per cycle, {access} cycles of latency + setup per transfer, "
                          f"{compute:.3g} compute cycles",
                          file="tile program", field="cycles")


def check_program(program, memory) -> None:
    """The cycle bound of a tile program under memory parameters, from its arrays:
    refused if it could pass int64 (a tiny bandwidth, a huge latency or setup, huge
    compute or byte counts)."""
    def total(array) -> float:   # np.sum's own reduction, without its wrapper
        return float(np.add.reduce(array, axis=None, dtype=np.float64))
    check_totals(memory, program.steps,
                 total(program.load_bytes) + total(program.store_bytes),
                 total(program.compute_cycles), total(program.vector_work()))


def check_totals(memory, steps: int, transferred: float, compute: float,
                 vector: float) -> None:
    """check_program from a program's totals (bytes moved, compute and vector-unit
    cycles), where they are known without its arrays (a streamed loop nest)."""
    access = memory.latency_cycles + memory.dma_setup_cycles
    if access >= INT64_BOUND:
        _check_bound(memory, access, 0, 0.0, 0.0, 0.0)
    _check_bound(memory, access, steps, float(transferred), float(compute), float(vector))
