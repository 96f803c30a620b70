"""`accsim verify` of a review packet reviews its study again and compares: packet.json
with a verdict, a table cell or a finding edited (its pages rendered again from the
edit, as a careful forger would) does not verify, nor do pages edited alone, while the
packet as written verifies from the run cache and from nothing."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

import simulator
from simulator.cli import main
from simulator.review.packet import inline_svg, rendered

STUDY = """\
title: an MLP on two platforms, with a latency target
objective: check that verify reviews the study again
owners: [a tester]
scope:
  platforms: [tpu_v1, tpu_v5e_like]
  workloads: [tpu_v1_mlp_b200]
  serving: {rate_per_s: 100, curve_rates_per_s: [50], requests: 60}
baseline: tpu_v1
sla:
  latency_ms: {p99: 5}
risks:
  - {risk: none really, owner: a tester}
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    """A packet (with serving, so an SLA verdict), reviewed under an option that
    changes its figures (--fusion none), and the run cache its review filled."""
    folder = tmp_path_factory.mktemp("rebuild")
    (folder / "study.yaml").write_text(STUDY)
    out, cache = folder / "packet", folder / "cache"
    assert main(["review", str(folder / "study.yaml"), "--out", str(out),
                 "--cache", str(cache), "--fusion", "none"]) == 0
    return out, cache


def _forged(made: tuple[Path, Path], tmp_path: Path, edit) -> Path:
    """A copy of the packet beside its study with packet.json edited by `edit` and
    packet.md and index.html rendered again from the edit."""
    out, _ = made
    copy = out.parent / f"forged-{tmp_path.name}"
    shutil.copytree(out, copy)
    packet = json.loads((copy / "packet.json").read_text())
    edit(packet)
    (copy / "packet.json").write_text(json.dumps(packet, indent=1) + "\n")
    svgs = {fig["id"]: inline_svg((copy / fig["file"]).read_text())
            for section in packet["sections"] for fig in section["figures"]}
    for name, text in rendered(packet, svgs).items():
        (copy / name).write_text(text)
    return copy


def _verify(folder: Path, cache: Path, capsys) -> tuple[int, str]:
    code = main(["verify", str(folder / "packet.json"), "--cache", str(cache)])
    return code, capsys.readouterr().out


def test_the_packet_as_written_verifies_from_the_cache_and_from_nothing(made, capsys):
    out, cache = made
    assert _verify(out, cache, capsys)[0] == 0
    assert main(["verify", str(out / "packet.json"), "--no-cache"]) == 0


def test_the_forged_copy_alone_verifies_when_nothing_is_edited(made, tmp_path, capsys):
    # the check the tests below rely on: copying and rendering again change nothing
    assert _verify(_forged(made, tmp_path, lambda packet: None), made[1], capsys)[0] == 0


def _section(packet: dict, section_id: str) -> dict:
    return next(s for s in packet["sections"] if s["id"] == section_id)


def _flip(verdict: str) -> str:
    return {"pass": "fail", "fail": "pass"}.get(verdict, "pass")


def _halve_first_number(section: dict) -> None:
    for row in section["tables"][0]["rows"]:
        for index, cell in enumerate(row):
            if isinstance(cell, (int, float)) and not isinstance(cell, bool) and cell:
                row[index] = cell / 2
                return
    raise AssertionError(f"no number in {section['id']}'s first table")


EDITS = {
    "the overall verdict": (lambda p: p.update(verdict=_flip(p["verdict"])),
                            ".verdict: "),
    "the SLA section's verdict": (
        lambda p: _section(p, "scope-sla").update(
            verdict=_flip(_section(p, "scope-sla")["verdict"])),
        ".sections[0].verdict: "),
    "a first-screen status": (
        lambda p: p["first_screen"][0].update(
            status={"met": "MISSED"}.get(p["first_screen"][0]["status"], "met")),
        ".first_screen[0].status"),
    "a number in the utilisation table": (
        lambda p: _halve_first_number(_section(p, "utilisation")), ".sections["),
    # reviewed again under the options it says, which are not what made its figures
    "the options it was reviewed under": (
        lambda p: p["options"].update(fusion=None), ".sections["),
    "a result struck from the list": (lambda p: p["results"].pop(),
                                      ".results: "),
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edited_packet_json_does_not_verify(made, tmp_path, capsys, edit):
    change, where = EDITS[edit]
    code, printed = _verify(_forged(made, tmp_path, change), made[1], capsys)
    assert code == 1
    assert f"differs on rerun: packet.json: {where}" in printed, printed


@pytest.mark.parametrize("page", ["index.html", "packet.md"])
def test_an_edited_page_does_not_verify(made, tmp_path, capsys, page):
    copy = _forged(made, tmp_path, lambda packet: None)
    text = (copy / page).read_text()
    (copy / page).write_text(text.replace("tpu_v5e_like", "tpu_v9_like", 1))
    code, printed = _verify(copy, made[1], capsys)
    assert code == 1
    assert f"changed input: {page}: not what packet.json renders to" in printed, printed


def test_a_packet_of_another_model_version_is_named_not_verified(made, monkeypatch,
                                                                 capsys):
    # its results are not rerun (simulator.verification.rerun); nor is it rebuilt
    out, cache = made
    monkeypatch.setattr(simulator, "MODEL_VERSION", simulator.MODEL_VERSION + 1)
    code, printed = _verify(out, cache, capsys)
    assert code == 1
    assert "model version changed: results/tpu_v1.tpu_v1_mlp_b200.default.json: " \
        in printed, printed


@pytest.mark.parametrize("tables", [5, "rows", [{"columns": 3, "rows": "x"}]])
def test_a_packet_json_with_tables_of_another_shape_is_named_not_a_traceback(
        made, tmp_path, capsys, tables):
    out, cache = made
    copy = out.parent / f"odd-{tmp_path.name}"
    shutil.copytree(out, copy)
    packet = json.loads((copy / "packet.json").read_text())
    packet["sections"][0]["tables"] = tables
    (copy / "packet.json").write_text(json.dumps(packet))
    code, printed = _verify(copy, cache, capsys)
    assert code == 1
    assert "packet.json: cannot be rendered" in printed or \
        "not what packet.json renders to" in printed, printed
    assert "differs on rerun: packet.json: .sections[0].tables" in printed, printed


def test_a_study_serving_more_than_verify_s_bound_is_refused_before_serving(
        made, tmp_path, capsys):
    # the study edited (and its hash in the packet) to serve 100 loads of a million
    # requests: step 1 reruns the packet's small serving result; the second review
    # would serve the study's, so it is held to the bound a serving rerun is
    out, _ = made
    shutil.copytree(out, tmp_path / "packet")
    study = tmp_path / "study.yaml"
    study.write_text((out.parent / "study.yaml").read_text().replace(
        "serving: {rate_per_s: 100, curve_rates_per_s: [50], requests: 60}",
        "serving: {rate_per_s: 100, curve_rates_per_s: [%s], requests: 1000000}"
        % ", ".join(str(rate) for rate in range(1, 100))))
    index = tmp_path / "packet" / "packet.json"
    packet = json.loads(index.read_text())
    packet["study"].update(path="../study.yaml",
                           sha256=hashlib.sha256(study.read_bytes()).hexdigest())
    index.write_text(json.dumps(packet))
    code, printed = _verify(tmp_path / "packet", tmp_path / "cache", capsys)
    assert code == 1
    assert "packet.json: its study could not be reviewed again" in printed, printed
    assert "over verify's bound" in printed and "--allow-long" in printed, printed
