"""Precision plans and their quality evidence (DESIGN.md section 17; issue 25 items 4
and 5): the emulation rounds as ml_dtypes does, bit for bit; fallback chains demote on
a platform that lacks a format and on a failed guardrail, each fallback named with its
reason; an int8 weight-only plan halves Llama decode's weight bytes; bad plans and
tensor files are one clear error each."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest

from simulator.inputs.named_inputs import DEFAULT_WORKLOAD, load_inputs
from simulator.errors import AccsimError
from simulator.frontends.hf import llm_command as hf_command
from simulator.inputs.loader import validate_model
from simulator.precision.emulate import FLOATS, MX_ELEMENTS, quantise, round_minifloat
from simulator.precision.precision_plan import PrecisionPlan
from simulator.precision.format_choice import apply_plan
from simulator.inputs.workload import Attention, Gemm, Workload

ml_dtypes = pytest.importorskip("ml_dtypes")

ML_TYPES = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
            "fp4_e2m1": ml_dtypes.float4_e2m1fn, "bf16": ml_dtypes.bfloat16,
            "fp16": np.float16}


def _random(shape, seed=0) -> np.ndarray:
    """Values over many binades, subnormals of every format included."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.uniform(-20, 10, shape))).astype(
        np.float32)


@pytest.mark.parametrize("dtype", sorted(ML_TYPES))
def test_rounding_matches_ml_dtypes_bit_for_bit(dtype):
    fmt = FLOATS[dtype]
    x = np.clip(_random(100_000), -fmt.max_value, fmt.max_value)
    expected = x.astype(ML_TYPES[dtype]).astype(np.float32)
    np.testing.assert_array_equal(round_minifloat(x, fmt).view(np.uint32),
                                  expected.view(np.uint32))


@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2", "fp4_e2m1"])
def test_scaled_quantisation_is_ml_dtypes_rounding_of_the_scaled_tensor(dtype):
    x = _random((64, 96), seed=1)
    scale = np.max(np.abs(x), axis=1, keepdims=True) / FLOATS[dtype].max_value
    expected = ((x / scale).astype(ML_TYPES[dtype]).astype(np.float32) * scale)
    np.testing.assert_array_equal(quantise(x, dtype, axis=1), expected.astype(np.float32))


@pytest.mark.parametrize("dtype, element", [("mxfp8", ml_dtypes.float8_e4m3fn),
                                            ("mxfp4", ml_dtypes.float4_e2m1fn),
                                            ("mxfp6", ml_dtypes.float6_e2m3fn)])
def test_mx_blocks_share_a_power_of_two_scale_from_the_block_max(dtype, element):
    x = np.random.default_rng(2).standard_normal((4, 70)).astype(np.float32)
    got = quantise(x, dtype, reduction_axis=1)
    emax = MX_ELEMENTS[dtype].max_exponent
    for start in range(0, 70, 32):   # the last block holds 6 elements
        block = x[:, start:start + 32]
        shared = np.floor(np.log2(np.max(np.abs(block), axis=1, keepdims=True))) - emax
        scale = np.exp2(shared).astype(np.float32)
        expected = np.clip(block / scale, -MX_ELEMENTS[dtype].max_value,
                           MX_ELEMENTS[dtype].max_value).astype(element)
        np.testing.assert_array_equal(got[:, start:start + 32],
                                      expected.astype(np.float32) * scale)


def _platform(name: str):
    return load_inputs(name, DEFAULT_WORKLOAD, None).platform


def _gemm_workload(**fields) -> Workload:
    return Workload(name="w", operators=[
        Gemm(name="up", layer_type="mlp.up", kind="gemm", m=512, n=4096, k=4096, **fields),
        Attention(name="attn", layer_type="attention", kind="attention", heads=8,
                  kv_heads=8, q_len=1, kv_len=2048, head_dim=128)])


def _plan(raw: dict, file: str = "plan.yaml") -> PrecisionPlan:
    return validate_model(raw, PrecisionPlan, file=file)


def test_outlier_heavy_activations_fail_the_guardrail_and_fall_back():
    platform = _platform("whatif/tpu_v5e_fp8")
    raw = {"layer_types": {"mlp.up": {"activation": ["fp8_e4m3", "int8", "bf16"],
                                      "guardrail": {"min_sqnr_db": 35}}}}
    heavy = apply_plan(_plan(raw), _gemm_workload(), platform)
    [record] = heavy.operators
    assert record.formats == {"weight": "bf16", "activation": "bf16"}
    assert [(f.role, f.format) for f in record.fallbacks] == [("activation", "fp8_e4m3"),
                                                             ("activation", "int8")]
    assert all(f.reason.startswith("guardrail: SQNR") and f.reason.endswith("< 35 dB")
               for f in record.fallbacks)
    assert record.quality.sqnr_db >= 35
    assert "heavy_tailed" in record.tensors
    assert heavy.workload == _gemm_workload()    # back where it started
    # normal activations keep int8 (it is the outlier channels that cost int8 its SQNR)
    normal = apply_plan(_plan({**raw, "samples": {"activations": "normal"}}),
                        _gemm_workload(), platform)
    assert normal.operators[0].formats["activation"] == "int8"
    assert [f.format for f in normal.operators[0].fallbacks] == ["fp8_e4m3"]
    gemm, attention = normal.workload.operators
    assert (gemm.dtype, gemm.weight_dtype) == ("int8", "bf16")   # weights pinned
    assert attention == _gemm_workload().operators[1]


