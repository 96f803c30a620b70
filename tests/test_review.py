"""The review packet (`accsim review`, DESIGN.md section 12): the shipped example
studies' packets, the three formats carrying the same numbers, the first screen, links
to evidence, reuse by content hash, `accsim verify` on a packet, and bad study specs."""

from __future__ import annotations

import hashlib
from html import unescape
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

import simulator
from simulator.cli import main
from simulator.errors import AccsimError
from simulator.review.packet import NUMBER_FORMATS
from simulator.review.providers import platform_area_mm2
from simulator.review.sections import TITLES
from simulator.review.study import load_study
from timed_cli import HANG_S

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "experiments" / "studies"
RESNET = STUDIES / "resnet50_platforms.yaml"
LLAMA = STUDIES / "llama31_8b_decode_serving.yaml"

SMALL_STUDY = """\
title: one GEMM on two platforms
objective: check the review machinery on a small workload
owners: [a tester]
scope:
  platforms: [tpu_v1, tpu_v5e_like]
  workloads: [gemm_4096]
baseline: tpu_v1
sla:
  latency_ms: {p99: 5}
risks:
  - {risk: none really, owner: a tester}
"""


SERVING_STUDY = SMALL_STUDY.replace("  workloads: [gemm_4096]\n", """\
  workloads: [gemm_4096]
  serving: {rate_per_s: 100, curve_rates_per_s: [50], requests: 60}
""")


def write_packet(study: Path, out: Path, *extra: str) -> dict:
    assert main(["review", str(study), "--out", str(out), *extra]) == 0
    return json.loads((out / "packet.json").read_text())


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    out = tmp_path_factory.mktemp("resnet") / "packet"
    return out, write_packet(RESNET, out, "--no-cache")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("llama") / "packet"
    return out, write_packet(LLAMA, out, "--no-cache")


# --- reading the three formats back ---

