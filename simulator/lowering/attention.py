"""Lowering of the attention kind: two tile programs for one operator (DESIGN.md
section 9), chosen by the plan's `fuse` (`flash` or `unfused`; unset: the faster by
`estimate_cycles`).

One program instance is one batch item's K/V head group: R = group x q_len query rows
(position-major, so a causal query tile covers consecutive positions) against kv_len
keys of head_dim d. Query tiles have tm rows, key tiles tn keys. A causal query tile
visits only the key tiles holding a key one of its rows sees; those tiles are computed
whole (masked), while model MACs count only visible pairs.

- unfused: three kernels one after another, as an eager framework runs them. QK^T: per
  (query tile, key tile) the Q tile (loaded with its first key tile) times the K tile,
  the score tile stored. Softmax: per query tile its score rows through the vector unit
  (3 passes, the softmax kind's cost), probabilities stored. PV: per (query tile, key
  tile) probabilities times the V tile, the output tile stored after its last key tile.
  The score matrix is a real tensor: when one instance's scores do not fit the output
  buffer (nor the on-chip activation memory) they go to off-chip memory and come back,
  each reload waiting on the store that wrote it (`reload_of`).
- flash: one kernel (FlashAttention-2 order, keys inner). Per query tile the Q tile
  loads once, K and V stream once, both products run on the array per key tile, the
  scores never leave the chip, and the online softmax (the same 3 passes over the
  tile's scores, plus a rescale multiply of the output accumulator) runs on the vector
  unit beside the array; the output tile is stored after the last key tile.

K and V bytes follow `kv_dtype` and are read once per group (GQA), never per query head.

With `output_path: vector` (DESIGN.md section 15) every product that leaves the array's
accumulators is copied out by the vector unit (lowering.evacuation, the GEMM's rule):
unfused, each score tile and each finished output tile; flash, per key tile both the
score tile (softmax reads it) and the PV product (the online softmax rescales the running
output before adding it, which the accumulators cannot do), as a NeuronCore's flash
kernel copies every matmul result out of PSUM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.lowering.evacuation import product_evacuation
from simulator.mapping.footprint import (array_speed, attention_element_bytes,
                                         attention_rows, buffer_fits, kv_bytes)
from simulator.mapping.plan import ATTENTION_FUSIONS, Tiling
from simulator.program.tile_program import TileProgram, validate_program
from simulator.model.dataflow import DATAFLOW_CODES
from simulator.model.timing import array_cycles, array_split, ceil_div, vector_cycles

# Passes of the softmax over each score, unfused or online (max, exp-subtract, sum).
SOFTMAX_PASSES = 3


@dataclass(frozen=True)
class QueryTile:
    """One query tile: its rows and the key tiles (widths) its rows see."""

    rows: int
    key_tiles: list[int]


def query_tiles(op, tm: int, tn: int) -> list[QueryTile]:
    """The query tiles of one instance with the key tiles each visits (causal: up to
    the last key its last row sees)."""
    rows, group, offset = attention_rows(op), op.group, op.kv_len - op.q_len
    tiles = []
    for start in range(0, rows, tm):
        size = min(tm, rows - start)
        last_position = (start + size - 1) // group
        keys = offset + last_position + 1 if op.causal else op.kv_len
        tiles.append(QueryTile(size, [min(tn, op.kv_len - j * tn)
                                      for j in range(ceil_div(keys, tn))]))
    return tiles


@dataclass
class _Steps:
    """Tile program arrays under construction, with the array-cycle split."""

    load: list
    compute: list
    vector: list
    acquire: list
    release: list
    store: list
    reload_of: list
    evacuation: list       # vector-unit cycles copying products out (output_path vector)
    split: list            # useful, padding, fill, stationary-load, skew array cycles
    speed: float = 1.0     # the array's streaming speed (mapping.footprint.array_speed)

    @classmethod
    def empty(cls, speed: float) -> _Steps:
        return cls([], [], [], [], [], [], [], [], [0.0] * 5, speed)

    def add(self, *, load: int, compute: int, vector: int = 0, acquire: bool,
            release: bool, store: int = 0, reload_of: int = -1,
            evacuation: int = 0) -> int:
        for column, value in ((self.load, load), (self.compute, compute),
                              (self.vector, vector), (self.acquire, acquire),
                              (self.release, release), (self.store, store),
                              (self.reload_of, reload_of), (self.evacuation, evacuation)):
            column.append(value)
        return len(self.load) - 1

    def product(self, m: int, n: int, k: int, platform: Platform, dataflow: int) -> int:
        """Array cycles of one tile product (never continuing a fold: each product's
        stationary operand differs from the previous one's)."""
        a = platform.systolic_array
        shape = (m, n, k, a.rows, a.cols, a.count, dataflow, a.fold_model_code, False,
                 self.speed)
        for index, part in enumerate(array_split(*shape)):
            self.split[index] += part
        return int(array_cycles(*shape))

    def program(self, depth: int, slots: int, overhead: int,
                evacuates: bool) -> TileProgram:
        """The program; its evacuation array only where the output path is vector."""
        as_int = {name: np.array(getattr(self, name), dtype=np.int64)
                  for name in ("load", "compute", "vector", "store", "reload_of",
                               "evacuation")}
        return TileProgram(as_int["load"], as_int["compute"], as_int["vector"],
                           np.array(self.acquire, dtype=bool),
                           np.array(self.release, dtype=bool), as_int["store"],
                           as_int["reload_of"], depth=depth, slots=slots,
                           overhead_cycles=overhead,
                           evacuation_cycles=as_int["evacuation"] if evacuates else None)


@dataclass(frozen=True)
class AttentionLowering:
    """One attention lowering's program and per-instance counts (bytes unless named)."""

    fusion: str
    program: TileProgram
    macs: int
    vector_elements: int
    vector_compute_cycles: int   # unfused softmax: vector-unit cycles inside compute
    useful_array_cycles: float
    padding_array_cycles: float
    fill_array_cycles: float
    stationary_load_array_cycles: float
    skew_array_cycles: float
    offchip_read: dict
    offchip_write: int
    compulsory: dict
    sram_read: dict
    sram_write: dict
    slots: dict
    scores_offchip: bool


def operator_error(op, rule: str, source: str | None) -> AccsimError:
    return AccsimError(rule, file=source, field=f"operators.{op.name}")


def checked_slots(op, fits, source: str | None) -> dict[str, int]:
    """Tiles each buffer holds (`fits`: mapping.footprint.buffer_fits); a plan needs
    at least `depth` of each, else the first overflow is the error."""
    for fit in fits:
        if not fit.fits:
            raise operator_error(op, fit.overflow(), source)
    return {fit.buffer: fit.slots for fit in fits}


def _flash(op, tiling: Tiling, platform: Platform, tiles: list[QueryTile],
           sizes: tuple, qo_offchip: bool) -> tuple[_Steps, int, dict, int]:
    """The flash program: (steps, vector element-ops, SRAM bytes the array reads, 0)."""
    e, _, acc, out = sizes
    d, flow = op.head_dim, DATAFLOW_CODES[tiling.dataflow]
    unit = platform.vector_unit
    cost = unit.cycles_per_element
    steps = _Steps.empty(array_speed(op, platform))
    elements = 0
    sram = {"ifmap": 0, "weight": 0, "output": 0}
    for tile in tiles:
        last = len(tile.key_tiles) - 1
        for j, keys in enumerate(tile.key_tiles):
            q_bytes = tile.rows * d * e if j == 0 and qo_offchip else 0
            compute = (steps.product(tile.rows, keys, d, platform, flow)
                       + steps.product(tile.rows, d, keys, platform, flow))
            scores = tile.rows * keys
            vector = (vector_cycles(scores, unit.lanes, cost.softmax, SOFTMAX_PASSES)
                      + vector_cycles(tile.rows * d, unit.lanes, cost.mul, 1))
            elements += scores * SOFTMAX_PASSES + tile.rows * d
            sram["ifmap"] += tile.rows * d * e
            kv_tile = kv_bytes(op, platform, 2 * keys * d)
            sram["weight"] += kv_tile
            sram["output"] += scores * acc + tile.rows * d * acc
            evacuation = (product_evacuation(platform, tile.rows, keys, d, flow)
                          + product_evacuation(platform, tile.rows, d, keys, flow))
            steps.add(load=q_bytes + kv_tile, compute=compute, vector=vector,
                      acquire=j == 0, release=j == last,
                      store=tile.rows * d * out if j == last and qo_offchip else 0,
                      evacuation=evacuation)
    return steps, elements, sram, 0


def _unfused(op, tiling: Tiling, platform: Platform, tiles: list[QueryTile],
             sizes: tuple, qo_offchip: bool,
             scores_offchip: bool) -> tuple[_Steps, int, dict, int]:
    """The unfused program: (steps, vector element-ops, SRAM bytes the array reads,
    softmax cycles inside compute)."""
    e, _, acc, out = sizes
    d, flow = op.head_dim, DATAFLOW_CODES[tiling.dataflow]
    unit = platform.vector_unit
    steps = _Steps.empty(array_speed(op, platform))
    sram = {"ifmap": 0, "weight": 0, "output": 0}
    stored_scores = []          # per query tile: the last step storing its scores
    for tile in tiles:          # QK^T
        for j, keys in enumerate(tile.key_tiles):
            q_bytes = tile.rows * d * e if j == 0 and qo_offchip else 0
            score_bytes = tile.rows * keys * out
            sram["ifmap"] += tile.rows * d * e
            sram["weight"] += kv_bytes(op, platform, keys * d)
            sram["output"] += tile.rows * keys * acc
            last = steps.add(load=q_bytes + kv_bytes(op, platform, keys * d),
                             compute=steps.product(tile.rows, keys, d, platform, flow),
                             acquire=True, release=True,
                             store=score_bytes if scores_offchip else 0,
                             evacuation=product_evacuation(platform, tile.rows, keys, d,
                                                           flow))
        stored_scores.append(last)
    softmax_steps, elements, vector_compute = [], 0, 0
    for tile, scores_step in zip(tiles, stored_scores):   # softmax, row block by block
        scores = tile.rows * sum(tile.key_tiles)
        cycles = vector_cycles(scores, unit.lanes, unit.cycles_per_element.softmax,
                               SOFTMAX_PASSES)
        vector_compute += cycles
        elements += scores * SOFTMAX_PASSES
        moved = scores * out if scores_offchip else 0
        softmax_steps.append(steps.add(load=moved, compute=cycles, acquire=True,
                                       release=True, store=moved,
                                       reload_of=scores_step if scores_offchip else -1))
    for tile, probs_step in zip(tiles, softmax_steps):    # PV
        last = len(tile.key_tiles) - 1
        for j, keys in enumerate(tile.key_tiles):
            p_bytes = tile.rows * keys * out if scores_offchip else 0
            sram["ifmap"] += tile.rows * keys * e
            sram["weight"] += kv_bytes(op, platform, keys * d)
            sram["output"] += tile.rows * d * acc
            steps.add(load=p_bytes + kv_bytes(op, platform, keys * d),
                      compute=steps.product(tile.rows, d, keys, platform, flow),
                      acquire=j == 0, release=j == last,
                      store=tile.rows * d * out if j == last and qo_offchip else 0,
                      reload_of=probs_step if scores_offchip else -1,
                      evacuation=product_evacuation(platform, tile.rows, d, keys, flow)
                      if j == last else 0)
    return steps, elements, sram, vector_compute


def lower_attention_as(op, tiling: Tiling, fusion: str, platform: Platform, *,
                       source: str | None = None) -> AttentionLowering:
    """One instance's program and counts under `fusion` (flash or unfused)."""
    if tiling.tm > attention_rows(op):
        raise operator_error(op, f"tm {tiling.tm} is larger than the operator's "
                    f"{attention_rows(op)} query rows per group (heads / kv_heads x "
                    f"q_len)", source)
    if tiling.tn > op.kv_len:
        raise operator_error(op, f"tn {tiling.tn} is larger than the operator's kv_len "
                    f"{op.kv_len}", source)
    if tiling.dataflow not in platform.systolic_array.dataflows:
        raise operator_error(op, f"dataflow {tiling.dataflow!r} is not supported by "
                    f"{platform.name} ({', '.join(platform.systolic_array.dataflows)})",
                    source)
    sizes = e, _, acc, out = attention_element_bytes(op, platform)
    slots = checked_slots(op, buffer_fits(op, tiling, platform), source)
    rows, d = attention_rows(op), op.head_dim
    q_bytes, kv_total, o_bytes = (rows * d * e, kv_bytes(op, platform, 2 * op.kv_len * d),
                                  rows * d * out)
    capacity = platform.activation_memory_bytes
    qo_offchip = capacity is None or q_bytes + o_bytes > capacity
    score_bytes = rows * op.kv_len * out
    on_chip_room = max(platform.buffers.output_bytes, capacity or 0)
    scores_offchip = fusion == "unfused" and score_bytes > on_chip_room
    tiles = query_tiles(op, tiling.tm, tiling.tn)
    if fusion == "flash":
        built = _flash(op, tiling, platform, tiles, sizes, qo_offchip)
    else:
        built = _unfused(op, tiling, platform, tiles, sizes, qo_offchip, scores_offchip)
    steps, elements, sram, vector_compute = built
    program = steps.program(tiling.depth, slots["output"],
                            platform.runtime.op_overhead_cycles,
                            platform.systolic_array.output_path != "direct")
    validate_program(program, source=f"lowering of {op.name}")
    macs = op.macs // (op.batch * op.kv_heads)
    # Useful cycles count the visible pairs only; the masked part of the diagonal
    # tiles joins the padding (the parts still sum to the array's busy cycles).
    tiles_useful, padding, fill, stationary, skew = steps.split
    useful = macs / platform.pes / steps.speed
    kv_read = sum(kv_bytes(op, platform, 2 * keys * d) for tile in tiles
                  for keys in tile.key_tiles)
    scores_moved = (sum(tile.rows * sum(tile.key_tiles) for tile in tiles) * out
                    if scores_offchip else 0)
    q_read = q_bytes if qo_offchip else 0
    o_written = o_bytes if qo_offchip else 0
    return AttentionLowering(
        fusion=fusion, program=program, macs=macs, vector_elements=elements,
        vector_compute_cycles=vector_compute, useful_array_cycles=useful,
        padding_array_cycles=padding + tiles_useful - useful, fill_array_cycles=fill,
        stationary_load_array_cycles=stationary, skew_array_cycles=skew,
        # unfused: scores stored then read by softmax, probabilities stored then read by PV
        offchip_read={"q": q_read, "kv": kv_read, "scores": 2 * scores_moved},
        offchip_write=o_written + 2 * scores_moved,
        compulsory={"q": q_read, "kv": kv_total, "c": o_written},
        # SRAM (approximate): the array reads each product's operands, accumulates into
        # the output buffer; buffers are written with what is loaded.
        sram_read=sram, sram_write={"ifmap": q_bytes + scores_moved, "weight": kv_read,
                                    "output": sram["output"]},
        slots=slots, scores_offchip=scores_offchip)


def estimate_cycles(lowering: AttentionLowering, platform: Platform) -> float:
    """The default's rule between the two lowerings: the larger of the array/vector
    busy time (evacuations included) and the off-chip bytes over the bandwidth (an
    engine-free estimate)."""
    p = lowering.program
    busy = max(float(p.compute_cycles.sum()), float(p.vector_work().sum()))
    moved = float(p.load_bytes.sum() + p.store_bytes.sum())
    return max(busy, moved / platform.bytes_per_cycle)


def choose_lowering(op, tiling: Tiling, platform: Platform, *,
                    source: str | None = None) -> AttentionLowering:
    """The plan's lowering, or, with `fuse` unset, the one `estimate_cycles` finds
    faster (ties: flash, which moves fewer bytes)."""
    if tiling.fuse is not None:
        if tiling.fuse not in ATTENTION_FUSIONS:
            raise operator_error(op, f"fuse: {tiling.fuse!r}: an attention operator is lowered "
                        f"{' or '.join(ATTENTION_FUSIONS)}", source)
        return lower_attention_as(op, tiling, tiling.fuse, platform, source=source)
    flash, unfused = (lower_attention_as(op, tiling, fusion, platform, source=source)
                      for fusion in ATTENTION_FUSIONS)
    if estimate_cycles(unfused, platform) < estimate_cycles(flash, platform):
        return unfused
    return flash
