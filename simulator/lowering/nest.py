"""A GEMM's loop nest in closed form (issue 26): what lowering counts over the steps
(bytes, SRAM traffic, array cycles and their split) and what the validity rules need,
from the loop order and the tile shapes instead of a pass over the steps, so a streamed
program generates its steps once, when it is replayed.

Why the counts are exact. An operand tile is keyed by the two dims it depends on; the
third, its free dim, sits at some loop level. Its uses between two uses of one tile are
the tiles of the loops inside that level, the same for every tile, so an LRU buffer of
`slots` tiles hits a reuse exactly when that product is at most `slots`: A misses when
ni == 0 or always (B: mi == 0 or always), and each tile is loaded once or once per
iteration of its free dim. Every other per-step figure depends only on the step's tile
shape (last tile or not, per dim), whether it is a C tile's first or last k step and
whether its stationary tile is the previous step's; `_classes` enumerates those
(first, last) classes per loop level with their step counts. Float sums are exact, so
equal to summing step by step, when the values are multiples of one power of two small
enough that no partial sum rounds; else they are summed step by step (float_sums).
"""

from __future__ import annotations

from itertools import product
from typing import NamedTuple

import numpy as np

from simulator.errors import AccsimError
from simulator.inputs.platform import Platform
from simulator.lowering import nest_steps as k
from simulator.lowering.evacuation import evacuation_array
from simulator.lowering.tile_table import TileTable
from simulator.model.dataflow import TIME_DIM, stationary_input_elements
from simulator.model.loop_nest import lru_fetches
from simulator.program.tile_program import StepArrays

# Indices of the float counters (LoopNest.counters): the split of busy array cycles.
USEFUL, PADDING, ARRAY_FILL, STATIONARY_LOAD, SKEW, N_FLOAT_COUNTERS = range(6)
# Indices of the integer counters (LoopNest.counters), bytes unless noted.
(A_OFFCHIP, B_OFFCHIP, C_RELOAD_OFFCHIP, C_STORE_OFFCHIP, A_SRAM_WRITE, B_SRAM_WRITE,
 A_SRAM_READ_ELEMS, B_SRAM_READ_ELEMS, C_SRAM_WRITE, C_SRAM_READ, A_MISSES, B_MISSES,
 EPILOGUE_OFFCHIP, A_VECTOR_ELEMS, B_VECTOR_ELEMS, N_INT_COUNTERS) = range(16)
# A float is exact in int64 / 2**e units below this many units (53-bit significand).
_EXACT_UNITS = 2**53
# Nests of at most this many steps sum their floats step by step (nest_steps.float_sums,
# about 11 ns a step): as fast as the closed form (about 15 us) at this size.
_STEPWISE_STEPS = 1024
# What each integer counter counts, in their order (for errors).
_INT_COUNTER_NAMES = (
    "A's off-chip bytes", "B's off-chip bytes", "C's reloaded bytes", "C's stored bytes",
    "ifmap SRAM writes", "weight SRAM writes", "A's SRAM read elements",
    "B's SRAM read elements", "output SRAM writes", "output SRAM reads", "A's misses",
    "B's misses", "epilogue operands' off-chip bytes", "prologue elements")


class GemmArgs(NamedTuple):
    """One GEMM instance's loop nest, by name: what lowering hands LoopNest and the
    streamed program (its operands A and B are the nest's: a GEMM run transposed is
    the nest of its transpose, model.loop_nest.ORIENTED_OPERANDS)."""

    m: int
    n: int
    k: int
    tm: int
    tn: int
    tk: int
    order: np.ndarray           # the loop order's dim codes, outermost first
    dataflow: int               # model.dataflow code
    rows: int
    cols: int
    count: int                  # identical arrays
    fold_model: int             # model.timing fold model code
    a_load_bytes: TileTable     # off-chip bytes of each A tile
    a_sram_bytes: TileTable     # SRAM bytes of each A tile
    b_load_bytes: TileTable     # off-chip bytes of each B tile
    b_sram_bytes: TileTable     # SRAM bytes of each B tile
    a_offchip: bool
    b_offchip: bool
    c_offchip: bool
    acc_bytes: int              # accumulator bytes per element
    out_bytes: int              # stored bytes per C element
    a_slots: int
    b_slots: int
    spill: bool                 # partial sums go off chip between k steps
    epilogue: np.ndarray        # fused epilogue's per-tile costs (epilogue_table)
    lanes: int
    speed: float                # streaming speed: MACs per PE per cycle x sparsity
    a_vector: int               # vector cycles per element of an A tile as it loads
    b_vector: int               # the same for B (a transposed load, say)

    def key(self) -> tuple:
        """Every field but the four tile tables (which the tile sizes and orientation
        name among one operator's TileTables), the arrays as bytes: what tells the
        nests of one operator apart."""
        return (self.m, self.n, self.k, self.tm, self.tn, self.tk, self.order.tobytes(),
                self.dataflow, self.rows, self.cols, self.count, self.fold_model,
                self.a_offchip, self.b_offchip, self.c_offchip, self.acc_bytes,
                self.out_bytes, self.a_slots, self.b_slots, self.spill,
                self.epilogue.tobytes(), self.lanes, self.speed, self.a_vector,
                self.b_vector)


