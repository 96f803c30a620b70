"""Energy and MFU of one GEMM worked by hand, term by term (DESIGN.md section 4)."""

from __future__ import annotations

import pytest

from platforms import make_platform
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Gemm, Workload

# Memory so fast and near that every load is 1 service cycle and usable 1 cycle later.
FAST_MEMORY = dict(offchip={"bandwidth_gbps": 1e6, "latency_cycles": 0},
                   dma={"setup_cycles": 0})


def test_one_gemm_energy_and_mfu_by_hand():
    platform = make_platform(**FAST_MEMORY)
    gemm = Gemm(name="g", layer_type="fc", kind="gemm", m=32, n=16, k=64)
    mapping = Mapping(operators={"g": TilingSpec(tm=8, tn=8, tk=16, loop_order="mnk",
                                                 dataflow="os")})
    result = simulate(Inputs(platform, Workload(name="w", operators=[gemm]), mapping))
    (op,) = result.operators
    totals = op.totals
    # Cycles: load 0 served [1, 2), usable 2; the 32 steps then run back to back (every
    # later load is served long before it is needed): 8 C tiles x (K 64 + fill 8+8-2)
    # = 624 busy cycles, ending at 626; the last store is served [627, 628).
    assert totals.cycles == 628
    assert op.run.busy_cycles == 624 and op.run.fill_cycles == 2
    # MFU = 2MNK / (time x peak) = 65,536 / (628 cycles x 2 x 8 x 8 per cycle).
    assert totals.derived(platform)["mfu"] == pytest.approx(65536 / (628 * 128))
    # MAC energy: 32 x 16 x 64 = 32,768 MACs x 0.23 pJ.
    assert totals.energy_mac_pj == pytest.approx(32768 * 0.23)
    # SRAM reads (bytes, int8; accumulators int32), per step of an 8x8x16 os tile:
    #   ifmap m*k*col_folds = 128, weight k*n*row_folds = 128, over 32 steps: 4096 each;
    #   output: the 3 later k steps of each of 8 tiles read 8*8*4 = 256 bytes back
    #   (6,144) and each finished tile is read once to be stored (2,048).
    sram_read = 4096 + 4096 + 6144 + 2048
    # SRAM writes: A and B tiles as they arrive (2,048 + 1,024) and every step's
    # accumulation into the output buffer (32 x 256 = 8,192).
    sram_write = 2048 + 1024 + 8192
    assert totals.energy_sram_pj == pytest.approx(sram_read * 1.25 + sram_write * 1.25)
    # Off-chip: A once (2,048), B once (1,024), 8 int8 C tiles (512), 160 pJ/byte.
    assert totals.offchip_bytes == 2048 + 1024 + 512
    assert totals.energy_offchip_pj == pytest.approx(3584 * 160.0)
    assert totals.energy_vector_pj == 0
    # Static: 5 components x 0.1 W for 628 ns at 1 GHz.
    assert totals.energy_static_pj == pytest.approx(0.5 * 628e-9 * 1e12)
    expected = (32768 * 0.23 + (sram_read + sram_write) * 1.25 + 3584 * 160.0
                + 0.5 * 628e-9 * 1e12)
    assert totals.energy_pj == pytest.approx(expected)
    derived = totals.derived(platform)
    assert derived["energy_per_mac_pj"] == pytest.approx(expected / 32768)
    assert derived["average_power_w"] == pytest.approx(expected * 1e-12 / 628e-9)
    assert derived["flops_per_joule"] == pytest.approx(65536 / (expected * 1e-12))
