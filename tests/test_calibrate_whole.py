"""accsim calibrate on measured whole-model runs (DESIGN.md section 19): times of three
small workloads simulated on tpu_v5e_like with a planted per-operator overhead (1,200
cycles against the 500 it assumes) are fitted back to the planted value; every case's
leave-one-out error is reported (and is ~0 where the truth is reachable); the fitted
platform is a new file over the base whose only values are the fitted ones, marked
fitted with the measurement file's sha256; a field no case depends on is reported
unidentifiable; bad measurement files are one clear error."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.inputs.platform_file import load_platform
from simulator.inputs.named_inputs import load_inputs
from simulator.simulate import simulate

PLANTED = 1200
WORKLOADS = {
    "one_gemm": [{"name": "g", "layer_type": "g", "kind": "gemm", "m": 256, "n": 512,
                  "k": 512}],
    "many_small": [{"name": "g", "layer_type": "g", "kind": "gemm", "m": 128, "n": 256,
                    "k": 256, "repeat": 6},
                   {"name": "r", "layer_type": "r", "kind": "elementwise",
                    "elements": 32768, "op": "relu", "repeat": 6}],
    "big_gemms": [{"name": "g", "layer_type": "g", "kind": "gemm", "m": 512, "n": 512,
                   "k": 1024, "repeat": 3}],
}


def _yaml(value) -> str:
    return json.dumps(value)  # JSON is YAML


def _measurements(tmp_path) -> str:
    (tmp_path / "planted.yaml").write_text(
        f"base: tpu_v5e_like\nname: planted\nruntime: {{op_overhead_cycles: {PLANTED}}}\n")
    rows = []
    for name, operators in WORKLOADS.items():
        (tmp_path / f"{name}.yaml").write_text(_yaml({"name": name,
                                                      "operators": operators}))
        inputs = load_inputs(str(tmp_path / "planted.yaml"), str(tmp_path / f"{name}.yaml"),
                             None)
        seconds = inputs.platform.seconds(simulate(inputs, engine="fast").total.cycles)
        rows.append({"name": name, "run": f"--arch tpu_v5e_like --workload {name}.yaml",
                     "value": seconds * 1e3, "unit": "ms",
                     "source": f"planted: runtime.op_overhead_cycles {PLANTED}"})
    path = tmp_path / "measurements.yaml"
    path.write_text(_yaml({"measurements": rows}))
    return str(path)


def test_whole_model_calibration_recovers_a_planted_overhead(tmp_path, capsys):
    measured = _measurements(tmp_path)
    out, report = tmp_path / "fitted" / "v5e.yaml", tmp_path / "fit.json"
    out.parent.mkdir()
    assert main(["calibrate", "--arch", "tpu_v5e_like", "--measured", measured,
                 "--fit", "runtime.op_overhead_cycles,runtime.invocation_overhead_us,"
                 "vector_unit.cycles_per_element.gelu",
                 "-o", str(out), "--json", str(report)]) == 0
    text = capsys.readouterr().out
    assert "left one out" in text and "unidentifiable" in text
    fit = json.loads(report.read_text())
    # op_overhead and invocation both add a fixed time; the per-operator counts of the
    # three cases (1, 12, 3 operators) tell them apart
    assert fit["fitted"]["runtime.op_overhead_cycles"] == pytest.approx(PLANTED, abs=2)
    assert fit["fitted"]["runtime.invocation_overhead_us"] == pytest.approx(0, abs=0.01)
    assert fit["unidentifiable"] == ["vector_unit.cycles_per_element.gelu"]
    assert [case["name"] for case in fit["cases"]] == list(WORKLOADS)
    for case in fit["cases"]:
        assert case["error_before"] < -0.05       # 500 cycles per operator: too fast
        # fitted to the other two cases: two fields from two cases, so the overhead
        # per operator and per call trade off a little
        assert abs(case["error_heldout"]) < 0.01
        assert abs(case["error_fitted"]) < 1e-3
    assert fit["median_error"]["before"] > 0.05
    # the fitted platform: a new file over the base, only the fitted values, fitted
    # provenance citing the measurement file by its sha256
    written = out.read_text()
    assert "base: tpu_v5e_like" in written
    sha = hashlib.sha256(open(measured, "rb").read()).hexdigest()
    platform, _ = load_platform(out)
    base, _ = load_platform(load_inputs("tpu_v5e_like", None, None).platform_source.path)
    entry = platform.provenance["runtime.op_overhead_cycles"]
    assert (entry.kind, entry.sha256, entry.source) == \
        ("fitted", sha, "../measurements.yaml")
    assert platform.runtime.op_overhead_cycles == PLANTED
    assert platform.offchip == base.offchip and platform.systolic_array == \
        base.systolic_array
    # and it runs: the fitted file gives the measured time
    assert main(["run", "--arch", str(out), "--workload",
                 str(tmp_path / "one_gemm.yaml")]) == 0


@pytest.mark.parametrize("measurement, fragment", [
    ({"unit": "minutes"}, "unit 'minutes' is none of"),
    ({"unit": "tokens/s"}, "needs `items`"),
    ({"value": -1.0}, "value"),
    ({"run": "--arch tpu_v5e_like --bogus 3"}, "not an `accsim run` command line"),
    ({"run": "--workload gemm_4096"}, "each run names its platform with --arch"),
    ({"run": "--arch nosuch.yaml --workload gemm_4096"}, "no such platform file"),
    ({"run": "--arch tpu_v5e_like --json x.json"}, "--json is no part of a measured run"),
    # times that would overflow the simulated or the measured time to infinity
    ({"value": 1e308, "unit": "samples/s", "items": 16},
     "a measured time lies between 1e-09 s and 1e+09 s"),
    ({"value": 1e-300}, "the measured time is 1e-303 s"),
    ({"run": None, "runs": [{"run": "--arch tpu_v5e_like --workload gemm_4096",
                             "times": 1e308}]}, "runs[0].times"),
])
def test_bad_measurement_files_are_one_clear_error(tmp_path, capsys, measurement,
                                                   fragment):
    rows = [{"name": f"m{i}", "run": "--arch tpu_v5e_like --workload gemm_4096",
             "value": 1.0, "unit": "ms", "source": "test"} for i in range(2)]
    rows[1].update(measurement)
    path = tmp_path / "measurements.yaml"
    path.write_text(_yaml({"measurements": rows}))
    code = main(["calibrate", "--arch", "tpu_v5e_like", "--measured", str(path),
                 "--fit", "runtime.op_overhead_cycles", "-o", str(tmp_path / "o.yaml")])
    err = capsys.readouterr().err
    assert code == 1
    assert str(path) in err and fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.yaml").exists()


def test_shipped_fitted_platform_cites_the_measurements_it_was_fitted_to():
    """experiments/whole_models/fitted/: each file loads over its base, and every fitted
    value names measurements.yaml by its current sha256 (edit the measurements and
    the check fails until experiments/whole_models.py refits)."""
    folder = Path(__file__).resolve().parent.parent / "experiments" / "whole_models"
    sha = hashlib.sha256((folder / "measurements.yaml").read_bytes()).hexdigest()
    files = sorted((folder / "fitted").glob("*.yaml"))
    assert files
    for path in files:
        platform, _ = load_platform(path)
        fitted = {name: entry for name, entry in platform.provenance.items()
                  if entry.kind == "fitted"}
        assert fitted
        assert {(entry.sha256, entry.source) for entry in fitted.values()} == \
            {(sha, "../measurements.yaml")}
        base, _ = load_platform(folder / f"{path.stem}.yaml")
        assert base.provenance[next(iter(fitted))].kind == "assumed"
        assert platform.offchip.bandwidth_gbps == base.offchip.bandwidth_gbps


def test_a_plan_shared_by_the_measured_runs_warns_once_per_workload(tmp_path, capsys):
    """A layer_types entry selecting no operator is named once per workload however
    many measured runs take the plan on it (it was named once per run)."""
    measured = Path(_measurements(tmp_path))
    (tmp_path / "plan.yaml").write_text(_yaml({"name": "p", "layer_types": {
        "g": {"depth": 2}, "gg": {"depth": 2}}}))
    document = json.loads(measured.read_text())
    for row in document["measurements"]:
        row["run"] += " --mapping plan.yaml"
    first = document["measurements"][0]
    document["measurements"] += [{**first, "name": f"{first['name']}_again_{n}"}
                                 for n in range(2)]  # the same run measured again
    measured.write_text(_yaml(document))
    assert main(["calibrate", "--arch", "tpu_v5e_like", "--measured", str(measured),
                 "--fit", "runtime.op_overhead_cycles",
                 "-o", str(tmp_path / "fitted.yaml")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if "warning" in line]
    assert len(warnings) == len(WORKLOADS), warnings
    assert all("layer_types.gg" in line for line in warnings)
    assert {line.split("in workload ")[1].split()[0] for line in warnings} == \
        {f"'{name}'" for name in WORKLOADS}