class LoopNest:
    """The closed form of one GEMM instance's program (`args`: GemmArgs, with per-tile
    tables lowering.tile_table.TileTables, whose memory grows with the tile counts,
    not with their product), and its steps generated from it (`fill`)."""

    def __init__(self, args: GemmArgs, platform: Platform):
        m, n, kk = args.m, args.n, args.k
        self.counts = (-(-m // args.tm), -(-n // args.tn), -(-kk // args.tk))
        self.order = tuple(args.order.tolist())
        self.steps = self.counts[0] * self.counts[1] * self.counts[2]
        self.dataflow = int(args.dataflow)
        self.spill = bool(args.spill)
        self.c_offchip = bool(args.c_offchip)
        self.a_table, self.a_sram = args.a_load_bytes, args.a_sram_bytes
        self.b_load, self.b_sram = args.b_load_bytes, args.b_sram_bytes
        self.a_offchip, self.b_offchip = bool(args.a_offchip), bool(args.b_offchip)
        a_slots, b_slots = args.a_slots, args.b_slots
        # Free dims: n for A, m for B. A tile's reuses are `inside` tiles apart.
        inside = self._inside()
        self.a_always = inside[1] > a_slots
        self.b_always = inside[0] > b_slots
        self.k_stride = inside[2]
        self.reloads = self.spill and self.counts[2] > 1
        self.evacuates = platform.systolic_array.output_path != "direct"
        # Times each tile moves (model.loop_nest's LRU rule): A along n, B along m.
        self.a_passes = int(lru_fetches(self.counts[1], inside[1], a_slots))
        self.b_passes = int(lru_fetches(self.counts[0], inside[0], b_slots))
        self.a_vector, self.b_vector = int(args.a_vector), int(args.b_vector)
        self.a_elements, self.b_elements = m * kk, kk * n
        self.shapes, self.cycles, self.split = k.nest_shape_tables(args)
        if self.evacuates:
            self.shapes[:, k.S_EVACUATION] = _evacuation(platform, self.shapes,
                                                         self.dataflow)
        params = [0] * k.N_PARAMS
        params[k.P_NM], params[k.P_NN], params[k.P_NK] = self.counts
        params[k.P_ORDER0], params[k.P_ORDER1], params[k.P_ORDER2] = self.order
        params[k.P_DATAFLOW] = self.dataflow
        for index, flag in ((k.P_A_OFFCHIP, self.a_offchip),
                            (k.P_B_OFFCHIP, self.b_offchip),
                            (k.P_C_OFFCHIP, self.c_offchip), (k.P_SPILL, self.spill),
                            (k.P_A_ALWAYS, self.a_always), (k.P_B_ALWAYS, self.b_always),
                            (k.P_RELOADS, self.reloads), (k.P_EVACUATION, self.evacuates)):
            params[index] = int(bool(flag))
        params[k.P_K_STRIDE] = self.k_stride
        self.params = np.array(params, np.int64)
        self._per_shape = self.shapes.tolist()   # Python ints: what the sums read
        # The load tables (TileTables) with the inner loop's dim last: a run of it
        # reads one row.
        self.a_runs = self.a_table.transposed() if self.order[2] == 0 else self.a_table
        self.b_runs = self.b_load.transposed() if self.order[2] == 2 else self.b_load
        self.tables = k.NestTables(params=self.params, a_runs=self.a_runs.arrays,
                                   b_runs=self.b_runs.arrays, shapes=self.shapes,
                                   cycles=self.cycles)
        self._classes_seen = self._class_counts()
        self._cases = [0] * 16   # steps per case: 2 * shape + continues
        for steps, shape, _, _, continues in self._classes_seen:
            self._cases[2 * shape + continues] += steps
        self._counters = None   # counters(), worked out on first use

    def _inside(self) -> list[int]:
        """Per dim, the product of the tile counts of the loops inside its loop."""
        inside = [1, 1, 1]
        product = 1
        for dim in reversed(self.order):
            inside[dim] = product
            product *= self.counts[dim]
        return inside

    def fill(self, begin: int, length: int, steps: StepArrays, offset: int = 0) -> None:
        """Steps begin .. begin + length - 1 into `steps` (every field an array) from
        `offset` on."""
        k.fill(self.tables, begin, length, offset, steps)

    def run_classes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What tells runs of the innermost loop apart (nest_steps.repeating_runs): a
        class per tile shape (equal table rows, cycles and last-k flag: equal steps),
        and an id per row of the A and B load tables (equal ids, equal rows: a row
        takes the one before's id when it equals it)."""
        shapes = np.column_stack((self.shapes, self.cycles.reshape(8, 2),
                                  np.arange(8) & 1))
        classes = np.unique(shapes, axis=0, return_inverse=True)[1].reshape(-1)
        return (classes.astype(np.int64), self.a_runs.row_ids(), self.b_runs.row_ids())

    def _class_counts(self) -> list[tuple[int, int, bool, bool, bool]]:
        """(steps, shape, first k, last k, continues) per class of steps."""
        per_level = []
        for level in range(3):
            c = self.counts[self.order[level]]
            per_level.append([(True, True, 1)] if c == 1 else
                             [(True, False, 1), (False, False, c - 2), (False, True, 1)])
        level_m, level_n, level_k = (self.order.index(dim) for dim in range(3))
        moves = [self.counts[dim] > 1 for dim in self.order]   # per level
        # A step continues the previous step's stationary tile only if every level
        # whose index differs from the previous step's is the stationary tile's free dim.
        free = self.order.index(int(TIME_DIM[self.dataflow]))
        inner_only, middle_ok, outer_ok = (not moves[2] or free == 2,
                                           not moves[1] or free == 1,
                                           not moves[0] or free == 0)
        single = [row[k.S_ROW_FOLDS] * row[k.S_COL_FOLDS] == 1 for row in self._per_shape]
        classes = []
        for combo in product(*per_level):
            steps = combo[0][2] * combo[1][2] * combo[2][2]
            if steps == 0:
                continue
            shape = 4 * combo[level_m][1] + 2 * combo[level_n][1] + combo[level_k][1]
            wraps_inner = combo[2][0]   # the inner loop wrapped: the middle moved
            changed_ok = inner_only and (not wraps_inner or middle_ok) and \
                (not (wraps_inner and combo[1][0]) or outer_ok)
            later = not (combo[0][0] and combo[1][0] and combo[2][0])
            continues = later and single[shape] and changed_ok
            classes.append((steps, shape, combo[level_k][0], combo[level_k][1],
                            bool(continues)))
        return classes

    def counters(self) -> tuple[np.ndarray, np.ndarray]:
        """The float and integer counters over the whole program (USEFUL ..., A_OFFCHIP
        ...): equal, bit for bit, to summing them step by step. The float sums are taken
        step by step on short nests (cheaper than the closed form below a few thousand
        steps) and where the closed form could round."""
        if self._counters is None:
            floats = None if self.steps <= _STEPWISE_STEPS else \
                _exact_sums(self._cases, self.split)
            if floats is None:
                floats = k.float_sums(self.params, self.shapes, self.split)
            ints = self.int_counters()
            floats.flags.writeable = ints.flags.writeable = False   # shared
            self._counters = floats, ints
        return self._counters

    def int_counters(self) -> np.ndarray:
        """The integer counters over the whole program, summed in Python integers; one
        past int64 is refused naming it (limits.check_tilings bounds the off-chip bytes
        and cycles before lowering; SRAM reads grow with the folds)."""
        ints = [0] * N_INT_COUNTERS
        nm, nn, nk = self.counts
        a_passes, b_passes = self.a_passes, self.b_passes
        ints[A_MISSES] = a_passes * nm * nk
        ints[B_MISSES] = b_passes * nk * nn
        ints[A_SRAM_WRITE] = a_passes * self.a_sram.sum()
        ints[B_SRAM_WRITE] = b_passes * self.b_sram.sum()
        if self.a_offchip:
            ints[A_OFFCHIP] = a_passes * self.a_table.sum()
        if self.a_vector > 0:   # every element of A, once per pass
            ints[A_VECTOR_ELEMS] = a_passes * self.a_elements
        if self.b_vector > 0:
            ints[B_VECTOR_ELEMS] = b_passes * self.b_elements
        if self.b_offchip:
            ints[B_OFFCHIP] = b_passes * self.b_load.sum()
        spilled = self.spill and self.c_offchip
        for steps, shape, first_k, last_k, _ in self._classes_seen:
            row = self._per_shape[shape]
            partial = row[k.S_PARTIAL]
            ints[A_SRAM_READ_ELEMS] += steps * row[k.S_A_READ]
            ints[B_SRAM_READ_ELEMS] += steps * row[k.S_B_READ]
            ints[C_SRAM_WRITE] += steps * partial
            if not first_k:
                ints[C_SRAM_READ] += steps * partial
                if spilled:
                    ints[C_RELOAD_OFFCHIP] += steps * partial
            if last_k:
                ints[C_SRAM_READ] += steps * partial
                ints[C_STORE_OFFCHIP] += steps * row[k.S_STORE_LAST]
                ints[EPILOGUE_OFFCHIP] += steps * row[k.S_EPILOGUE_LOAD]
            elif spilled:
                ints[C_STORE_OFFCHIP] += steps * partial
        for index, value in enumerate(ints):
            if not -2**63 <= value < 2**63:
                raise AccsimError(f"{_INT_COUNTER_NAMES[index]} would count "
                                  f"{value:.3g}, past int64 (2**63)", field="tiling")
        return np.array(ints, np.int64)

    def totals(self) -> tuple[int, int, int]:
        """(bytes moved, compute cycles, vector-unit cycles) of the whole program:
        what program.check_program bounds."""
        ints = self.int_counters()
        moved = sum(int(ints[c]) for c in (A_OFFCHIP, B_OFFCHIP, C_RELOAD_OFFCHIP,
                                           EPILOGUE_OFFCHIP, C_STORE_OFFCHIP))
        compute = sum(n * int(c) for n, c in zip(self._cases, self.cycles))
        vector = self.a_passes * self._load_vector_cycles(0, k.S_A_VECTOR) + \
            self.b_passes * self._load_vector_cycles(1, k.S_B_VECTOR)
        for steps, shape, _, last_k, _ in self._classes_seen:
            if last_k:
                vector += steps * self._per_shape[shape][k.S_VECTOR]
            if last_k or self.spill:
                vector += steps * self._per_shape[shape][k.S_EVACUATION]
        return moved, compute, vector

    def _load_vector_cycles(self, dim: int, column: int) -> int:
        """The load-time vector cycles over every A tile (dim 0: its m) or every B tile
        (dim 1: its n) once, edge tiles by shape."""
        nd, nk = self.counts[dim], self.counts[2]
        tiles = {(False, False): (nd - 1) * (nk - 1), (False, True): nd - 1,
                 (True, False): nk - 1, (True, True): 1}
        weight = 4 if dim == 0 else 2
        return sum(count * self._per_shape[weight * last_d + last_k][column]
                   for (last_d, last_k), count in tiles.items())

    def follows_the_rules(self, slots: int) -> bool:
        """True when every per-step validity rule (program.validate_program) holds by
        the nest's form: nothing negative, compute >= 1, and an acquisition never waits
        on a release at or after it (a C tile's steps acquire on its first k and release
        on its last, so the C tiles inside k's loop are live at once). A store always
        releases and a reload always reads a spilling step one k stride back by
        construction. False: check the generated steps (the rule's own message)."""
        used = sorted({2 * shape + cont for _, shape, _, _, cont in self._classes_seen})
        return bool(
            self.a_table.min() >= 0 and self.b_load.min() >= 0
            and (self.shapes[:, k.S_VECTOR:] >= 0).all()
            and (self.cycles[used] >= 1).all()
            and (self.spill or self.counts[2] == 1 or self.k_stride <= slots))


def _evacuation(platform: Platform, shapes: np.ndarray, dataflow: int) -> np.ndarray:
    """Evacuation cycles of each tile shape's output tile (lowering.evacuation)."""
    evac = platform.systolic_array.evacuation
    ms, ns, ks = shapes[:, k.S_MS], shapes[:, k.S_NS], shapes[:, k.S_KS]
    transposed = np.zeros_like(ms)
    if evac.transpose_stationary:
        transposed = transposed + stationary_input_elements(ms, ns, ks, dataflow)
    return evacuation_array(ms * ns, transposed, evac.elements_per_cycle,
                            evac.tile_cycles)


def _exact_sums(cases: list[int], split: np.ndarray) -> np.ndarray | None:
    """Each split field summed over the steps in closed form, or None when summing
    step by step in floats could round (then the sums are taken step by step). In
    integers: every value is a whole number of its field's smallest power of two (its
    largest denominator, `unit`), so the sum is a count of units, exact as a float
    while the magnitudes sum below 2**53 units."""
    used = [case for case, steps in enumerate(cases) if steps]
    steps = [cases[case] for case in used]
    ratios = [[value.as_integer_ratio() for value in row] for row in split[used].tolist()]
    totals = np.zeros(split.shape[1], np.float64)
    for field in range(split.shape[1]):
        unit = max(row[field][1] for row in ratios)
        total = magnitude = 0
        for n, row in zip(steps, ratios):
            numerator, denominator = row[field]
            units = n * numerator * (unit // denominator)
            total += units
            magnitude += abs(units)
        if magnitude >= _EXACT_UNITS:
            return None
        totals[field] = total / unit
    return totals
