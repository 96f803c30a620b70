"""Per-tile timing formulas: the one place the model's arithmetic is written.

Small pure functions on integers and floats, compiled with Numba so the fast engine and
the compiled lowering call them inline, while the SimPy engine, the Python lowering and
the tests call the very same functions (Numba dispatchers are callable from Python).
Dataflows are integer codes so that they pass through compiled code as data.
"""

from __future__ import annotations

import math

from numba import njit

# Dataflow codes, in the order of DESIGN.md section 3's table.
OS, WS, IS = 0, 1, 2
DATAFLOW_CODES = {"os": OS, "ws": WS, "is": IS}


@njit(cache=True, inline="always")
def fold_shape(m: int, n: int, k: int, dataflow: int) -> tuple[int, int, int]:
    """(Sr, Sc, T): the dims mapped to array rows, array cols, and streamed in time."""
    if dataflow == OS:
        return m, n, k
    if dataflow == WS:
        return k, n, m
    return k, m, n


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
    """Pipeline fill and drain of one fold: R + C - 2 (os), 2R + C - 2 (ws, is)."""
    if dataflow == OS:
        return rows + cols - 2
    return 2 * rows + cols - 2


@njit(cache=True, inline="always")
def array_cycles(m: int, n: int, k: int, rows: int, cols: int, dataflow: int,
                 continues_fold: bool) -> int:
    """Cycles of the array on one tile product, SCALE-Sim v3's per-fold latency.

    A single-fold tile whose stationary operand equals the previous step's continues
    that fold and pays only its streamed length T.
    """
    _, _, t = fold_shape(m, n, k, dataflow)
    if continues_fold:
        return t
    folds = fold_count(m, n, k, rows, cols, dataflow)
    return folds * (t + fold_fill_cycles(rows, cols, dataflow))


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
