"""Operand orientation (DESIGN.md section 19): a GEMM run transposed is the loop nest of
Cᵀ = Bᵀ.Aᵀ, built once in lowering. Over generated programs, every form of that nest
agrees on transposed programs: the step kernel, the closed form (counters, streamed
steps, fused replay), the search's busy-cycle estimate and both engines; with free
transposes it is exactly the normal program of the transposed operator; the transposes
a platform charges land on the vector unit; plans, --orientation and the search honour
the choice, and results record it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from engine_agreement import assert_engines_agree
from hypothesis import given, settings
from hypothesis import strategies as st
from platforms import make_platform
from test_engine_equivalence_lowered import lowering_cases

from simulator.cli import main
from simulator.errors import AccsimError
from simulator.engines.nest_replay import replay_nest
from simulator.inputs.named_inputs import load_inputs
from simulator.lowering import lower_compute
from simulator.lowering.gemm_stream import GemmStream
from simulator.mapping.plan import (LOOP_ORDERS, Mapping, Tiling, TilingSpec, merged_spec,
                                    with_orientation)
from simulator.model.loop_nest import (ORIENTATIONS, ORIENTED_ORDER, array_busy_cycles,
                                       oriented, oriented_order)
from simulator.program.tile_program import memory_params
from simulator.search.resolve import resolve_workload
from simulator.inputs.workload import Conv2d, Gemm, Workload

ARRAYS = ("load_bytes", "compute_cycles", "vector_cycles", "acquire", "release",
          "store_bytes", "reload_of")
FREE = {"transpose": {"stationary_load": "free", "store": "free"}}


def _transposed_cases():
    return lowering_cases().filter(lambda case: case[1].orientation == "transposed")


@settings(max_examples=150, deadline=None)
@given(case=_transposed_cases(), block=st.sampled_from([1, 3, 16, 4096]))
def test_every_form_of_a_transposed_nest_agrees(case, block):
    """The whole program (step kernel), the closed form streamed block by block and
    fused with its replay, the search's busy cycles and both engines, on one program."""
    gemm, tiling, platform, act, members = case
    whole = lower_compute(gemm, tiling, platform, following=act, fused=members)
    streamed = lower_compute(gemm, tiling, platform, following=act, fused=members,
                             block_steps=0)
    assert isinstance(streamed.program, GemmStream)
    assert streamed.counters == whole.counters
    materialized = streamed.program.materialize()
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(materialized, name),
                                      getattr(whole.program, name), err_msg=name)
    memory = memory_params(platform)
    fast = assert_engines_agree(whole.program, memory, naive=False)
    assert replay_nest(streamed.program, memory, block_steps=block).breakdown == \
        fast.breakdown
    g = gemm.gemm()
    (m, n, _), (tm, tn, _) = oriented((g.m, g.n, g.k), "transposed"), \
        oriented((tiling.tm, tiling.tn, tiling.tk), "transposed")
    array = platform.systolic_array
    busy = array_busy_cycles(m, n, g.k, tm, tn, tiling.tk,
                             order=ORIENTED_ORDER[1][LOOP_ORDERS.index(tiling.loop_order)],
                             dataflow=tiling.dataflow, rows=array.rows, cols=array.cols,
                             count=array.count, fold_model=array.fold_model)
    assert int(busy) == int(whole.program.compute_cycles.sum())


@settings(max_examples=150, deadline=None)
@given(case=lowering_cases())
def test_with_free_transposes_a_transposed_gemm_is_its_transposes_normal_gemm(case):
    """Cᵀ = Bᵀ.Aᵀ: the operator of n x m x k run normal with the tiling's m and n
    exchanged gives the same program, its A the operator's B (one dtype, dense)."""
    gemm, tiling, platform, _, _ = case
    platform = platform.model_copy(update={"systolic_array": platform.systolic_array
                                           .model_copy(update={"transpose": make_platform(
                                               systolic_array=FREE).systolic_array
                                               .transpose})})
    turned = Tiling(tiling.tm, tiling.tn, tiling.tk, tiling.loop_order, tiling.dataflow,
                    tiling.depth, orientation="transposed")
    transpose = Gemm(name="gt", layer_type="fc", kind="gemm", m=gemm.n, n=gemm.m,
                     k=gemm.k)
    normal = Tiling(tiling.tn, tiling.tm, tiling.tk,
                    oriented_order(tiling.loop_order, "transposed"), tiling.dataflow,
                    tiling.depth)
    ours = lower_compute(gemm, turned, platform)
    theirs = lower_compute(transpose, normal, platform)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(ours.program, name),
                                      getattr(theirs.program, name), err_msg=name)
    assert ours.counters.offchip_read["a"] == theirs.counters.offchip_read["b"]
    assert ours.counters.offchip_read["b"] == theirs.counters.offchip_read["a"]
    assert ours.counters.sram_read == theirs.counters.sram_read
    assert ours.counters.useful_array_cycles == theirs.counters.useful_array_cycles


