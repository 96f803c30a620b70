"""Lowering: off-chip bytes by hand, LRU reuse, conv windows, fold continuation, and
plans that do not fit (DESIGN.md section 3, Lowering)."""

from __future__ import annotations

import numpy as np
import pytest

from platforms import make_platform
from simulator.errors import AccsimError, InvalidProgramError
from simulator.lowering import lower_compute, lower_vector
from simulator.search.resolve import lower_workload
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.search.resolve import resolve_tiling
from simulator.program.tile_program import make_program, validate_program
from simulator.inputs.workload import Conv2d, Elementwise, Gemm, Workload

# M=32, N=16, K=64 on int8 with 8x8x16 tiles: nm=4, nn=2, nk=4; an A or B tile is
# 8*16 = 128 bytes, a C tile 8*8 int32 = 256 bytes (8*8 = 64 bytes stored as int8).
GEMM = Gemm(name="g", layer_type="fc", kind="gemm", m=32, n=16, k=64)
A_TOTAL, B_TOTAL = 32 * 64, 64 * 16


def lower(op, platform, **spec):
    """Lower with the spec's fields over the array_aligned heuristic (depth 2 unless
    given)."""
    tiling = resolve_tiling(op, TilingSpec(**{"heuristic": "array_aligned", **spec}),
                            platform)
    return lower_compute(op, tiling, platform)


def offchip(lowered):
    c = lowered.counters
    return c.offchip_read["a"], c.offchip_read["b"], c.offchip_read["c"], c.offchip_write


@pytest.mark.parametrize("ifmap_tiles, a_bytes", [(2, 2 * A_TOTAL), (3, 2 * A_TOTAL),
                                                  (4, A_TOTAL), (8, A_TOTAL)])
def test_mnk_a_reuse_needs_a_row_of_k_tiles(ifmap_tiles, a_bytes):
    # Loop m, n, k: for each m tile, the 4 A tiles along k are used once per n tile
    # (nn = 2). Held across the n loop only when all 4 fit; LRU cycling 4 keys through
    # 2 or 3 slots always misses, so A moves twice.
    platform = make_platform(buffers={"ifmap_bytes": 128 * ifmap_tiles})
    lowered = lower(GEMM, platform, tm=8, tn=8, tk=16, loop_order="mnk", dataflow="os")
    assert offchip(lowered)[0] == a_bytes
    assert lowered.counters.slots["ifmap"] == ifmap_tiles


@pytest.mark.parametrize("weight_tiles, b_bytes", [(2, 4 * B_TOTAL), (7, 4 * B_TOTAL),
                                                   (8, B_TOTAL)])
def test_mnk_b_reuse_needs_all_weights(weight_tiles, b_bytes):
    # All 8 B tiles are cycled once per m tile (nm = 4): B moves once only when all fit.
    platform = make_platform(buffers={"weight_bytes": 128 * weight_tiles})
    lowered = lower(GEMM, platform, tm=8, tn=8, tk=16, loop_order="mnk", dataflow="os")
    assert offchip(lowered)[1] == b_bytes


def test_mnk_totals_and_stores():
    lowered = lower(GEMM, make_platform(), tm=8, tn=8, tk=16, loop_order="mnk",
                    dataflow="os")
    # k innermost: each of the 8 C tiles is stored once as int8 (64 bytes), never spilled.
    assert offchip(lowered) == (A_TOTAL, B_TOTAL, 0, 8 * 64)
    program = lowered.program
    assert program.steps == 32
    assert program.acquire.sum() == program.release.sum() == 8
    assert lowered.counters.live_c_tiles == 1 and not lowered.counters.spills
    assert program.load_bytes.sum() + program.store_bytes.sum() == \
        lowered.counters.offchip_bytes