def test_a_format_the_platform_lacks_falls_back_with_that_reason():
    applied = apply_plan(_plan({"default": {"weight": ["fp8_e4m3", "int8"],
                                            "kv": ["mxfp4", "int8"]}}),
                         _gemm_workload(), _platform("tpu_v5e_like"))
    gemm, attention = applied.operators
    assert gemm.formats["weight"] == "int8" and attention.formats["kv"] == "int8"
    assert [f.reason for f in gemm.fallbacks] == ["platform lacks fp8_e4m3"]
    assert [f.reason for f in attention.fallbacks] == ["platform lacks mxfp4"]
    assert applied.workload.operators[1].kv_dtype == "int8"
    assert gemm.quality.rel_error > 0      # changed operators carry their evidence
    record = applied.record()
    assert record["operators"][0]["fallbacks"] == [
        {"role": "weight", "format": "fp8_e4m3", "reason": "platform lacks fp8_e4m3"}]


def _error(raw: dict, workload: Workload | None = None, platform: str = "tpu_v5e_like",
           file: str = "plan.yaml") -> str:
    with pytest.raises(AccsimError) as caught:
        apply_plan(_plan(raw, file), workload or _gemm_workload(), _platform(platform),
                   file=file)
    return str(caught.value)


def test_bad_plans_are_one_clear_error_each(tmp_path):
    assert "plan.yaml: default.weight[0]: Input should be" in _error({"default": {"weight": ["fp7"]}})
    never = _error({"layer_types": {"mlp.up": {"weight": ["fp8_e4m3", "int4"]}}})
    assert never.startswith("plan.yaml: layer_types.mlp.up.weight: no format of the chain")
    assert "int4: platform lacks int4" in never
    assert "N < M" in _error({"default": {"sparsity": "4:4"}})
    assert "unknown field" in _error({"default": {"weights": ["int8"]}})
    assert "no operator 'nope'" in _error({"operators": {"nope": {"weight": ["int8"]}}})
    assert "attention attn has no weight" in _error(
        {"operators": {"attn": {"weight": ["int8"]}}})
    assert "packed format" in _error({"default": {"activation": ["int4"]}},
                                     platform="whatif/tpu_v5e_int4")
    guard = _error({"default": {"weight": ["int4"], "guardrail": {"max_rel_error": 1e-6}}},
                   platform="whatif/tpu_v5e_int4")
    assert "guardrail: rel error" in guard and "> 1e-06" in guard


def test_user_tensors_are_read_without_pickle_and_shape_checked(tmp_path):
    rng = np.random.default_rng(3)
    np.save(tmp_path / "a.npy", rng.standard_normal((100, 4096)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((4096, 64)).astype(np.float32))
    np.save(tmp_path / "obj.npy", np.array([{"x": 1}], dtype=object))
    file = str(tmp_path / "plan.yaml")
    raw = {"operators": {"up": {"weight": ["int8"], "tensors": {"a": "a.npy"}}}}
    applied = apply_plan(_plan(raw, file), _gemm_workload(), _platform("tpu_v5e_like"),
                         file=file)
    assert applied.operators[0].tensors == "user tensors (64x1024x64)"
    bad = {"operators": {"up": {"weight": ["int8"], "tensors": {"b": "w.npy"}}}}
    message = _error(bad, file=file)
    assert "w.npy: operators.up.tensors.b: shape (4096, 64) does not fit up" in message
    pickled = {"operators": {"up": {"weight": ["int8"], "tensors": {"a": "obj.npy"}}}}
    assert "operators.up.tensors.a: cannot read as .npy" in _error(pickled, file=file)


def test_int8_weight_only_plan_halves_llama_decode_weight_bytes(tmp_path):
    plan = tmp_path / "int8.yaml"
    plan.write_text("name: int8_weights\ndefault: {weight: [int8]}\n")
    runs = {}
    for label, extra in (("bf16", []), ("int8", ["--precision", str(plan)])):
        out = tmp_path / f"{label}.json"
        done = subprocess.run(
            [sys.executable, "-m", "simulator.cli", "run", "--arch", "tpu_v5e_like",
             "--model", "llama_3_1_8b", "--phase", "decode", "--context", "2048",
             "--heuristic", "array_aligned", "--json", str(out), *extra],
            capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        runs[label] = (json.loads(out.read_text()), done.stdout)
    def weight_bytes(doc):
        return sum(op["per_instance_bytes"]["compulsory"]["b"] * op["runs"]
                   for op in doc["operators"] if op["kind"] == "gemm")
    assert 2 * weight_bytes(runs["int8"][0]) == weight_bytes(runs["bf16"][0])
    assert "precision" not in runs["bf16"][0]
    block = runs["int8"][0]["precision"]
    assert block["plan"] == "int8_weights"
    assert {op["formats"]["weight"] for op in block["operators"]} == {"int8"}
    assert "precision plan int8_weights: 5 operator(s) set, 0 fallback(s)" in \
        runs["int8"][1]


def test_act_dtype_is_the_hf_frontends_activation_dtype():
    parser = argparse.ArgumentParser()
    hf_command.add_arguments(parser)
    args = ["--phase", "decode", "--context", "128"]
    act = hf_command.llm_step(parser.parse_args([*args, "--act-dtype", "int8"]),
                              "llama_3_1_8b").workload()
    plain = hf_command.llm_step(parser.parse_args([*args, "--dtype", "int8"]),
                                "llama_3_1_8b").workload()
    assert act == plain
    assert {op.dtype for op in act.operators} == {"int8"}
