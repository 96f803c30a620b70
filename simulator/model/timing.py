"""Per-tile timing formulas: the one place the model's arithmetic is written.

Small pure functions on integers and floats, compiled with Numba so the fast engine and
the compiled lowering call them inline, while the SimPy engine, the Python lowering and
the tests call the very same functions (Numba dispatchers are callable from Python).
Dataflows are integer codes so that they pass through compiled code as data; what each
one maps where is model.dataflow's table.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from simulator.kernels.jit import njit
from simulator.model.dataflow import M, N, TIME_DIM, fill_rows, fold_shape

# Fold model codes (DESIGN.md section 3).
PIPELINED, SCALESIM = 0, 1
FOLD_MODEL_CODES = {"pipelined": PIPELINED, "scalesim": SCALESIM}


@njit(cache=True, inline="always")
def ceil_div(a: int, b: int) -> int:
    """Integer ceiling division for non-negative a and positive b."""
    return -(-a // b)


@njit(cache=True, inline="always")
def fold_count(m: int, n: int, k: int, rows: int, cols: int, dataflow: int) -> int:
    """Number of array folds a tile occupies (partial folds padded, never overlapped)."""
    sr, sc, _ = fold_shape(m, n, k, dataflow)
    return ceil_div(sr, rows) * ceil_div(sc, cols)


@njit(cache=True, inline="always")
def fold_fill_cycles(rows: int, cols: int, dataflow: int) -> int:
    """SCALE-Sim's fill and drain of one fold: R + C - 2 (os), 2R + C - 2 (ws, is)."""
    return fill_rows(dataflow) * rows + cols - 2


@njit(cache=True, inline="always")
def skew_cycles(rows: int, cols: int) -> int:
    """The pipelined model's skew, paid once per step: R + C - 2."""
    return rows + cols - 2


@njit(cache=True, inline="always")
def streamed_cycles(t: int, speed: float) -> int:
    """Cycles of a fold streaming T rows at `speed` x the array's base rate (MACs per PE
    per cycle of the dtype run, times a sparsity speedup): ceil(T / speed)."""
    return int(math.ceil(t / speed))


@njit(cache=True, inline="always")
def array_split(m: int, n: int, k: int, rows: int, cols: int, count: int, dataflow: int,
                fold_model: int, continues_fold: bool,
                speed: float = 1.0) -> tuple[float, float, int, int, int]:
    """(useful, padding, fill, stationary_load, skew) array cycles of one tile product on
    `count` arrays of rows x cols (DESIGN.md section 3); they sum to `array_cycles`.

    Folds F run in rounds of `count`, F' = ceil(F / count) rounds. useful = T x used
    PEs / (R C count), padding = F' T - useful. scalesim: fill = F' x its fold fill.
    pipelined: stationary_load = F' x max(0, P - T) with P = R (the next fold's
    stationary operand shifts in while the current one streams) and skew = R + C - 2
    once. A step that continues the previous step's single fold costs T and pays none
    of fill, stationary_load or skew. At `speed` s (section 17) a fold streams
    T' = ceil(T / s) cycles and useful = T x used PEs / (R C count s).
    """
    sr, sc, t0 = fold_shape(m, n, k, dataflow)
    t = streamed_cycles(t0, speed)
    rounds = 1 if continues_fold else ceil_div(fold_count(m, n, k, rows, cols, dataflow),
                                               count)
    useful = t0 * (sr * sc) / (rows * cols * count) / speed
    padding = rounds * t - useful
    if continues_fold:
        return useful, padding, 0, 0, 0
    if fold_model == SCALESIM:
        return useful, padding, rounds * fold_fill_cycles(rows, cols, dataflow), 0, 0
    return useful, padding, 0, rounds * max(0, rows - t), skew_cycles(rows, cols)


@njit(cache=True, inline="always")
def array_cycles(m: int, n: int, k: int, rows: int, cols: int, count: int, dataflow: int,
                 fold_model: int, continues_fold: bool, speed: float = 1.0) -> int:
    """Cycles of the array(s) on one tile product.

    scalesim: F' x (T + fill), SCALE-Sim v3's per-fold latency. pipelined:
    F' x max(T, R) + R + C - 2. A single-fold tile whose stationary operand equals the
    previous step's continues that fold and pays only its streamed length T. T is the
    streamed length at `speed`, ceil(T / speed) (streamed_cycles).
    """
    _, _, t0 = fold_shape(m, n, k, dataflow)
    t = streamed_cycles(t0, speed)
    if continues_fold:
        return t
    rounds = ceil_div(fold_count(m, n, k, rows, cols, dataflow), count)
    if fold_model == SCALESIM:
        return rounds * (t + fold_fill_cycles(rows, cols, dataflow))
    return rounds * max(t, rows) + skew_cycles(rows, cols)


class TileProduct(NamedTuple):
    """One tile product on the array, by name: what array_cycles and array_split read
    (their parameters, in their order). A NamedTuple, so that compiled code builds it
    too; compiled callers in other modules pass it to product_cycles and product_split,
    which unpack it here (Python callers: TileProducts)."""

    m: int
    n: int
    k: int
    rows: int
    cols: int
    count: int               # identical arrays
    dataflow: int            # model.dataflow code
    fold_model: int          # PIPELINED or SCALESIM
    continues_fold: bool     # continues the previous step's single fold
    speed: float             # streaming speed (streamed_cycles)


