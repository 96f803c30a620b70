"""The Python API (simulator.api, issue 29): its docstring examples run, and what it
saves is byte for byte what the CLI writes for run, compare and serve."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

import simulator.api as accsim
from simulator.cli import main
from simulator.errors import AccsimError


def test_the_api_docstring_examples_run():
    outcome = doctest.testmod(accsim, optionflags=doctest.ELLIPSIS)
    assert outcome.attempted >= 8 and outcome.failed == 0


def test_importing_simulator_loads_no_numba():
    probe = "import sys, simulator; print('numba' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_simulate_saves_what_run_json_writes(tmp_path):
    cli, api = tmp_path / "cli.json", tmp_path / "api.json"
    assert main(["run", "--arch", "edge_32x32", "--workload", "gemm_4096",
                 "--json", str(cli)]) == 0
    accsim.simulate("edge_32x32", "gemm_4096").save_json(api)
    assert api.read_bytes() == cli.read_bytes()


def test_an_hf_step_saves_what_run_model_writes(tmp_path):
    cli, api = tmp_path / "cli.json", tmp_path / "api.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "gpt2", "--phase", "decode",
                 "--batch", "4", "--context", "128", "--json", str(cli)]) == 0
    step = accsim.from_hf("gpt2", phase="decode", batch=4, context=128)
    accsim.simulate("tpu_v5e_like", step).save_json(api)
    assert api.read_bytes() == cli.read_bytes()


def test_compare_saves_what_compare_json_writes(tmp_path):
    cli, api = tmp_path / "cli.json", tmp_path / "api.json"
    csv = tmp_path / "cli.csv"
    assert main(["compare", "--arch", "tpu_v1", "--arch", "edge_32x32", "--workload",
                 "gemm_4096", "--json", str(cli), "--csv", str(csv)]) == 0
    compared = accsim.compare(["tpu_v1", "edge_32x32"], "gemm_4096")
    compared.save_json(api)
    assert api.read_bytes() == cli.read_bytes()
    lines = csv.read_text().splitlines()
    assert lines[0].startswith("platform,workload,cycles,time_s,mfu,")
    assert [line.split(",")[0] for line in lines[1:]] == ["tpu_v1", "edge_32x32"]
    rows = compared.rows()
    assert rows[0]["x_latency"] == 1.0 and 0 < rows[1]["mfu"] <= 1


def test_serve_saves_what_serve_json_writes(tmp_path):
    cli, api = tmp_path / "cli.json", tmp_path / "api.json"
    assert main(["serve", "--workload", "gemm_4096", "--rate", "50", "--requests", "30",
                 "--json", str(cli)]) == 0
    accsim.serve(workload="gemm_4096", rate=50, requests=30).save_json(api)
    assert api.read_bytes() == cli.read_bytes()


def test_results_are_tables_for_pandas_and_jupyter():
    pandas = pytest.importorskip("pandas")
    result = accsim.simulate("edge_32x32", "gemm_4096")
    frame = result.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame["name"]) == [op.lowered.name for op in result.run.operators]
    assert frame["mfu"].between(0, 1).all()
    html = result._repr_html_()
    assert html.startswith("<table>") and "edge_32x32" in html


def test_bad_input_is_one_accsim_error():
    with pytest.raises(AccsimError, match="no shipped platform"):
        accsim.simulate("no_such_platform")
    with pytest.raises(AccsimError, match="--context"):
        accsim.from_hf("gpt2", phase="decode")
    with pytest.raises(AccsimError, match="rate"):
        accsim.serve(workload="gemm_4096", rate=-1)


def test_compare_takes_onnx_like_run(tmp_path, capsys):
    pytest.importorskip("onnx")
    import onnx
    sys.path.insert(0, str(Path(__file__).parent))
    models = __import__("onnx_models")
    path = tmp_path / "mlp.onnx"
    onnx.save(models.mlp(), path)
    assert main(["compare", "--arch", "tpu_v1", "--arch", "edge_32x32", "--onnx",
                 str(path)]) == 0
    shown = capsys.readouterr().out
    assert "tpu_v1" in shown and "edge_32x32" in shown


def test_sweep_runs_a_spec_into_a_store_and_resumes(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    spec = __import__("test_sweep_run").spec_file(tmp_path)
    store = tmp_path / "store.sqlite"
    first = accsim.sweep(spec, store)
    statuses = [row["status"] for row in first.rows]
    assert len(statuses) == 36 and statuses.count("failed") == 18  # no output tile fits
    again = accsim.sweep(spec, store)  # resumed: nothing recomputed, the same rows
    assert again.rows == first.rows
    assert all(0 < row["mfu"] <= 1 for row in first.rows if row["status"] == "ok")


def test_sweep_report_prints_mfu_as_percent_like_run(tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).parent))
    spec = __import__("test_sweep_run").spec_file(tmp_path)
    store = tmp_path / "store.sqlite"
    rows = accsim.sweep(spec, store).rows
    capsys.readouterr()
    assert main(["sweep", "report", str(store), "--pareto", "mfu,time_s"]) == 0
    shown = capsys.readouterr().out
    assert "MFU%" in shown
    best = max(row["mfu"] for row in rows if row["status"] == "ok")
    assert f"{100 * best:.1f}" in shown  # the stored fraction, shown as percent
