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

from simulator.kernels.jit import njit
from simulator.model.dataflow import fill_rows, fold_shape

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
    too; callers in other modules pass it to tile_product_timing (from Python) or
    product_cycles and product_split (from compiled code), which unpack it here."""

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


def tile_product_timing(product: TileProduct) -> tuple[int, tuple]:
    """A Python caller's array cycles and their split (array_split) of one tile
    product. The kernels take scalars: those the kernel library exports."""
    return array_cycles(*product), array_split(*product)


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
