"""Per-dtype MAC rates, packed formats and weight sparsity (DESIGN.md section 17): the
acceptance cases of issue 25 items 1-3, the closed-form busy cycles and both engines
at every speed, and one clear error per bad input."""

from __future__ import annotations

import argparse
import subprocess
import sys
from fractions import Fraction
from typing import get_args

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from platforms import make_platform

from simulator.inputs.named_inputs import DEFAULT_WORKLOAD, load_inputs
from simulator.inputs.platform import Dtype, Platform
from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.errors import AccsimError
from simulator.model.formats import FORMATS, packed_bytes
from simulator.frontends.hf import llm_command as hf_command
from simulator.inputs.loader import validate_model
from simulator.lowering import lower_compute
from simulator.mapping.footprint import offchip_by_order
from simulator.model.loop_nest import array_busy_cycles
from simulator.mapping.plan import LOOP_ORDERS, Mapping, Tiling
from simulator.program.tile_program import memory_params
from simulator.present.run_report import result_dict
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Gemm, Workload

# Exact bytes per element, scales included (OCP MX v1.0: 8-bit scale per 32 elements).
BYTES_PER_ELEMENT = {
    "fp32": Fraction(4), "int32": Fraction(4), "bf16": Fraction(2), "fp16": Fraction(2),
    "int16": Fraction(2), "int8": Fraction(1), "fp8": Fraction(1),
    "fp8_e4m3": Fraction(1), "fp8_e5m2": Fraction(1), "int4": Fraction(1, 2),
    "fp4_e2m1": Fraction(1, 2), "mxfp8": Fraction(8 * 32 + 8, 8 * 32),
    "mxfp6": Fraction(6 * 32 + 8, 8 * 32), "mxfp4": Fraction(4 * 32 + 8, 8 * 32),
    "mxint8": Fraction(8 * 32 + 8, 8 * 32),
}


def test_every_format_has_its_exact_bytes_per_element():
    assert sorted(BYTES_PER_ELEMENT) == sorted(get_args(Dtype)) == sorted(FORMATS)
    for name, expected in BYTES_PER_ELEMENT.items():
        assert FORMATS[name].bytes_per_element == expected, name
    assert float(FORMATS["mxfp4"].bytes_per_element) * 8 == 4.25   # bits


@pytest.mark.parametrize("dtype, elements, expected", [
    ("int4", 3, 2), ("int4", 4, 2), ("fp4_e2m1", 1, 1), ("mxfp4", 32, 17),
    ("mxfp4", 33, 34), ("mxfp6", 64, 50), ("mxfp8", 1, 33), ("mxint8", 96, 99),
    ("bf16", 7, 14)])
def test_packed_bytes_round_up_to_whole_units(dtype, elements, expected):
    assert packed_bytes(dtype, elements) == expected
    assert packed_bytes(dtype, np.array([elements]))[0] == expected


def test_tpu_v5e_like_int8_peak_matches_the_cited_393_tops():
    platform = load_inputs("tpu_v5e_like", DEFAULT_WORKLOAD, None).platform
    assert platform.peak_flops_for("int8") == pytest.approx(393e12, rel=0.01)
    assert platform.peak_flops == pytest.approx(197e12, rel=0.01)


def _gemm_run(platform: str, size: int, **fields):
    base = load_inputs(platform, DEFAULT_WORKLOAD, None)
    workload = Workload(name="g", operators=[Gemm(name="g", layer_type="fc", kind="gemm",
                                                  m=size, n=size, k=size, **fields)])
    return simulate(Inputs(base.platform, workload, Mapping()), engine="fast")


def test_int8_gemm_runs_at_twice_the_bf16_rate_with_mfu_of_the_int8_peak():
    bf16 = _gemm_run("tpu_v5e_like", 8192)
    int8 = _gemm_run("tpu_v5e_like", 8192, dtype="int8")
    assert bf16.total.cycles / int8.total.cycles == pytest.approx(2.0, rel=0.05)
    record = result_dict(int8)
    assert record["workload"]["peak_dtype"] == "int8"
    assert "peak_dtype" not in result_dict(bf16)["workload"]
    platform = int8.platform
    assert platform.peak_flops_for("int8") == 2 * platform.peak_flops
    mfu = record["workload"]["mfu"]
    assert mfu == pytest.approx(int8.total.model_flops / (platform.peak_flops_for("int8")
                                * record["workload"]["time_s"]))
    assert mfu == pytest.approx(result_dict(bf16)["workload"]["mfu"], rel=0.05)
    assert record["operators"][0]["precision"] == {"run_dtype": "int8",
                                                   "macs_per_cycle": 2}


