"""Per-tile tables in O(rows + columns) memory (lowering.tile_table, issue 26): a table
holds the entries of the whole table it stands for (whole, transposed, summed, its
consecutive equal rows), a table built from tile sizes is the per-tile function of
their outer product, and a big-grid GEMM's streamed program holds arrays that grow
with its tile counts, not with their products.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from platforms import make_platform

from simulator.lowering import lower_compute
from simulator.lowering.gemm_stream import GemmStream
from simulator.lowering.tile_table import TileTable, tile_sizes
from simulator.mapping.plan import Tiling
from simulator.inputs.workload import Gemm


@st.composite
def whole_tables(draw) -> np.ndarray:
    """A rows x columns int64 table whose entries repeat often (few distinct values)."""
    rows, cols = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    entries = st.lists(st.sampled_from([0, 1, 7, 64]), min_size=rows * cols,
                       max_size=rows * cols)
    return np.array(draw(entries), np.int64).reshape(rows, cols)


def _consecutive_row_ids(table: np.ndarray) -> np.ndarray:
    """The naive reference: a new id wherever a row differs from the one before."""
    ids = [0]
    for i in range(1, table.shape[0]):
        ids.append(ids[-1] + int(not np.array_equal(table[i], table[i - 1])))
    return np.array(ids, np.int64)


@settings(max_examples=200, deadline=None)
@given(table=whole_tables())
def test_a_table_holds_the_entries_of_the_whole_table(table):
    held = TileTable.from_array(table)
    assert held.shape == table.shape
    np.testing.assert_array_equal(held.to_array(), table)
    np.testing.assert_array_equal(held.transposed().to_array(), table.T)
    assert held.sum() == int(table.sum())
    assert (held.max(), held.min()) == (int(table.max()), int(table.min()))
    np.testing.assert_array_equal(held.row_ids(), _consecutive_row_ids(table))
    np.testing.assert_array_equal(held.transposed().row_ids(),
                                  _consecutive_row_ids(table.T))
    # Canonical classes: as many as distinct rows and columns.
    assert held.values.shape == (np.unique(table, axis=0).shape[0],
                                 np.unique(table, axis=1).shape[1])


@settings(max_examples=200, deadline=None)
@given(sizes=st.tuples(*[st.integers(1, 40)] * 4), unit=st.sampled_from([1, 2, 3, 8]),
       scale=st.sampled_from([1, 2]))
def test_a_table_of_tile_sizes_is_the_per_tile_function_of_their_products(sizes, unit,
                                                                          scale):
    """A packed format's bytes (whole units of `unit` elements, rounded up): tiles of
    different sizes can take equal bytes, so classes merge."""
    rows, tile_rows, cols, tile_cols = sizes
    row_sizes = tile_sizes(rows, min(tile_rows, rows))
    col_sizes = tile_sizes(cols, min(tile_cols, cols))
    assert row_sizes.sum() == rows and col_sizes.sum() == cols

    def per_tile(elements):
        return -(-elements // unit) * scale

    held = TileTable.of_sizes(row_sizes, col_sizes, per_tile)
    expected = per_tile(np.outer(row_sizes, col_sizes))
    np.testing.assert_array_equal(held.to_array(), expected)
    np.testing.assert_array_equal(held.row_ids(), _consecutive_row_ids(expected))
    assert held.values.shape[0] <= 2 and held.values.shape[1] <= 2   # edge or not


def _arrays(holder, seen: set[int]) -> list[np.ndarray]:
    """Every numpy array an object holds (in its attributes, tuples and tables)."""
    if id(holder) in seen:
        return []
    seen.add(id(holder))
    if isinstance(holder, np.ndarray):
        return [holder]
    if isinstance(holder, (tuple, list)):
        return [a for item in holder for a in _arrays(item, seen)]
    if hasattr(holder, "__dict__"):
        return [a for item in vars(holder).values() for a in _arrays(item, seen)]
    return []


@pytest.mark.parametrize("loop_order", ["mnk", "nkm", "kmn"])
def test_a_big_grid_gemms_program_holds_tables_linear_in_its_tile_counts(loop_order):
    """1000 x 999 x 1001 tiles (1e9 steps), edge tiles on every dim, each loop order
    with a transposed table or none: what the streamed program holds is a few int64
    per tile row and column, where one whole table of the grid would be 8 MB."""
    counts = (1000, 999, 1001)
    tile = 4
    m, n, k = (c * tile - 1 for c in counts)
    gemm = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k)
    tiling = Tiling(tile, tile, tile, loop_order, "os", 2, None)
    lowered = lower_compute(gemm, tiling, make_platform(), block_steps=1 << 12)
    program = lowered.program
    assert isinstance(program, GemmStream)
    assert program.steps == counts[0] * counts[1] * counts[2]
    nest = program.nest
    assert nest.a_table.shape == (counts[0], counts[2])
    assert nest.b_load.shape == nest.b_sram.shape == (counts[2], counts[1])
    held = sum(a.nbytes for a in _arrays(program, set()))
    assert held <= 8 * 8 * sum(counts)
    assert held < counts[0] * counts[2] * 8 // 20   # a twentieth of one whole table
