"""The compiled serving loop's cost tables (loop_prices.CostTables) from its cost model
(LlmCost): copied from its memos and grid points at the start of a run, and an entry
the kernel lacks (a MISS) asked of it as the reference would ask it at that point,
or a table enlarged where the kernel lacks room."""

from __future__ import annotations

import numpy as np

from simulator.invocation import call_cost_reads_bytes
from simulator.serving import loop_state as k
from simulator.serving.llm_cost import LlmCost
from simulator.serving.loop_maps import PairMap, pair_map, set_pair
from simulator.serving.loop_prices import CostTables, call_key


def cost_tables(cost: LlmCost) -> CostTables:
    """The cost model's memos and grid points as CostTables (dense tables with rows up
    to the largest index they hold: `filled` enlarges them). A call's cost is copied
    only where it depends on its tokens and requests (else asked once a run); the
    prefill memo is not (the kernel interpolates each chunk from the grid points)."""
    calls = cost._call_memo if call_cost_reads_bytes(cost.platform) else {}
    points = [context for context in cost._decode if context in cost._pair]
    dense, dense_known = _dense_table(list(cost._dense_memo),
                                      list(cost._dense_memo.values()), 2)
    decode, decode_known = _dense_table(list(cost._decode_memo),
                                        list(cost._decode_memo.values()), 4)
    grid, grid_known = _dense_table(points, [cost._decode_at(context)
                                             for context in points], 4)
    dense_grid, dense_grid_known = _dense_table(list(cost._dense),
                                                list(cost._dense.values()), 2)
    return CostTables(
        dense=dense, dense_known=dense_known,
        decode=decode, decode_known=decode_known,
        call=_pairs(list(calls), [(found.seconds, found.energy_j)
                                  for found in calls.values()]),
        grid=grid, grid_known=grid_known,
        dense_grid=dense_grid, dense_grid_known=dense_grid_known,
        prefill_grid=_pairs(list(cost._prefill), list(cost._prefill.values())))


def _pairs(keys: list[tuple[int, int]], values: list) -> PairMap:
    """A PairMap of (a, b) keys, as a << 32 | b."""
    packed = np.array(keys, dtype=np.int64).reshape(len(keys), 2)
    return pair_map(packed[:, 0] << 32 | packed[:, 1],
                    np.array(values, dtype=np.float64).reshape(len(keys), 2))


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