class TileProducts(NamedTuple):
    """Tile products of several shapes on one set of arrays, none continuing a fold, by
    name: what tile_products_timing reads. `transposed`: each runs as C^T = B^T A^T (m
    and n exchanged), and one whose folds leave arrays idle (fewer folds than arrays)
    with its stationary tile copied into each and its streamed dim split among them
    (spread_shape: DESIGN.md section 19's transposed attention products)."""

    shapes: np.ndarray       # int64 (products, 3): each product's m, n, k
    rows: int
    cols: int
    count: int               # identical arrays
    dataflow: int            # model.dataflow code
    fold_model: int          # PIPELINED or SCALESIM
    speed: float             # streaming speed (streamed_cycles)
    transposed: bool


def tile_products_timing(products: TileProducts) -> tuple[np.ndarray, np.ndarray]:
    """A Python caller's array cycles (int64, per product) and their split (float64,
    array_split's five per product) of many tile products in one kernel call: a search
    works out a few dozen shapes, each two kernel calls' dispatch apart. The kernel
    takes scalars and arrays: those the kernel library exports."""
    size = products.shapes.shape[0]
    cycles = np.empty(size, dtype=np.int64)
    split = np.empty((size, 5), dtype=np.float64)
    _products_timing(*products, cycles, split)
    return cycles, split


@njit(cache=True)
def _products_timing(shapes, rows: int, cols: int, count: int, dataflow: int,
                     fold_model: int, speed: float, transposed: bool, cycles,
                     split) -> None:
    """tile_products_timing's loop, its results written into `cycles` and `split`."""
    for i in range(shapes.shape[0]):
        m, n, k = shapes[i, 0], shapes[i, 1], shapes[i, 2]
        if transposed:
            m, n, k = spread_shape(n, m, k, rows, cols, count, dataflow)
        cycles[i] = array_cycles(m, n, k, rows, cols, count, dataflow, fold_model, False,
                                 speed)
        useful, padding, fill, stationary, skew = array_split(
            m, n, k, rows, cols, count, dataflow, fold_model, False, speed)
        split[i, 0] = useful
        split[i, 1] = padding
        split[i, 2] = fill
        split[i, 3] = stationary
        split[i, 4] = skew


@njit(cache=True, inline="always")
def spread_shape(m: int, n: int, k: int, rows: int, cols: int, count: int,
                 dataflow: int) -> tuple[int, int, int]:
    """The shape each array runs of a product whose F folds leave arrays idle (F <
    count): its streamed dim split into count // F shares (rounded up); the product
    itself where its folds occupy every array."""
    folds = fold_count(m, n, k, rows, cols, dataflow)
    if folds >= count:
        return m, n, k
    share = count // folds
    streamed = TIME_DIM[dataflow]
    if streamed == M:
        return ceil_div(m, share), n, k
    if streamed == N:
        return m, ceil_div(n, share), k
    return m, n, ceil_div(k, share)


@njit(cache=True, inline="always")
def product_cycles(product) -> int:
    """array_cycles of a TileProduct, for compiled callers."""
    return array_cycles(product.m, product.n, product.k, product.rows, product.cols,
                        product.count, product.dataflow, product.fold_model,
                        product.continues_fold, product.speed)


@njit(cache=True, inline="always")
def product_split(product) -> tuple[float, float, int, int, int]:
    """array_split of a TileProduct, for compiled callers."""
    return array_split(product.m, product.n, product.k, product.rows, product.cols,
                       product.count, product.dataflow, product.fold_model,
                       product.continues_fold, product.speed)


@njit(cache=True, inline="always")
def vector_cycles(elements: int, lanes: int, cycles_per_element: int, passes: int) -> int:
    """Vector unit cycles: ceil(elements / lanes) * cycles_per_element * passes."""
    return ceil_div(elements, lanes) * cycles_per_element * passes


@njit(cache=True)
def vector_cycles_each(elements, lanes: int, cycles_per_element: int, passes: int):
    """vector_cycles of each count of `elements` (int64): a Python caller's many in
    one kernel call."""
    cycles = np.empty_like(elements)
    for i in range(elements.shape[0]):
        cycles[i] = vector_cycles(elements[i], lanes, cycles_per_element, passes)
    return cycles


@njit(cache=True, inline="always")
def service_cycles(nbytes: int, bytes_per_cycle: float) -> int:
    """Cycles a transfer of nbytes > 0 occupies the off-chip server (float64 ceil)."""
    return int(math.ceil(nbytes / bytes_per_cycle))


@njit(cache=True, inline="always")
def input_stall(load_usable: int, start: int, prev_end: int) -> int:
    """Part of the compute gap before a step spent waiting for its load."""
    return max(0, min(load_usable, start) - prev_end)


@njit(cache=True, inline="always")
def evacuation_cycles(elements: int, elements_per_cycle: int, tile_cycles: int,
                      transposed: int) -> int:
    """Vector-unit cycles copying one output tile of `elements` out of the array's
    accumulators (output_path: vector, DESIGN.md section 15): ceil(elements / rate) +
    tile_cycles, plus ceil(transposed / rate) for a stationary tile transposed on the
    way (0 elements when the platform does not transpose)."""
    return (ceil_div(elements, elements_per_cycle) + tile_cycles
            + ceil_div(transposed, elements_per_cycle))


@njit(cache=True, inline="always")
def host_transfer_cycles(nbytes: int, bytes_per_cycle: float, latency_cycles: int) -> int:
    """Cycles of one host-link transfer of a call: latency + ceil(bytes / bandwidth);
    0 when nothing moves."""
    if nbytes <= 0:
        return 0
    return latency_cycles + int(math.ceil(nbytes / bytes_per_cycle))