class _Tables(HTMLParser):
    """Cell texts of every <table id=...>, and every element id."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.ids: set[str] = set()
        self._table = self._row = self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "table" and "id" in attrs:
            self._table = self.tables.setdefault(attrs["id"], [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self._table.append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_tables(out: Path) -> _Tables:
    parser = _Tables()
    parser.feed((out / "index.html").read_text())
    return parser


def md_tables(out: Path) -> dict[str, list[list[str]]]:
    """Cell texts of every Markdown table, by the anchor written before it."""
    tables, current = {}, None
    for line in (out / "packet.md").read_text().splitlines():
        anchor = re.match(r'<a id="table-([^"]+)"></a>', line)
        if anchor:
            current = tables.setdefault(anchor.group(1), [])
            continue
        if current is not None and line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            current.append(cells)
        elif current is not None and line.strip() and not line.startswith("**"):
            current = None
    for rows in tables.values():
        del rows[:2]  # header and alignment lines
    return tables


def md_cell_text(cell: str) -> str:
    text = re.sub(r'<a id="[^"]+"></a>', "", cell)
    link = re.fullmatch(r"\[(.*)\]\((.*)\)", text)
    return unescape((link.group(1) if link else text).replace("\\|", "|"))


def parse_number(text: str, fmt: str) -> float:
    value = float(text.replace(",", ""))
    return value / 100 if fmt == "pct1" else value


def resolution(text: str, fmt: str) -> float:
    """Half a unit in the last digit shown."""
    digits = text.split(".")[1] if "." in text and "e" not in text else ""
    unit = 10.0 ** -len(digits) / 2
    return unit / 100 if fmt == "pct1" else unit


# --- the packet's files and self-containment ---

def test_packet_holds_its_files_with_their_hashes(resnet):
    out, packet = resnet
    for name in ("index.html", "packet.md", "packet.json"):
        assert (out / name).stat().st_size > 0
    assert [r["kind"] for r in packet["results"]] == ["run"] * 3 + ["serving"] * 3
    for entry in packet["results"]:
        data = (out / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        manifest = json.loads(data)["manifest"] if entry["kind"] == "run" else \
            json.loads(data)["points"][0]["manifest"]
        assert manifest["model_version"] == packet["model_version"]
    figures = [f for s in packet["sections"] for f in s["figures"]]
    assert len(figures) == 7  # trend; a breakdown and a serving curve per platform
    for fig in figures:
        assert hashlib.sha256((out / fig["file"]).read_bytes()).hexdigest() == fig["sha256"]
    html = (out / "index.html").read_text()
    assert html.count("<svg") == len(figures)  # inline, not linked
    assert "<link" not in html and "<script" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "default-src 'none'" in html  # the page may fetch nothing


def test_every_section_has_a_heading_and_a_verdict(resnet):
    out, packet = resnet
    assert [s["title"] for s in packet["sections"]] == list(TITLES.values())
    html, md = (out / "index.html").read_text(), (out / "packet.md").read_text()
    for section in packet["sections"]:
        assert section["verdict"] in ("pass", "fail", "not evaluated")
        assert section["reason"]
        assert f'<section id="s-{section["id"]}">' in html
        assert f"## {section['title']} ({section['verdict']})" in md


def test_markdown_and_json_carry_the_numbers_of_the_html(resnet):
    out, packet = resnet
    in_html, in_md = html_tables(out).tables, md_tables(out)
    compared = 0
    for section in packet["sections"]:
        for table in section["tables"]:
            html_rows, md_rows = in_html[f"table-{table['id']}"], in_md[table["id"]]
            assert len(html_rows) == len(md_rows) == len(table["rows"]), table["id"]
            for row, html_row, md_row in zip(table["rows"], html_rows, md_rows):
                for value, column, html_text, md_text in zip(
                        row, table["columns"], html_row, md_row):
                    md_text = md_cell_text(md_text)
                    assert html_text == md_text, (table["id"], column["name"])
                    if isinstance(value, (int, float)) and column["format"] in \
                            NUMBER_FORMATS:
                        shown = parse_number(html_text, column["format"])
                        assert abs(shown - value) <= resolution(
                            html_text, column["format"]) + 1e-12 * abs(value)
                        compared += 1
                    elif value is None:
                        assert html_text == "-"
    assert compared > 500


def test_json_numbers_are_the_result_files_numbers(resnet):
    out, packet = resnet
    results = {(r["platform"], r["workload"]): json.loads((out / r["path"]).read_text())
               for r in packet["results"] if r["kind"] == "run"}
    efficiency = next(s for s in packet["sections"] if s["id"] == "efficiency")
    (table,) = efficiency["tables"]
    for row in table["rows"]:
        workload = results[(row[0], row[1])]["workload"]
        assert row[3] == pytest.approx(workload["time_s"] * 1e3, rel=1e-12)
        assert row[5] == pytest.approx(workload["average_power_w"], rel=1e-12)


# --- first screen, findings, evidence ---

def test_sla_missed_is_on_the_first_screen(resnet):
    out, packet = resnet
    sla = next(line for line in packet["first_screen"] if line["label"] == "SLA")
    assert sla["status"] == "MISSED" and sla["text"].startswith("SLA missed on ")
    scope = next(s for s in packet["sections"] if s["id"] == "scope-sla")
    checks = scope["tables"][1]["rows"]
    assert any(row[0] == "edge_32x32" and row[8] == "MISSED" for row in checks)
    html = (out / "index.html").read_text()
    first_screen = html[:html.index('<section id="s-findings">')]
    assert "MISSED" in first_screen and sla["text"] in first_screen
    md = (out / "packet.md").read_text()
    assert "**SLA: MISSED**" in md[:md.index("## Findings")]


def test_rollback_trigger_is_evaluated_on_the_result_files(resnet):
    out, packet = resnet
    line = next(line for line in packet["first_screen"] if line["label"] ==
                "Rollback trigger")
    rollback = next(s for s in packet["sections"] if s["id"] == "rollback")
    (row,) = rollback["tables"][0]["rows"]
    stall = json.loads((out / "results/tpu_v5e_like.resnet50_b1.default.json")
                       .read_text())["workload"]["memory_stall_fraction"]
    assert row[0] == "tpu_v5e_like" and row[4] == stall
    assert (row[7] == "FIRED") == (stall > 0.25) == (line["status"] == "FIRED")
    if stall > 0.25:
        assert "FIRED" in (out / "index.html").read_text().split("<h2>Findings")[0]


def test_findings_on_a_small_study_fire_whatever_the_timing_model(tmp_path):
    """Triggers that hold on any model: an MFU above 0, a GEMM expected vector-bound,
    a 1 us latency bound, an int8 change without a guardrail."""
    study = tmp_path / "study.yaml"
    study.write_text(SMALL_STUDY.replace("{p99: 5}", "{p99: 0.001}") + """\
