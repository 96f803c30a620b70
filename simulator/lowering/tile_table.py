"""Per-tile tables of a GEMM's tile grid (bytes of each A tile, of each B tile) held in
O(rows + columns) memory (issue 26): a tile's bytes depend on its sizes, and a GEMM's
tiles have two sizes per dim (the edge tile's and the rest's), so a 1000 x 1000 grid
holds a few distinct values, not a million. A table is a small matrix of values, one
row per class of grid rows and one column per class of grid columns, and the class of
each grid row and column; entry (i, j) is values[rows[i], cols[j]]. A conv's window
table, whose rows do differ, is held the same way with as many classes as it needs.

Classes are canonical: no two rows (columns) of `values` are equal and every one is
used, so two grid rows hold equal entries exactly when their classes are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class TileTable:
    """int64 entries of a rows x columns grid: values[rows[i], cols[j]] at (i, j)."""

    values: np.ndarray   # int64[row classes, column classes]
    rows: np.ndarray     # int64[grid rows]: each grid row's class
    cols: np.ndarray     # int64[grid columns]: each grid column's class

    @classmethod
    def classed(cls, values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> TileTable:
        """The table with entry values[rows[i], cols[j]], its equal value rows and
        columns merged (so its classes are canonical); every value row and column is
        used by some grid row and column."""
        values, row_of = np.unique(np.asarray(values, np.int64), axis=0,
                                   return_inverse=True)
        values, col_of = np.unique(values, axis=1, return_inverse=True)
        return cls(np.ascontiguousarray(values), row_of.reshape(-1)[rows].astype(np.int64),
                   col_of.reshape(-1)[cols].astype(np.int64))

    @classmethod
    def from_array(cls, table: np.ndarray) -> TileTable:
        """A whole 2-d table (one class per distinct row and column)."""
        table = np.asarray(table, np.int64)
        return cls.classed(table, np.arange(table.shape[0]), np.arange(table.shape[1]))

    @classmethod
    def of_sizes(cls, row_sizes: np.ndarray, col_sizes: np.ndarray,
                 per_tile: Callable[[np.ndarray], np.ndarray]) -> TileTable:
        """per_tile(np.outer(row_sizes, col_sizes)) (per_tile elementwise, e.g. the
        bytes of so many elements) from the distinct sizes alone: no grid-sized array."""
        row_values, rows = np.unique(row_sizes, return_inverse=True)
        col_values, cols = np.unique(col_sizes, return_inverse=True)
        values = per_tile(np.outer(row_values, col_values).astype(np.int64))
        return cls.classed(values, rows.reshape(-1), cols.reshape(-1))

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows.shape[0], self.cols.shape[0]

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.rows.nbytes + self.cols.nbytes

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values, rows, cols): the table as the compiled kernels take it (nest_steps)."""
        return self.values, self.rows, self.cols

    def transposed(self) -> TileTable:
        return TileTable(np.ascontiguousarray(self.values.T), self.cols, self.rows)

    def to_array(self) -> np.ndarray:
        """The whole table, rows x columns (for the step kernel of a whole program)."""
        return np.ascontiguousarray(self.values[self.rows[:, None], self.cols[None, :]])

    def sum(self) -> int:
        """The sum of every entry (each class's value times its rows and columns)."""
        rows = np.bincount(self.rows, minlength=self.values.shape[0])
        cols = np.bincount(self.cols, minlength=self.values.shape[1])
        return int(rows @ self.values @ cols)

    def max(self) -> int:
        return int(self.values.max())

    def min(self) -> int:
        return int(self.values.min())

    def row_ids(self) -> np.ndarray:
        """An id per grid row, shared by each run of equal consecutive rows (equal rows
        are equal classes: the classes are canonical)."""
        starts = np.ones(self.rows.shape[0], np.int64)
        starts[1:] = self.rows[1:] != self.rows[:-1]
        return np.cumsum(starts) - 1


def tile_sizes(size: int, tile: int) -> np.ndarray:
    """The sizes of the tiles along a dim of `size` elements cut every `tile`: `tile`
    each but the last, which holds the rest."""
    return np.minimum(tile, size - np.arange(-(-size // tile), dtype=np.int64) * tile)
