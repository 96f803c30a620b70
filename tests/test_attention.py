"""The attention operator kind: its schema, and its two lowerings (unfused and flash)."""

import pytest
from pydantic import ValidationError

from simulator.inputs.workload import Attention, Workload

ATTENTION = dict(name="attn", layer_type="attention.core", kind="attention", batch=1,
                 heads=32, kv_heads=8, q_len=16, kv_len=64, head_dim=128)


def test_attention_fields_validate_and_count_macs():
    op = Workload(name="w", operators=[{**ATTENTION, "causal": True}]).operators[0]
    assert isinstance(op, Attention)
    assert op.group == 4
    # Causal: query i of the last 16 positions sees 64 - 16 + i + 1 keys.
    pairs = sum(64 - 16 + i + 1 for i in range(16))
    assert op.visible_pairs == pairs
    assert op.macs == 2 * 32 * pairs * 128


@pytest.mark.parametrize("change, message", [
    ({"kv_heads": 5}, "kv_heads 5 must divide heads 32"),
    ({"head_dim": 0}, "greater than 0"),
    ({"q_len": -1}, "greater than 0"),
    ({"causal": True, "q_len": 65}, "q_len 65 <= kv_len 64"),
    ({"kv_dtype": "int3"}, "Input should be"),  # int4 is a format since issue 25
])
def test_attention_rejects_bad_shapes(change, message):
    with pytest.raises(ValidationError, match=message):
        Workload(name="w", operators=[{**ATTENTION, **change}])


def test_weight_dtype_is_a_gemm_field():
    op = Workload(name="w", operators=[dict(name="g", layer_type="fc", kind="gemm", m=4,
                                            n=4, k=4, weight_dtype="int8")]).operators[0]
    assert op.weight_dtype == "int8"


# ------------------------------------------------------------------ lowering

import numpy as np  # noqa: E402
from dataclasses import replace  # noqa: E402

from platforms import make_platform  # noqa: E402

from simulator.engines.des import run_des  # noqa: E402
from simulator.engines.fast import run_fast  # noqa: E402
from simulator.inputs.loader import load_model, locate  # noqa: E402
from simulator.inputs.platform import Platform  # noqa: E402
from simulator.lowering import lower_attention  # noqa: E402
from simulator.search.resolve import lower_workload  # noqa: E402
from simulator.lowering.attention import lower_attention_as, estimate_cycles  # noqa: E402
from simulator.mapping.plan import Mapping, TilingSpec  # noqa: E402
from simulator.search.resolve import resolve_tiling  # noqa: E402
from simulator.program.tile_program import memory_params  # noqa: E402
from simulator.simulate import Inputs, simulate  # noqa: E402


def _v5e() -> Platform:
    return load_model(locate("tpu_v5e_like", "platform"), Platform)[0]


def _op(**fields):
    return Workload(name="w", operators=[{**ATTENTION, **fields}]).operators[0]


def _both(op, platform, **spec):
    """Both lowerings of one K/V head group per program (groups 1: per-group counts)."""
    tiling = resolve_tiling(op, TilingSpec(**{"groups": 1, **spec}), platform)
    return {fusion: lower_attention_as(op, tiling, fusion, platform)
            for fusion in ("flash", "unfused")}


SHAPES = [dict(q_len=8192, kv_len=8192, causal=True), dict(q_len=2048, kv_len=2048),
          dict(q_len=512, kv_len=4096, causal=True), dict(q_len=1, kv_len=2048),
          dict(q_len=16, kv_len=64, heads=8, kv_heads=8)]


@pytest.mark.parametrize("shape", SHAPES)
def test_flash_and_unfused_do_the_same_flops(shape):
    lowered = _both(_op(**shape), _v5e())
    assert lowered["flash"].macs == lowered["unfused"].macs == _op(**shape).macs // (
        _op(**shape).batch * _op(**shape).kv_heads)