expected_bottlenecks: {layer_types: {gemm: vector}}
precision_changes: [{what: int8 weights, layer_types: [gemm], to_dtype: int8}]
rollback: {metric: mfu, fires_when: above, threshold: 0}
""")
    out = tmp_path / "packet"
    packet = write_packet(study, out, "--no-cache")
    status = {line["label"]: line["status"] for line in packet["first_screen"]}
    assert status == {"SLA": "MISSED", "Rollback trigger": "FIRED",
                      "Precision changes": "FLAGGED: no quality guardrail",
                      "Expected bottlenecks": "MISMATCH"}
    assert [f["kind"] for f in packet["findings"]] == [
        "bottleneck mismatch", "bottleneck mismatch", "SLA missed", "SLA missed",
        "rollback fired", "rollback fired", "precision without guardrail", "no fit"]
    html = (out / "index.html").read_text()
    first_screen = html[:html.index('<section id="s-findings">')]
    for text in ("MISSED", "FIRED", "FLAGGED: no quality guardrail", "MISMATCH"):
        assert text in first_screen


def test_bottleneck_mismatches_are_listed_first_and_link_to_their_rows(resnet):
    out, packet = resnet
    kinds = [f["kind"] for f in packet["findings"]]
    assert kinds[0] == "bottleneck mismatch"
    assert kinds == sorted(kinds, key=lambda k: k != "bottleneck mismatch")
    assert "SLA missed" in kinds and "rollback fired" in kinds
    sheet = next(s for s in packet["sections"] if s["id"] == "mapping-sheet")
    checks = [row[12] for row in sheet["tables"][0]["rows"]]
    first_other = checks.index(next(c for c in checks if c != "MISMATCH"))
    assert "MISMATCH" not in checks[first_other:] and first_other > 0
    ids = html_tables(out).ids
    for found in packet["findings"]:
        if found["href"].startswith("#"):
            assert found["href"][1:] in ids
    # every evidence link into a result file points at a record that exists
    for section in packet["sections"]:
        for table in section["tables"]:
            for row in table["rows"]:
                for cell in row:
                    if isinstance(cell, dict) and cell.get("href", "").startswith(
                            "results/"):
                        path, _, pointer = cell["href"].partition("#")
                        node = json.loads((out / path).read_text())
                        for part in filter(None, pointer.split("/")):
                            node = node[int(part) if isinstance(node, list) else part]


def test_llama_decode_study_runs_the_hf_model_and_flags_its_precision_change(llama):
    out, packet = llama
    kinds = [(r["kind"], r["platform"]) for r in packet["results"]]
    assert kinds[:2] == [("run", "tpu_v5e_like"), ("run", "tpu_v5e_like_hbm3_whatif")]
    assert ("serving", "tpu_v5e_like_hbm3_whatif") in kinds
    # the what-if variant is written into the packet, and its runs point at that file
    variant = out / "inputs" / "tpu_v5e_like_hbm3_whatif.yaml"
    assert "bandwidth_gbps: 1638.0" in variant.read_text()
    whatif = json.loads((out / packet["results"][1]["path"]).read_text())
    assert whatif["manifest"]["inputs"]["platform"]["path"] == str(variant)
    result = json.loads((out / packet["results"][0]["path"]).read_text())
    source = result["manifest"]["inputs"]["workload"]
    assert source["path"].endswith("llama_3_1_8b.json") and source["sha256"]
    assert any(op["kind"] == "attention" for op in
               source["canonical"]["operators"])
    sections = {s["id"]: s for s in packet["sections"]}
    rows = [row for row in sections["serving"]["tables"][0]["rows"]
            if row[0] == "tpu_v5e_like_hbm3_whatif"]
    assert [row[2] for row in rows] == [0.1, 0.25, 0.4]  # offered loads
    entry = next(r for r in packet["results"] if r["kind"] == "serving"
                 and r["platform"] == "tpu_v5e_like_hbm3_whatif")
    served = json.loads((out / entry["path"]).read_text())
    assert rows[1][12] == served["points"][1]["tpot_ms"]["p99"]  # tpot p99 ms
    checks = sections["scope-sla"]["tables"][1]["rows"]
    assert {row[4] for row in checks if row[3] == "serving at 0.25/s"} == {
        "ttft_ms p95", "tpot_ms p50", "tpot_ms p99", "min_tokens_per_s"}
    assert sections["sweep"]["reason"].startswith("the study asks for no")
    precision = next(line for line in packet["first_screen"]
                     if line["label"] == "Precision changes")
    assert precision["status"].startswith("FLAGGED")
    flagged = [f for f in packet["findings"] if f["kind"] ==
               "precision without guardrail"]
    assert len(flagged) == 1 and "KV cache" in flagged[0]["text"]


def test_a_pair_serving_refuses_is_not_evaluated_and_the_rest_goes_on(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(SMALL_STUDY.replace("""\
  platforms: [tpu_v1, tpu_v5e_like]
  workloads: [gemm_4096]
