"""Attention as kernels run it (DESIGN.md section 19, issue 41): both products in either
orientation, decode on the vector unit, K/V head groups chained in one program, MLA's
one latent read; and the pinned choice that keeps the model before them."""

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from platforms import make_platform

from simulator.api import load_platform
from simulator.engines.fast import run_fast
from simulator.errors import AccsimError
from simulator.inputs.workload import Workload
from simulator.lowering.attention import lower_attention_as
from simulator.mapping.footprint import program_groups
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.program.tile_program import memory_params
from simulator.search.resolve import lower_workload, resolve_tiling
from simulator.simulate import Inputs, simulate
from simulator.system.capacity import operator_kv_bytes

PLATFORMS = ("tpu_v5e_like", "whatif/tpu_v5e_256x256")
BIG = {"ifmap_bytes": 1 << 20, "weight_bytes": 1 << 20, "output_bytes": 1 << 20}
LEGACY = TilingSpec(orientation="normal", unit="array", groups=1)


def _decode(batch: int, context: int, group: int, heads: int = 32, **fields) -> dict:
    return dict(name="attn", layer_type="attention.core", kind="attention", batch=batch,
                heads=heads, kv_heads=heads // group, q_len=1, kv_len=context,
                head_dim=128, kv_cache=True, **fields)


def _bounds(op, lowered, platform, vector: bool = False) -> tuple[float, int]:
    """(KV read cycles at the rated bandwidth, array cycles in the better orientation
    at the tiling run; with `vector`, the vector unit's where fewer) of the whole
    operator."""
    rated = platform.offchip.bandwidth_gbps / platform.clock_ghz   # bytes per cycle
    kv = 2 * op.batch * op.kv_heads * op.kv_len * op.head_dim * 2 / rated
    choices = [dict(orientation="normal"), dict(orientation="transposed")] \
        + ([dict(unit="vector")] if vector else [])
    array = min(int(lower_attention_as(op, lowered.tiling, lowered.fused, platform,
                                       **choice).program
                    .compute_cycles.sum()) * lowered.runs
                for choice in choices)
    return kv, array


# The issue's grid, sampled at its ends and middle: batch 1-256, context 512-32768,
# query heads per K/V head 1-8.
GRID = list(itertools.product((1, 16, 256), (512, 4096, 32768), (1, 4, 8)))
# The issue's bound, max(KV read, array time), is a throughput bound: it leaves out
# what one program pays once and no tiling overlaps, its fill and drain (dispatch, the
# first K/V tile's load with the memory's latency before any product can start, the
# last step's products after the last load). A true lower bound of the operator is
# the bound plus that fill and drain. From SMALL_US up the issue's 1.2 x bound is
# asserted as written, fill and drain inside the 20% margin. Below it, where fill and
# drain reach a fifth of the bound or more (up to 10x at a batch-1 context-64 step:
# test_a_small_decode_cannot_meet_1_2x_within_one_operator shows 1.2x unreachable
# there), a point is held to 1.2 x bound + fill and drain once: still within 1.2x of
# the true lower bound (1.2 x (bound + fill and drain)), with no margin on the fill
# and drain. SMALL_US is where the rule switches, not a fitted value: above it fill and
# drain stayed under 15% of the bound at every point of these grids (largest 0.144,
# gaudi3 batch 256 context 191 group 8), so the strict form holds there.
SMALL_US = 20   # of max(KV read, array time): 30,000 cycles at tpu_v5e_like's 1.5 GHz


@pytest.mark.parametrize("name", PLATFORMS)
def test_decode_attention_approaches_its_kv_read_or_array_time(name):
    _check_grid(load_platform(name), name, GRID)


# Short contexts, where one (request, group) pair's K/V is less than the memory's
# latency x bandwidth (lowering.step_pairs), on the issue's platforms and on a chip with
# 4.5x tpu_v5e_like's bandwidth (the whole-model set's Gaudi 3, written from published
# figures). Here the array's time is far above the KV read (a few keys per fold), so
# the bound is the faster unit's: the vector unit's products where they take less.
SHORT_GRID = list(itertools.product((1, 16, 256), (64, 191, 512), (1, 4, 8)))
GAUDI3 = Path(__file__).resolve().parents[1] / "experiments/whole_models/gaudi3.yaml"


