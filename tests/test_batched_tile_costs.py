"""A Python caller's batched kernels (model.timing): tile_products_timing gives each
product the cycles and split array_cycles and array_split give it alone (transposed: m
and n exchanged and the streamed dim split over idle arrays, as the attention lowering
runs it), vector_cycles_each each count's vector_cycles; and the attention search's
choice checks keep their verdicts (lowering.attention.checked_choice)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.api import load_platform
from simulator.errors import AccsimError
from simulator.inputs.workload import Workload
from simulator.lowering.attention import check_choice, checked_choice
from simulator.lowering.tile_table import TileTables
from simulator.mapping.plan import Tiling
from simulator.model.dataflow import fold_dims
from simulator.model.timing import (PIPELINED, SCALESIM, TileProducts, array_cycles,
                                    array_split, ceil_div, fold_count, tile_products_timing,
                                    vector_cycles, vector_cycles_each)

SIZES = st.integers(min_value=1, max_value=700)


def _alone(m, n, k, rows, cols, count, dataflow, fold_model, speed, transposed):
    """One product's (cycles, split) by the scalar kernels, spread by hand."""
    sizes = [m, n, k]
    if transposed:
        sizes = [n, m, k]
        folds = fold_count(*sizes, rows, cols, dataflow)
        if folds < count:
            streamed = fold_dims(dataflow)[2]
            sizes[streamed] = ceil_div(sizes[streamed], count // folds)
    args = (*sizes, rows, cols, count, dataflow, fold_model, False, speed)
    return array_cycles(*args), list(array_split(*args))


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(st.tuples(SIZES, SIZES, SIZES), min_size=1, max_size=6),
       rows=st.sampled_from([8, 32, 128]), cols=st.sampled_from([8, 64, 128]),
       count=st.sampled_from([1, 2, 4]), dataflow=st.sampled_from([0, 1, 2]),
       fold_model=st.sampled_from([PIPELINED, SCALESIM]),
       speed=st.sampled_from([1.0, 2.0, 0.5]), transposed=st.booleans())
def test_products_batched_equal_each_alone(shapes, rows, cols, count, dataflow,
                                           fold_model, speed, transposed):
    cycles, split = tile_products_timing(TileProducts(
        shapes=np.array(shapes, dtype=np.int64), rows=rows, cols=cols, count=count,
        dataflow=dataflow, fold_model=fold_model, speed=speed, transposed=transposed))
    for (m, n, k), got_cycles, got_split in zip(shapes, cycles.tolist(), split.tolist()):
        assert (got_cycles, got_split) == _alone(m, n, k, rows, cols, count, dataflow,
                                                 fold_model, speed, transposed)


def test_a_transposed_product_spreads_over_idle_arrays():
    # ws on 128 x 128: S^T of 8 rows x 1000 keys over d 128 is one fold (k x m), so
    # four arrays split its 1000 streamed keys: each runs 250.
    cycles, _ = tile_products_timing(TileProducts(
        shapes=np.array([(8, 1000, 128)], dtype=np.int64), rows=128, cols=128, count=4,
        dataflow=1, fold_model=PIPELINED, speed=1.0, transposed=True))
    assert cycles.tolist() == [array_cycles(250, 8, 128, 128, 128, 4, 1, PIPELINED, False,
                                            1.0)]


@given(elements=st.lists(st.integers(min_value=0, max_value=10**9), max_size=8),
       lanes=st.sampled_from([1, 7, 128]), per_element=st.integers(1, 5),
       passes=st.integers(1, 3))
def test_vector_cycles_each_equal_each_alone(elements, lanes, per_element, passes):
    got = vector_cycles_each(np.array(elements, dtype=np.int64), lanes, per_element,
                             passes)
    assert got.tolist() == [vector_cycles(e, lanes, per_element, passes)
                            for e in elements]


def test_a_choice_checked_again_gives_the_same_verdict():
    platform = load_platform("tpu_v5e_like")
    op = Workload(name="w", operators=[dict(
        name="attn", layer_type="attention.core", kind="attention", head_dim=128, batch=1,
        heads=8, kv_heads=8, q_len=16, kv_len=64)]).operators[0]
    tables = TileTables(op, platform)
    fine = Tiling(tm=16, tn=64, tk=128, loop_order="mnk", dataflow="ws", depth=2)
    too_wide = Tiling(tm=16, tn=65, tk=128, loop_order="mnk", dataflow="ws", depth=2)
    for _ in range(2):
        checked_choice(op, fine, platform, orientation="normal", unit="array",
                       source=None, tables=tables)
        with pytest.raises(AccsimError) as kept:
            checked_choice(op, too_wide, platform, orientation="normal", unit="array",
                           source=None, tables=tables)
        with pytest.raises(AccsimError) as alone:
            check_choice(op, too_wide, platform, "normal", "array", None)
        assert str(kept.value) == str(alone.value)
        assert "tn 65 is larger" in str(kept.value)
