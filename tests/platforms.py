"""Small synthetic platforms for unit tests, built from one dict with overrides.

The base platform uses SCALE-Sim's fold model, on which the hand-computed expectations
of the older tests are written; tests of the pipelined model ask for it."""

from __future__ import annotations

import copy

from simulator.inputs.platform import Platform

BASE = {
    "name": "test_8x8",
    "clock_ghz": 1.0,
    "systolic_array": {"rows": 8, "cols": 8, "dataflows": ["os", "ws", "is"],
                       "input_dtypes": ["int8"], "accumulator_dtype": "int32",
                       "output_dtype": "int8", "fold_model": "scalesim"},
    "buffers": {"ifmap_bytes": 4096, "weight_bytes": 4096, "output_bytes": 4096},
    "dma": {"setup_cycles": 2},
    "offchip": {"bandwidth_gbps": 16.0, "latency_cycles": 10},
    "vector_unit": {"lanes": 8, "cycles_per_element": {
        "add": 1, "mul": 1, "relu": 1, "gelu": 4, "silu": 4, "reduction": 1,
        "softmax": 2, "norm": 2, "pool": 1}},
    "energy": {"mac_pj": {"int8": 0.23}, "sram_read_pj_per_byte": 1.25,
               "sram_write_pj_per_byte": 1.25, "offchip_pj_per_byte": 160.0,
               "vector_op_pj": 0.5,
               "static_power": {"array_w": 0.1, "sram_w": 0.1, "offchip_w": 0.1,
                                "vector_w": 0.1, "other_w": 0.1}},
}


def _merge(base: dict, overrides: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def make_platform(**overrides) -> Platform:
    """The 8x8 test platform with nested fields replaced, e.g. buffers={"ifmap_bytes": 64}."""
    return Platform.model_validate(_merge(BASE, overrides))