@pytest.mark.parametrize("name", PLATFORMS + (str(GAUDI3),))
def test_short_context_decode_attention_approaches_its_kv_read_or_unit_time(name):
    _check_grid(load_platform(name), name, SHORT_GRID, vector=True)


def test_gaudi3_decode_attention_at_all_the_issue_contexts():
    _check_grid(load_platform(str(GAUDI3)), "gaudi3", GRID, vector=True)


def _check_grid(platform, name: str, grid: list, vector: bool = False) -> None:
    """Each point within 1.2x of its bound, or below SMALL_US within 1.2x of it plus its
    program's fill and drain (why: the comment at SMALL_US)."""
    memory = memory_params(platform)
    for batch, context, group in grid:
        workload = Workload(name="w", operators=[_decode(batch, context, group)])
        op = workload.operators[0]
        lowered = lower_workload(workload, Mapping(), platform)[0]
        cycles = run_fast(lowered.program, memory).breakdown.total_cycles * lowered.runs
        kv, array = _bounds(op, lowered, platform, vector)
        bound = max(kv, array)
        where = f"{name} batch {batch} context {context} group {group}: {lowered.tiling}"
        fill_drain = _fill_and_drain(op, lowered, platform, memory, vector) * lowered.runs
        if bound >= SMALL_US * 1000 * platform.clock_ghz:
            assert fill_drain <= 0.2 * bound, where   # 1.2x is reachable here
            assert cycles <= 1.2 * bound, where
        else:
            assert cycles <= 1.2 * bound + fill_drain, where


def _fill_and_drain(op, lowered, platform, memory, vector: bool) -> float:
    """One program's cycles no step overlaps (the comment at SMALL_US). With the vector
    unit among the choices: dispatch, the first step's load with its latency before any
    product, the last step's products, the last store with its latency. Array only:
    dispatch, one K/V tile's load with its latency, one step's products (its mean)."""
    program = lowered.program
    if vector:
        return (platform.runtime.op_overhead_cycles + 2 * memory.access_cycles
                + int(program.load_bytes[0] + program.store_bytes[-1])
                / memory.bytes_per_cycle + int(program.compute_cycles[-1]))
    tile = 2 * lowered.tiling.tn * op.head_dim * 2 / platform.bytes_per_cycle
    return (platform.runtime.op_overhead_cycles + platform.offchip.latency_cycles
            + tile + int(program.compute_cycles.sum()) / program.steps)


def test_a_small_decode_cannot_meet_1_2x_within_one_operator():
    """Why the grid's small points are held to the bound plus their fixed costs: at
    batch 1, context 512, GQA 8 on tpu_v5e_like the bound is the array time (about 2 us),
    and the dispatch plus the first K/V tile's load latency, which every product waits
    for, alone exceed a fifth of it. Only a neighbour's tail hiding them would do, and
    operators do not overlap their neighbours (DESIGN.md section 3); a decode batch
    shares them among its requests (tests/test_serving_decode_batch.py)."""
    platform = load_platform("tpu_v5e_like")
    workload = Workload(name="w", operators=[_decode(1, 512, 8)])
    lowered = lower_workload(workload, Mapping(), platform)[0]
    kv, array = _bounds(workload.operators[0], lowered, platform)
    bound = max(kv, array)
    before_any_product = platform.runtime.op_overhead_cycles + \
        platform.offchip.latency_cycles
    assert before_any_product > 0.2 * bound
    cycles = run_fast(lowered.program, memory_params(platform)).breakdown.total_cycles
    assert cycles * lowered.runs > 1.2 * bound


@pytest.mark.parametrize("name, cycles", [("tpu_v5e_like", 17_002_496),
                                          ("whatif/tpu_v5e_256x256", 33_587_200)])
