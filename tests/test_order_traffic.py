"""min_offchip's traffic model (mapping.footprint.offchip_by_order), summed per tiling
and loop order by the compiled model.loop_nest.order_traffic, against the loop nest's
array rules it follows (inside_product, lru_fetches, c_offchip_bytes), every tile size
a search tries, on GEMMs and convs of shipped platforms: dense and sparse weights,
narrow dtypes, on-chip activations, spilling partial sums. Equal, dtype and shape too."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.api import load_platform
from simulator.inputs.workload import Conv2d, Workload
from simulator.mapping import footprint
from simulator.mapping.heuristics import dim_candidates
from simulator.mapping.plan import LOOP_ORDERS
from simulator.model.loop_nest import (DIMS, c_offchip_bytes, inside_product,
                                       lru_fetches)

PLATFORMS = ("tpu_v5e_like", "edge_32x32", "tpu_v1", "whatif/tpu_v5e_sparse24",
             "whatif/tpu_v5e_int4", "whatif/tpu_v5e_psum", "whatif/tpu_v5e_host")
SHAPES = (dict(kind="gemm", m=7, n=6144, k=4096),
          dict(kind="gemm", m=512, n=28672, k=4096),
          dict(kind="gemm", batch=4, m=64, n=128, k=96),
          dict(kind="conv2d", h=14, w=14, cin=64, cout=128, kh=3, kw=3, padding=1))


def by_the_rules(op, platform, tm, tn, tk) -> np.ndarray:
    """offchip_by_order's model on the nest's array rules, one loop order at a time."""
    g = op.gemm()
    _, acc, out = footprint.operand_bytes(op, platform)
    buffers = platform.buffers
    counts = {"m": -(-g.m // tm), "n": -(-g.n // tn), "k": -(-g.k // tk)}
    slots = {"n": buffers.ifmap_bytes // footprint.a_tile_bytes(op, platform, tm, tk,
                                                                "im2col"),
             "m": buffers.weight_bytes // footprint.b_tile_bytes(op, platform, tk, tn),
             "k": buffers.output_bytes // footprint.c_tile_bytes(op, platform, tm, tn)}
    a_elements = op.batch * op.h * op.w * (op.cin // op.groups) \
        if isinstance(op, Conv2d) else g.m * g.k
    bases = {"n": footprint.activation_bytes(op, platform, a_elements),
             "m": footprint.weight_bytes(op, platform, g.k * g.n, offchip=True)}
    onchip = footprint.operator_onchip(op, platform)
    shape = np.broadcast_shapes(tm.shape, tn.shape, tk.shape)
    rows = []
    for order in range(len(LOOP_ORDERS)):
        total = np.zeros(shape, np.int64)
        for reuse in "m" if onchip else "nmk":
            inside = inside_product(reuse, DIMS, counts, np.int64(order))
            total = total + (c_offchip_bytes(g, out, acc, counts["k"],
                                             slots["k"] < inside) if reuse == "k"
                             else bases[reuse] * lru_fetches(counts[reuse], inside,
                                                             slots[reuse]))
        rows.append(total)
    return np.stack(rows)


@pytest.mark.parametrize("platform_name", PLATFORMS)
@pytest.mark.parametrize("shape", SHAPES)
def test_order_traffic_follows_the_nests_rules(platform_name, shape):
    platform = load_platform(platform_name)
    op = Workload(name="w", operators=[dict(name="op", layer_type="fc", **shape)]
                  ).operators[0]
    g, array = op.gemm(), platform.systolic_array
    vm, vn, vk = (np.asarray(dim_candidates(size, (array.rows, array.cols)), np.int64)
                  for size in (g.m, g.n, g.k))
    tm, tn, tk = vm[:, None, None], vn[None, :, None], vk[None, None, :]
    found = footprint.offchip_by_order(op, platform, tm, tn, tk)
    expected = by_the_rules(op, platform, tm, tn, tk)
    assert found.dtype == np.int64 and found.shape == expected.shape
    assert np.array_equal(found, expected)