@pytest.mark.parametrize("shape", SHAPES)
def test_flash_moves_fewer_bytes_when_the_scores_spill(shape):
    platform = _v5e()
    op = _op(**shape)
    lowered = _both(op, platform)
    flash, unfused = lowered["flash"], lowered["unfused"]

    def moved(x):
        return int(x.program.load_bytes.sum() + x.program.store_bytes.sum())

    scores = op.group * op.q_len * op.kv_len * 2
    assert unfused.scores_offchip == (scores > platform.buffers.output_bytes)
    if unfused.scores_offchip:
        assert moved(flash) < moved(unfused)
        assert unfused.offchip_read["scores"] > 0
    else:  # the same Q, K, V and output traffic
        assert moved(flash) == moved(unfused)
    assert flash.offchip_read["scores"] == 0


def test_unfused_prefill_8192_shows_the_score_traffic_in_the_result():
    workload = Workload(name="w", operators=[{**ATTENTION, "q_len": 8192, "kv_len": 8192,
                                              "causal": True}])
    plan = Mapping(layer_types={"attention.core": TilingSpec(fuse="unfused")})
    result = simulate(Inputs(_v5e(), workload, plan))
    op = result.operators[0]
    assert op.lowered.fused == "unfused"
    scores = op.lowered.counters.offchip_read["scores"]
    # Scores stored then read by softmax, probabilities stored then read by PV: most of
    # the traffic, and far above the compulsory Q, K, V and output bytes.
    assert scores > 0.9 * op.lowered.counters.offchip_bytes / 2
    assert op.totals.offchip_bytes > 10 * op.totals.compulsory_bytes
    from simulator.present.run_report import result_dict
    record = result_dict(result)["operators"][0]["per_instance_bytes"]
    assert record["offchip_read"]["scores"] == scores
    flash = simulate(Inputs(_v5e(), workload, Mapping(
        layer_types={"attention.core": TilingSpec(fuse="flash")}))).operators[0]
    assert flash.totals.offchip_bytes < op.totals.offchip_bytes / 10
    assert flash.totals.model_flops == op.totals.model_flops
    assert flash.totals.cycles < op.totals.cycles