def test_the_pinned_old_choice_reproduces_the_old_figures(name, cycles):
    # Llama-3.1-8B decode, batch 16, context 2048, 32 layers: the attention's cycles
    # as accsim 5 ran them (`accsim run --model llama_3_1_8b --phase decode --batch 16
    # --context 2048 --ignore-capacity`, before this change).
    workload = Workload(name="w", operators=[{**_decode(16, 2048, 4), "repeat": 32}])
    plan = Mapping(layer_types={"attention.core": LEGACY})
    result = simulate(Inputs(load_platform(name), workload, plan))
    assert result.operators[0].totals.cycles == cycles
    searched = simulate(Inputs(load_platform(name), workload, Mapping()))
    assert searched.operators[0].totals.cycles < cycles / 1.8


def test_a_gqa_group_shares_one_stationary_tile_in_either_orientation():
    # The group's query heads are rows of one program: its K (normal) or Q (transposed)
    # tile is loaded once for all of them, so (pipelined folds, 8 rows within a fold's
    # stationary load) 8 heads cost the array what 1 does.
    platform = make_platform(systolic_array={"rows": 16, "cols": 16,
                                             "fold_model": "pipelined"}, buffers=BIG)
    for orientation in ("normal", "transposed"):
        cycles = {}
        for group in (1, 8):
            op = Workload(name="w", operators=[{**_decode(1, 64, group, heads=8),
                                                "head_dim": 16}]).operators[0]
            tiling = resolve_tiling(op, TilingSpec(tm=group, tn=16, dataflow="ws",
                                                   groups=1), platform)
            lowered = lower_attention_as(op, tiling, "flash", platform,
                                         orientation=orientation)
            cycles[group] = int(lowered.program.compute_cycles.sum())
            assert lowered.offchip_read["kv"] == 2 * 64 * 16   # once per group, int8
        assert cycles[8] == cycles[1], orientation


def test_transposed_streams_k_where_the_fold_fill_is_paid_per_fold():
    # On a SCALE-Sim fold model each fold pays its fill: K stationary (normal) pays it
    # per 16 keys for 4 streamed rows, Q stationary (transposed) once for 512 keys
    # (QK^T: 32 x (4 + 46) cycles against 512 + 46; PV has 32 folds either way).
    platform = make_platform(systolic_array={"rows": 16, "cols": 16, "dataflows": ["ws"]},
                             vector_unit={"lanes": 64, "cycles_per_element": {"mul": 16}},
                             buffers=BIG)
    op = Workload(name="w", operators=[{**_decode(1, 512, 4, heads=8),
                                        "head_dim": 16}]).operators[0]
    tiling = resolve_tiling(op, TilingSpec(tm=4, tn=512, dataflow="ws", groups=1),
                            platform)
    normal, transposed = (lower_attention_as(op, tiling, "flash", platform,
                                             orientation=orientation)
                          for orientation in ("normal", "transposed"))
    assert normal.program.compute_cycles.sum() - transposed.program.compute_cycles.sum() \
        == 32 * (4 + 46) - (512 + 46) + 32 * (4 + 46) - 32 * (16 + 46)
    chosen = lower_workload(Workload(name="w", operators=[op]), Mapping(), platform)[0]
    assert (chosen.tiling.unit, chosen.tiling.orientation) == ("array", "transposed")


def test_decode_runs_on_the_vector_unit_where_that_is_faster():
    platform = load_platform("whatif/tpu_v5e_256x256")
    workload = Workload(name="w", operators=[_decode(16, 2048, 4)])
    lowered = lower_workload(workload, Mapping(), platform)[0]
    assert lowered.tiling.unit == "vector" and lowered.tiling.orientation is None
    counters = lowered.counters
    assert counters.useful_array_cycles == 0 and counters.vector_compute_cycles > 0
    # one multiply-accumulate per lane per cycle: both products' MACs / lanes
    unit = platform.vector_unit
    program = lowered.program
    assert int(program.compute_cycles.sum()) >= counters.macs // unit.lanes
    assert int(program.vector_cycles.sum()) == 0   # softmax on the same unit, in compute
    # its MACs are vector element-ops: no array MAC energy
    assert counters.vector_elements > counters.macs
    result = simulate(Inputs(platform, workload, Mapping()))
    energy = result.operators[0].totals
    assert energy.energy_mac_pj == 0
    assert energy.energy_vector_pj >= counters.macs * lowered.runs \
        * platform.energy.vector_op_pj


