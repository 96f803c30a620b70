"""The Python API writes what the CLI writes, byte for byte (issue 29): `accsim run`,
`compare` and `serve` with `--json`, run as the installed command in a subprocess, against
simulator.api's save_json for the same inputs (a shipped workload, a workload file, an
LLM from `--model`, and serving); and the API's results as DataFrames and Jupyter
tables, with one clear error where pandas is missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import simulator.api as accsim
from simulator.errors import AccsimError

ROOT = Path(__file__).resolve().parent.parent


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`accsim ARGS` as a user runs it, in `folder`, from the same package this process
    imported (tests/conftest.py puts it first on PYTHONPATH: a checkout on sys.path and
    an installed copy differ in git_commit)."""
    done = subprocess.run([sys.executable, "-m", "simulator.cli", *args], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working folder both sides run in (recorded paths are relative to the JSON
    file), with a private cache for serving costs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "out").mkdir()
    return tmp_path


def same_bytes(folder: Path, name: str) -> None:
    api, made = folder / "out" / f"api_{name}.json", folder / "out" / f"cli_{name}.json"
    assert api.read_bytes() == made.read_bytes()
    assert json.loads(api.read_text())  # a document, not an empty file


def test_run_of_the_default_shipped_workload(folder):
    cli(folder, "run", "--json", "out/cli_run.json")
    accsim.simulate().save_json("out/api_run.json")
    same_bytes(folder, "run")


def test_run_of_a_workload_file_with_a_heuristic(folder):
    shutil.copy(ROOT / "workloads" / "bert_base_s128.yaml", folder / "bert.yaml")
    cli(folder, "run", "--arch", "tpu_v5e_like", "--workload", "bert.yaml",
        "--heuristic", "min_offchip", "--json", "out/cli_file.json")
    accsim.simulate("tpu_v5e_like", "bert.yaml", heuristic="min_offchip").save_json(
        "out/api_file.json")
    same_bytes(folder, "file")
    recorded = json.loads((folder / "out" / "api_file.json").read_text())
    assert recorded["manifest"]["inputs"]["workload"]["path"] == "../bert.yaml"


def test_run_of_an_llm_prefill_from_model(folder):
    cli(folder, "run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--phase",
        "prefill", "--seq", "256", "--batch", "2", "--json", "out/cli_llm.json")
    step = accsim.from_hf("llama_3_1_8b", phase="prefill", seq=256, batch=2)
    accsim.simulate("tpu_v5e_like", step).save_json("out/api_llm.json")
    same_bytes(folder, "llm")
    assert "llm" in json.loads((folder / "out" / "api_llm.json").read_text())


def test_compare_of_an_llm_decode_on_two_platforms(folder):
    cli(folder, "compare", "--arch", "tpu_v1", "--arch", "tpu_v5e_like", "--model", "gpt2",
        "--phase", "decode", "--context", "256", "--json", "out/cli_cmp.json")
    step = accsim.from_hf("gpt2", phase="decode", context=256)
    accsim.compare(["tpu_v1", "tpu_v5e_like"], step).save_json("out/api_cmp.json")
    same_bytes(folder, "cmp")


def test_compare_labels_platforms_whose_names_clash_as_the_cli_does(folder):
    shutil.copy(ROOT / "arch_configs" / "edge_32x32.yaml", folder / "edge_copy.yaml")
    cli(folder, "compare", "--arch", "edge_32x32", "--arch", "edge_copy.yaml",
        "--workload", "gemm_4096", "--json", "out/cli_clash.json")
    compared = accsim.compare(["edge_32x32", "edge_copy.yaml"], "gemm_4096")
    compared.save_json("out/api_clash.json")
    same_bytes(folder, "clash")
    assert [row["platform"] for row in compared.rows()] == [
        "edge_32x32 (edge_32x32)", "edge_32x32 (edge_copy)"]


def test_serve_of_a_plain_workload(folder):
    cli(folder, "serve", "--arch", "tpu_v1", "--workload", "resnet50_b1", "--rate", "300",
        "--requests", "40", "--max-batch", "4", "--sla", "latency_p99_ms=5",
        "--json", "out/cli_serve.json")
    accsim.serve(arch="tpu_v1", workload="resnet50_b1", rate=300, requests=40,
                 max_batch=4, sla={"latency_p99_ms": 5}).save_json("out/api_serve.json")
    same_bytes(folder, "serve")


def test_serve_of_an_llm(folder):
    cli(folder, "serve", "--arch", "tpu_v5e_like", "--model", "gpt2", "--rate", "20",
        "--requests", "12", "--prompt-tokens", "64", "--output-tokens", "8",
        "--json", "out/cli_llm_serve.json")
    accsim.serve(arch="tpu_v5e_like", model="gpt2", rate=20, requests=12,
                 prompt_tokens=64, output_tokens=8).save_json("out/api_llm_serve.json")
    same_bytes(folder, "llm_serve")
    assert json.loads((folder / "out" / "api_llm_serve.json").read_text())[
        "completed"] == 12


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """One of each result type, small."""
    spec = tmp_path_factory.mktemp("sweep") / "spec.yaml"
    spec.write_text("name: tiny\nplatform: edge_32x32\nworkloads: [gemm_4096]\n"
                    "axes:\n  offchip.bandwidth_gbps: [10.0, 20.0]\n"
                    "sampling: {method: grid}\nobjectives: {time_s: min}\n")
    return {"result": accsim.simulate("edge_32x32", "gemm_4096"),
            "comparison": accsim.compare(["tpu_v1", "edge_32x32"], "gemm_4096"),
            "serve": accsim.serve(workload="gemm_4096", rate=50, requests=10),
            "sweep": accsim.sweep(spec, spec.with_suffix(".sqlite"))}


ROWS = {"result": 1, "comparison": 2, "serve": 1, "sweep": 2}  # table rows in Jupyter
FRAME_ROWS = {"result": 1, "comparison": 2, "serve": 1, "sweep": 2}  # DataFrame rows


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_every_result_shows_as_an_html_table_in_jupyter(results, kind):
    shown = results[kind]._repr_html_()
    assert shown.startswith("<table>") and shown.endswith("</table>")
    assert shown.count("<tr>") == 1 + ROWS[kind]  # the header row, then one per row
    assert "<script" not in shown


@pytest.mark.parametrize("kind", sorted(FRAME_ROWS))
def test_every_result_converts_to_a_dataframe(results, kind):
    pandas = pytest.importorskip("pandas")
    frame = results[kind].to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == FRAME_ROWS[kind]


def test_dataframes_carry_the_figures_as_fractions(results):
    pytest.importorskip("pandas")
    compared = results["comparison"].to_pandas()
    assert list(compared["platform"]) == ["tpu_v1", "edge_32x32"]
    assert compared["mfu"].between(0, 1).all() and compared["x_latency"][0] == 1.0
    assert list(results["sweep"].to_pandas()["status"]) == ["ok", "ok"]


def test_an_html_table_escapes_what_it_shows(results):
    result = results["result"]
    shown = accsim.Comparison([result], ["<b>edge</b>"])._repr_html_()
    assert "&lt;b&gt;edge&lt;/b&gt;" in shown and "<b>" not in shown


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_to_pandas_without_pandas_is_one_clear_error(results, kind, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now fails
    with pytest.raises(AccsimError, match=r"pip install 'accsim\[pandas\]'"):
        results[kind].to_pandas()
