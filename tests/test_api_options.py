"""The Python API takes what `accsim run` takes (issue 42): a multi-chip plan (chips,
tp, pp, ep, overlap) and a precision plan, with the same capacity refusal and
override; printing a result or a comparison shows a summary, not the document; a
comparison's table never cuts a number at any width."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

import simulator.api as accsim
from simulator.cli import main
from simulator.errors import AccsimError


@pytest.fixture(scope="module")
def decode():
    return accsim.from_hf("llama_3_1_70b", phase="decode", batch=1, context=128)


def test_a_model_too_large_for_one_chip_is_refused_as_run_refuses_it(decode, capsys):
    with pytest.raises(AccsimError) as caught:
        accsim.simulate("tpu_v5e_like", decode)
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_70b", "--phase",
                 "decode", "--context", "128"]) == 1
    assert caught.value.message() in capsys.readouterr().err


def test_a_tensor_parallel_plan_runs_as_accsim_run_does(decode, tmp_path, capsys):
    """T x P = 2 x 5 fits the 70B model; the figures equal `accsim run`'s."""
    result = accsim.simulate("tpu_v5e_like", decode, chips=10, tp=2, pp=5)
    out = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_70b", "--phase",
                 "decode", "--context", "128", "--chips", "10", "--tp", "2", "--pp", "5",
                 "--json", str(out)]) == 0
    recorded = json.loads(out.read_text())
    assert result.run.total.cycles == recorded["workload"]["cycles"]
    assert result.capacity.fits is True
    assert recorded["system"]["tp"] == 2 and recorded["system"]["pp"] == 5


def test_ignore_capacity_overrides_as_run_does(decode):
    result = accsim.simulate("tpu_v5e_like", decode, ignore_capacity=True)
    assert result.capacity.record()["fits"] is False


def test_bad_plan_options_are_refused_naming_the_option():
    """The API names the argument where the command line names its flag (issue 47)."""
    with pytest.raises(AccsimError, match="^tp: "):
        accsim.simulate("tpu_v5e_like", "gemm_4096", tp=0)
    with pytest.raises(AccsimError, match="^ep: "):
        accsim.simulate("tpu_v5e_like", "gemm_4096", ep=2)


def test_printing_a_result_or_a_comparison_is_a_summary():
    result = accsim.simulate("edge_32x32", "gemm_4096")
    shown = repr(result)
    assert shown.startswith("Result(platform='edge_32x32', workload='gemm_4096', cycles=")
    assert "\n" not in shown and len(shown) < 400
    both = accsim.compare(["tpu_v1", "edge_32x32"], "gemm_4096")
    lines = repr(both).splitlines()
    assert lines[0] == "Comparison(workload='gemm_4096', 2 platforms)"
    assert [line.split("(")[0].strip() for line in lines[1:]] == ["tpu_v1", "edge_32x32"]
    assert len(repr(both)) < 1000


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_a_comparison_table_never_cuts_a_number(width):
    both = accsim.compare(["tpu_v1", "edge_32x32"], "gemm_4096")
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False).print(both.table())
    text = out.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= max(width, 40)
    for row in both.rows():  # every figure appears whole
        assert f"{row['time_s'] * 1e3:,.3f}" in text
        assert f"{row['energy_j'] * 1e3:,.3f}" in text
    assert re.search(r"bottleneck", text)
