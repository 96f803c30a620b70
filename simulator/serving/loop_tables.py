"""The compiled serving loop's cost tables (loop_prices.CostTables) from its cost model
(LlmCost): copied from its memos and grid points at the start of a run, and an entry
the kernel lacks (a MISS) asked of it as the reference would ask it at that point,
or a table enlarged where the kernel lacks room.

A search makes hundreds of runs of one cost model, whose memos gain few entries from
one run to the next: the tables built from them are kept on the cost model
(KeptTables), and a run copies them (the kernel and `filled` write into their tables),
adding only the entries the memos gained since (each memo only grows, in insertion
order), instead of converting every memo again (about half a millisecond a run)."""

from __future__ import annotations

from itertools import islice

import numpy as np

from simulator.invocation import call_cost_reads_bytes
from simulator.serving import loop_state as k
from simulator.serving.llm_cost import LlmCost
from simulator.serving.loop_maps import EMPTY, PairMap, fill, pair_map, set_pair
from simulator.serving.loop_prices import CostTables, call_key


class KeptTables:
    """The tables of one cost model's memos as the last run found them, and how many
    entries of each memo they hold: what the next run extends and copies."""

    def __init__(self) -> None:
        self.dense, self.decode, self.grid, self.dense_grid = (
            _dense_table([], [], width) for width in (2, 4, 4, 2))
        self.call, self.prefill_grid = (_pairs([], []) for _ in range(2))
        self.held: dict[str, int] = {}  # by table: the entries of its memo it holds
        self.grid_sizes: tuple[int, int] | None = None  # the grid's (decode, pair) points

    def tables(self, cost: LlmCost) -> CostTables:
        """Copies of the tables, each first brought up to its memo."""
        self.dense = self._grown_dense("dense", self.dense, cost._dense_memo, 2)
        self.decode = self._grown_dense("decode", self.decode, cost._decode_memo, 4)
        self.dense_grid = self._grown_dense("dense_grid", self.dense_grid, cost._dense, 2)
        sizes = (len(cost._decode), len(cost._pair))
        if self.grid_sizes != sizes:  # its points: the contexts in both, built anew
            points = [context for context in cost._decode if context in cost._pair]
            self.grid = _dense_table(points, [cost._decode_at(context)
                                              for context in points], 4)
            self.grid_sizes = sizes
        self.prefill_grid = self._grown_pairs("prefill_grid", self.prefill_grid,
                                              cost._prefill, lambda found: found)
        if call_cost_reads_bytes(cost.platform):
            self.call = self._grown_pairs("call", self.call, cost._call_memo,
                                          lambda found: (found.seconds, found.energy_j))
        (dense, dense_known), (decode, decode_known), (grid, grid_known), \
            (dense_grid, dense_grid_known) = (
                (rows.copy(), known.copy())
                for rows, known in (self.dense, self.decode, self.grid, self.dense_grid))
        return CostTables(
            dense=dense, dense_known=dense_known,
            decode=decode, decode_known=decode_known, call=_copied(self.call),
            grid=grid, grid_known=grid_known,
            dense_grid=dense_grid, dense_grid_known=dense_grid_known,
            prefill_grid=_copied(self.prefill_grid))

    def _gained(self, name: str, memo: dict) -> list:
        """The memo's (key, value) items since the table last held it."""
        held = self.held.get(name, 0)
        self.held[name] = len(memo)
        return list(islice(memo.items(), held, None)) if len(memo) > held else []

    def _grown_dense(self, name: str, table: tuple, memo: dict, width: int) -> tuple:
        """A dense table (rows, known) with the memo's gained entries."""
        gained = self._gained(name, memo)
        if not gained:
            return table
        indices = [index for index, _ in gained]
        rows, known = _room(*table, max(indices))
        rows[indices] = np.array([value for _, value in gained],
                                 dtype=np.float64).reshape(len(indices), width)
        known[indices] = True
        return rows, known

    def _grown_pairs(self, name: str, pairs: PairMap, memo: dict, pair_of) -> PairMap:
        """A PairMap (keyed a << 32 | b) with the memo's gained entries."""
        gained = self._gained(name, memo)
        if not gained:
            return pairs
        keys, values = _packed([key for key, _ in gained],
                               [pair_of(found) for _, found in gained])
        if 2 * (int(pairs.used[0]) + len(keys)) > len(pairs.keys):  # loop_maps.has_room
            held = pairs.keys != EMPTY
            return pair_map(np.concatenate([pairs.keys[held], keys]),
                            np.concatenate([pairs.values[held], values]),
                            room=len(pairs.keys))
        fill(pairs, keys, values)
        return pairs