def _llama_decode(*options: str):
    parser = argparse.ArgumentParser()
    hf_command.add_arguments(parser)
    step = hf_command.llm_step(parser.parse_args(["--phase", "decode", "--context", "2048",
                                                  *options]), "llama_3_1_8b")
    base = load_inputs("tpu_v5e_like", DEFAULT_WORKLOAD, None)
    return simulate(Inputs(base.platform, step.workload(), base.mapping), engine="fast")


def _weight_bytes(result) -> tuple[int, int]:
    """(compulsory, off-chip read) bytes of the GEMMs' weight operands, all runs."""
    compulsory = offchip = 0
    for op in result.operators:
        if op.lowered.kind == "gemm":
            compulsory += op.lowered.counters.compulsory["b"] * op.lowered.runs
            offchip += op.lowered.counters.offchip_read["b"] * op.lowered.runs
    return compulsory, offchip


def test_int8_weight_only_decode_moves_half_the_weight_bytes():
    bf16 = _weight_bytes(_llama_decode())
    int8 = _weight_bytes(_llama_decode("--weight-dtype", "int8"))
    assert int8[0] * 2 == bf16[0]
    assert int8[1] * 2 == bf16[1]


def _sparse_gemm(platform: Platform, sparsity, m=4096, n=1024, k=1024):
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k, sparsity=sparsity)
    return lower_compute(op, Tiling(m, 512, 512, "nkm", "ws", 2), platform)


def test_two_of_four_on_a_platform_that_runs_it_halves_the_streaming():
    platform = load_inputs("whatif/tpu_v5e_sparse24", DEFAULT_WORKLOAD, None).platform
    dense, sparse = _sparse_gemm(platform, None), _sparse_gemm(platform, "2:4")
    assert sparse.counters.useful_array_cycles * 2 == dense.counters.useful_array_cycles
    busy = dense.program.compute_cycles.sum(), sparse.program.compute_cycles.sum()
    assert busy[0] / busy[1] == pytest.approx(2.0, rel=0.02)
    # the streaming phase exactly; the skew (R + C - 2 per step) is not streamed
    skew = dense.counters.skew_array_cycles
    assert sparse.counters.skew_array_cycles == skew
    assert busy[0] - skew == 2 * (busy[1] - skew)
    k, n = 1024, 1024
    # half the bf16 weights, plus 2 bits of index per kept value
    assert sparse.counters.compulsory["b"] == k * n * 2 // 2 + k * n // 2 * 2 // 8
    assert sparse.counters.offchip_read["b"] * 16 == dense.counters.offchip_read["b"] * 9
    assert sparse.precision.sparsity_mode == "structured"


