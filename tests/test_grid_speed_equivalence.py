"""The search's faster vectorised paths give what the plain ones give: min_offchip's
narrowing tie-break equals one lexicographic sort of every fitting (tile, order), and
window_grid equals window_elements tile by tile."""

from __future__ import annotations

import numpy as np
import pytest

from platforms import make_platform
from simulator.mapping.footprint import array_speed, offchip_by_order, operand_fits
from simulator.model.loop_nest import array_busy_cycles
from simulator.mapping.heuristics import dim_candidates, min_offchip
from simulator.mapping.plan import LOOP_ORDERS
from simulator.mapping.windows import window_elements, window_grid
from simulator.inputs.workload import Workload

PLATFORM = make_platform(systolic_array={"rows": 4, "cols": 4},
                         buffers={"ifmap_bytes": 256, "weight_bytes": 192,
                                  "output_bytes": 512})
OPS = Workload.model_validate({"name": "ops", "operators": [
    {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 12, "n": 6, "k": 10},
    {"name": "c", "layer_type": "conv", "kind": "conv2d", "h": 7, "w": 6, "cin": 2,
     "cout": 6, "kh": 3, "kw": 3, "padding": 1},
    {"name": "s", "layer_type": "conv", "kind": "conv2d", "batch": 2, "h": 9, "w": 8,
     "cin": 3, "cout": 5, "kh": 3, "kw": 2, "stride": 2, "dilation": 2},
]}).operators


def _lexsorted_min_offchip(op, platform, depth: int, dataflow: str) -> tuple:
    """min_offchip's choice the plain way: every fitting tile x order, one lexsort."""
    array = platform.systolic_array
    g = op.gemm()
    vm, vn, vk = (np.asarray(dim_candidates(size, (array.rows, array.cols)), dtype=np.int64)
                  for size in (g.m, g.n, g.k))
    a, b, c = operand_fits(op, platform, vm[:, None, None], vn[None, :, None],
                           vk[None, None, :], depth)
    mi, ni, ki = np.nonzero(a & b & c)
    tm, tn, tk = vm[mi][:, None], vn[ni][:, None], vk[ki][:, None]
    order = np.arange(len(LOOP_ORDERS))[None, :]
    traffic = offchip_by_order(op, platform, tm, tn, tk)[:, :, 0].T.ravel()
    busy = array_busy_cycles(g.m, g.n, g.k, tm, tn, tk, order=order, dataflow=dataflow,
                             rows=array.rows, cols=array.cols, count=array.count,
                             fold_model=array.fold_model,
                             speed=array_speed(op, platform)).ravel()
    tm, tn, tk, order = (np.broadcast_to(v, (len(mi), len(LOOP_ORDERS))).ravel()
                         for v in (tm, tn, tk, order))
    steps = -(-g.m // tm) * -(-g.n // tn) * -(-g.k // tk)
    rank = np.argsort(np.argsort(np.array(LOOP_ORDERS)))[order]
    pick = np.lexsort((rank, tk, tn, tm, steps, busy, traffic))[0]
    return int(tm[pick]), int(tn[pick]), int(tk[pick]), LOOP_ORDERS[order[pick]]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
def test_min_offchip_narrowing_equals_one_lexsort(op, depth, dataflow):
    tiling = min_offchip(op, PLATFORM, depth, dataflow)
    assert (tiling.tm, tiling.tn, tiling.tk, tiling.loop_order) == \
        _lexsorted_min_offchip(op, PLATFORM, depth, dataflow)


@pytest.mark.parametrize("op", OPS[1:], ids=lambda op: op.name)
def test_window_grid_counts_each_tile_as_window_elements(op):
    g = op.gemm()
    m0s, m1s = np.array([0, 3, 5, g.m - 4]), np.array([2, 9, g.m, g.m])
    k0s, k1s = np.array([0, 1, 7, 0]), np.array([4, 11, g.k, g.k])
    grid = window_grid(op, m0s, m1s, k0s, k1s)
    assert grid.tolist() == [[window_elements(op, int(m0), int(m1), int(k0), int(k1))
                              for k0, k1 in zip(k0s, k1s)] for m0, m1 in zip(m0s, m1s)]