""", """\
  platforms:
    - tpu_v1
    - {base: tpu_v5e_like, name: no_hbm_size, set: {offchip.capacity_bytes: null}}
  models: [{config: llama_3_1_8b, phase: decode, context: 64}]
  serving: {rate_per_s: 1, requests: 4, prompt_tokens: 16, output_tokens: 2}
"""))
    # llama_3_1_8b's 16 GB of weights do not fit tpu_v1's 8 GiB: the run is a what-if
    packet = write_packet(study, tmp_path / "packet", "--no-cache", "--ignore-capacity")
    assert [(r["kind"], r["platform"]) for r in packet["results"]] == [
        ("run", "tpu_v1"), ("run", "no_hbm_size")]
    serving = next(s for s in packet["sections"] if s["id"] == "serving")
    assert serving["verdict"] == "not evaluated"
    notes = " ".join(serving["text"]) + serving["reason"]
    assert "serving llama_3_1_8b_decode_b1_c64 on no_hbm_size not evaluated: " in notes
    assert "offchip.capacity_bytes" in notes


def test_platform_area_comes_from_the_platform_where_it_has_one():
    class WithArea:
        name, area_mm2 = "chip", 400.0

    class WithoutTable:
        name, area_mm2 = "chip", None

    assert platform_area_mm2(WithArea()) == 400.0
    assert platform_area_mm2(WithoutTable()).reason == "chip gives no area table"


# --- reuse and verification ---

def test_results_reused_by_content_hash_and_packet_is_deterministic(tmp_path, capsys):
    study = tmp_path / "small.yaml"
    study.write_text(SERVING_STUDY)
    cache = tmp_path / "cache"
    first = write_packet(study, tmp_path / "a", "--cache", str(cache))
    assert "2 runs and 2 serving results (0 reused" in capsys.readouterr().out
    assert len(list(cache.glob("*.json"))) == 4
    second = write_packet(study, tmp_path / "b", "--cache", str(cache))
    assert "(4 reused" in capsys.readouterr().out
    assert first == second
    for name in ("packet.json", "packet.md", "index.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # a damaged cache entry is recomputed, not trusted
    for damaged in (next(cache.glob("serving-*.json")),
                    next(p for p in cache.glob("*.json") if "serving" not in p.name)):
        damaged.write_text('{"manifest": {}}')
    assert write_packet(study, tmp_path / "c", "--cache", str(cache)) == first
    assert "(2 reused" in capsys.readouterr().out


def test_results_of_other_code_are_never_served_from_the_cache(tmp_path, capsys,
                                                                monkeypatch):
    """The cache keys runs and serving results by the code's digest too: a change of
    code that leaves MODEL_VERSION as it was computes them again."""
    study = tmp_path / "small.yaml"
    study.write_text(SERVING_STUDY)
    cache = tmp_path / "cache"
    write_packet(study, tmp_path / "a", "--cache", str(cache))
    assert "2 runs and 2 serving results (0 reused" in capsys.readouterr().out
    write_packet(study, tmp_path / "b", "--cache", str(cache))
    assert "(4 reused" in capsys.readouterr().out
    monkeypatch.setattr("simulator.review.pipeline.code_version", lambda: "other code")
    write_packet(study, tmp_path / "c", "--cache", str(cache))
    assert "(0 reused" in capsys.readouterr().out
    assert len(list(cache.glob("serving-*.json"))) == 4


def test_the_code_version_is_a_digest_of_the_sources_and_model_version(monkeypatch):
    from simulator.code_version import code_version
    now = code_version()
    assert re.fullmatch("[0-9a-f]{64}", now) and code_version() == now
    monkeypatch.setattr(simulator, "MODEL_VERSION", simulator.MODEL_VERSION + 1)
    assert code_version() != now


def test_a_new_model_version_is_never_served_from_the_cache(tmp_path, capsys,
                                                            monkeypatch):
    study = tmp_path / "small.yaml"
    study.write_text(SMALL_STUDY)
    cache = tmp_path / "cache"
    write_packet(study, tmp_path / "a", "--cache", str(cache))
    assert "(0 reused" in capsys.readouterr().out
    monkeypatch.setattr(simulator, "MODEL_VERSION", simulator.MODEL_VERSION + 1)
    packet = write_packet(study, tmp_path / "b", "--cache", str(cache))
    assert "(0 reused" in capsys.readouterr().out
    assert packet["model_version"] == simulator.MODEL_VERSION
    assert len(list(cache.glob("*.json"))) == 4


def test_verify_accepts_a_packet_and_names_a_tampered_result(tmp_path, capsys):
    study = tmp_path / "small.yaml"
    study.write_text(SERVING_STUDY)
    out = tmp_path / "packet"
    write_packet(study, out, "--no-cache")
    assert main(["verify", str(out / "packet.json")]) == 0
    assert "verified" in capsys.readouterr().out
    result = out / "results" / "tpu_v1.gemm_4096.default.json"
    data = json.loads(result.read_text())
    data["workload"]["cycles"] += 1
    result.write_text(json.dumps(data, indent=1) + "\n")
    assert main(["verify", str(out / "packet.json")]) == 1
    assert f"changed input: result: {result} (sha256 changed since the packet)" in \
        capsys.readouterr().out
    # results edited with their recorded hashes edited too still fail on the rerun
    served = out / "results" / "serving.tpu_v1.gemm_4096.json"
    data = json.loads(served.read_text())
    data["points"][1]["latency_ms"]["p99"] *= 0.5
    served.write_text(json.dumps(data, indent=1) + "\n")
    packet = json.loads((out / "packet.json").read_text())
    for entry in packet["results"]:
        entry["sha256"] = hashlib.sha256((out / entry["path"]).read_bytes()).hexdigest()
    (out / "packet.json").write_text(json.dumps(packet))
    assert main(["verify", str(out / "packet.json")]) == 1
    printed = capsys.readouterr().out
    assert "differs on rerun: results/tpu_v1.gemm_4096.default.json: .workload.cycles" \
        in printed
    assert "differs on rerun: results/serving.tpu_v1.gemm_4096.json: " \
        ".points[1].latency_ms.p99" in printed


def _packet(folder: Path) -> dict:
    return json.loads((folder / "packet.json").read_text())


def _verify_forged(forged: Path, packet: dict) -> int:
    """`accsim verify` of `packet` written beside the packet it was made from (its
    paths resolve there), the file removed after: the module's packet stays as made."""
    forged.write_text(json.dumps(packet))
    try:
        return main(["verify", str(forged)])
    finally:
        forged.unlink()


