"""The array's output path and the per-call cost (DESIGN.md section 15): evacuation
cycles on the vector unit for output_path: vector, the invocation term once per run,
both absent (and unwritten) by default."""

from __future__ import annotations

import numpy as np
import pytest
from platforms import make_platform

from simulator.inputs.loader import locate
from simulator.inputs.platform_file import load_platform
from simulator.lowering.evacuation import evacuation_array
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.metrics.totals import add_totals, invocation_totals
from simulator.present.run_report import result_dict
from simulator.simulate import Inputs, simulate
from simulator.model.timing import evacuation_cycles
from simulator.inputs.workload import Gemm, Workload

GEMM = Gemm(name="g", layer_type="fc", kind="gemm", m=64, n=48, k=40)
PLAN = Mapping(operators={"g": TilingSpec(tm=16, tn=16, tk=8, dataflow="ws",
                                          loop_order="mnk")})
VECTOR = {"output_path": "vector", "evacuation": {"elements_per_cycle": 4,
                                                  "tile_cycles": 10}}


def run(platform, workload=None):
    return simulate(Inputs(platform, workload or Workload(name="w", operators=[GEMM]),
                           PLAN))


def test_vectorised_evacuation_equals_the_timing_formula():
    elements = np.array([1, 5, 64, 255, 256, 1000])
    transposed = np.array([0, 3, 64, 0, 17, 999])
    for rate in (1, 3, 128):
        expected = [evacuation_cycles(int(e), rate, 7, int(t))
                    for e, t in zip(elements, transposed)]
        assert evacuation_array(elements, transposed, rate, 7).tolist() == expected


def test_evacuation_is_charged_per_output_tile_and_slows_the_run():
    direct = run(make_platform())
    vector = run(make_platform(systolic_array=VECTOR))
    # 4 x 3 output tiles of 16 x 16, each ceil(256 / 4) + 10 cycles, once (k innermost)
    assert vector.operators[0].run.evacuation_cycles == 12 * (64 + 10)
    assert vector.total.cycles > direct.total.cycles
    assert direct.operators[0].run.evacuation_cycles == 0
    record = result_dict(vector)
    assert record["workload"]["evacuation_cycles"] == 12 * 74
    assert "evacuation_cycles" not in result_dict(direct)["workload"]
    assert "evacuation_cycles" not in result_dict(direct)["operators"][0]["per_run"]


def test_transpose_of_the_stationary_operand_adds_its_tile():
    plain = run(make_platform(systolic_array=VECTOR))
    transposed = run(make_platform(systolic_array={
        **VECTOR, "evacuation": {**VECTOR["evacuation"], "transpose_stationary": True}}))
    # ws: the last k step's 8 x 16 weight tile passes too, ceil(128 / 4) per output tile
    assert transposed.operators[0].run.evacuation_cycles == \
        plain.operators[0].run.evacuation_cycles + 12 * 32


@pytest.mark.parametrize("array, rule", [
    ({"output_path": "vector"}, "needs evacuation"),
    ({"evacuation": {"elements_per_cycle": 4, "tile_cycles": 0}}, "output_path is direct")])
def test_output_path_and_evacuation_go_together(array, rule):
    with pytest.raises(Exception, match=rule):
        make_platform(systolic_array=array)


def test_psum_whatif_platform_evacuates():
    platform = load_platform(locate("whatif/tpu_v5e_psum", "platform"))[0]
    assert platform.systolic_array.output_path == "vector"
    base = load_platform(locate("tpu_v5e_like", "platform"))[0]
    assert "output_path" not in base.model_dump(mode="json")["systolic_array"]


def test_invocation_is_charged_once_per_run():
    link = {"bandwidth_gbps": 16.0, "latency_us": 2.0}
    platform = make_platform(runtime={"invocation_overhead_us": 5.0, "host_link": link})
    base = run(make_platform())
    charged = run(platform)
    clock = platform.clock_ghz * 1e3   # cycles per us
    bytes_per_cycle = 16.0 / platform.clock_ghz
    in_bytes, out_bytes = 64 * 40 * 1, 64 * 48 * 1   # the test platform's int8
    expected = round(5.0 * clock) + sum(round(2.0 * clock) + -(-b // bytes_per_cycle)
                                        for b in (in_bytes, out_bytes))
    assert charged.invocation_cycles == int(expected)
    assert charged.total.cycles == base.total.cycles + charged.invocation_cycles
    assert charged.total.invocation_cycles == charged.invocation_cycles
    assert result_dict(charged)["workload"]["invocation_cycles"] == int(expected)
    assert "invocation_cycles" not in result_dict(base)["workload"]
    resident = Workload(name="w", operators=[GEMM], resident=True)
    assert run(platform, resident).invocation_cycles == round(5.0 * clock)


def test_a_runs_total_is_the_sum_over_its_operators_and_its_call():
    """total adds the call to the operators' (cached) total: the same left-to-right
    sums, so the same figures, as one sum over every operator and the call."""
    platform = make_platform(runtime={"invocation_overhead_us": 5.0, "host_link": {
        "bandwidth_gbps": 16.0, "latency_us": 2.0}})
    second = GEMM.model_copy(update={"name": "h", "m": 37, "dtype": "int8"})
    plan = PLAN.model_copy(update={"operators": {**PLAN.operators, "h": TilingSpec(
        tm=16, tn=16, tk=8, dataflow="os", loop_order="kmn")}})
    result = simulate(Inputs(platform, Workload(name="w", operators=[GEMM, second]), plan))
    assert result.invocation_cycles
    assert result.operators_total is result.operators_total
    assert result.total == add_totals([*(op.totals for op in result.operators),
                                       invocation_totals(result.invocation_cycles,
                                                         platform)])
    assert result.total.energy_pj > result.operators_total.energy_pj


def test_resident_is_not_written_when_false():
    assert "resident" not in Workload(name="w", operators=[GEMM]).model_dump()