@pytest.mark.parametrize("spec, rule", [
    (TilingSpec(unit="vector"), "unit: vector runs decode attention only"),
    (TilingSpec(groups=3), "groups 3 must divide the operator's 8 K/V head groups"),
])
def test_plans_the_operator_cannot_run_are_refused(spec, rule):
    workload = Workload(name="w", operators=[{**_decode(1, 256, 4), "q_len": 2}])
    with pytest.raises(AccsimError, match=rule) as error:
        simulate(Inputs(load_platform("tpu_v5e_like"), workload,
                        Mapping(operators={"attn": spec})))
    assert error.value.field == "operators.attn"


def test_groups_chain_in_one_program_up_to_its_step_bound():
    op = Workload(name="w", operators=[_decode(16, 2048, 4)]).operators[0]   # 128 groups
    assert program_groups(op, 1) == 128
    assert program_groups(op, 64) == 64          # 4096 steps at most
    assert program_groups(op, 5000) == 1
    assert program_groups(op, 64, 2) == 2        # the plan's


def test_one_latent_serves_as_k_and_v():
    # MLA's absorbed attention: K and V are one cached latent (512 + 64 elements); a
    # flash step reads it once, unfused each product's kernel reads its own.
    platform = load_platform("tpu_v5e_like")
    apart = Workload(name="w", operators=[_decode(1, 2048, 16, heads=16)]).operators[0]
    shared = Workload(name="w", operators=[{**_decode(1, 2048, 16, heads=16),
                                            "head_dim": 288, "kv_latent": 576}]
                      ).operators[0]
    tiling = resolve_tiling(shared, TilingSpec(groups=1), platform)
    flash = lower_attention_as(shared, tiling, "flash", platform)
    unfused = lower_attention_as(shared, tiling, "unfused", platform)
    assert flash.compulsory["kv"] == flash.offchip_read["kv"] == 2048 * 576 * 2
    assert unfused.offchip_read["kv"] == 2 * 2048 * 288 * 2
    assert operator_kv_bytes(shared, 2) == 2048 * 576 * 2
    assert operator_kv_bytes(apart, 2) == 2 * 2048 * 128 * 2
    with pytest.raises(ValidationError, match="kv_latent 600 is more than K and V apart"):
        Workload(name="w", operators=[{**_decode(1, 64, 1), "head_dim": 256,
                                       "kv_latent": 600}])


def test_a_step_moves_several_pairs_kv_where_one_pair_cannot_cover_the_latency():
    # Llama-2-7B-like decode at context 191 on Gaudi 3 (vector unit): one pair's K/V
    # (49 KB) is a tenth of latency x bandwidth (265 cycles x 1,887 B); one pair per
    # step leaves the memory idle most of each step. Llama-3.1-8B-like at context 2048
    # on tpu_v5e_like's array: one pair's 1 MB step already hides it, the program is
    # unchanged.
    for name, (batch, context, group), choice, many in (
            (str(GAUDI3), (256, 191, 1), dict(unit="vector"), True),
            ("tpu_v5e_like", (16, 2048, 4), dict(orientation="normal"), False)):
        platform = load_platform(name)
        op = Workload(name="w", operators=[_decode(batch, context, group)]).operators[0]
        tiling = resolve_tiling(op, TilingSpec(tn=context, groups=64), platform)
        lowered = lower_attention_as(op, tiling, "flash", platform, **choice)
        one = lower_attention_as(op, replace(tiling, groups=1), "flash", platform,
                                 **choice)
        assert one.pairs == 1
        pairs = lowered.pairs
        assert (pairs > 1) == many, name
        assert lowered.program.steps == 64 // pairs * one.program.steps
        assert int(lowered.program.load_bytes[0]) == pairs * int(one.program.load_bytes[0])
        assert lowered.program.compute_cycles.sum() == 64 * one.program.compute_cycles.sum()
        if many:   # the memory busy most of the program (one pair per step: 18%)
            run = run_fast(lowered.program, memory_params(platform)).breakdown
            assert run.offchip_busy_cycles >= 0.8 * (run.total_cycles
                                                     - run.overhead_cycles)
