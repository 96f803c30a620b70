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

K and V bytes follow `kv_dtype` and are read once per group (GQA), never per query head;
where they are one cached latent (`kv_latent`, MLA) a flash step reads it once for both
products.

Where the products run (DESIGN.md section 19), a plan's `orientation` and `unit`:
- normal: K (QK^T) and V (PV) are the array's stationary operand, the group's query
  rows (or probabilities) streamed through: a decode step streams a few rows per fold.
- transposed: S^T = K Q^T and O^T = V^T P^T, so the group's Q tile (and P tile) is the
  stationary one, loaded once for all the group's query heads, and K and V stream at
  memory rate. A product whose stationary tile leaves arrays idle (fewer folds than
  arrays) copies it into each and splits the streamed keys among them. O^T goes back
  to O with one vector pass over the output tile.
- vector (q_len 1 only): both products on the vector unit, one multiply-accumulate per
  lane per cycle at the platform's `mul` cost, the softmax on the same unit; no array.
One program runs `groups` K/V head groups back to back (footprint.program_groups), as a
kernel walks a batch's sequences and heads in one launch: its dispatch, first load and
last store are paid once per program, not once per group; one step may cover several
groups (lowering.step_pairs: their K/V in one transfer where one group's cannot cover
the memory's latency). `orientation: normal`,
`unit: array`, `groups: 1` is the model before these choices, figure for figure.

With `output_path: vector` (DESIGN.md section 15) every product that leaves the array's
accumulators is copied out by the vector unit (lowering.evacuation, the GEMM's rule):
unfused, each score tile and each finished output tile; flash, per key tile both the
score tile (softmax reads it) and the PV product (the online softmax rescales the running
output before adding it, which the accumulators cannot do), as a NeuronCore's flash
kernel copies every matmul result out of PSUM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.lowering.attention_tiles import (QueryTile, group_kv_bytes, product_shapes,
                                                query_tiles, tile_pair_counts)
from simulator.lowering.evacuation import product_evacuation
from simulator.mapping.footprint import (array_speed, attention_element_bytes,
                                         attention_instances, attention_rows, buffer_fits,
                                         kv_bytes, kv_pair_bytes, program_groups,
                                         unsupported_orientation)
from simulator.mapping.plan import ATTENTION_FUSIONS, ATTENTION_UNITS, Tiling
from simulator.lowering.step_pairs import pairs_per_step
from simulator.lowering.tile_table import TileTables
from simulator.program.tile_program import TileProgram, memory_params, validate_program
from simulator.model.dataflow import DATAFLOW_CODES
from simulator.model.loop_nest import ORIENTATIONS
from simulator.model.timing import TileProducts, tile_products_timing, vector_cycles

ARRAY, VECTOR = ATTENTION_UNITS
NORMAL, TRANSPOSED = ORIENTATIONS

# Passes of the softmax over each score, unfused or online (max, exp-subtract, sum).
SOFTMAX_PASSES = 3


@dataclass
class _Steps:
    """Tile program arrays of one K/V head group under construction, with the array-cycle
    split and where the products run (`orientation` on the array, or the vector unit)."""

    load: list
    compute: list
    vector: list
    acquire: list
    release: list
    store: list
    reload_of: list
    evacuation: list       # vector-unit cycles copying products out (output_path vector)
    split: list            # useful, padding, fill, stationary-load, skew array cycles
    platform: Platform
    dataflow: int
    orientation: str | None
    unit: str
    speed: float = 1.0     # the array's streaming speed (mapping.footprint.array_speed)
    vector_compute: int = 0  # vector-unit cycles inside compute
    vector_macs: int = 0     # multiply-accumulates on the vector unit (unit vector)
    # Tile products' cycles and split, and evacuations, by unit, orientation, dataflow
    # and shape: one operator's on one platform (kept in its TileTables), shared by the
    # lowerings of its search, whose steps repeat a few shapes thousands of times.
    memo: dict = field(default_factory=dict)

    @classmethod
    def empty(cls, op, platform: Platform, dataflow: str, orientation: str | None,
              unit: str, tables: TileTables) -> _Steps:
        return cls([], [], [], [], [], [], [], [], [0.0] * 5, platform,
                   DATAFLOW_CODES[dataflow], orientation, unit,
                   tables.get(("array speed",), lambda: array_speed(op, platform)),
                   memo=tables.get(("attention products",), dict))

    def add(self, *, load: int, compute: int, vector: int = 0, acquire: bool,
            release: bool, store: int = 0, reload_of: int = -1,
            evacuation: int = 0) -> int:
        self.load.append(load)
        self.compute.append(compute)
        self.vector.append(vector)
        self.acquire.append(acquire)
        self.release.append(release)
        self.store.append(store)
        self.reload_of.append(reload_of)
        self.evacuation.append(evacuation)
        return len(self.load) - 1

    def _array_shape(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """The product as the array runs it: transposed, C^T = B^T A^T (m and n
        exchanged)."""
        if self.orientation != TRANSPOSED:
            return m, n, k
        return n, m, k

    def product(self, m: int, n: int, k: int) -> int:
        """Cycles of one tile product C (m x n) = A (m x k) B (k x n) on its unit (on
        the array never continuing a fold: each product's stationary operand differs
        from the previous one's), its split added in step order."""
        cycles, split = self.product_cost(m, n, k)
        if self.unit == VECTOR:
            self.vector_compute += cycles
            self.vector_macs += m * n * k
            return cycles
        total = self.split   # each part summed in step order (so the same floats)
        total[0] += split[0]
        total[1] += split[1]
        total[2] += split[2]
        total[3] += split[3]
        total[4] += split[4]
        return cycles

    def product_cost(self, m: int, n: int, k: int) -> tuple[int, tuple]:
        """product's (cycles, array-cycle split) of one shape, worked out once."""
        key = ("product", self.unit, self.orientation, self.dataflow, m, n, k)
        found = self.memo.get(key)
        if found is None:
            self.product_costs([(m, n, k)])
            found = self.memo[key]
        return found

    def product_costs(self, shapes) -> None:
        """Work out product_cost of each (m, n, k) of `shapes` not known yet, those on
        the array in one kernel call: (cycles, array-cycle split), none on the vector
        unit. Transposed, C^T = B^T A^T, and a product whose folds leave arrays idle
        has its streamed dim split among them (model.timing.TileProducts)."""
        head = ("product", self.unit, self.orientation, self.dataflow)
        memo = self.memo
        missing = list(dict.fromkeys(shape for shape in shapes if head + shape not in memo))
        if not missing:
            return
        if self.unit == VECTOR:
            unit = self.platform.vector_unit
            for m, n, k in missing:
                memo[head + (m, n, k)] = (int(vector_cycles(
                    m * n * k, unit.lanes, unit.cycles_per_element.mul, 1)), ())
            return
        a = self.platform.systolic_array
        cycles, split = tile_products_timing(TileProducts(
            shapes=np.array(missing, dtype=np.int64), rows=a.rows, cols=a.cols,
            count=a.count, dataflow=self.dataflow, fold_model=a.fold_model_code,
            speed=self.speed, transposed=self.orientation == TRANSPOSED))
        for shape, product_cycles, parts in zip(missing, cycles.tolist(), split.tolist()):
            memo[head + shape] = (product_cycles, tuple(parts))

    def evacuated(self, m: int, n: int, k: int) -> int:
        """Vector-unit cycles copying one product out of the array's accumulators (all
        of it, however many arrays made it; none on the vector unit, whose products are
        in its registers)."""
        if self.unit == VECTOR:
            return 0
        key = ("evacuated", self.orientation, self.dataflow, m, n, k)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = product_evacuation(
                self.platform, *self._array_shape(m, n, k), self.dataflow)
        return found

    def untransposed(self, rows: int, d: int) -> int:
        """Vector-unit cycles turning a transposed output tile O^T back into O (one pass;
        0 in the normal orientation)."""
        if self.unit == VECTOR or self.orientation != TRANSPOSED:
            return 0
        unit = self.platform.vector_unit
        return int(vector_cycles(rows * d, unit.lanes, unit.cycles_per_element.add, 1))

    def program(self, depth: int, slots: int, overhead: int, evacuates: bool,
                groups: int, pairs: int = 1) -> TileProgram:
        """The program of `groups` K/V head groups one after another, `pairs` of them
        in each step (lowering.step_pairs: each step `pairs` times this group's step;
        a reload refers to its own group's store); its evacuation array only where the
        output path is vector."""
        n, runs = len(self.load), groups // pairs
        one = np.array((self.load, self.compute, self.vector, self.store,
                        self.evacuation, self.reload_of, self.acquire, self.release),
                       dtype=np.int64)
        if pairs > 1:
            one[:5] *= pairs
        if runs > 1:   # the group's steps `runs` times, by broadcasting (np.tile is slower)
            each = np.empty((8, runs, n), dtype=np.int64)
            each[:] = one[:, None, :]
            if max(self.reload_of) >= 0:   # a reload refers to its own group's store
                reload_of = one[5]
                each[5] = np.where(reload_of >= 0,
                                   reload_of + np.arange(runs)[:, None] * n, -1)
            one = each.reshape(8, runs * n)
        load, compute, vector, store, evacuation, reload_of = one[:6]
        acquire, release = one[6:] != 0
        return TileProgram(load_bytes=load, compute_cycles=compute, vector_cycles=vector,
                           acquire=acquire, release=release, store_bytes=store,
                           reload_of=reload_of, depth=depth, slots=slots,
                           overhead_cycles=overhead,
                           evacuation_cycles=evacuation if evacuates else None)


def tile_costs(op, platform: Platform, dataflow: str, orientation: str | None, unit: str,
               tables: TileTables) -> _Steps:
    """Costs of single tile products (`product_cost`) and their evacuations
    (`evacuated`) where a lowering would run them, memoised in `tables` as its own
    are: a step builder with no steps."""
    return _Steps.empty(op, platform, dataflow, orientation, unit, tables)


@dataclass(frozen=True)
class AttentionLowering:
    """One attention lowering's program and per-program counts (bytes unless named):
    `groups` K/V head groups, each one batch item's K/V head and its query heads."""

    fusion: str
    orientation: str | None    # None on the vector unit
    unit: str
    groups: int
    pairs: int                 # groups per step (lowering.step_pairs)
    program: TileProgram
    macs: int
    vector_elements: int
    vector_compute_cycles: int   # vector-unit cycles inside compute (softmax, products)
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


def _flash(op, steps: _Steps, tiles: list[QueryTile], sizes: tuple,
           qo_offchip: bool) -> tuple[int, dict]:
    """The flash program's steps: (vector element-ops, SRAM bytes the array reads)."""
    e, _, acc, out = sizes
    d, platform = op.head_dim, steps.platform
    unit = platform.vector_unit
    cost = unit.cycles_per_element
    elements = 0
    sram = {"ifmap": 0, "weight": 0, "output": 0}
    per_shape = {}   # (rows, keys): what a step of that shape's tile pair costs
    for tile in tiles:
        last = len(tile.key_tiles) - 1
        for j, keys in enumerate(tile.key_tiles):
            q_bytes = tile.rows * d * e if j == 0 and qo_offchip else 0
            compute = (steps.product(tile.rows, keys, d)
                       + steps.product(tile.rows, d, keys))
            scores = tile.rows * keys
            shape = per_shape.get((tile.rows, keys))
            if shape is None:
                shape = per_shape[tile.rows, keys] = (
                    vector_cycles(scores, unit.lanes, cost.softmax, SOFTMAX_PASSES)
                    + vector_cycles(tile.rows * d, unit.lanes, cost.mul, 1),
                    kv_pair_bytes(op, platform, keys),
                    steps.evacuated(tile.rows, keys, d)
                    + steps.evacuated(tile.rows, d, keys))
            vector, kv_tile, evacuation = shape
            if j == last:
                vector += steps.untransposed(tile.rows, d)
            if steps.unit == VECTOR:   # the softmax shares the unit with the products
                steps.vector_compute += vector
                compute, vector = compute + vector, 0
            elements += scores * SOFTMAX_PASSES + tile.rows * d
            sram["ifmap"] += tile.rows * d * e
            sram["weight"] += kv_tile
            sram["output"] += scores * acc + tile.rows * d * acc
            steps.add(load=q_bytes + kv_tile, compute=compute, vector=vector,
                      acquire=j == 0, release=j == last,
                      store=tile.rows * d * out if j == last and qo_offchip else 0,
                      evacuation=evacuation)
    return elements, sram


def _unfused(op, steps: _Steps, tiles: list[QueryTile], sizes: tuple, qo_offchip: bool,
             scores_offchip: bool) -> tuple[int, dict]:
    """The unfused program's steps: (vector element-ops, SRAM bytes the array reads)."""
    e, _, acc, out = sizes
    d, platform = op.head_dim, steps.platform
    unit = platform.vector_unit
    sram = {"ifmap": 0, "weight": 0, "output": 0}
    kv_tiles = {}               # bytes of K (or V) of so many keys
    for tile in tiles:
        for keys in tile.key_tiles:
            if keys not in kv_tiles:
                kv_tiles[keys] = kv_bytes(op, platform, keys * d)
    stored_scores = []          # per query tile: the last step storing its scores
    for tile in tiles:          # QK^T
        for j, keys in enumerate(tile.key_tiles):
            q_bytes = tile.rows * d * e if j == 0 and qo_offchip else 0
            score_bytes = tile.rows * keys * out
            sram["ifmap"] += tile.rows * d * e
            sram["weight"] += kv_tiles[keys]
            sram["output"] += tile.rows * keys * acc
            last = steps.add(load=q_bytes + kv_tiles[keys],
                             compute=steps.product(tile.rows, keys, d),
                             acquire=True, release=True,
                             store=score_bytes if scores_offchip else 0,
                             evacuation=steps.evacuated(tile.rows, keys, d))
        stored_scores.append(last)
    softmax_steps, elements = [], 0
    for tile, scores_step in zip(tiles, stored_scores):   # softmax, row block by block
        scores = tile.rows * sum(tile.key_tiles)
        cycles = vector_cycles(scores, unit.lanes, unit.cycles_per_element.softmax,
                               SOFTMAX_PASSES)
        steps.vector_compute += cycles
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
            sram["weight"] += kv_tiles[keys]
            sram["output"] += tile.rows * d * acc
            steps.add(load=p_bytes + kv_tiles[keys],
                      compute=steps.product(tile.rows, d, keys),
                      vector=steps.untransposed(tile.rows, d) if j == last else 0,
                      acquire=j == 0, release=j == last,
                      store=tile.rows * d * out if j == last and qo_offchip else 0,
                      reload_of=probs_step if scores_offchip else -1,
                      evacuation=steps.evacuated(tile.rows, d, keys) if j == last else 0)
    return elements, sram


def check_choice(op, tiling: Tiling, platform: Platform, orientation: str | None,
                  unit: str, source: str | None) -> None:
    """The plan's tile sizes, dataflow, orientation and unit must suit the operator."""
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
    if unit not in ATTENTION_UNITS:
        raise operator_error(op, f"unit: {unit!r}: attention runs on the "
                             f"{' or '.join(ATTENTION_UNITS)}", source)
    if unit == VECTOR and op.q_len != 1:
        raise operator_error(op, f"unit: vector runs decode attention only (q_len 1; "
                             f"this operator has q_len {op.q_len})", source)
    if unit == ARRAY and orientation not in ORIENTATIONS:
        raise operator_error(op, f"orientation: {orientation!r}: an attention product "
                             f"runs {' or '.join(ORIENTATIONS)}", source)
    if unit == ARRAY and orientation not in platform.systolic_array.transpose.orientations:
        raise operator_error(op, unsupported_orientation(orientation, platform), source)
    groups, total = tiling.groups, attention_instances(op)
    if groups is not None and total % groups:
        raise operator_error(op, f"groups {groups} must divide the operator's {total} "
                             f"K/V head groups (batch {op.batch} x kv_heads "
                             f"{op.kv_heads})", source)


@dataclass(frozen=True)
class _Facts:
    """What one program's lowering reads of its operator and platform alone, whatever
    the tiling (worked out once per TileTables: a search lowers a few tilings)."""

    sizes: tuple[int, int, int, int]   # attention_element_bytes
    q_bytes: int          # one group's Q, O and K/V (all keys) bytes
    o_bytes: int
    kv_total: int
    qo_offchip: bool      # Q and O do not fit the on-chip activation memory
    scores_spill: bool    # one group's score matrix fits no on-chip room (unfused)
    macs: int             # one group's model MACs
    memory: object        # memory_params

    @classmethod
    def of(cls, op, platform: Platform) -> _Facts:
        sizes = e, _, _, out = attention_element_bytes(op, platform)
        rows, d = attention_rows(op), op.head_dim
        q_bytes, o_bytes = rows * d * e, rows * d * out
        capacity = platform.activation_memory_bytes
        on_chip_room = max(platform.buffers.output_bytes, capacity or 0)
        return cls(sizes, q_bytes, o_bytes, kv_pair_bytes(op, platform, op.kv_len),
                   capacity is None or q_bytes + o_bytes > capacity,
                   rows * op.kv_len * out > on_chip_room,
                   op.macs // attention_instances(op), memory_params(platform))


def checked_choice(op, tiling: Tiling, platform: Platform, *, orientation: str | None,
                   unit: str, source: str | None, tables: TileTables) -> None:
    """check_choice, its verdict kept in `tables` by what it reads: a search checks
    each candidate's choice as it bounds it, then again as it lowers it."""
    key = ("attention choice", tiling.tm, tiling.tn, tiling.dataflow, tiling.groups,
           orientation, unit, source)
    refused = tables.found(key)
    if refused is None:
        try:
            check_choice(op, tiling, platform, orientation, unit, source)
            refused = False
        except AccsimError as exc:
            refused = exc
        tables.keep(key, refused)
    if refused is not False:
        raise refused


def lower_attention_as(op, tiling: Tiling, fusion: str, platform: Platform, *,
                       orientation: str | None = NORMAL, unit: str = ARRAY,
                       source: str | None = None, tables: TileTables | None = None,
                       check: bool = True) -> AttentionLowering:
    """One program's steps and counts under `fusion` (flash or unfused), with the
    products in `orientation` on the array or on the vector unit, over the tiling's
    `groups` K/V head groups (unset: footprint.program_groups' rule). `tables`: what
    earlier lowerings of this operator on this platform worked out (a search's:
    choice checks, operator facts, query tiles, buffer fits, tile products), reused;
    `check`: validate the program (False where the caller replays it at once with
    run_fast, which validates it)."""
    if tables is None or not tables.serves(op, platform):
        tables = TileTables(op, platform)
    orientation = None if unit == VECTOR else orientation
    checked_choice(op, tiling, platform, orientation=orientation, unit=unit, source=source,
                   tables=tables)
    facts = tables.get(("attention facts",), lambda: _Facts.of(op, platform))
    sizes = e, _, acc, out = facts.sizes
    fits = tables.get(("attention fits", tiling.tm, tiling.tn, tiling.depth),
                      lambda: buffer_fits(op, tiling, platform))
    slots = checked_slots(op, fits, source)
    d = op.head_dim
    q_bytes, kv_total, o_bytes = facts.q_bytes, facts.kv_total, facts.o_bytes
    qo_offchip = facts.qo_offchip
    scores_offchip = fusion == "unfused" and facts.scores_spill
    tiles = tables.get(("query tiles", tiling.tm, tiling.tn),
                       lambda: query_tiles(op, tiling.tm, tiling.tn))
    pairs = tables.get(("tile pairs", tiling.tm, tiling.tn),
                       lambda: tile_pair_counts(tiles))
    steps = _Steps.empty(op, platform, tiling.dataflow, orientation, unit, tables)
    steps.product_costs(product_shapes(pairs, d))   # those not known yet: one call
    if fusion == "flash":
        elements, sram = _flash(op, steps, tiles, sizes, qo_offchip)
    else:
        elements, sram = _unfused(op, steps, tiles, sizes, qo_offchip, scores_offchip)
    kv_read = group_kv_bytes(op, platform, fusion, pairs)
    groups = tables.get(("attention groups", len(steps.load), tiling.groups),
                        lambda: program_groups(op, len(steps.load), tiling.groups))
    pairs = pairs_per_step(sum(steps.compute), sum(steps.load) + sum(steps.store),
                           len(steps.load), groups, depth=tiling.depth,
                           slots=min(slots.values()), memory=facts.memory)
    program = steps.program(tiling.depth, slots["output"] // pairs,
                            platform.runtime.op_overhead_cycles,
                            platform.systolic_array.output_path != "direct", groups,
                            pairs)
    if check:
        validate_program(program, source=f"lowering of {op.name}")
    macs = facts.macs
    # Useful cycles count the visible pairs only; the masked part of the diagonal
    # tiles joins the padding (the parts still sum to the array's busy cycles). On
    # the vector unit the array does nothing.
    tiles_useful, padding, fill, stationary, skew = steps.split
    useful = macs / platform.pes / steps.speed if unit == ARRAY else 0.0
    padding = padding + tiles_useful - useful if unit == ARRAY else 0.0
    scores_moved = (sum(tile.rows * sum(tile.key_tiles) for tile in tiles) * out
                    if scores_offchip else 0)
    q_read = q_bytes if qo_offchip else 0
    o_written = o_bytes if qo_offchip else 0
    g = groups
    return AttentionLowering(
        fusion=fusion, orientation=orientation, unit=unit, groups=g, pairs=pairs,
        program=program,
        macs=macs * g, vector_elements=(elements + steps.vector_macs) * g,
        vector_compute_cycles=steps.vector_compute * g, useful_array_cycles=useful * g,
        padding_array_cycles=padding * g, fill_array_cycles=fill * g,
        stationary_load_array_cycles=stationary * g, skew_array_cycles=skew * g,
        # unfused: scores stored then read by softmax, probabilities stored then read by PV
        offchip_read={"q": q_read * g, "kv": kv_read * g, "scores": 2 * scores_moved * g},
        offchip_write=(o_written + 2 * scores_moved) * g,
        compulsory={"q": q_read * g, "kv": kv_total * g, "c": o_written * g},
        # SRAM (approximate): the array reads each product's operands, accumulates into
        # the output buffer; buffers are written with what is loaded.
        sram_read={k: v * g for k, v in sram.items()},
        sram_write={"ifmap": (q_bytes + scores_moved) * g, "weight": kv_read * g,
                    "output": sram["output"] * g},
        slots=slots, scores_offchip=scores_offchip)


def estimate_cycles(lowering: AttentionLowering, platform: Platform) -> float:
    """The default's rule between lowerings: the larger of the array/vector busy time
    (evacuations included) and the off-chip bytes over the bandwidth (an engine-free
    estimate)."""
    p = lowering.program
    busy = max(float(p.compute_cycles.sum()), float(p.vector_work().sum()))
    moved = float(p.load_bytes.sum() + p.store_bytes.sum())
    return max(busy, moved / platform.bytes_per_cycle)


def lowering_choices(op, tiling: Tiling, platform: Platform
                     ) -> list[tuple[str, str | None, str]]:
    """(fusion, orientation, unit) the tiling leaves open, in the order ties go:
    flash before unfused, the array before the vector unit (decode only), normal
    before transposed (where the array runs transposed); the plan's own where it sets
    them."""
    fusions = [tiling.fuse] if tiling.fuse is not None else list(ATTENTION_FUSIONS)
    units = [tiling.unit] if tiling.unit is not None else \
        [ARRAY, VECTOR] if op.q_len == 1 else [ARRAY]
    orientations = [tiling.orientation] if tiling.orientation is not None \
        else list(platform.systolic_array.transpose.orientations)
    return [(fusion, orientation if unit == ARRAY else None, unit)
            for fusion in fusions for unit in units
            for orientation in (orientations if unit == ARRAY else [None])]


def choose_lowering(op, tiling: Tiling, platform: Platform, *,
                    source: str | None = None, tables: TileTables | None = None,
                    check: bool = True) -> AttentionLowering:
    """The plan's lowering, or, where it leaves fuse, orientation or unit open, the
    one `estimate_cycles` finds fastest (ties: the earlier of `lowering_choices`).
    `tables`: lower_attention_as', which also keep each lowering by its tile sizes,
    dataflow, depth, groups and choice, so a search lowers each once. `check`: as for
    lower_attention_as; a choice among several is always checked (an invalid one
    is an error even where it is not chosen)."""
    if tiling.fuse is not None and tiling.fuse not in ATTENTION_FUSIONS:
        raise operator_error(op, f"fuse: {tiling.fuse!r}: an attention operator is lowered "
                    f"{' or '.join(ATTENTION_FUSIONS)}", source)
    if tables is None or not tables.serves(op, platform):
        tables = TileTables(op, platform)
    choices = lowering_choices(op, tiling, platform)
    check = check or len(choices) > 1
    best, best_cycles = None, 0.0
    for fusion, orientation, unit in choices:
        lowering = tables.get(
            ("attention", tiling.tm, tiling.tn, tiling.dataflow, tiling.depth,
             tiling.groups, fusion, orientation, unit),
            lambda: lower_attention_as(op, tiling, fusion, platform,
                                       orientation=orientation, unit=unit, source=source,
                                       tables=tables, check=False))
        if check:
            validate_program(lowering.program, source=f"lowering of {op.name}")
        if len(choices) == 1:   # nothing to weigh it against (a search's candidates)
            return lowering
        cycles = estimate_cycles(lowering, platform)
        if best is None or cycles < best_cycles:
            best, best_cycles = lowering, cycles
    return best
