"""accsim calibrate simulates each distinct measured operator once per parameter point
(simulator.calibrate.distinct), each row alone (fusion none): every row's simulated
time equals the row-by-row reference (the whole measured workload simulated as
measured), the fit, its cross-validation and the written platform equal those of the
row-by-row path, and rows the fusion planner would join (a GEMM and the elementwise op
after it) are each fitted with a time of their own (before: a KeyError traceback).
Whole-model cases that run the same parts share their simulations, each case's seconds
as simulated alone."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator.calibrate import operator_fit
from simulator.calibrate.calibrate_command import calibrated_yaml
from simulator.calibrate.distinct import Distinct
from simulator.calibrate.measured import read_measured
from simulator.calibrate.measured_runs import PreparedRun, read_runs
from simulator.calibrate.operator_fit import Model, calibrate
from simulator.calibrate.sensitivity import assumed_ranges
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.platform import Platform
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import validate_model
from simulator.mapping.plan import Mapping
from simulator.calibrate.sensitivity import with_values
from simulator.calibrate.whole import Cases
from simulator.simulate import simulate
from simulator.inputs.workload import Workload

HEAD = "operator,shape,dtype,measured_s\n"
GEMM, SOFTMAX = "gemm,m=8 n=1024 k=512,bf16", "softmax,rows=256 cols=512,bf16"
WIDE = "gemm,m=8 n=2048 k=512,bf16"
# Three shapes, two of one kind, each repeated with its own measured time (as repeated
# timings are).
REPEATED = [f"{shape},{seconds * (1 + 0.01 * i)}" for i in range(6)
            for shape, seconds in [((GEMM, 3.1e-6), (SOFTMAX, 1.3e-6),
                                    (WIDE, 5.9e-6))[i % 3]]]
# An add right after a GEMM would be its epilogue under fusion auto (then the add had no
# time of its own); the softmax and the second GEMM repeat earlier rows.
JOINING = [f"{GEMM},1.4e-05", "elementwise,elements=8192 op=add,bf16,1.0e-06",
           f"{SOFTMAX},2.3e-06", f"{GEMM},1.41e-05", f"{SOFTMAX},2.4e-06",
           "elementwise,elements=8192 op=add,bf16,1.1e-06", f"{GEMM},1.45e-05"]
FIELD = "offchip.efficiency"


def _measured(tmp_path, rows: list[str], name: str):
    path = tmp_path / name
    path.write_text(HEAD + "\n".join(rows) + "\n")
    return read_measured(str(path))


def _platform() -> Platform:
    return load_inputs("tpu_v5e_like", None, None).platform


def _row_by_row(platform: Platform, measured, values: dict) -> np.ndarray:
    """Seconds of every row with the whole measured workload simulated as measured."""
    variant = validate_model(with_values(platform, values), Platform, file="variant")
    workload = Workload(name="measured", operators=measured.operators)
    result = simulate(Inputs(variant, workload, Mapping(fusion="none")), engine="fast")
    seconds = {op.lowered.name: op.totals.cycles / variant.clock_hz
               for op in result.operators}
    return np.array([seconds[op.name] for op in measured.operators])


@pytest.mark.parametrize("rows, distinct", [(REPEATED, 3), (JOINING, 3)])
def test_each_row_as_row_by_row(tmp_path, rows, distinct):
    platform = _platform()
    measured = _measured(tmp_path, rows, "m.csv")
    fields = {FIELD: assumed_ranges(platform)[FIELD]}
    model = Model(platform, measured, fields, "fast", None, "m.csv")
    for value in (0.9, 0.8):
        assert np.array_equal(model.seconds({FIELD: value}),
                              _row_by_row(platform, measured, {FIELD: value}))
    assert len(model.distinct.workload.operators) == distinct


def test_rows_fusion_would_join_are_fitted_each_alone(tmp_path):
    """Under fusion auto the add after the first GEMM is its epilogue and has no time of
    its own (calibrate raised KeyError on it); simulated alone, it is a row like any,
    and the fit runs."""
    platform = _platform()
    measured = _measured(tmp_path, JOINING, "m.csv")
    add = measured.operators[1].name
    auto = simulate(Inputs(platform, Workload(name="measured",
                                              operators=measured.operators), Mapping()),
                    engine="fast")
    assert add not in {op.lowered.name for op in auto.operators}
    fields = {FIELD: assumed_ranges(platform)[FIELD]}
    model = Model(platform, measured, fields, "fast", None, "m.csv")
    assert np.all(model.seconds({}) > 0)
    fit = calibrate(platform, measured, fields, folds=2, file="m.csv")
    assert set(fit.fitted) == {FIELD} and np.isfinite(fit.train_after)


def test_fit_as_row_by_row(tmp_path, monkeypatch):
    """The fit, its folds and the written file, with repeats simulated once and with
    every row simulated (each distinct operator set aside), are the same; each point
    simulates the three distinct operators only."""
    platform = _platform()
    measured = _measured(tmp_path, REPEATED, "m.csv")
    fields = {FIELD: assumed_ranges(platform)[FIELD]}
    sizes = []
    counted = operator_fit.simulate

    def counting(inputs, **options):
        sizes.append(len(inputs.workload.operators))
        return counted(inputs, **options)

    monkeypatch.setattr(operator_fit, "simulate", counting)
    deduplicated = calibrate(platform, measured, fields, folds=2, file="m.csv")
    assert sizes and set(sizes) == {3}
    monkeypatch.setattr(operator_fit, "distinct_operators", lambda workload:
                        Distinct(workload, np.arange(len(workload.operators))))
    sizes.clear()
    reference = calibrate(platform, measured, fields, folds=2, file="m.csv")
    assert set(sizes) == {len(REPEATED)}
    assert deduplicated == reference
    assert calibrated_yaml(platform, deduplicated, "m.csv", measured.sha256, "m.csv") \
        == calibrated_yaml(platform, reference, "m.csv", measured.sha256, "m.csv")


def test_whole_model_cases_of_the_same_runs_share_them(tmp_path, monkeypatch):
    """Two cases of one run (published twice) and a case of that run twice over: each
    distinct list of parts is simulated once per platform, and every case's seconds
    equal those of the cases simulated one by one."""
    gemm = {"name": "g", "layer_type": "g", "kind": "gemm", "m": 128, "n": 256, "k": 256}
    (tmp_path / "w.yaml").write_text(json.dumps({"name": "w", "operators": [gemm]}))
    run = "--arch tpu_v5e_like --workload w.yaml"
    rows = [{"name": "a", "run": run, "value": 0.01, "unit": "ms", "source": "s"},
            {"name": "b", "run": run, "value": 0.012, "unit": "ms", "source": "t"},
            {"name": "c", "runs": [{"run": run, "times": 2}], "value": 0.02,
             "unit": "ms", "source": "s"}]
    (tmp_path / "m.yaml").write_text(json.dumps({"measurements": rows}))
    runs = read_runs(str(tmp_path / "m.yaml"))
    platform = _platform()
    calls = []
    simulated = PreparedRun.seconds

    def counting(part, *args, **options):
        calls.append(part.times)
        return simulated(part, *args, **options)

    monkeypatch.setattr(PreparedRun, "seconds", counting)
    shared = Cases(platform, runs, [0, 1, 2], "fast", None, "m.yaml")
    alone = Cases(platform, runs, [0, 1, 2], "fast", None, "m.yaml")
    alone.same_as = [0, 1, 2]
    for values in ({}, {FIELD: 0.8}):
        calls.clear()
        seconds = shared.seconds(values)
        assert calls == [1, 2]
        assert np.array_equal(seconds, alone.seconds(values))
        assert seconds[0] == seconds[1] != seconds[2]