@pytest.mark.parametrize("change, fragment", [
    # the marker is what verify requires before it reads the rest as this format
    ({"packet": {"format": "accsim-review-packet", "version": 1}},  # before `options`
     "packet.version: Input should be 2"),
    ({"packet": {"format": "something-else", "version": 1}},
     "packet.format: Input should be 'accsim-review-packet'"),
    # a packet whose results were all struck out would verify nothing
    ({"results": []}, "results: List should have at least 1 item"),
])
def test_verify_refuses_a_packet_it_cannot_check(resnet, capsys, change, fragment):
    folder, _ = resnet
    forged = folder / "forged-packet.json"
    assert _verify_forged(forged, {**_packet(folder), **change}) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"accsim: error: {forged}: ") and fragment in line, line


def test_verify_names_a_study_path_no_system_takes(tmp_path, capsys):
    # a NUL in a recorded path: os.stat raises ValueError, not OSError. A small study's
    # packet: verify reruns every result (the ResNet packet's took about 10 s)
    study = tmp_path / "small.yaml"
    study.write_text(SMALL_STUDY)
    folder = tmp_path / "packet"
    write_packet(study, folder, "--no-cache")
    packet = _packet(folder)
    packet["study"]["path"] = "study\x00.yaml"
    assert _verify_forged(folder / "forged-packet.json", packet) == 1
    captured = capsys.readouterr()
    assert "changed input: study: " in captured.out and "(no longer readable)" in \
        captured.out and "NOT verified" in captured.err, captured