def test_kmn_spills_partial_sums_when_live_tiles_do_not_fit():
    # Loop k, m, n: all 8 C tiles are live at once. With 4 output slots (1024 bytes)
    # every visit but the last stores int32 partials (256 bytes) and every visit but
    # the first reloads them: per tile 3*256 + 64 stored, 3*256 reloaded.
    platform = make_platform(buffers={"output_bytes": 1024})
    lowered = lower(GEMM, platform, tm=8, tn=8, tk=16, loop_order="kmn", dataflow="os")
    assert lowered.counters.live_c_tiles == 8 and lowered.counters.spills
    assert offchip(lowered) == (A_TOTAL, B_TOTAL, 8 * 3 * 256, 8 * (3 * 256 + 64))
    program = lowered.program
    assert program.acquire.all() and program.release.all()
    reloads = np.flatnonzero(program.reload_of >= 0)
    assert reloads.size == 24
    # The reload of a tile comes from its previous visit, one round (8 steps) earlier.
    assert (program.reload_of[reloads] == reloads - 8).all()


def test_kmn_without_spill_when_live_tiles_fit():
    lowered = lower(GEMM, make_platform(buffers={"output_bytes": 2048}), tm=8, tn=8,
                    tk=16, loop_order="kmn", dataflow="os")
    # 8 slots hold the 8 live tiles: A and B move once (A reused across the n pair),
    # each C tile is stored once.
    assert not lowered.counters.spills
    assert offchip(lowered) == (A_TOTAL, B_TOTAL, 0, 8 * 64)


def test_conv_a_traffic_is_the_window_with_halo_not_im2col():
    # 3x3 stride 1 pad 1 on 8x8x4: im2col A is 64 pixels x 36 = 2304 elements, the real
    # input 8*8*4 = 256. With tm = 16 (two output rows) and the whole K per tile, each
    # A tile is its input rows with a one-row halo: output rows 0-1 read input rows 0-2
    # (3 rows), rows 2-3 read 1-4 (4), rows 4-5 read 3-6 (4), rows 6-7 read 5-7 (3):
    # (3 + 4 + 4 + 3) rows * 8 cols * 4 channels = 448 bytes.
    conv = Conv2d(name="c", layer_type="conv", kind="conv2d", h=8, w=8, cin=4, cout=8,
                  kh=3, kw=3, padding=1)
    platform = make_platform(buffers={"ifmap_bytes": 8192})
    whole = lower(conv, platform, tm=64, tn=8, tk=36, dataflow="os")
    assert offchip(whole)[0] == 256 == whole.counters.compulsory["a"]
    banded = lower(conv, platform, tm=16, tn=8, tk=36, dataflow="os")
    assert offchip(banded)[0] == (3 + 4 + 4 + 3) * 8 * 4
    # The array still reads the im2col stream from SRAM: 2304 elements, one col fold.
    assert banded.counters.sram_read_elements["ifmap"] == 64 * 36


def test_strided_1x1_conv_reads_only_touched_pixels():
    # 1x1 stride 2 on 8x8x4 touches every other row and column: 4*4*4 = 64 elements.
    conv = Conv2d(name="s", layer_type="conv", kind="conv2d", h=8, w=8, cin=4, cout=8,
                  kh=1, kw=1, stride=2)
    lowered = lower(conv, make_platform(), tm=16, tn=8, tk=4, dataflow="os")
    assert offchip(lowered)[0] == 64 == lowered.counters.compulsory["a"]


@pytest.mark.parametrize("dataflow, spec, folds, streamed", [
    # os: C tile stationary, k streamed; k innermost continues the fold over k tiles.
    ("os", dict(tm=8, tn=8, tk=16, loop_order="mnk"), 4 * 2, 64),
    # ws: weight tile stationary, m streamed; m innermost continues over m tiles.
    ("ws", dict(tm=8, tn=8, tk=8, loop_order="nkm"), 8 * 2, 32),
    # is: input tile stationary, n streamed; n innermost continues over n tiles.
    ("is", dict(tm=8, tn=4, tk=8, loop_order="mkn"), 8 * 4, 16),
])
def test_tiled_compute_sums_to_scalesim_demand_rows(dataflow, spec, folds, streamed):
    # SCALE-Sim's D = folds * (T + fill), fill = R + C - 2 (os) or 2R + C - 2 (ws, is),
    # on the 8x8 array; folds = ceil(Sr/8) * ceil(Sc/8) of the whole GEMM.
    fill = 8 + 8 - 2 if dataflow == "os" else 2 * 8 + 8 - 2
    platform = make_platform(buffers={"output_bytes": 65536})
    lowered = lower(GEMM, platform, dataflow=dataflow, **spec)
    assert lowered.program.compute_cycles.sum() == folds * (streamed + fill)
    c = lowered.counters
    assert c.useful_array_cycles == pytest.approx(32 * 16 * 64 / 64)
    assert c.useful_array_cycles + c.padding_array_cycles + c.fill_array_cycles == \
        pytest.approx(lowered.program.compute_cycles.sum())


