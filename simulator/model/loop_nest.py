"""A GEMM's loop nest in closed form: the one home of its reuse rules. Three loops (m, n,
k) in a loop order, each dim cut into tiles; every operand's tiles are indexed by two
dims and reused along the third (A: n, B: m, C: k). From that alone:
- which loops lie inside an operand's reuse loop (inside_product), and so whether an LRU
  buffer of `slots` tiles keeps a tile between its uses (lru_fetches);
- the C tiles live at once (live_c_tiles), and C's off-chip bytes when partial sums
  spill (c_offchip_bytes);
- the array's busy cycles (array_busy_cycles), from the dataflow table's fold shape;
- the innermost loop with more than one tile, and the order's effective sequence.
The search's estimates (mapping.footprint.offchip_by_order, search.bounds), the closed
form of lowering (lowering.nest) and the step-by-step model (tests/lru_steps.py, a test
reference for these) all follow these rules; tests keep them equal.

Operand orientation (DESIGN.md section 19) is one transform of the nest, not a rule of
its own: a GEMM C = A.B run `transposed` is the nest of Cᵀ = Bᵀ.Aᵀ, whose m and n are
the operator's n and m and whose A and B are the operator's B and A (ORIENTED_DIMS,
ORIENTED_OPERANDS). Lowering, the closed form and the search build that nest once,
before any step is enumerated; every rule above then applies to it unchanged.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np

from simulator.kernels.jit import njit
from simulator.model.dataflow import (COL_DIM, DATAFLOW_CODES, FILL_ROWS, ROW_DIM, TIME_DIM,
                                      fold_dims)

DIMS = "mnk"
LOOP_ORDERS = tuple("".join(p) for p in permutations(DIMS))
# Operand orientation (DESIGN.md section 19): per orientation, the operator's dim each
# dim of the nest (m, n, k) stands for, and the operator's operand each operand of the
# nest (A, B, C) is. `transposed` runs Cᵀ = Bᵀ.Aᵀ: m and n exchange, and A and B.
ORIENTATIONS = ("normal", "transposed")
ORIENTED_DIMS = {"normal": "mnk", "transposed": "nmk"}
ORIENTED_OPERANDS = {"normal": "abc", "transposed": "bac"}


def oriented(values: tuple, orientation: str) -> tuple:
    """An (m, n, k)- or (A, B, C)-indexed triple as the nest of `orientation` indexes
    it (the exchange is its own inverse, so it also maps the nest's back)."""
    if orientation == "normal":
        return tuple(values)
    first, second, *rest = values
    return (second, first, *rest)


def oriented_order(order: str, orientation: str) -> str:
    """A loop order over the operator's dims as the nest of `orientation` names it."""
    names = ORIENTED_DIMS[orientation]
    return "".join(names[DIMS.index(dim)] for dim in order)


# Indexed [orientation code, loop order index]: the nest's loop order index.
ORIENTED_ORDER = np.array([[LOOP_ORDERS.index(oriented_order(name, orientation))
                            for name in LOOP_ORDERS] for orientation in ORIENTATIONS],
                          dtype=np.int64)


def live_c_tiles(m: int, n: int, tiling) -> int:
    """C tiles live at once under a plan's Tiling (tm, tn, loop_order): the tile counts of the C dims whose loops are inside k's
    (each holds a partial sum until k finishes)."""
    counts = {"m": -(-m // tiling.tm), "n": -(-n // tiling.tn)}   # not the ceil_div kernel
    order = tiling.loop_order
    live = 1
    for dim in order[order.index("k") + 1:]:
        live *= counts.get(dim, 1)
    return live


def inside_product(reuse: str, dims: str, counts: dict, order) -> np.ndarray:
    """Product of the tile counts of `dims` whose loops are inside `reuse`'s loop, for
    loop orders given as indices into LOOP_ORDERS (broadcasting against `counts`):
    the tiles of an operand used between two uses of one of its tiles."""
    product = np.ones((), dtype=np.int64)
    for dim in dims:
        if dim != reuse:
            product = product * np.where(_INSIDE[reuse][dim][order], counts[dim], 1)
    return product


def _axis_tiles(size: int, tile: np.ndarray, unit: int) -> tuple[np.ndarray, ...]:
    """The tiles of one dim in two kinds, full and edge: (full tiles, folds of a full
    tile along `unit`, edge tiles (0 or 1), folds of the edge tile)."""
    full, rem = size // tile, size % tile
    return full, -(-tile // unit), (rem > 0).astype(np.int64), -(-rem // unit)


def _loop_tables() -> tuple[np.ndarray, np.ndarray]:
    """Indexed [order, m has >1 tile, n has >1 tile, k has >1 tile]: the innermost dim
    with more than one tile (DIMS index, -1 if none), and a code of the loop order over
    those dims alone (equal codes: the same sequence of steps)."""
    inner = np.full((len(LOOP_ORDERS), 2, 2, 2), -1, dtype=np.int64)
    code = np.zeros((len(LOOP_ORDERS), 2, 2, 2), dtype=np.int64)
    for index, name in enumerate(LOOP_ORDERS):
        for flags in np.ndindex(2, 2, 2):
            kept = [DIMS.index(d) for d in name if flags[DIMS.index(d)]]
            inner[(index, *flags)] = kept[-1] if kept else -1
            for dim in kept:
                code[(index, *flags)] = code[(index, *flags)] * 4 + dim + 1
    return inner, code


INNERMOST, EFFECTIVE_ORDER = _loop_tables()


def loop_tables_index(m: int, n: int, k: int, tm, tn, tk, *, order) -> tuple:
    """Index into INNERMOST / EFFECTIVE_ORDER for (broadcastable) tilings."""
    tm, tn, tk, order = (np.asarray(x, dtype=np.int64) for x in (tm, tn, tk, order))
    return (order, (-(-m // tm) > 1).astype(np.int64), (-(-n // tn) > 1).astype(np.int64),
            (-(-k // tk) > 1).astype(np.int64))


def array_busy_cycles(m: int, n: int, k: int, tm, tn, tk, *, order, dataflow: str,
                      rows: int, cols: int, count: int, fold_model: str,
                      speed: float = 1.0) -> np.ndarray:
    """The array's busy cycles of one GEMM instance under tilings, in closed form: the
    sum of the compute cycles the lowering emits (tests check equality). tm, tn, tk and
    order (indices into LOOP_ORDERS) broadcast against each other.

    The stationary operand's tile fixes the folds F (os: C, ws: B, is: A), run in
    rounds F' = ceil(F / count); each dim's tiles come in two kinds (full, edge), so the
    stationary tiles in four. A step pays F' x (T + fill) (scalesim) or
    F' x max(T, R) + skew (pipelined), unless it is single-fold and continues the
    previous step's stationary tile, when it pays T. Consecutive steps share that tile
    only while the streamed dim's loop is the innermost one with more than one tile;
    then each single-fold stationary tile starts once, on its first streamed tile (a
    full one), else every step starts anew. At `speed` each streamed tile of T rows
    streams ceil(T / speed) cycles (timing.streamed_cycles).
    """
    tm, tn, tk = (np.asarray(x, dtype=np.int64) for x in (tm, tn, tk))
    code = DATAFLOW_CODES[dataflow]
    row_dim, col_dim, time_dim = fold_dims(code)
    sizes = ((m, tm), (n, tn), (k, tk))
    row, col = sizes[row_dim], sizes[col_dim]
    streamed = (*sizes[time_dim], "mnk"[time_dim])
    fill = int(FILL_ROWS[code]) * rows + cols - 2
    r_full, r_folds, r_edge, r_edge_folds = _axis_tiles(*row, rows)
    c_full, c_folds, c_edge, c_edge_folds = _axis_tiles(*col, cols)
    # Sums over the four kinds of stationary tiles (row kind x col kind): the tiles,
    # those of one fold (one row fold and one col fold), and the rounds F', which on
    # one array are the folds (a product of row and col folds) and so also factorise.
    tiles = (r_full + r_edge) * (c_full + c_edge)
    singles = (r_full * (r_folds == 1) + r_edge * (r_edge_folds == 1)) * \
        (c_full * (c_folds == 1) + c_edge * (c_edge_folds == 1))
    if count == 1:
        rounds = (r_full * r_folds + r_edge * r_edge_folds) * \
            (c_full * c_folds + c_edge * c_edge_folds)
    else:
        rounds = sum(r_count * c_count * -(-(r_f * c_f) // count)
                     for r_count, r_f in ((r_full, r_folds), (r_edge, r_edge_folds))
                     for c_count, c_f in ((c_full, c_folds), (c_edge, c_edge_folds)))
    total, tile, name = streamed
    s_full, _, s_edge, _ = _axis_tiles(total, tile, 1)
    tile_t = np.ceil(tile / speed).astype(np.int64)       # a full tile's T at speed
    rem_t = np.ceil(total % tile / speed).astype(np.int64)  # the edge tile's
    streamed_t = s_full * tile_t + s_edge * rem_t
    n_streamed = s_full + s_edge
    inner = INNERMOST[loop_tables_index(m, n, k, tm, tn, tk, order=order)]
    starts_once = (inner == DIMS.index(name)) | (inner < 0)
    if fold_model == "scalesim":
        runs = np.where(starts_once, 1, n_streamed)
        return rounds * streamed_t + fill * ((rounds - singles) * n_streamed
                                             + singles * runs)
    skew = rows + cols - 2
    paced = s_full * np.maximum(tile_t, rows) + s_edge * np.maximum(rem_t, rows)
    multi = (rounds - singles) * paced + skew * n_streamed * (tiles - singles)
    single = np.where(starts_once, np.maximum(tile_t, rows) + skew + streamed_t - tile_t,
                      paced + skew * n_streamed)
    return multi + singles * single


@njit(cache=True, inline="always")
def _tile_kinds(size: int, tile: int, unit: int) -> tuple[int, int, int, int]:
    """_axis_tiles of one tile size: (full tiles, their folds, edge tiles, its folds)."""
    rem = size % tile
    return size // tile, -(-tile // unit), np.int64(rem > 0), -(-rem // unit)


@njit(cache=True)
def least_busy_cycles(sizes, tiles, least, array, speed):
    """array_busy_cycles of the (loop order, tiling) pairs `least` marks
    (bool[orders, tilings]), the int64 maximum at the others: one compiled pass over the
    tilings instead of two dozen array operations on all of them, each pair computed
    as array_busy_cycles computes it (tests keep them equal). sizes: the GEMM's (m, n,
    k); tiles: int64[3, tilings], each tiling's (tm, tn, tk); array: int64[5], the
    array's (dataflow code, rows, cols, count, 1 if its fold model is scalesim else 0
    (pipelined)), one record so the call stays within the module-boundary rule's six
    positional arguments; speed: its streaming speed (float)."""
    dataflow, rows, cols, count, scalesim = array[0], array[1], array[2], array[3], array[4]
    orders, tilings = least.shape
    out = np.full((orders, tilings), np.iinfo(np.int64).max, np.int64)
    row_dim, col_dim, time_dim = ROW_DIM[dataflow], COL_DIM[dataflow], TIME_DIM[dataflow]
    fill = FILL_ROWS[dataflow] * rows + cols - 2
    skew = rows + cols - 2
    for i in range(tilings):
        if not least[:, i].any():
            continue
        r_full, r_folds, r_edge, r_edge_folds = _tile_kinds(sizes[row_dim],
                                                            tiles[row_dim, i], rows)
        c_full, c_folds, c_edge, c_edge_folds = _tile_kinds(sizes[col_dim],
                                                            tiles[col_dim, i], cols)
        stationary = (r_full + r_edge) * (c_full + c_edge)
        singles = (r_full * (r_folds == 1) + r_edge * (r_edge_folds == 1)) * \
            (c_full * (c_folds == 1) + c_edge * (c_edge_folds == 1))
        rounds = (r_full * c_full * -(-(r_folds * c_folds) // count)
                  + r_full * c_edge * -(-(r_folds * c_edge_folds) // count)
                  + r_edge * c_full * -(-(r_edge_folds * c_folds) // count)
                  + r_edge * c_edge * -(-(r_edge_folds * c_edge_folds) // count))
        total, tile = sizes[time_dim], tiles[time_dim, i]
        s_full, s_edge = total // tile, np.int64(total % tile > 0)
        tile_t = np.int64(np.ceil(tile / speed))
        rem_t = np.int64(np.ceil(total % tile / speed))
        streamed_t = s_full * tile_t + s_edge * rem_t
        n_streamed = s_full + s_edge
        paced = s_full * max(tile_t, rows) + s_edge * max(rem_t, rows)
        multi = (rounds - singles) * paced + skew * n_streamed * (stationary - singles)
        # Whether each dim has more than one tile (ceil(size / tile) > 1).
        several_m, several_n, several_k = (np.int64(tiles[0, i] < sizes[0]),
                                           np.int64(tiles[1, i] < sizes[1]),
                                           np.int64(tiles[2, i] < sizes[2]))
        for order in range(orders):
            if not least[order, i]:
                continue
            inner = INNERMOST[order, several_m, several_n, several_k]
            starts_once = inner == time_dim or inner < 0
            if scalesim != 0:
                runs = 1 if starts_once else n_streamed
                out[order, i] = rounds * streamed_t + fill * (
                    (rounds - singles) * n_streamed + singles * runs)
            elif starts_once:
                out[order, i] = multi + singles * (max(tile_t, rows) + skew + streamed_t
                                                   - tile_t)
            else:
                out[order, i] = multi + singles * (paced + skew * n_streamed)
    return out


# Indexed [reuse dim][dim][loop order]: whether `dim`'s loop is inside `reuse`'s.
_INSIDE = {reuse: {dim: np.array([dim in name[name.index(reuse) + 1:]
                                  for name in LOOP_ORDERS]) for dim in DIMS}
           for reuse in DIMS}


def lru_fetches(reuse_tiles, inside, slots):
    """Times each tile of an operand moves off-chip under LRU reuse (the min_offchip
    model and the search's bound): once if its reuse dim has one tile (`reuse_tiles`)
    or the tiles of its own dims inside the reuse loop (`inside`) fit its buffer's
    `slots`, else once per tile of the reuse dim."""
    fits = (reuse_tiles == 1) | (inside <= slots)
    if isinstance(fits, bool):   # one nest's (lowering's): no array
        return 1 if fits else reuse_tiles
    return np.where(fits, 1, reuse_tiles)


# Indexed [loop order, reuse dim, dim]: whether `dim`'s loop is inside `reuse`'s, as
# order_traffic reads it.
INSIDE_TABLE = np.array([[[dim in name[name.index(reuse) + 1:] for dim in DIMS]
                          for reuse in DIMS] for name in LOOP_ORDERS])


@njit(cache=True)
def order_traffic(counts, slots, fetch_bytes, reused, c_bytes, inside):
    """Off-chip bytes of tilings per loop order (int64[orders, tilings]): the sum over
    the operands whose reuse dim `reused` marks (DIMS order: A's n, B's m, C's k) of
    lru_fetches x `fetch_bytes` (A and B), and of c_offchip_bytes (C: c_bytes[0] bytes
    once, plus c_bytes[1] per k step after the first where its slots hold fewer tiles
    than those inside its reuse loop). counts, slots: int64[3, tilings], each dim's tile
    count and the slots of the operand reused along it; inside: INSIDE_TABLE. One pass
    per tiling instead of a dozen array operations on all of them."""
    orders, tilings = inside.shape[0], counts.shape[1]
    out = np.zeros((orders, tilings), np.int64)
    for order in range(orders):
        for i in range(tilings):
            total = 0
            for reuse in range(3):
                if not reused[reuse]:
                    continue
                product = 1
                for dim in range(3):
                    if inside[order, reuse, dim]:
                        product *= counts[dim, i]
                if reuse == 2:
                    total += c_bytes[0]
                    if slots[2, i] < product:
                        total += c_bytes[1] * (counts[2, i] - 1)
                elif counts[reuse, i] == 1 or product <= slots[reuse, i]:
                    total += fetch_bytes[reuse]
                else:
                    total += fetch_bytes[reuse] * counts[reuse, i]
            out[order, i] = total
    return out


def c_offchip_bytes(g, out: int, acc: int, k_tiles, spill) -> np.ndarray:
    """C's off-chip bytes of one GEMM instance `g`: its outputs once, and where partial
    sums spill (`spill`), a store and a reload of them k_tiles - 1 times."""
    return g.m * g.n * out + spill * 2 * g.m * g.n * acc * (k_tiles - 1)