def _gemm(m=16, n=24, k=8):
    return Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k)


@pytest.mark.parametrize("dataflow", ["ws", "is", "os"])
def test_a_platforms_transposes_are_vector_passes(dataflow):
    """Charged transposes: each stored C tile once (store: vector), and each load of
    the stationary input tile (stationary_load: vector; os keeps C, no input)."""
    tiling = Tiling(8, 8, 8, "mnk", dataflow, 2, orientation="transposed")
    costs = {"stationary_load": "vector", "store": "vector", "cycles_per_element": 3}
    charged = make_platform(systolic_array={"transpose": costs})
    free = make_platform(systolic_array=FREE)
    lanes = charged.vector_unit.lanes
    gemm = _gemm()
    extra = (lower_compute(gemm, tiling, charged).program.vector_cycles.sum()
             - lower_compute(gemm, tiling, free).program.vector_cycles.sum())
    c_tiles = 2 * 3                      # 16 x 24 in 8 x 8 tiles, stored once each
    per_tile = -(-64 // lanes) * 3       # one pass over 64 elements at 3 cycles each
    loads = {"ws": 2 * 1, "is": 3 * 1, "os": 0}[dataflow]   # stationary tiles loaded
    assert extra == (c_tiles + loads) * per_tile
    normal = Tiling(8, 8, 8, "mnk", dataflow, 2)
    assert (lower_compute(gemm, normal, charged).program.vector_cycles.sum()
            == lower_compute(gemm, normal, free).program.vector_cycles.sum() == 0)


def test_transposed_operands_swap_buffers():
    """Run transposed, B's tiles sit in the ifmap buffer and A's in the weight buffer:
    a tiling whose A tile fits the ifmap buffer but not the weight buffer runs normal
    and is refused transposed, naming A's tiles and the weight buffer."""
    platform = make_platform(buffers={"ifmap_bytes": 4096, "weight_bytes": 128})
    normal = lower_compute(_gemm(), Tiling(16, 8, 8, "mnk", "ws", 2), platform)
    assert normal.counters.slots == {"ifmap": 32, "weight": 2, "output": 8}
    with pytest.raises(AccsimError) as raised:
        lower_compute(_gemm(), Tiling(16, 8, 8, "mnk", "ws", 2,
                                      orientation="transposed"), platform)
    assert "A tiles (tm 16 x tk 8) of 128 bytes: the weight buffer" in str(raised.value)
    turned = lower_compute(_gemm(), Tiling(8, 8, 8, "mnk", "ws", 2,
                                           orientation="transposed"), platform)
    assert turned.counters.slots == {"ifmap": 64, "weight": 2, "output": 16}


def test_plans_and_the_mode_fix_the_orientation():
    work = Workload(name="w", operators=[_gemm(64, 48, 32)])
    platform = make_platform()
    spec = TilingSpec(tm=16, tn=16, tk=16, loop_order="mnk", dataflow="ws", depth=2)
    pinned = Mapping(default=spec.model_copy(update={"orientation": "transposed"}))
    (resolved,) = resolve_workload(work, pinned, platform)
    assert resolved.tiling.orientation == "transposed"
    (resolved,) = resolve_workload(work, Mapping(default=spec), platform)
    assert resolved.tiling.orientation == "normal"   # a full entry: normal, as before
    op = work.operators[0]
    assert merged_spec(with_orientation(Mapping(), "transposed"), op).orientation \
        == "transposed"
    assert merged_spec(with_orientation(Mapping(), "auto"), op).orientation is None
    assert merged_spec(with_orientation(pinned, "normal"), op).orientation == \
        "transposed"     # the plan's own entry wins over the run's mode
    for mode in ORIENTATIONS:
        (resolved,) = resolve_workload(work, with_orientation(Mapping(), mode), platform)
        assert resolved.tiling.orientation == mode


def test_a_tiling_says_its_orientation_only_when_transposed():
    normal = Tiling(8, 8, 8, "mnk", "ws", 2)
    turned = Tiling(8, 8, 8, "mnk", "ws", 2, orientation="transposed")
    assert "orientation" not in normal.record()
    assert turned.record()["orientation"] == "transposed"
    assert normal.describe() == "8x8x8 mnk ws d2"
    assert turned.describe() == "8x8x8 mnk ws T d2"
    assert normal.sort_key() < turned.sort_key()


SKINNY = ("name: skinny\noperators:\n  - {name: gemm, layer_type: gemm, kind: gemm, "
          "m: 16, n: 4096, k: 4096}\n")


def _cycles(tmp_path, capsys, arch: str, mode: str) -> tuple[int, dict]:
    workload = tmp_path / "skinny.yaml"
    workload.write_text(SKINNY)
    out = tmp_path / f"{mode}.json"
    assert main(["run", "--arch", arch, "--workload", str(workload), "--orientation",
                 mode, "--json", str(out)]) == 0
    capsys.readouterr()
    record = json.loads(out.read_text())["operators"][0]
    return record["per_run"]["total_cycles"], record["tiling"]


def test_a_skinny_gemm_runs_transposed_on_one_big_array(tmp_path, capsys):
    """M = 16 rows against 4096 x 4096 weights on one 256 x 256 array: run normal, each
    weight fold streams 16 rows against its 256-cycle load; transposed, the 16 rows
    stay in the array and the weights stream through it. The search picks transposed
    there, and auto never loses to normal."""
    normal, tiling = _cycles(tmp_path, capsys, "whatif/tpu_v5e_256x256", "normal")
    auto, chosen = _cycles(tmp_path, capsys, "whatif/tpu_v5e_256x256", "auto")
    assert "orientation" not in tiling
    assert chosen["orientation"] == "transposed"
    assert auto < normal


def test_an_unknown_orientation_is_one_clear_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--orientation", "sideways"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "sideways" in err and "Traceback" not in err


@pytest.mark.parametrize("dataflow", ["ws", "is", "os"])
def test_a_convolution_runs_transposed_as_its_gemm(dataflow):
    """A conv lowers as its im2col GEMM: transposed, its input windows are the nest's
    B tiles (their halo counted as the normal run counts it), and every form agrees."""
    conv = Conv2d(name="c", layer_type="conv", kind="conv2d", h=6, w=6, cin=4, cout=8,
                  kh=3, kw=3, padding=1)
    platform = make_platform(systolic_array={"rows": 4, "cols": 4})
    g = conv.gemm()
    tiling = Tiling(12, 4, 12, "nkm", dataflow, 2, orientation="transposed")
    whole = lower_compute(conv, tiling, platform)
    normal = lower_compute(conv, replace(tiling, orientation="normal"), platform)
    assert whole.counters.compulsory == normal.counters.compulsory
    assert whole.counters.offchip_read["a"] >= whole.counters.compulsory["a"] > 0
    assert whole.counters.macs == g.m * g.n * g.k
    streamed = lower_compute(conv, tiling, platform, block_steps=0)
    assert streamed.counters == whole.counters
    memory = memory_params(platform)
    fast = assert_engines_agree(whole.program, memory, naive=True)
    assert replay_nest(streamed.program, memory, block_steps=7).breakdown == \
        fast.breakdown


def test_a_wrong_transpose_cost_is_refused_naming_the_field(tmp_path, capsys):
    arch = tmp_path / "arch.yaml"
    arch.write_text("base: tpu_v5e_like\nname: sideways\n"
                    "systolic_array: {transpose: {store: sideways}}\n")
    assert main(["check", str(arch)]) != 0
    err = capsys.readouterr().err
    assert "systolic_array.transpose.store" in err and "Traceback" not in err


def test_an_array_that_holds_only_weights_runs_normal_only(tmp_path, capsys):
    """TPU v1 says `transpose: {supported: false}`: the search never runs a GEMM
    transposed there (the skinny GEMM that turns on a v5e-like array stays normal), and
    a run that asks for transposed is one clear error naming the platform's rule."""
    turns = load_inputs("whatif/tpu_v5e_256x256", None, None).platform
    array = turns.systolic_array
    held = turns.model_copy(update={"systolic_array": array.model_copy(update={
        "transpose": array.transpose.model_copy(update={"supported": False})})})
    assert held.systolic_array.transpose.orientations == ("normal",)
    work = Workload(name="w", operators=[_gemm(16, 4096, 4096)])
    assert [resolve_workload(work, Mapping(), platform)[0].tiling.orientation
            for platform in (turns, held)] == ["transposed", "normal"]
    platform = make_platform(systolic_array={"transpose": {"supported": False}})
    with pytest.raises(AccsimError, match="orientation 'transposed' is not supported"):
        lower_compute(work.operators[0], Tiling(16, 16, 16, "mnk", "ws", 2,
                                                orientation="transposed"), platform)
    workload = tmp_path / "skinny.yaml"
    workload.write_text(SKINNY)
    assert main(["run", "--arch", "tpu_v1", "--workload", str(workload),
                 "--orientation", "transposed"]) != 0
    err = capsys.readouterr().err
    assert "orientation 'transposed' is not supported by tpu_v1" in err
    assert "Traceback" not in err