def test_two_of_four_elsewhere_is_decompressed_and_dense():
    platform = load_inputs("tpu_v5e_like", DEFAULT_WORKLOAD, None).platform
    dense, sparse = _sparse_gemm(platform, None), _sparse_gemm(platform, "2:4")
    np.testing.assert_array_equal(sparse.program.compute_cycles,
                                  dense.program.compute_cycles)
    # compressed off chip (3 bits of index per group of 4: ceil(log2(C(4, 2)))), dense
    # in the weight buffer
    assert sparse.counters.compulsory["b"] == 1024 * 1024 + -(-(1024 * 1024 // 4 * 3) // 8)
    assert sparse.counters.sram_write["weight"] == dense.counters.sram_write["weight"]
    base = load_inputs("tpu_v5e_like", DEFAULT_WORKLOAD, None)
    workload = Workload(name="s", operators=[Gemm(name="g", layer_type="fc", kind="gemm",
                                                  m=512, n=512, k=512, sparsity="2:4")])
    record = result_dict(simulate(Inputs(base.platform, workload, Mapping()),
                                  engine="fast"))
    assert record["operators"][0]["precision"]["sparsity_mode"] == "decompressed"


def test_unstructured_sparsity_is_bandwidth_only():
    platform = load_inputs("whatif/tpu_v5e_sparse24", DEFAULT_WORKLOAD, None).platform
    dense, sparse = _sparse_gemm(platform, None), _sparse_gemm(platform, 0.25)
    np.testing.assert_array_equal(sparse.program.compute_cycles,
                                  dense.program.compute_cycles)
    assert sparse.counters.compulsory["b"] == 1024 * 1024 // 4 * 2 + 1024 * 1024 // 8
    assert sparse.precision.sparsity_mode == "bandwidth-only"


RATED = {"input_dtypes": ["int8", "bf16", "int4"], "macs_per_cycle": {"int8": 2,
                                                                      "int4": 4},
         "sparsity": [{"pattern": "2:4", "speedup": 1.5}]}


@settings(max_examples=150, deadline=None)
@given(m=st.integers(1, 30), n=st.integers(1, 30), k=st.integers(1, 30),
       data=st.data(), dtype=st.sampled_from(["int8", "bf16"]),
       weight=st.sampled_from([None, "int4", "bf16"]),
       sparsity=st.sampled_from([None, "2:4", "1:4", 0.5]),
       fold_model=st.sampled_from(["pipelined", "scalesim"]))
def test_busy_cycles_closed_form_and_engines_agree_at_every_speed(
        m, n, k, data, dtype, weight, sparsity, fold_model):
    platform = make_platform(
        systolic_array={**RATED, "fold_model": fold_model,
                        "count": data.draw(st.integers(1, 3))},
        energy={"mac_pj": {"int8": 0.2, "bf16": 0.5, "int4": 0.1}},
        buffers={"ifmap_bytes": 1 << 14, "weight_bytes": 1 << 14, "output_bytes": 1 << 14})
    op = Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k, dtype=dtype,
              weight_dtype=weight, sparsity=sparsity)
    tm, tn, tk = (data.draw(st.integers(1, size)) for size in (m, n, k))
    order = data.draw(st.integers(0, len(LOOP_ORDERS) - 1))
    dataflow = data.draw(st.sampled_from(["os", "ws", "is"]))
    lowered = lower_compute(op, Tiling(tm, tn, tk, LOOP_ORDERS[order], dataflow, 2),
                            platform)
    assert int(array_busy_cycles(m, n, k, tm, tn, tk, order=order, dataflow=dataflow,
                                 rows=8, cols=8, count=platform.systolic_array.count,
                                 fold_model=fold_model, speed=lowered.speed)) == \
        int(lowered.program.compute_cycles.sum())
    if sparsity is None and weight != "int4":   # whole-byte tiles: the estimate is exact
        assert int(offchip_by_order(op, platform, tm, tn, tk)[order]) == \
            lowered.counters.offchip_bytes
    memory = memory_params(platform)
    fast = run_fast(lowered.program, memory, keep_steps=True)
    des = run_des(lowered.program, memory, keep_steps=True)
    assert fast.breakdown == des.breakdown


def _platform_error(**array) -> str:
    raw = make_platform().model_dump(mode="json")
    raw["systolic_array"].update(array)
    with pytest.raises(AccsimError) as caught:
        validate_model(raw, Platform, file="p.yaml")
    return str(caught.value)


def _workload_error(**fields) -> str:
    raw = {"name": "w", "operators": [{"name": "g", "layer_type": "fc", "kind": "gemm",
                                       "m": 8, "n": 8, "k": 8, **fields}]}
    with pytest.raises(AccsimError) as caught:
        validate_model(raw, Workload, file="w.yaml")
    return str(caught.value)


def test_bad_precision_inputs_are_one_clear_error_each():
    assert "weight_dtype" in _workload_error(weight_dtype="fp5")
    assert "N < M" in _workload_error(sparsity="4:4")
    assert "not of the form N:M" in _workload_error(sparsity="2-4")
    assert "between 0 and 1" in _workload_error(sparsity=1.5)
    error = _platform_error(sparsity=[{"pattern": "2:4", "speedup": 3.0}])
    assert "systolic_array.sparsity" in error and "above M / N" in error
    assert "not input_dtypes" in _platform_error(macs_per_cycle={"bf16": 2})
    assert "macs_per_cycle" in _platform_error(macs_per_cycle={"int8": 0})


def test_packed_activations_are_refused_on_one_line(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text("name: w\noperators:\n  - {name: g, layer_type: fc, kind: gemm, "
                        "m: 64, n: 64, k: 64, dtype: mxfp4}\n")
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "run", "--arch",
                           "tpu_v5e_like", "--workload", str(workload)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "operators.g.dtype" in done.stderr and "packed format" in done.stderr