def test_every_mapping_under_review_runs_on_every_platform(tmp_path):
    study = tmp_path / "small.yaml"
    study.write_text(SMALL_STUDY + "mappings:\n  - {name: default}\n"
                     "  - {heuristic: min_offchip}\n")
    packet = write_packet(study, tmp_path / "packet", "--no-cache")
    assert [(r["platform"], r["mapping"]) for r in packet["results"]] == [
        ("tpu_v1", "default"), ("tpu_v1", "min_offchip"), ("tpu_v5e_like", "default"),
        ("tpu_v5e_like", "min_offchip")]
    result = json.loads((tmp_path / "packet" / packet["results"][1]["path"]).read_text())
    assert result["manifest"]["inputs"]["mapping"]["canonical"]["default"]["heuristic"] \
        == "min_offchip"
    fit = next(s for s in packet["sections"] if s["id"] == "fit")["tables"][0]
    assert [row[:2] for row in fit["rows"]] == [
        ["tpu_v1", "default"], ["tpu_v1", "min_offchip"], ["tpu_v5e_like", "default"],
        ["tpu_v5e_like", "min_offchip"]]


# --- bad study specs: one clear error each, before any simulation ---

BAD_STUDIES = [
    ("unknown platform", SMALL_STUDY.replace("[tpu_v1, tpu_v5e_like]",
                                             "[tpu_v1, tpu_v9]"),
     "scope.platforms[1]: 'tpu_v9': no such file, and no shipped platform"),
    ("unknown SLA key", SMALL_STUDY.replace("{p99: 5}", "{p42: 5}"),
     "sla.latency_ms.p42: unknown field"),
    ("misspelt SLA target", SMALL_STUDY.replace("latency_ms:", "latency_s:"),
     "sla.latency_s: unknown field"),
    ("missing owners", SMALL_STUDY.replace("owners: [a tester]\n", ""),
     "owners: required field is missing"),
    ("risk without owner", SMALL_STUDY.replace("{risk: none really, owner: a tester}",
                                               "{risk: none really}"),
     "risks[0].owner: required field is missing"),
    ("baseline out of scope", SMALL_STUDY.replace("baseline: tpu_v1",
                                                  "baseline: edge_32x32"),
     "baseline: baseline 'edge_32x32' is not a platform in scope"),
    ("unknown expected layer_type", SMALL_STUDY + "expected_bottlenecks:\n"
     "  layer_types: {conv9x9: compute}\n",
     "expected_bottlenecks.layer_types.conv9x9: no workload in scope has a layer_type"),
    ("unknown bottleneck class", SMALL_STUDY + "expected_bottlenecks:\n"
     "  layer_types: {fc: slow}\n", "expected_bottlenecks.layer_types.fc: Input should"),
    ("heuristic from a module", SMALL_STUDY + "mappings:\n  - {heuristic: 'os:getcwd'}\n",
     "mappings[0].heuristic: unknown heuristic 'os:getcwd'"),
    ("variant of an unknown field", SMALL_STUDY.replace(
        "[tpu_v1, tpu_v5e_like]", "[tpu_v1, {base: tpu_v1, name: v, set: "
        "{offchip.bandwith_gbps: 1}}]"),
     "scope.platforms[1].set.offchip.bandwith_gbps: tpu_v1 has no field"),
    ("variant of a bad value", SMALL_STUDY.replace(
        "[tpu_v1, tpu_v5e_like]", "[tpu_v1, {base: tpu_v1, name: v, set: "
        "{clock_ghz: -1}}]"), "scope.platforms[1].set (clock_ghz): Input should be"),
    ("continuous batching of a plain workload", SERVING_STUDY.replace(
        "requests: 60}", "requests: 60, batching: continuous}"),
     "scope: serving.batching continuous serves LLMs"),
    ("a batch larger than serve takes", SERVING_STUDY.replace(
        "requests: 60}", "requests: 60, max_batch: 20000}"),
     "scope.serving.max_batch: Input should be less than or equal to 16384"),
    ("unknown rollback metric", SMALL_STUDY + "rollback: {metric: speed, fires_when: "
     "above, threshold: 1}\n", "rollback.metric: Input should be"),
    ("no such sweep spec", SMALL_STUDY.replace("  workloads: [gemm_4096]\n",
                                               "  workloads: [gemm_4096]\n"
                                               "  sweep: sweeps/none.yaml\n"),
     "scope.sweep: 'sweeps/none.yaml': no such sweep spec file"),
]


