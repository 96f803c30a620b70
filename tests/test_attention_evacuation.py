"""Attention's array products through a vector output path (DESIGN.md section 15): with
`output_path: vector` every score tile and output tile leaving the accumulators is
evacuated by the vector unit (flash: per key tile both products), charged in the
`evacuation` term, identical on both engines; a direct path keeps the program as it was."""

from __future__ import annotations

import pytest
from hypothesis import event, given, reject, settings
from hypothesis import strategies as st
from engine_agreement import assert_engines_agree
from platforms import make_platform

from simulator.errors import AccsimError
from simulator.lowering.attention import lower_attention_as, query_tiles
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.program.tile_program import memory_params
from simulator.present.run_report import result_dict
from simulator.search.resolve import resolve_tiling
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

RATE, TILE = 4, 10
VECTOR = {"output_path": "vector", "evacuation": {"elements_per_cycle": RATE,
                                                  "tile_cycles": TILE}}
# One instance: 2 query heads per KV head x 12 positions = 24 rows against 20 keys of
# head_dim 8; tiles of 16 rows (16 and 8) and 8 keys (8, 8 and 4).
SHAPE = dict(name="attn", layer_type="attention.core", kind="attention", batch=1,
             heads=4, kv_heads=2, q_len=12, kv_len=20, head_dim=8, dtype="int8")
ROWS, KEYS, D = (16, 8), (8, 8, 4), 8


def _op(**fields):
    return Workload(name="w", operators=[{**SHAPE, **fields}]).operators[0]


def _lowered(platform, fusion, dataflow="os", **fields):
    op = _op(**fields)
    tiling = resolve_tiling(op, TilingSpec(tm=16, tn=8, dataflow=dataflow, groups=1),
                            platform)
    return lower_attention_as(op, tiling, fusion, platform)


