"""`accsim verify` of what `accsim compare --json` wrote: each platform's result is a
run result and is verified as one, from any directory, a difference or a changed input
named by its platform; a forged comparison of more results than verify reruns
unasked is refused before any rerun. (verify used to call the file 'not an accsim
result file (manifest is missing)'.)"""

from __future__ import annotations

import json

import pytest

from platforms import BASE
from simulator.cli import main
from simulator.verification.compared import MAX_VERIFY_COMPARED
from test_bad_inputs import WORKLOAD_FILE, dump
from timed_cli import cpu_seconds


@pytest.fixture
def compared(tmp_path, monkeypatch, capsys):
    """A comparison of two platforms (files beside it) written from tmp_path/made,
    and the folder it is verified from."""
    made = tmp_path / "made"
    made.mkdir()
    (made / "a.yaml").write_text(dump(BASE))
    (made / "b.yaml").write_text(dump({**BASE, "name": "b_wider", "offchip": {
        **BASE["offchip"], "bandwidth_gbps": 2 * BASE["offchip"]["bandwidth_gbps"]}}))
    (made / "w.yaml").write_text(WORKLOAD_FILE)
    monkeypatch.chdir(made)
    assert main(["compare", "--arch", "a.yaml", "--arch", "b.yaml", "--workload",
                 "w.yaml", "--json", "c.json"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    return made / "c.json"


def verified(path, capsys, *flags) -> tuple[int, str]:
    code = main(["verify", str(path), *flags])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_comparison_verifies_from_another_directory(compared, capsys):
    code, printed = verified(compared, capsys)
    assert code == 0, printed
    assert "verified (inputs unchanged, rerun identical)" in printed


def test_an_edited_figure_is_named_by_its_platform(compared, capsys):
    document = json.loads(compared.read_text())
    operator = document["platforms"][1]["result"]["operators"][0]
    operator["totals"]["cycles"] += 1
    compared.write_text(json.dumps(document))
    code, printed = verified(compared, capsys)
    assert code == 1
    assert f"differs on rerun: platforms[1](b_wider).result.operators[0]" \
           f"({operator['name']}).totals.cycles" in printed
    assert "platforms[0]" not in printed


def test_a_changed_platform_file_is_named_by_its_platform(compared, capsys):
    first = compared.parent / "a.yaml"
    first.write_text(first.read_text() + "# edited\n")
    code, printed = verified(compared, capsys)
    assert code == 1
    changes = [line for line in printed.splitlines() if line.startswith("changed input")]
    assert len(changes) == 1 and changes[0].startswith("changed input: platforms[0](")


def test_a_result_that_is_no_run_result_is_named_with_its_place(compared, capsys):
    document = json.loads(compared.read_text())
    del document["platforms"][1]["result"]["manifest"]
    compared.write_text(json.dumps(document))
    code, printed = verified(compared, capsys)
    assert code == 1
    assert "platforms[1](b_wider).result.manifest" in printed
    assert "Traceback" not in printed


def test_a_forged_comparison_of_many_results_is_refused_before_any_rerun(compared,
                                                                          capsys):
    document = json.loads(compared.read_text())
    document["platforms"] *= (MAX_VERIFY_COMPARED // 2) + 1
    compared.write_text(json.dumps(document))
    (code, printed), spent = cpu_seconds(lambda: verified(compared, capsys))
    assert code == 1 and "--allow-long" in printed and "platforms" in printed
    assert spent < 5
