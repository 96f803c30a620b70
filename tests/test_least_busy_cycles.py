"""min_offchip's busy-cycle tie-break, compiled (model.loop_nest.least_busy_cycles),
against the closed form it follows (array_busy_cycles): every tile size min_offchip
tries x every loop order, on GEMMs and convs of every shipped platform, each dataflow it
supports, both fold models, one array and several, at its own array speed and a
fractional one. Equal where marked, the int64 maximum elsewhere; dtype and shape too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.api import load_platform
from simulator.inputs.workload import Workload
from simulator.mapping.footprint import array_speed
from simulator.mapping.heuristics import dim_candidates
from simulator.mapping.plan import LOOP_ORDERS
from simulator.model.dataflow import DATAFLOW_CODES
from simulator.model.loop_nest import array_busy_cycles, least_busy_cycles

ARCH = Path(__file__).resolve().parents[1] / "arch_configs"
PLATFORMS = sorted(str(path.relative_to(ARCH).with_suffix(""))
                   for path in ARCH.rglob("*.yaml"))
SHAPES = (dict(kind="gemm", m=1, n=6144, k=4096),
          dict(kind="gemm", m=7, n=4096, k=14336),
          dict(kind="gemm", m=1000, n=1536, k=1000),
          dict(kind="gemm", batch=4, m=64, n=130, k=96),
          dict(kind="conv2d", h=14, w=14, cin=64, cout=128, kh=3, kw=3, padding=1))


def test_every_shipped_platform_is_covered():
    assert len(PLATFORMS) >= 13 and "tpu_v5e_like" in PLATFORMS


@pytest.mark.parametrize("platform_name", PLATFORMS)
@pytest.mark.parametrize("shape", SHAPES)
def test_least_busy_cycles_is_array_busy_cycles(platform_name, shape):
    platform = load_platform(platform_name)
    array = platform.systolic_array
    op = Workload(name="w", operators=[dict(name="op", layer_type="fc", **shape)]
                  ).operators[0]
    g = op.gemm()
    vm, vn, vk = (np.asarray(dim_candidates(size, (array.rows, array.cols)), np.int64)
                  for size in (g.m, g.n, g.k))
    tm, tn, tk = (axis.ravel() for axis in np.meshgrid(vm, vn, vk, indexing="ij"))
    orders = np.arange(len(LOOP_ORDERS), dtype=np.int64)[:, None]
    least = np.random.default_rng(len(tm)).random((len(LOOP_ORDERS), len(tm))) < 0.7
    for dataflow in array.dataflows:
        for fold_model in ("pipelined", "scalesim"):
            for count in sorted({array.count, 3}):
                for speed in (array_speed(op, platform), 1.7):
                    expected = array_busy_cycles(
                        g.m, g.n, g.k, tm, tn, tk, order=orders, dataflow=dataflow,
                        rows=array.rows, cols=array.cols, count=count,
                        fold_model=fold_model, speed=speed)
                    found = least_busy_cycles(
                        np.array([g.m, g.n, g.k], np.int64), np.stack((tm, tn, tk)),
                        least, np.array([DATAFLOW_CODES[dataflow], array.rows,
                                         array.cols, count, fold_model == "scalesim"],
                                        np.int64), float(speed))
                    assert found.dtype == np.int64 and found.shape == expected.shape
                    assert np.array_equal(found[least], expected[least])
                    assert (found[~least] == np.iinfo(np.int64).max).all()