@pytest.mark.parametrize("text,expected", [(t, e) for _, t, e in BAD_STUDIES],
                         ids=[name for name, _, _ in BAD_STUDIES])
def test_bad_study_gets_one_clear_error(tmp_path, capsys, text, expected):
    study = tmp_path / "study.yaml"
    study.write_text(text)
    out = tmp_path / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"accsim: error: {study}: ") and expected in line, line
    assert not out.exists()  # refused before any simulation or output


def test_a_study_names_shipped_what_if_platforms_as_run_does(tmp_path):
    # whatif/NAME is a shipped name (the unknown-name error lists it so), not a path
    study = tmp_path / "study.yaml"
    study.write_text(SMALL_STUDY.replace(
        "[tpu_v1, tpu_v5e_like]",
        "[tpu_v1, whatif/tpu_v5e_256x256, {base: whatif/tpu_v5e_fp8, name: v, set: "
        "{clock_ghz: 1.0}}]"))
    resolved = load_study(str(study))
    assert resolved.platform("whatif/tpu_v5e_256x256").systolic_array.rows == 256
    assert resolved.platform("v").clock_ghz == 1.0
    # a name that is no shipped one is still a path, from the study's folder
    study.write_text(SMALL_STUDY.replace("tpu_v5e_like]", "whatif/nope]"))
    with pytest.raises(AccsimError, match="'whatif/nope': no such platform file"):
        load_study(str(study))
    # as is a model config's (a kind with no shipped folder of files)
    study.write_text(SMALL_STUDY.replace("  workloads: [gemm_4096]\n",
                                         "  workloads: [gemm_4096]\n  models: [{config: "
                                         "hub/nope, phase: decode, context: 8}]\n"))
    with pytest.raises(AccsimError, match="'hub/nope': no such model config file"):
        load_study(str(study))


def test_bad_study_from_the_shell_has_no_traceback(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(SMALL_STUDY.replace("tpu_v5e_like]", "tpu_v9]"))
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "review", str(study),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True,
                          timeout=HANG_S)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_foreign_output_folder_is_refused(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(SMALL_STUDY)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 1
    assert "holds no packet.json" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "keep me"



def test_an_interrupted_review_is_rerun_into_its_own_folder(tmp_path, capsys):
    """A review leaves its marker before anything else (listing each file before it
    writes it), so a folder a failed or interrupted review half wrote is taken again
    (and its leftovers dropped)."""
    study = tmp_path / "study.yaml"
    study.write_text(SMALL_STUDY)
    out = tmp_path / "half"
    (out / "results").mkdir(parents=True)
    (out / ".accsim-review").write_text("a folder accsim writes; the files it wrote "
                                        "here:\nresults/left_over.json\n")
    (out / "results" / "left_over.json").write_text("{}")
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 0
    capsys.readouterr()
    assert (out / "packet.json").is_file()
    assert not (out / "results" / "left_over.json").exists()


def test_a_cache_that_cannot_be_made_is_refused_before_any_run(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(SMALL_STUDY)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    out = tmp_path / "o"
    assert main(["review", str(study), "--out", str(out),
                 "--cache", str(blocker / "cache")]) == 1
    err = capsys.readouterr().err
    assert "--cache" in err and "a_file" in err and "Traceback" not in err
    assert not (out / "results").exists() or not any((out / "results").iterdir())

# --- the packet in a browser ---

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser",
                                                  "google-chrome") if shutil.which(name)),
                None)
