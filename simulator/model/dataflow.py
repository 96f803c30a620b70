"""The dataflow table (DESIGN.md section 3): the one home of what os, ws and is differ in.

A dataflow maps the three GEMM dims (m, n, k) onto the array: one dim runs down the
array's rows, one across its columns, one streams through in time. Everything else is
derived from that mapping, never branched on by name:
- the stationary operand is the one the streamed dim does not index (os: C, free of k;
  ws: B, free of m; is: A, free of n), so a single-fold tile continues its fold exactly
  along the streamed dim's loop, and a step's stationary tile is keyed by the other two;
- an input operand is read from SRAM once per fold along its free dim when that dim is
  spatial, once per tile when it streams (SCALE-Sim's per-fold counting);
- SCALE-Sim's fold fill is R + C - 2 when the output stays (os) and 2R + C - 2 when an
  input is preloaded first (ws, is).

Dataflows are integer codes and the table NumPy arrays, so compiled kernels read the same
rows as Python does.
"""

from __future__ import annotations

import numpy as np

from simulator.kernels.jit import njit

# Dataflow codes, in the order of DESIGN.md section 3's table.
OS, WS, IS = 0, 1, 2
NAMES = ("os", "ws", "is")
DATAFLOW_CODES = {name: code for code, name in enumerate(NAMES)}
# GEMM dims and operands, as the table's entries name them.
M, N, K = 0, 1, 2
A, B, C = 0, 1, 2
# Dims each operand is indexed by: A (m, k), B (k, n), C (m, n).
OPERAND_DIMS = ((M, K), (K, N), (M, N))

# The table: one entry per dataflow code.
ROW_DIM = np.array([M, K, K], dtype=np.int64)      # dim down the array's rows
COL_DIM = np.array([N, N, M], dtype=np.int64)      # dim across its columns
TIME_DIM = np.array([K, M, N], dtype=np.int64)     # dim streamed in time
STATIONARY = np.array([C, B, A], dtype=np.int64)   # operand held in the PEs
FILL_ROWS = np.array([1, 2, 2], dtype=np.int64)    # scalesim fold fill: FILL_ROWS R + C - 2

# How an input operand's SRAM reads per step scale with the folds (free_dim_reads).
ONCE, PER_ROW_FOLD, PER_COL_FOLD = 0, 1, 2


def free_dim(operand: int) -> int:
    """The GEMM dim an operand is not indexed by (A: n, B: m, C: k)."""
    return ({M, N, K} - set(OPERAND_DIMS[operand])).pop()


def input_reads(dataflow: int, operand: int) -> int:
    """ONCE, PER_ROW_FOLD or PER_COL_FOLD: an input operand (A or B) is re-read for every
    fold along its free dim when that dim is spatial (rows or columns), once per step
    when it streams."""
    dim = free_dim(operand)
    if ROW_DIM[dataflow] == dim:
        return PER_ROW_FOLD
    if COL_DIM[dataflow] == dim:
        return PER_COL_FOLD
    return ONCE


def fold_dims(dataflow: int) -> tuple[int, int, int]:
    """(row dim, column dim, streamed dim) of a dataflow, for Python callers that index
    their own sizes (arrays of tile sizes, say) by GEMM dim."""
    return int(ROW_DIM[dataflow]), int(COL_DIM[dataflow]), int(TIME_DIM[dataflow])


# Per dataflow: how A's and B's SRAM reads scale (derived from the table above).
A_READS = np.array([input_reads(code, A) for code in range(len(NAMES))], dtype=np.int64)
B_READS = np.array([input_reads(code, B) for code in range(len(NAMES))], dtype=np.int64)


@njit(cache=True, inline="always")
def _dim(m: int, n: int, k: int, dim: int) -> int:
    """The size of GEMM dim `dim` of an (m, n, k) tile."""
    if dim == M:
        return m
    if dim == N:
        return n
    return k


@njit(cache=True, inline="always")
def fold_shape(m: int, n: int, k: int, dataflow: int) -> tuple[int, int, int]:
    """(Sr, Sc, T): the tile's dims on the array's rows, on its columns, and streamed."""
    return (_dim(m, n, k, ROW_DIM[dataflow]), _dim(m, n, k, COL_DIM[dataflow]),
            _dim(m, n, k, TIME_DIM[dataflow]))


@njit(cache=True, inline="always")
def fill_rows(dataflow: int) -> int:
    """SCALE-Sim's fold fill is fill_rows x R + C - 2."""
    return FILL_ROWS[dataflow]


@njit(cache=True, inline="always")
def stationary_key(dataflow: int, mi: int, ni: int, ki: int, nn: int, nk: int) -> int:
    """The key of a step's stationary tile, from its tile indices (os: C, ws: B, is: A),
    as lowering keys tiles: C mi nn + ni, B ki nn + ni, A mi nk + ki."""
    operand = STATIONARY[dataflow]
    if operand == C:
        return mi * nn + ni
    if operand == B:
        return ki * nn + ni
    return mi * nk + ki


@njit(cache=True, inline="always")
def read_multiplier(reads: int, row_folds: int, col_folds: int) -> int:
    """An input tile's SRAM reads per step in units of its elements (A_READS, B_READS)."""
    if reads == PER_ROW_FOLD:
        return row_folds
    if reads == PER_COL_FOLD:
        return col_folds
    return 1


def stationary_input_elements(m, n, k, dataflow: int):
    """Elements of the stationary input tile of (m, n, k) products, scalars or arrays
    alike (ws: its k x n weight tile, is: its m x k input tile); 0 for os, where the
    output stays."""
    operand = int(STATIONARY[dataflow])
    if operand == C:
        return 0 * m
    sizes = (m, n, k)
    first, second = OPERAND_DIMS[operand]
    return sizes[first] * sizes[second]