def _tile(elements, transposed=0):
    return -(-elements // RATE) + TILE + -(-transposed // RATE)


def test_unfused_evacuates_each_score_tile_and_each_finished_output_tile():
    program = _lowered(make_platform(systolic_array=VECTOR), "unfused").program
    scores = sum(_tile(r * k) for r in ROWS for k in KEYS)
    outputs = sum(_tile(r * D) for r in ROWS)
    assert int(program.evacuation_cycles.sum()) == scores + outputs
    # only steps of the array evacuate: the softmax steps (vector compute) do not
    softmax = program.compute_cycles.shape[0] - len(ROWS) * len(KEYS) * 2
    assert (program.evacuation_cycles[len(ROWS) * len(KEYS):][:softmax] == 0).all()


def test_flash_evacuates_both_products_of_every_key_tile():
    program = _lowered(make_platform(systolic_array=VECTOR), "flash").program
    assert program.evacuation_cycles.tolist() == [
        _tile(r * k) + _tile(r * D) for r in ROWS for k in KEYS]


@pytest.mark.parametrize("fusion", ["flash", "unfused"])
def test_the_transpose_adds_each_products_stationary_tile(fusion):
    transposing = {**VECTOR, "evacuation": {**VECTOR["evacuation"],
                                            "transpose_stationary": True}}
    plain = _lowered(make_platform(systolic_array=VECTOR), fusion, "ws").program
    moved = _lowered(make_platform(systolic_array=transposing), fusion, "ws").program
    # ws: QK^T's stationary tile is a K^T tile (d x keys), PV's a V tile (keys x d);
    # unfused charges PV's on its finishing (last key tile) step, as a GEMM does.
    if fusion == "flash":
        extra = sum(2 * -(-(D * k) // RATE) for _ in ROWS for k in KEYS)
    else:
        extra = sum(-(-(D * k) // RATE) for _ in ROWS for k in KEYS) + \
            len(ROWS) * -(-(D * KEYS[-1]) // RATE)
    assert int(moved.evacuation_cycles.sum()) == int(plain.evacuation_cycles.sum()) + extra
    os_moved = _lowered(make_platform(systolic_array=transposing), fusion, "os").program
    assert (os_moved.evacuation_cycles == plain.evacuation_cycles).all()  # os: none


@pytest.mark.parametrize("fusion", ["flash", "unfused"])
def test_a_direct_output_path_has_no_evacuation_and_the_same_program(fusion):
    direct = _lowered(make_platform(), fusion).program
    vector = _lowered(make_platform(systolic_array=VECTOR), fusion).program
    assert direct.evacuation_cycles is None
    for name in ("load_bytes", "compute_cycles", "vector_cycles", "acquire", "release",
                 "store_bytes", "reload_of"):
        assert (getattr(direct, name) == getattr(vector, name)).all(), name


def test_the_run_reports_attentions_evacuation_in_its_term():
    workload = Workload(name="w", operators=[SHAPE])
    plan = Mapping(operators={"attn": TilingSpec(tm=16, tn=8, dataflow="os",
                                                 fuse="flash", orientation="normal",
                                                 unit="array", groups=1)})
    direct = simulate(Inputs(make_platform(), workload, plan))
    vector = simulate(Inputs(make_platform(systolic_array=VECTOR), workload, plan))
    per_instance = sum(_tile(r * k) + _tile(r * D) for r in ROWS for k in KEYS)
    assert vector.operators[0].run.evacuation_cycles == per_instance  # one KV head's run
    assert vector.total.cycles > direct.total.cycles
    record = result_dict(vector)
    assert record["workload"]["evacuation_cycles"] == 2 * per_instance
    assert "evacuation_cycles" not in result_dict(direct)["workload"]


@st.composite
def attention_programs(draw):
    """(program, memory) of a random small attention on a random vector-path platform,
    in either orientation, one or two K/V head groups per program."""
    group = draw(st.sampled_from([1, 2, 4]))
    q_len = draw(st.integers(1, 16))
    kv_len = draw(st.integers(q_len, 40))
    d = draw(st.sampled_from([4, 8, 16]))
    platform = make_platform(
        systolic_array={"rows": draw(st.sampled_from([4, 8])),
                        "cols": draw(st.sampled_from([4, 8])),
                        "count": draw(st.integers(1, 2)),
                        "fold_model": draw(st.sampled_from(["pipelined", "scalesim"])),
                        "output_path": "vector",
                        "evacuation": {
                            "elements_per_cycle": draw(st.sampled_from([1, 3, 8, 64])),
                            "tile_cycles": draw(st.sampled_from([0, 2, 64])),
                            "transpose_stationary": draw(st.booleans())}},
        buffers={"output_bytes": draw(st.sampled_from([256, 256, 256, 600, 4096, 1 << 16]))},
        offchip={"bandwidth_gbps": draw(st.sampled_from([0.5, 3.0, 64.0])),
                 "latency_cycles": draw(st.integers(0, 40))},
        dma={"setup_cycles": draw(st.integers(0, 5))},
        runtime={"op_overhead_cycles": draw(st.sampled_from([0, 3]))})
    op = _op(heads=2 * group, kv_heads=2, q_len=q_len, kv_len=kv_len, head_dim=d,
             causal=draw(st.booleans()))
    rows = group * q_len
    tm, tn = draw(st.integers(1, min(rows, 8))), draw(st.integers(1, min(kv_len, 8)))
    fusion = draw(st.sampled_from(["flash", "unfused"]))
    try:
        tiling = resolve_tiling(op, TilingSpec(tm=tm, tn=tn, depth=draw(st.integers(1, 3)),
                                               dataflow=draw(st.sampled_from(
                                                   ["os", "ws", "is"])),
                                               groups=draw(st.sampled_from([1, 2]))),
                                platform)
        lowered = lower_attention_as(op, tiling, fusion, platform, orientation=draw(
            st.sampled_from(["normal", "transposed"])))
    except AccsimError:  # a plan the buffers cannot hold: no program to compare
        reject()
    event(f"{fusion} {lowered.orientation}, scores off chip: {lowered.scores_offchip}")
    assert len(query_tiles(op, tm, tn)) == -(-rows // tm)
    return lowered.program, memory_params(platform)


@settings(max_examples=200, deadline=None)
@given(case=attention_programs(), naive=st.integers(0, 9))
def test_fast_and_simpy_identical_on_attention_with_evacuation(case, naive):
    program, memory = case
    assert program.evacuation_cycles is not None and program.evacuation_cycles.any()
    # A tenth of the cases: the naive reference too (it is slow).
    fast = assert_engines_agree(program, memory, naive=naive == 0)
    assert fast.breakdown.evacuation_cycles == int(program.evacuation_cycles.sum())