def test_causal_visits_only_the_needed_tiles():
    platform = _v5e()
    full = _both(_op(q_len=4096, kv_len=4096), platform, tm=1024, tn=1024)
    causal = _both(_op(q_len=4096, kv_len=4096, causal=True), platform, tm=1024, tn=1024)
    # 16 query tiles (4 heads x 4096 rows / 1024) of 4 key tiles; causal: tiles of rows
    # at positions 0..255 see one key tile, ... positions 768..1023 see it too, etc.
    assert full["flash"].program.steps == 16 * 4
    visited = sum(-(-((start + 1024) // 4) // 1024) for start in range(0, 16384, 1024))
    assert causal["flash"].program.steps == visited
    assert causal["flash"].macs * 2 == pytest.approx(full["flash"].macs, rel=0.01)


def test_gqa_reads_k_and_v_once_per_group():
    platform = _v5e()
    gqa = _both(_op(q_len=1, kv_len=2048, heads=32, kv_heads=8), platform)["flash"]
    mha = _both(_op(q_len=1, kv_len=2048, heads=32, kv_heads=32), platform)["flash"]
    per_group = 2 * 2048 * 128 * 2
    assert gqa.offchip_read["kv"] == per_group
    lowered_gqa = lower_attention(_op(q_len=1, kv_len=2048, heads=32, kv_heads=8),
                                  resolve_tiling(_op(q_len=1, kv_len=2048),
                                                 TilingSpec(groups=1), platform), platform)
    assert lowered_gqa.runs == 8
    assert mha.offchip_read["kv"] == per_group  # per instance; MHA has 32 instances


@pytest.mark.parametrize("shape", SHAPES)
def test_default_search_keeps_the_faster_lowering(shape):
    platform = _v5e()
    workload = Workload(name="w", operators=[_op(**shape)])
    chosen = lower_workload(workload, Mapping(), platform)[0]
    memory = memory_params(platform)
    cycles = {fusion: run_fast(lower_attention_as(workload.operators[0],
                                                  replace(chosen.tiling, fuse=fusion),
                                                  fusion, platform).program,
                               memory).breakdown.total_cycles
              for fusion in ("flash", "unfused")}
    assert cycles[chosen.fused] == min(cycles.values())


@pytest.mark.parametrize("shape", SHAPES)
def test_a_heuristic_plan_keeps_the_lowering_estimated_faster(shape):
    platform = _v5e()
    op = _op(**shape)
    lowered = _both(op, platform, heuristic="array_aligned")
    plan = Mapping(default=TilingSpec(heuristic="array_aligned"))
    chosen = lower_workload(Workload(name="w", operators=[op]), plan, platform)[0]
    estimates = {k: estimate_cycles(v, platform) for k, v in lowered.items()}
    assert chosen.fused == min(("flash", "unfused"), key=lambda k: (estimates[k], k))


@pytest.mark.parametrize("fusion", ["flash", "unfused"])
@pytest.mark.parametrize("shape", [dict(q_len=40, kv_len=40, causal=True),
                                   dict(q_len=3, kv_len=400)])
def test_attention_programs_replay_identically_on_both_engines(fusion, shape):
    # A small platform, so the scores spill and the unfused reloads wait on stores.
    platform = make_platform(buffers={"output_bytes": 256 * 4 * 2 + 64})
    op = _op(heads=4, kv_heads=2, head_dim=8, dtype="int8", **shape)
    tiling = resolve_tiling(op, TilingSpec(tm=min(16, 2 * op.q_len), tn=8), platform)
    lowered = lower_attention_as(op, tiling, fusion, platform)
    if fusion == "unfused":
        assert lowered.scores_offchip and (lowered.program.reload_of >= 0).any()
    memory = memory_params(platform)
    fast = run_fast(lowered.program, memory, keep_steps=True)
    des = run_des(lowered.program, memory, keep_steps=True)
    assert fast.breakdown == des.breakdown
    for name, times in fast.steps.as_dict().items():
        assert np.array_equal(times, des.steps.as_dict()[name]), name


def test_kv_dtype_sets_the_kv_bytes_and_must_be_listed():
    from simulator.errors import AccsimError
    platform = _v5e()
    op = _op(q_len=1, kv_len=2048, kv_dtype="fp8")
    workload = Workload(name="w", operators=[op])
    with pytest.raises(AccsimError, match="kv_dtype fp8 is not an input dtype"):
        lower_workload(workload, Mapping(), platform)
    array = platform.systolic_array.model_copy(update={"input_dtypes": ["bf16", "fp8"]})
    wide = platform.model_copy(update={"systolic_array": array})
    fp8 = lower_workload(workload, Mapping(), wide)[0]
    bf16 = lower_workload(Workload(name="w", operators=[_op(q_len=1, kv_len=2048)]),
                          Mapping(), wide)[0]
    assert fp8.counters.offchip_read["kv"] * 2 == bf16.counters.offchip_read["kv"]


def test_weight_dtype_sets_the_weight_bytes():
    platform = make_platform(systolic_array={"input_dtypes": ["int16", "int8"]},
                             energy={"mac_pj": {"int8": 0.2, "int16": 0.4}})
    ops = [dict(name="g", layer_type="fc", kind="gemm", m=8, n=64, k=64, dtype="int16")]
    plain = lower_workload(Workload(name="w", operators=ops), Mapping(), platform)[0]
    narrow = lower_workload(Workload(name="w", operators=[{**ops[0], "weight_dtype":
                                                           "int8"}]), Mapping(), platform)[0]
    assert plain.counters.compulsory["b"] == 64 * 64 * 2
    assert narrow.counters.compulsory["b"] == 64 * 64
    assert narrow.counters.offchip_read["b"] * 2 == plain.counters.offchip_read["b"]
    assert narrow.counters.offchip_read["a"] == plain.counters.offchip_read["a"]


def test_the_sheet_says_which_lowering_ran_and_why():
    from simulator.present.sheet import sheet_rows
    workload = Workload(name="w", operators=[{**ATTENTION, "q_len": 4096, "kv_len": 4096,
                                              "causal": True}])
    result = simulate(Inputs(_v5e(), workload, Mapping()))
    fused = sheet_rows(result)[0]["fused"]
    chosen = result.operators[0].lowered.fused
    assert fused.startswith(f"{chosen} (flash: ") and "; unfused: " in fused
    cycles = {part.split(":")[0]: int(part.split(", ")[1].split(" ")[0].replace(",", ""))
              for part in fused[len(chosen) + 2:].split("; ")[:2]}
    assert cycles[chosen] == min(cycles.values())


def test_mapper_bounds_hold_with_narrow_weights():
    # The mapper prunes on lower bounds: with int8 weights beside int16 activations the
    # bounds must count the weights' real bytes, or they would exceed what runs.
    from simulator.search.bounds import candidate_bounds
    from simulator.search.operator import evaluate as _evaluate
    from simulator.inputs.workload import Gemm
    platform = make_platform(systolic_array={"input_dtypes": ["int16", "int8"]},
                             energy={"mac_pj": {"int8": 0.2, "int16": 0.4}},
                             buffers={"ifmap_bytes": 512, "weight_bytes": 256,
                                      "output_bytes": 2048})
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=6, n=16, k=24, dtype="int16",
              weight_dtype="int8")
    memory = memory_params(platform)
    tilings, cycles_lb, energy_lb = candidate_bounds(op, platform)
    assert len(tilings) > 50
    for tiling, c_lb, e_lb in zip(tilings, cycles_lb, energy_lb):
        evaluation = _evaluate(op, tiling, platform, memory, None)
        assert c_lb <= evaluation.cycles and e_lb <= evaluation.energy_pj, tiling


@pytest.mark.parametrize("small, shape", [
    *((False, shape) for shape in SHAPES),
    *((True, shape) for shape in SHAPES[1:]),   # 8192 x 8192 in small tiles is slow
    (True, dict(q_len=100, kv_len=3000, causal=True, head_dim=32))])
def test_attention_tiling_rule_fits_the_buffers(small, shape):
    platform = make_platform(systolic_array={"input_dtypes": ["bf16"],
                                             "accumulator_dtype": "fp32",
                                             "output_dtype": "bf16"},
                             energy={"mac_pj": {"bf16": 0.5}},
                             buffers={"ifmap_bytes": 65536, "weight_bytes": 32768,
                                      "output_bytes": 65536}) if small else _v5e()
    op = _op(**shape)
    for depth in (1, 2, 4):
        spec = TilingSpec(heuristic="array_aligned", depth=depth)
        tiling = resolve_tiling(op, spec, platform)
        for fusion in ("flash", "unfused"):
            lower_attention_as(op, tiling, fusion, platform)   # raises if it overflows


def test_the_mappers_plan_reproduces_its_best_attention():
    from simulator.search.workload_search import map_workload
    workload = Workload(name="w", operators=[{**ATTENTION, "q_len": 2048, "kv_len": 2048,
                                              "causal": True}])
    inputs = Inputs(_v5e(), workload, Mapping())
    found = map_workload(inputs, workers=1)
    best = found.operators[0].best
    assert best.tiling.fuse in ("flash", "unfused")
    assert found.operators[0].stats.simulated >= 2      # both lowerings were tried
    rerun = simulate(Inputs(_v5e(), workload, found.plan())).operators[0]
    assert rerun.totals.cycles == best.cycles and rerun.lowered.fused == best.tiling.fuse
