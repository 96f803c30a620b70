"""accsim calibrate (DESIGN.md section 16): operator times synthesised from a platform
whose assumed values differ from the shipped ones (3% noise, fixed seed) are fitted back
within 5% of the truth, the held-back operators' error falls below 5%, a field no
measured operator exercises is reported unidentifiable and left unchanged, and the
written platform marks the fitted values with the CSV's sha256."""

from __future__ import annotations

import csv
import hashlib
import json

import numpy as np
import pytest

from simulator.calibrate.sensitivity import with_values
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.platform import Platform
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import validate_model
from simulator.mapping.plan import Mapping
from simulator.simulate import simulate
from simulator.inputs.workload import Workload

TRUTH = {"offchip.efficiency": 0.82, "vector_unit.cycles_per_element.softmax": 3}
UNEXERCISED = "vector_unit.cycles_per_element.gelu"
# (operator, shape): weight-streaming GEMMs (bandwidth) and softmaxes (vector unit).
ROWS = [("gemm", f"m=8 n={n} k=2048") for n in (1024, 2048, 4096)] \
    + [("softmax", f"rows={r} cols=512") for r in (256, 512, 1024)]


def _synthesise(tmp_path) -> str:
    shipped = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    truth = validate_model(with_values(shipped, TRUTH), Platform, file="truth")
    operators = [{"name": f"op{i}", "layer_type": kind, "kind": kind,
                  **{k: int(v) for k, v in (p.split("=") for p in shape.split())}}
                 for i, (kind, shape) in enumerate(ROWS)]
    result = simulate(Inputs(truth, Workload(name="w", operators=operators), Mapping()),
                      engine="fast")
    seconds = np.array([op.totals.cycles for op in result.operators]) \
        / (truth.clock_ghz * 1e9)
    noisy = seconds * (1 + 0.03 * np.random.default_rng(7).standard_normal(len(seconds)))
    path = tmp_path / "measured.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["operator", "shape", "dtype", "measured_s"])
        for (kind, shape), value in zip(ROWS, noisy):
            writer.writerow([kind, shape, "bf16", f"{value:.9g}"])
    return str(path)


def test_calibration_recovers_known_truth(tmp_path, capsys):
    measured = _synthesise(tmp_path)
    out, report = tmp_path / "v5e.calibrated.yaml", tmp_path / "fit.json"
    assert main(["calibrate", "--arch", "tpu_v5e_like", "--measured", measured,
                 "--fit", ",".join([*TRUTH, UNEXERCISED]), "--folds", "3",
                 "-o", str(out), "--json", str(report)]) == 0
    text = capsys.readouterr().out
    assert "unidentifiable" in text and UNEXERCISED in text
    data = json.loads(report.read_text())
    assert data["unidentifiable"] == [UNEXERCISED]
    for name, true in TRUTH.items():
        assert abs(data["fitted"][name] - true) <= 0.05 * true, name
    assert data["heldout_error_after"] < 0.05 < data["heldout_error_before"]
    calibrated = load_inputs(str(out), "gemm_4096", None).platform
    values = calibrated.numeric_fields()
    sha = hashlib.sha256(open(measured, "rb").read()).hexdigest()
    for name in TRUTH:
        entry = calibrated.provenance[name]
        assert (entry.kind, entry.source, entry.sha256) == ("fitted", measured, sha)
        assert values[name] == data["fitted"][name]
    shipped = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    assert values[UNEXERCISED] == shipped.numeric_fields()[UNEXERCISED]
    assert calibrated.provenance[UNEXERCISED].kind == "assumed"


@pytest.mark.parametrize("content, fragment", [
    ("operator,shape,measured_s\ngemm,m=8 n=8 k=8,1e-6\n", "missing columns ['dtype']"),
    ("operator,shape,dtype,measured_s\ngemm,m=8 n=8,bf16,1e-6\ngemm,m=8 n=8 k=8,,1\n",
     "line 2"),
    ("operator,shape,dtype,measured_s\ngemm,m=8 n=8 k=8,bf16,soon\n"
     "gemm,m=8 n=8 k=9,,1\n", "is no number"),
])
def test_bad_measurements_are_one_clear_line(tmp_path, capsys, content, fragment):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["calibrate", "--arch", "tpu_v5e_like", "--measured", str(path),
                 "-o", str(tmp_path / "out.yaml")]) == 1
    err = capsys.readouterr().err
    assert fragment in err and "bad.csv" in err and "Traceback" not in err
