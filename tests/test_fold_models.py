"""The two fold models and several arrays (DESIGN.md section 3): the per-tile formulas
by hand, the busy split summing exactly, and the scalesim model with one array
reproducing the figures of model version 1 (before pipelined folds existed) exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from platforms import make_platform

from simulator.inputs.platform import Platform
from simulator.lowering import lower_compute
from simulator.mapping.plan import LOOP_ORDERS, Mapping, Tiling, TilingSpec, with_fusion
from simulator.simulate import Inputs, simulate
from simulator.model.dataflow import DATAFLOW_CODES, WS
from simulator.model.timing import PIPELINED, SCALESIM, array_cycles, array_split
from simulator.inputs.workload import Gemm, Workload

GOLDEN = Path(__file__).parent / "data" / "timing_model_v1.json"


@pytest.mark.parametrize("m, count, model, expected", [
    # ws on 8x8: Sr = k = 8, Sc = n = 16 (2 folds), T = m.
    (20, 1, SCALESIM, 2 * (20 + 2 * 8 + 8 - 2)),   # every fold fills: 84
    (20, 1, PIPELINED, 2 * 20 + 8 + 8 - 2),        # T >= R: skew once: 54
    (20, 2, SCALESIM, 20 + 22),                    # one round on two arrays
    (20, 2, PIPELINED, 20 + 14),
    (3, 1, PIPELINED, 2 * 8 + 14),                 # T < R: the shift-in paces: 30
    (3, 4, PIPELINED, 8 + 14),                     # 2 folds, 4 arrays: one round
])
def test_array_cycles_by_hand(m, count, model, expected):
    assert array_cycles(m, 16, 8, 8, 8, count, WS, model, False) == expected
    useful, padding, fill, load, skew = array_split(m, 16, 8, 8, 8, count, WS, model,
                                                    False)
    assert useful + padding + fill + load + skew == pytest.approx(expected)
    assert useful == pytest.approx(m * 16 * 8 / (64 * count))
    if model == PIPELINED:
        assert fill == 0 and skew == 14
        assert load == -(-2 // count) * max(0, 8 - m)
    else:
        assert load == skew == 0


@pytest.mark.parametrize("model", [SCALESIM, PIPELINED])
def test_a_continuing_fold_costs_t_in_both_models(model):
    assert array_cycles(5, 8, 8, 8, 8, 2, WS, model, True) == 5
    assert array_split(5, 8, 8, 8, 8, 2, WS, model, True)[2:] == (0, 0, 0)


@settings(max_examples=150, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40),
       fractions=st.tuples(*[st.floats(0.01, 1.0)] * 3),
       order=st.sampled_from(LOOP_ORDERS), dataflow=st.sampled_from(sorted(DATAFLOW_CODES)),
       count=st.integers(1, 5), model=st.sampled_from(["pipelined", "scalesim"]))
def test_busy_array_cycles_split_exactly(m, n, k, fractions, order, dataflow, count,
                                         model):
    platform = make_platform(buffers={"ifmap_bytes": 1 << 16, "weight_bytes": 1 << 16,
                                      "output_bytes": 1 << 16},
                             systolic_array={"count": count, "fold_model": model})
    tm, tn, tk = (max(1, int(size * f)) for size, f in zip((m, n, k), fractions))
    lowered = lower_compute(Gemm(name="g", layer_type="fc", kind="gemm", m=m, n=n, k=k),
                            Tiling(tm, tn, tk, order, dataflow, 1), platform)
    c = lowered.counters
    split = (c.useful_array_cycles + c.padding_array_cycles + c.fill_array_cycles
             + c.stationary_load_array_cycles + c.skew_array_cycles)
    assert split == pytest.approx(int(lowered.program.compute_cycles.sum()))
    assert c.useful_array_cycles == pytest.approx(m * n * k / (64 * count))
    if model == "pipelined":
        assert c.fill_array_cycles == 0
    else:
        assert c.stationary_load_array_cycles == c.skew_array_cycles == 0


def test_peak_and_mfu_count_every_array():
    one = make_platform()
    four = make_platform(systolic_array={"count": 4})
    assert four.pes == 4 * one.pes == 4 * 64
    assert four.peak_flops == pytest.approx(4 * one.peak_flops)


def _version_1_cases():
    return sorted(json.loads(GOLDEN.read_text()).items())


@pytest.mark.parametrize("case", _version_1_cases(), ids=lambda case: case[0])
def test_scalesim_model_with_one_array_reproduces_model_version_1(case):
    # Figures recorded by model version 1 (array_aligned heuristic, one array, every
    # fold filling): the scalesim fold model must give them to the cycle.
    _, recorded = case
    data = recorded["platform"]
    data["systolic_array"] = {**data["systolic_array"], "fold_model": "scalesim",
                              "count": 1}
    platform = Platform.model_validate(data)
    workload = Workload.model_validate(recorded["workload"])
    # Model version 1 ran every operator on its own: no fusion.
    mapping = with_fusion(Mapping(default=TilingSpec(heuristic="array_aligned")), "none")
    result = simulate(Inputs(platform, workload, mapping))
    assert len(result.operators) == len(recorded["operators"])
    for op in result.operators:
        expected = recorded["operators"][op.lowered.name]
        run = op.run.as_dict()
        assert run.pop("overhead_cycles") == 0
        assert run.pop("collective_cycles") == 0
        assert run == expected["run"], op.lowered.name
        c = op.lowered.counters
        assert (c.useful_array_cycles, c.padding_array_cycles, c.fill_array_cycles) == \
            pytest.approx((expected["useful"], expected["padding"], expected["fill"]))
        assert c.stationary_load_array_cycles == c.skew_array_cycles == 0


def test_scalesim_inputs_and_validation_force_scalesim_folds_on_one_array():
    from simulator.inputs.named_inputs import load_inputs
    data = Path(__file__).parent / "data" / "scalesim"
    imported = load_inputs(str(data / "scale.cfg"), str(data / "small_conv.csv"), None)
    validated = load_inputs("tpu_v5e_like", "gemm_4096", None, validate="scalesim")
    for platform in (imported.platform, validated.platform):
        array = platform.systolic_array
        assert (array.fold_model, array.count) == ("scalesim", 1)