ARTIFACTS = ROOT / "artifacts" / "review"
PROBE = """<script>
(function () {
  const size = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({
    figures: [...document.querySelectorAll('figure svg')].map(size),
    headings: [...document.querySelectorAll('h2')].map(h => h.firstChild.textContent.trim()),
    slaBottom: document.getElementById('status-sla').getBoundingClientRect().bottom,
    viewport: window.innerHeight});
  document.body.appendChild(out);
})();
</script>"""


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0",
                           "--window-size=1280,900", *args], capture_output=True,
                          text=True, timeout=HANG_S)


def laid_out(out: Path) -> dict:
    """The packet's page as Chromium lays it out: a copy with the PROBE script (its CSP
    allowing it), its DOM dumped and the probe's JSON read back; the copy removed."""
    html = (out / "index.html").read_text()
    probed = out / "probe.html"
    probed.write_text(html.replace("default-src 'none';",
                                   "default-src 'none'; script-src 'unsafe-inline';")
                      .replace("</body>", PROBE + "</body>"))
    dumped = chromium("--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    probed.unlink()
    found = re.search(r'<pre id="probe">(.*?)</pre>', dumped.stdout, re.S)
    assert found, dumped.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs "
                    "Debian's chromium package; apt-get install chromium)")
def test_packet_renders_in_headless_chromium(resnet):
    out, packet = resnet
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "resnet50_platforms.png"
    screenshot.unlink(missing_ok=True)
    shown = chromium(f"--screenshot={screenshot}", (out / "index.html").as_uri())
    assert shown.returncode == 0, shown.stderr[-2000:]
    console = [line for line in shown.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script errors, and no fetch the page's CSP had to block
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    probe = laid_out(out)
    for title in TITLES.values():
        assert title in probe["headings"]
    assert "Assumptions and sensitivity" in probe["headings"]
    assert len(probe["figures"]) == 7
    assert all(width > 100 and height > 100 for width, height in probe["figures"])
    assert probe["slaBottom"] <= probe["viewport"]  # the SLA line is on the first screen


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs "
                    "Debian's chromium package; apt-get install chromium)")
def test_assumptions_section_renders_in_headless_chromium(tmp_path):
    """A study asking for the section: its heading, tables and one tornado per
    platform lay out in the browser, with no console error."""
    study = tmp_path / "small.yaml"
    study.write_text(SMALL_STUDY + "assumptions: {metric: time_s}\n")
    out = tmp_path / "packet"
    packet = write_packet(study, out, "--no-cache")
    section = next(s for s in packet["sections"] if s["id"] == "assumptions")
    assert section["verdict"] in ("pass", "fail")
    shown = chromium(f"--screenshot={tmp_path / 'shot.png'}", (out / "index.html").as_uri())
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert [line for line in shown.stderr.splitlines() if ":CONSOLE" in line] == []
    probe = laid_out(out)
    assert "Assumptions and sensitivity" in probe["headings"]
    tornadoes = [f for f in section["figures"] if f["id"].startswith("tornado-")]
    assert [f["id"] for f in tornadoes] == ["tornado-tpu_v1", "tornado-tpu_v5e_like"]
    assert len(probe["figures"]) == sum(len(s["figures"]) for s in packet["sections"])
    assert all(width > 100 and height > 100 for width, height in probe["figures"])
    parsed = html_tables(out)
    assert {"table-assumed", "table-tornado", "table-robust-ranking",
            "table-robust-sla"} <= set(parsed.tables)
    assert parsed.tables["table-robust-ranking"][0][:3] == ["tpu_v1", "tpu_v5e_like",
                                                             "tpu_v5e_like"]