def _copied(pairs: PairMap) -> PairMap:
    """A PairMap of its own arrays."""
    return PairMap(keys=pairs.keys.copy(), values=pairs.values.copy(),
                   used=pairs.used.copy())


def cost_tables(cost: LlmCost) -> CostTables:
    """The cost model's memos and grid points as CostTables (dense tables with rows up
    to at least the largest index they hold: `filled` enlarges them), copied from the
    tables kept on the cost model (KeptTables, made on its first run). A call's cost
    is copied only where it depends on its tokens and requests (else asked once a
    run); the prefill memo is not (the kernel interpolates each chunk from the grid
    points)."""
    if cost.kept_tables is None:
        cost.kept_tables = KeptTables()
    return cost.kept_tables.tables(cost)


def _packed(keys: list[tuple[int, int]], values: list) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) keys as a << 32 | b, and their values as rows of two floats."""
    packed = np.array(keys, dtype=np.int64).reshape(len(keys), 2)
    return (packed[:, 0] << 32 | packed[:, 1],
            np.array(values, dtype=np.float64).reshape(len(keys), 2))


def _pairs(keys: list[tuple[int, int]], values: list) -> PairMap:
    """A PairMap of (a, b) keys, as a << 32 | b."""
    return pair_map(*_packed(keys, values))


def _dense_table(indices: list[int], values: list, width: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `width` floats by index and whether each is known, from the values
    (pairs, or pairs of pairs) of each index."""
    rows = np.zeros((max(indices, default=0) + 1, width))
    known = np.zeros(len(rows), dtype=np.bool_)
    if indices:
        rows[indices] = np.array(values, dtype=np.float64).reshape(len(indices), width)
        known[indices] = True
    return rows, known


def _room(rows: np.ndarray, known: np.ndarray, index: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """A dense table with a row for `index` (at least twice the rows: few copies)."""
    if index < len(known):
        return rows, known
    size = max(index + 1, 2 * len(known))
    more_rows, more_known = np.zeros((size, rows.shape[1])), np.zeros(size, dtype=np.bool_)
    more_rows[:len(rows)], more_known[:len(known)] = rows, known
    return more_rows, more_known


def filled(si: np.ndarray, cost: LlmCost, tables: CostTables) -> CostTables:
    """The tables with the entry the kernel lacks (named in si: I_MISS_KIND, I_MISS_A,
    I_MISS_B) from the cost model, or the room it lacks."""
    kind, a, b = int(si[k.I_MISS_KIND]), int(si[k.I_MISS_A]), int(si[k.I_MISS_B])
    if kind == k.K_CALL:
        found = cost._call(a, b)
        return tables._replace(call=set_pair(tables.call, call_key(
            si[k.I_CALL_KEYED], a, b), (found.seconds, found.energy_j)))
    if kind == k.K_PREFILL_GRID:
        return tables._replace(prefill_grid=set_pair(tables.prefill_grid, (a << 32) | b,
                                                     cost._prefill_at(a, b)))
    if kind == k.K_DENSE_GRID:
        grid, known = _room(tables.dense_grid, tables.dense_grid_known, a)
        grid[a], known[a] = cost._dense_at(a), True
        return tables._replace(dense_grid=grid, dense_grid_known=known)
    if kind == k.K_DECODE_ROOM:
        decode, known = _room(tables.decode, tables.decode_known, a)
        return tables._replace(decode=decode, decode_known=known)
    if kind == k.K_DENSE_ROOM:
        dense, known = _room(tables.dense, tables.dense_known, a)
        return tables._replace(dense=dense, dense_known=known)
    variable, fixed = cost._decode_at(a)  # K_GRID
    grid, known = _room(tables.grid, tables.grid_known, a)
    grid[a], known[a] = (*variable, *fixed), True
    return tables._replace(grid=grid, grid_known=known)