def test_padding_counts_unused_pes():
    # M=12 on 8 rows (os): folds of 8 and 4 rows; the second uses half the PEs.
    gemm = Gemm(name="p", layer_type="fc", kind="gemm", m=12, n=8, k=10)
    lowered = lower(gemm, make_platform(), tm=12, tn=8, tk=10, dataflow="os")
    c = lowered.counters
    assert lowered.program.compute_cycles.tolist() == [2 * (10 + 14)]
    assert c.useful_array_cycles == pytest.approx(10 * 12 * 8 / 64)   # 15
    assert c.padding_array_cycles == pytest.approx(2 * 10 - 15)
    assert c.fill_array_cycles == 2 * 14


def test_fused_epilogue_costs_vector_cycles_per_finished_tile():
    gelu = Elementwise(name="act", layer_type="gelu", kind="elementwise",
                       elements=32 * 16, op="gelu")
    workload = Workload(name="w", operators=[GEMM, gelu])
    mapping = Mapping(operators={"g": TilingSpec(tm=8, tn=8, tk=16, loop_order="mnk",
                                                 dataflow="os", fuse="act")})
    lowered = lower_workload(workload, mapping, make_platform())
    assert [op.name for op in lowered] == ["g"]
    vector = lowered[0].program.vector_cycles
    # 8x8 = 64 elements per C tile, 8 lanes, gelu 4 cycles/element: 32 cycles, on the
    # last k step of each of the 8 tiles only.
    assert vector.tolist() == [0, 0, 0, 32] * 8


def test_vector_operator_tiles_rows_and_moves_real_tensors():
    add = Elementwise(name="a", layer_type="add", kind="elementwise", elements=1000,
                      op="add")
    lowered = lower_vector(add, resolve_tiling(add, TilingSpec(rows_per_tile=300),
                                               make_platform()), make_platform())
    program = lowered.program
    # 1000 rows of 1 element in tiles of 300, 300, 300, 100; add reads two inputs.
    assert program.load_bytes.tolist() == [600, 600, 600, 200]
    assert program.store_bytes.tolist() == [300, 300, 300, 100]
    assert program.compute_cycles.tolist() == [38, 38, 38, 13]   # ceil(rows / 8 lanes)
    assert program.acquire.all() and program.release.all()


def test_activation_memory_keeps_a_and_c_on_chip():
    platform = make_platform(activation_memory_bytes=1 << 20)
    lowered = lower(GEMM, platform, tm=8, tn=8, tk=16, loop_order="mnk", dataflow="os")
    assert offchip(lowered) == (0, B_TOTAL, 0, 0)
    assert lowered.counters.compulsory == {"a": 0, "b": B_TOTAL, "c": 0}
    # The output residencies still end, with 0-byte stores.
    assert lowered.program.release.sum() == 8 and lowered.program.store_bytes.sum() == 0


def test_tile_larger_than_the_operator_is_rejected():
    with pytest.raises(AccsimError, match="tm 64 is larger than the operator's M 32"):
        lower(GEMM, make_platform(), tm=64, tn=8, tk=16)


