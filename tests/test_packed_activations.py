"""Packed activation formats (issue 25 item 2, DESIGN.md section 17): a gemm's or conv's
A operand in int4, fp4 or an MX format moves its exact packed bytes (block scales
included) off chip, its tiles round up to whole packing units so a plan that fits in
bf16 still fits, the search's bounds stay lower bounds, both engines agree, and a format
the platform lacks is one clear error (or a fallback in a precision plan)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from in_turn import slow_unless_in_turn
from platforms import make_platform

from simulator.inputs.named_inputs import DEFAULT_WORKLOAD, load_inputs
from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.errors import AccsimError
from simulator.model.formats import FORMATS, MX_BLOCK
from simulator.limits import check_inputs
from simulator.inputs.loader import validate_model
from simulator.lowering import lower_compute
from simulator.lowering.tile_table import TileTables
from simulator.mapping.footprint import buffer_fits
from simulator.mapping.heuristics import heuristic
from simulator.mapping.plan import LOOP_ORDERS, Mapping, Tiling
from simulator.precision.precision_plan import PrecisionPlan
from simulator.precision.format_choice import apply_plan
from simulator.program.tile_program import memory_params
from simulator.search.bounds import candidate_bounds
from simulator.search.operator import evaluate
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Attention, Conv2d, Gemm, Workload

PACKED = ["int4", "fp4_e2m1", "mxfp4"]
# An array that takes every packed activation format, each at its own rate.
ARRAY = {"input_dtypes": ["bf16", "int8", *PACKED],
         "macs_per_cycle": {"int8": 2, "int4": 4, "fp4_e2m1": 4, "mxfp4": 4},
         "accumulator_dtype": "fp32", "output_dtype": "bf16"}
MAC_PJ = {"bf16": 0.5, "int8": 0.2, "int4": 0.1, "fp4_e2m1": 0.1, "mxfp4": 0.12}


def _platform(**overrides):
    return make_platform(systolic_array={**ARRAY, **overrides.pop("systolic_array", {})},
                         energy={"mac_pj": MAC_PJ}, **overrides)


def _exact_a_bytes(dtype: str, m: int, k: int) -> int:
    """A's packed bytes from the shape alone: 4 bits per element, rows of k split into
    blocks of 32 sharing one 8-bit scale for the MX format."""
    bits = m * k * 4
    if dtype == "mxfp4":
        assert k % MX_BLOCK == 0
        bits += m * (k // MX_BLOCK) * 8
    return -(-bits // 8)


@pytest.mark.parametrize("dtype", PACKED)
def test_offchip_bytes_of_packed_activations_are_exact(dtype):
    platform = _platform(buffers={"ifmap_bytes": 1 << 16, "weight_bytes": 1 << 16,
                                  "output_bytes": 1 << 16})
    m, n, k = 48, 40, 96
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k, dtype=dtype,
              weight_dtype="bf16")
    bf16 = op.model_copy(update={"dtype": "bf16"})
    # n in one tile: each A tile moves once; tk a multiple of the MX block
    tiling = Tiling(16, n, 32, "mnk", "os", 2)
    packed = lower_compute(op, tiling, platform)
    wide = lower_compute(bf16, tiling, platform)
    expected = _exact_a_bytes(dtype, m, k)
    assert packed.counters.offchip_read["a"] == expected
    assert packed.counters.compulsory["a"] == expected
    assert wide.counters.offchip_read["a"] == m * k * 2
    assert expected < m * k      # under a byte per element, even with the MX scales
    # weights and outputs (bf16, the array's output dtype) are untouched
    assert packed.counters.offchip_read["b"] == wide.counters.offchip_read["b"] == k * n * 2
    assert packed.counters.offchip_write == wide.counters.offchip_write == m * n * 2
    # the slower operand sets the rate: bf16 weights run at bf16's; with weights in
    # the same format the array runs at the format's rate
    assert packed.precision is None
    both = lower_compute(op.model_copy(update={"weight_dtype": dtype}), tiling, platform)
    assert (both.precision.run_dtype, both.precision.macs_per_cycle) == (dtype, 4)


def test_an_odd_int4_tile_rounds_up_to_a_whole_byte():
    platform = _platform()
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=3, n=4, k=5, dtype="int4")
    lowered = lower_compute(op, Tiling(3, 4, 5, "mnk", "os", 1), platform)
    assert lowered.counters.offchip_read["a"] == 8          # 15 nibbles: 7.5 -> 8 bytes
    split = lower_compute(op, Tiling(1, 4, 5, "mnk", "os", 1), platform)
    assert split.counters.offchip_read["a"] == 3 * 3        # 5 nibbles per row tile
    assert split.counters.compulsory["a"] == 8              # the tensor, packed whole


@settings(max_examples=120, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 80), data=st.data(),
       dtype=st.sampled_from(PACKED), conv=st.booleans())
def test_a_plan_that_fits_in_bf16_fits_packed(m, n, k, data, dtype, conv):
    platform = _platform(buffers={"ifmap_bytes": data.draw(st.integers(16, 2048)),
                                  "weight_bytes": 1 << 14, "output_bytes": 1 << 14})
    if conv:
        op = Conv2d(name="c", layer_type="conv", kind="conv2d", h=6, w=5, cin=3, cout=n,
                    kh=3, kw=3, padding=1, dtype="bf16")
        g = op.gemm()
        m, k = g.m, g.k
    else:
        op = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k, dtype="bf16")
    tm, tn, tk = (data.draw(st.integers(1, size)) for size in (m, n, k))
    tiling = Tiling(tm, tn, tk, data.draw(st.sampled_from(LOOP_ORDERS)), "os",
                    data.draw(st.integers(1, 3)))
    assume(all(fit.fits for fit in buffer_fits(op, tiling, platform)))
    packed = op.model_copy(update={"dtype": dtype})
    # a partial MX block still carries its scale: at 16 elements or more a tile of
    # 4.25 bits per element plus one block is within bf16's 16 bits per element
    assume(dtype != "mxfp4" or tm * tk >= MX_BLOCK // 2)
    fits = buffer_fits(packed, tiling, platform)
    assert all(fit.fits and fit.needed <= fit.capacity for fit in fits)
    lowered = lower_compute(packed, tiling, platform)          # lowering agrees
    assert lowered.counters.slots["ifmap"] * fits[0].tile_bytes <= fits[0].capacity


@settings(max_examples=150, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 80),
       ifmap=st.integers(8, 600), depth=st.integers(1, 3),
       name=st.sampled_from(["array_aligned", "os_k_inner", "min_offchip"]),
       dataflow=st.sampled_from(["os", "ws", "is"]), dtype=st.sampled_from(PACKED))
def test_heuristic_tilings_of_packed_activations_fit(m, n, k, ifmap, depth, name,
                                                    dataflow, dtype):
    # wherever the bf16 operator's heuristic tiling fits and `depth` packing units of
    # the format fit the ifmap buffer, the packed operator's heuristic tiling lowers
    platform = _platform(buffers={"ifmap_bytes": ifmap, "weight_bytes": 1 << 14,
                                  "output_bytes": 1 << 14})
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k, dtype="bf16")
    assume(depth * FORMATS[dtype].unit_bytes <= ifmap)
    try:
        lower_compute(op, heuristic(name)(op, platform, depth, dataflow), platform)
    except AccsimError:
        assume(False)
    packed = op.model_copy(update={"dtype": dtype})
    lowered = lower_compute(packed, heuristic(name)(packed, platform, depth, dataflow),
                            platform)
    assert lowered.counters.slots["ifmap"] >= depth


# The mapper test's small platform: tilings that do not fit, that spill, every dataflow.
SMALL = _platform(systolic_array={"rows": 4, "cols": 4},
                  buffers={"ifmap_bytes": 256, "weight_bytes": 192, "output_bytes": 512},
                  offchip={"latency_cycles": 6})


BOUND_OPS = {"gemm": Gemm(name="g", layer_type="fc", kind="gemm", m=12, n=6, k=36),
             "batched": Gemm(name="b", layer_type="attn", kind="gemm", batch=2, m=8, n=9,
                             k=5),
             "conv": Conv2d(name="c", layer_type="conv", kind="conv2d", h=5, w=5, cin=2,
                            cout=6, kh=3, kw=3, padding=1)}
BOUND_CASES = [(name, dtype) for name in BOUND_OPS
               for dtype in ("int4", "mxfp4")]      # fp4_e2m1 packs as int4 does


# One code path whatever the case: the default run takes the walk of tests/in_turn.py
# (each operator and each format once), the rest is marked slow.
@pytest.mark.parametrize("op,dtype", slow_unless_in_turn(
    BOUND_CASES, arguments=[(BOUND_OPS[name], dtype) for name, dtype in BOUND_CASES],
    ids=[f"{name}-{dtype}" for name, dtype in BOUND_CASES]))
def test_bounds_stay_lower_bounds_with_packed_activations(op, dtype):
    op = op.model_copy(update={"dtype": dtype})
    memory = memory_params(SMALL)
    tilings, cycles_lb, energy_lb = candidate_bounds(op, SMALL)
    assert len(tilings) > 0
    tables = TileTables(op, SMALL)   # shared by its tilings, as in the search
    for tiling, c_lb, e_lb in zip(tilings, cycles_lb, energy_lb):
        evaluation = evaluate(op, tiling, SMALL, memory, None, tables=tables)
        assert c_lb <= evaluation.cycles, (tiling, c_lb, evaluation.cycles)
        assert e_lb <= evaluation.energy_pj, (tiling, e_lb, evaluation.energy_pj)


@pytest.mark.parametrize("dtype", PACKED)
def test_time_is_never_below_the_roofline_with_packed_activations(dtype):
    ops = [Gemm(name="g", layer_type="fc", kind="gemm", m=96, n=64, k=160, dtype=dtype),
           Conv2d(name="c", layer_type="conv", kind="conv2d", h=9, w=9, cin=8, cout=16,
                  kh=3, kw=3, padding=1, dtype=dtype)]
    platform = _platform(buffers={"ifmap_bytes": 2048, "weight_bytes": 4096,
                                  "output_bytes": 4096})
    result = simulate(Inputs(platform, Workload(name="w", operators=ops), Mapping()),
                      engine="fast")
    for op in result.operators:
        totals = op.totals
        assert totals.cycles >= totals.roofline_bound_cycles, op.lowered.name
        assert totals.offchip_bytes >= totals.compulsory_bytes, op.lowered.name


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 30), n=st.integers(1, 30), k=st.integers(1, 70), data=st.data(),
       dtype=st.sampled_from(PACKED), weight=st.sampled_from([None, "int8", "bf16"]))
def test_engines_agree_on_packed_activation_programs(m, n, k, data, dtype, weight):
    platform = _platform(buffers={"ifmap_bytes": 1 << 14, "weight_bytes": 1 << 14,
                                  "output_bytes": 1 << 14})
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k, dtype=dtype,
              weight_dtype=weight)
    tm, tn, tk = (data.draw(st.integers(1, size)) for size in (m, n, k))
    tiling = Tiling(tm, tn, tk, data.draw(st.sampled_from(LOOP_ORDERS)),
                    data.draw(st.sampled_from(["os", "ws", "is"])), 2)
    lowered = lower_compute(op, tiling, platform)
    memory = memory_params(platform)
    fast = run_fast(lowered.program, memory, keep_steps=True)
    des = run_des(lowered.program, memory, keep_steps=True)
    assert fast.breakdown == des.breakdown
    assert fast.breakdown.total_cycles > 0


def test_engines_agree_on_a_shipped_what_if_with_int4_activations():
    base = load_inputs("whatif/tpu_v5e_int4", DEFAULT_WORKLOAD, None)
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=256, n=512, k=1024,
              dtype="int4", weight_dtype="int8")
    inputs = Inputs(base.platform, Workload(name="w", operators=[op]), Mapping())
    fast, des = simulate(inputs, engine="fast"), simulate(inputs, engine="simpy")
    assert fast.total.cycles == des.total.cycles
    assert fast.total.offchip_bytes == des.total.offchip_bytes
    (lowered,) = (o.lowered for o in fast.operators)
    assert lowered.counters.compulsory["a"] == 256 * 1024 // 2
    assert lowered.precision.run_dtype == "int8"   # the slower of the pair sets the rate


def _plan(raw: dict) -> PrecisionPlan:
    return validate_model(raw, PrecisionPlan, file="plan.yaml")


def test_a_plan_runs_packed_activations_where_the_platform_has_them():
    workload = Workload(name="w", operators=[
        Gemm(name="up", layer_type="mlp.up", kind="gemm", m=64, n=256, k=256),
        Attention(name="attn", layer_type="attention", kind="attention", heads=8,
                  kv_heads=8, q_len=1, kv_len=256, head_dim=64)])
    plan = _plan({"layer_types": {"mlp.up": {"activation": ["int4", "bf16"]},
                                  "attention": {"activation": ["int4", "bf16"]}}})
    what_if = apply_plan(plan, workload, load_inputs("whatif/tpu_v5e_int4",
                                                     DEFAULT_WORKLOAD, None).platform)
    gemm, attention = what_if.operators
    assert gemm.formats["activation"] == "int4" and gemm.fallbacks == ()
    assert what_if.workload.operators[0].dtype == "int4"
    # attention's Q and probabilities stay whole bytes: the chain moves on, with why
    assert attention.formats["activation"] == "bf16"
    assert [f.reason for f in attention.fallbacks] == [
        "int4 is a packed format; packed activations are modelled for gemm and conv2d only"]
    plain = apply_plan(plan, workload, load_inputs("tpu_v5e_like", DEFAULT_WORKLOAD,
                                                   None).platform)
    assert plain.operators[0].formats["activation"] == "bf16"
    assert [f.reason for f in plain.operators[0].fallbacks] == ["platform lacks int4"]


def test_a_packed_activation_the_platform_lacks_is_one_clear_error(tmp_path):
    platform = load_inputs("tpu_v5e_like", DEFAULT_WORKLOAD, None).platform
    gemm = Gemm(name="up", layer_type="mlp.up", kind="gemm", m=64, n=64, k=64)
    with pytest.raises(AccsimError) as caught:
        apply_plan(_plan({"default": {"activation": ["fp4_e2m1"]}}),
                   Workload(name="w", operators=[gemm]), platform, file="plan.yaml")
    assert str(caught.value).startswith("plan.yaml: default.activation: no format of the "
                                        "chain ['fp4_e2m1']")
    assert "fp4_e2m1: platform lacks fp4_e2m1" in str(caught.value)
    with pytest.raises(AccsimError) as caught:
        check_inputs(Workload(name="w", operators=[
            gemm.model_copy(update={"dtype": "fp4_e2m1"})]), platform,
            workload_source="w.yaml")
    assert str(caught.value).startswith("w.yaml: operators.up.dtype: dtype fp4_e2m1 (a "
                                        "packed format) is not an input dtype of")
    workload = tmp_path / "w.yaml"
    workload.write_text("name: w\noperators:\n  - {name: g, layer_type: fc, kind: gemm, "
                        "m: 64, n: 64, k: 64, dtype: fp4_e2m1}\n")
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "run", "--arch",
                           "tpu_v5e_like", "--workload", str(workload)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "operators.g.dtype" in done.stderr and "not an input dtype" in done.stderr


def test_a_packed_vector_operator_is_refused_naming_it():
    platform = load_inputs("whatif/tpu_v5e_int4", DEFAULT_WORKLOAD, None).platform
    workload = Workload.model_validate({"name": "w", "operators": [
        {"name": "act", "layer_type": "act", "kind": "elementwise", "elements": 64,
         "op": "gelu", "dtype": "int4"}]})
    with pytest.raises(AccsimError) as caught:
        check_inputs(workload, platform, workload_source="w.yaml")
    assert str(caught.value).startswith("w.yaml: operators.act.dtype: dtype int4 is a "
                                        "packed format; packed activations are modelled "
                                        "for gemm and conv2d only")


def test_int4_activations_run_end_to_end_on_the_int4_what_if(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text("name: w\noperators:\n  - {name: g, layer_type: fc, kind: gemm, "
                        "m: 512, n: 512, k: 1024, dtype: int4}\n")
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "run", "--arch",
                           "whatif/tpu_v5e_int4", "--workload", str(workload),
                           "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (record,) = json.loads(out.read_text())["operators"]
    assert record["precision"] == {"run_dtype": "int4", "macs_per_cycle": 4}
