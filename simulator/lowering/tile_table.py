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
from typing import TypeVar

import numpy as np

Built = TypeVar("Built")


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
        values, row_of = _merged_rows(np.asarray(values, np.int64))
        values, col_of = _merged_rows(values.T)
        return cls(np.ascontiguousarray(values.T), row_of[rows], col_of[cols])

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
        row_values, rows = _distinct(row_sizes)
        col_values, cols = _distinct(col_sizes)
        values = per_tile(np.outer(row_values, col_values).astype(np.int64))
        return cls.classed(values, rows, cols)

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
        """The table of the transposed grid, made once per table (the search's
        lowerings share their tables)."""
        return self._once("_transposed", lambda: TileTable(
            np.ascontiguousarray(self.values.T), self.cols, self.rows))

    def _once(self, name: str, make: Callable[[], Built]) -> Built:
        """What `make` returns, made on the first call by this name and kept with the
        table (immutable: the same value every time). Not functools.cached_property,
        whose lock costs more than a small table's sum."""
        held = self.__dict__.get(name)
        if held is None:
            held = self.__dict__[name] = make()
        return held

    def to_array(self) -> np.ndarray:
        """The whole table, rows x columns (what the step-by-step reference model,
        tests/lru_steps.py, takes)."""
        return np.ascontiguousarray(self.values[self.rows[:, None], self.cols[None, :]])

    def sum(self) -> int:
        """The sum of every entry (each class's value times its rows and columns),
        exact whatever its size; worked out once per table (the search's lowerings
        share their tables, TileTables)."""
        return self._once("_sum", self._summed)

    def _summed(self) -> int:
        rows = np.bincount(self.rows, minlength=self.values.shape[0])
        cols = np.bincount(self.cols, minlength=self.values.shape[1])
        if self.rows.shape[0] * self.cols.shape[0] * int(np.abs(self.values).max(
                initial=0)) < 2**63:
            return int(rows @ self.values @ cols)
        # Past int64 (a 2**40-element operand's bytes in a large grid): Python integers.
        return int(rows.astype(object) @ self.values.astype(object) @ cols.astype(object))

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


class TileTables:
    """The tables of one operator's lowerings on one platform, each built once by its
    key (which table, its tile sizes), and what lowering it under any tiling shares
    (lowering's per-operator facts): the search lowers many candidate tilings that
    share tile sizes (SCALE-Sim AlexNet: 276 lowerings, 99 distinct A tables, 41 B).
    An attention operator's hold its lowerings by tile sizes and choice, and their
    tile products, query tiles and buffer fits (lowering.attention). One is made per
    operator searched and dropped with it; a lowering of another operator or platform
    builds its own tables (`serves`)."""

    def __init__(self, op, platform):
        self.op, self.platform = op, platform
        self._built: dict[tuple, object] = {}

    def serves(self, op, platform) -> bool:
        return op is self.op and platform is self.platform

    def found(self, key: tuple):
        """What `key` names if kept (`keep`) or built already, else None."""
        return self._built.get(key)

    def keep(self, key: tuple, value) -> None:
        """Keep `value` under `key` (what a caller made and may meet again)."""
        self._built[key] = value

    def get(self, key: tuple, build: Callable[[], Built]) -> Built:
        """What `key` names, built by `build` the first time."""
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = build()
        return built


def tile_sizes(size: int, tile: int) -> np.ndarray:
    """The sizes of the tiles along a dim of `size` elements cut every `tile`: `tile`
    each but the last, which holds the rest."""
    return np.minimum(tile, size - np.arange(-(-size // tile), dtype=np.int64) * tile)


def _distinct(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a 1-d array and each entry's index among them; a dim's
    tile sizes (every tile full, or full tiles then one edge tile) without a sort (a
    lowering builds three tables per candidate tiling the search tries)."""
    sizes = np.asarray(sizes, np.int64)
    first, last = sizes[0], sizes[-1]
    if (sizes[:-1] == first).all():
        if last == first:
            return sizes[:1], np.zeros(sizes.shape[0], np.int64)
        classes = np.zeros(sizes.shape[0], np.int64)
        classes[-1] = 1
        return np.array([first, last], np.int64), classes
    values, classes = np.unique(sizes, return_inverse=True)
    return values, classes.reshape(-1).astype(np.int64)


def _merged_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-d array, in the order first met, and each row's index
    among them (a copy of the array itself when its rows are distinct, as they mostly
    are: the search builds hundreds of small tables per operator)."""
    seen: dict[tuple, int] = {}
    first: list[int] = []
    classes: list[int] = []
    for index, key in enumerate(map(tuple, values.tolist())):
        found = seen.setdefault(key, len(first))
        if found == len(first):
            first.append(index)
        classes.append(found)
    if len(first) == len(classes):
        return values.copy(), np.arange(len(classes), dtype=np.int64)
    return values[first], np.array(classes, np.int64)