@pytest.mark.parametrize("depth, ifmap_bytes, message", [
    # A tile 32 x 64 int8 = 2048 bytes; 3000 bytes hold one, double buffering needs two.
    (2, 3000, r"A tiles \(tm 32 x tk 64\) of 2048 bytes: the ifmap buffer of 3000 bytes holds 1, the plan "
              r"needs 2 \(depth 2\); overflow 1096 bytes"),
    (4, 7000, r"holds 3, the plan needs 4 \(depth 4\); overflow 1192 bytes"),
])
def test_plans_that_overflow_a_buffer_are_rejected_with_numbers(depth, ifmap_bytes,
                                                                message):
    platform = make_platform(buffers={"ifmap_bytes": ifmap_bytes, "output_bytes": 65536,
                                      "weight_bytes": 65536})
    with pytest.raises(AccsimError, match=message):
        lower(GEMM, platform, tm=32, tn=16, tk=64, depth=depth, dataflow="os")


def test_output_buffer_smaller_than_depth_is_rejected():
    platform = make_platform(buffers={"output_bytes": 300})
    with pytest.raises(AccsimError, match=r"output buffer of 300 bytes holds 1, the plan "
                       r"needs 2 \(depth 2\); overflow 212 bytes"):
        lower(GEMM, platform, tm=8, tn=8, tk=16)


def test_unsupported_dataflow_is_rejected():
    platform = make_platform(systolic_array={"dataflows": ["ws"]})
    with pytest.raises(AccsimError, match="dataflow 'os' is not supported"):
        lower(GEMM, platform, tm=8, tn=8, tk=16, dataflow="os")


def test_fuse_must_name_the_following_vector_operator():
    relu = Elementwise(name="r", layer_type="relu", kind="elementwise", elements=7,
                       op="relu")
    workload = Workload(name="w", operators=[GEMM, relu])
    for fuse, message in (("nope", "must name the operator right after it"),
                          ("r", "works on 7 elements, the output has 512")):
        mapping = Mapping(operators={"g": TilingSpec(fuse=fuse)})
        with pytest.raises(AccsimError, match=message):
            lower_workload(workload, mapping, make_platform())


def test_unknown_operator_in_plan_is_an_error():
    mapping = Mapping(operators={"ghost": TilingSpec(tm=8)})
    with pytest.raises(AccsimError, match="no operator named 'ghost'"):
        lower_workload(Workload(name="w", operators=[GEMM]), mapping, make_platform())


@pytest.mark.parametrize("kwargs, message", [
    (dict(acquire=[1, 1, 0], release=[0, 0, 1], store_bytes=[0, 0, 8]),
     "1 releases < 2 acquisitions"),
    (dict(acquire=[0, 1, 0], release=[1, 0, 0], store_bytes=[8, 0, 0]),
     "release 0 at step 0 comes before acquisition 0 at step 1"),
    (dict(acquire=[1, 1, 1], release=[0, 0, 1], store_bytes=[0, 0, 8]),
     "releases < 3 acquisitions"),
    (dict(acquire=[1, 1, 1], release=[1, 1, 1], store_bytes=[8, 0, 8],
          reload_of=[-1, 2, -1]), "step 1 reloads partial sums from step 2"),
    (dict(store_bytes=[0, 8, 0]), None),
])
def test_invalid_programs_are_rejected(kwargs, message):
    if message is None:
        kwargs["release"] = [0, 0, 0]
        message = "step 1 stores bytes but does not release"
    program = make_program([8, 8, 8], [5, 5, 5], depth=1, slots=1, **kwargs)
    with pytest.raises(InvalidProgramError, match=message):
        validate_program(program)


def test_acquisition_waiting_on_a_later_release_is_a_deadlock():
    # Two slots, three acquisitions before any release: the third waits for a release
    # that can only come after it.
    program = make_program([8] * 5, [5] * 5, acquire=[1, 1, 1, 0, 0],
                           release=[0, 0, 1, 1, 1], store_bytes=[0, 0, 8, 8, 8], depth=1,
                           slots=2)
    with pytest.raises(InvalidProgramError, match="deadlock"):
        validate_program(program)
