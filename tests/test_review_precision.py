"""Precision variants in a review study (issue 25; DESIGN.md sections 12 and 17): each
variant's plan is simulated against the baseline through the path `accsim run
--precision` takes, the packet's precision what-if section shows the gain, the
fallbacks with their reasons, the emulated error, the guardrail and any declared
quality figure, and a win without quality evidence is a failed check; the shipped
Llama-3.1-8B study renders in Chromium and verifies; bad precision input in a study is
one clear error each, before any output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from simulator.cli import main
from test_review import (CHROMIUM, STUDIES, chromium, html_tables, md_tables,
                         write_packet)

STUDY = STUDIES / "llama31_8b_decode_precision.yaml"

# One GEMM on tpu_v5e_like, whose array runs int8 at twice its bf16 rate.
GEMM_STUDY = """\
title: one GEMM in int8
objective: check the precision what-if section on a small workload
owners: [a tester]
scope:
  platforms: [tpu_v5e_like]
  workloads: [gemm_4096]
baseline: tpu_v5e_like
"""


def _sections(packet: dict) -> dict:
    return {s["id"]: s for s in packet["sections"]}


def _variant(extra: str) -> str:
    return GEMM_STUDY + "precision_variants:\n" + extra


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    out = tmp_path_factory.mktemp("precision") / "packet"
    return out, write_packet(STUDY, out, "--no-cache")


def test_shipped_study_simulates_each_variant_against_its_baseline(shipped):
    out, packet = shipped
    section = _sections(packet)["precision-whatif"]
    assert section["verdict"] == "pass"
    gain = next(t for t in section["tables"] if t["id"] == "precision-gain")
    rows = {(row[0], row[1]): row for row in gain["rows"]}
    assert set(rows) == {(v, p) for v in ("int8_weights", "fp8_kv")
                         for p in ("tpu_v5e_like", "whatif/tpu_v5e_fp8")}
    runs = {(r["platform"], r["workload"]): r for r in packet["results"]}
    for (variant, platform), row in rows.items():
        base = json.loads((out / runs[(platform, row[2])]["path"]).read_text())
        run = json.loads((out / runs[(platform, f"{row[2]}+{variant}")]["path"])
                         .read_text())
        assert run["precision"]["plan"] == variant
        assert "precision" not in base
        for offset, key in ((4, "time_s"), (7, "energy_j")):
            assert row[offset] == pytest.approx(base["workload"][key] * 1e3)
            assert row[offset + 1] == pytest.approx(run["workload"][key] * 1e3)
        bytes_of = [d["workload"]["offchip_read_bytes"] + d["workload"]
                    ["offchip_write_bytes"] for d in (base, run)]
        assert row[10:12] == pytest.approx([b * 1e-6 for b in bytes_of])
    # int8 weights: the GEMMs' weights move half their bf16 bytes, at the int8 rate
    int8 = rows[("int8_weights", "tpu_v5e_like")]
    assert int8[6] > 1.5 and int8[12] > 1.5 and int8[13] == 0
    # fp8 KV: tpu_v5e_like lacks fp8 and falls back (no gain), the fp8 what-if gains
    fallback = rows[("fp8_kv", "tpu_v5e_like")]
    assert fallback[13] == 1 and fallback[6] == 1.0 and fallback[-2] == "no gain"
    assert rows[("fp8_kv", "whatif/tpu_v5e_fp8")][12] > 1.0
    operators = next(t for t in section["tables"] if t["id"] == "precision-operators")
    attn = {row[1]: row for row in operators["rows"] if row[0] == "fp8_kv"}
    assert attn["tpu_v5e_like"][3] == "activation bf16, kv bf16"
    assert attn["tpu_v5e_like"][5] == "kv fp8_e4m3: platform lacks fp8_e4m3"
    assert attn["whatif/tpu_v5e_fp8"][3] == "activation bf16, kv fp8_e4m3"
    assert attn["whatif/tpu_v5e_fp8"][7] >= 25   # its guardrail: SQNR >= 25 dB
    assert attn["whatif/tpu_v5e_fp8"][8] == "SQNR >= 25 dB"
    line = next(line for line in packet["first_screen"]
                if line["label"] == "Precision what-ifs")
    assert line["status"] == "each win has evidence"


def test_shipped_packet_carries_the_same_precision_rows_in_every_format(shipped):
    out, packet = shipped
    gain = next(t for t in _sections(packet)["precision-whatif"]["tables"]
                if t["id"] == "precision-gain")
    html = html_tables(out).tables["table-precision-gain"]
    markdown = md_tables(out)["precision-gain"]
    assert len(html) == len(markdown) == len(gain["rows"])
    assert [row[:2] for row in html] == [row[:2] for row in markdown] == \
        [row[:2] for row in gain["rows"]]
    assert [row[5] for row in html] == [f"{row[5]:,.3f}" for row in gain["rows"]]


def test_shipped_packet_verifies_with_its_variant_runs(shipped, capsys):
    out, packet = shipped
    assert len([r for r in packet["results"] if "+" in r["workload"]]) == 4
    capsys.readouterr()
    assert main(["verify", str(out / "packet.json")]) == 0
    assert "verified (inputs unchanged, rerun identical)" in capsys.readouterr().out


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs "
                    "Debian's chromium package; apt-get install chromium)")
def test_shipped_precision_packet_renders_in_headless_chromium(shipped):
    out, _ = shipped
    shown = chromium("--virtual-time-budget=5000", "--dump-dom",
                     (out / "index.html").as_uri())
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert [line for line in shown.stderr.splitlines() if ":CONSOLE" in line] == []
    dom = shown.stdout
    assert 'id="s-precision-whatif"' in dom
    assert "Precision what-ifs, simulated" in dom
    assert 'id="table-precision-gain"' in dom and 'id="table-precision-operators"' in dom
    assert "platform lacks fp8_e4m3" in dom
    assert 'id="status-precision-what-ifs"' in dom


def test_a_win_without_quality_evidence_is_a_failed_check(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(_variant("  - {name: int8, inline: {default: {weight: [int8], "
                              "activation: [int8]}}}\n"))
    packet = write_packet(study, tmp_path / "packet", "--no-cache")
    section = _sections(packet)["precision-whatif"]
    assert section["verdict"] == "fail"
    [row] = section["tables"][0]["rows"]
    assert row[-2] == "WIN WITHOUT EVIDENCE" and row[6] > 1.5
    assert "not judged by a guardrail on gemm" in row[-3]
    [found] = [f for f in packet["findings"]
               if f["kind"] == "precision without quality evidence"]
    assert found["href"].endswith("#/precision")
    assert packet["verdict"] == "fail"
    line = next(line for line in packet["first_screen"]
                if line["label"] == "Precision what-ifs")
    assert line["status"].startswith("FLAGGED")
    # the emulated error is there all the same
    [operator] = section["tables"][1]["rows"]
    assert operator[6] > 0 and operator[8] == "none"


@pytest.mark.parametrize("evidence,expected", [
    ("    inline: {default: {weight: [int8], guardrail: {min_sqnr_db: 30}}}\n",
     "emulated error within the guardrail on 1 operator(s)"),
    ("    inline: {default: {weight: [int8]}}\n    quality:\n      - {metric: top-1 "
     "delta, value: -0.1, unit: points, source: our eval run 7}\n",
     "1 declared quality figure(s)")])
def test_a_guardrail_or_a_declared_figure_is_quality_evidence(tmp_path, evidence,
                                                              expected):
    study = tmp_path / "study.yaml"
    study.write_text(_variant("  - name: int8\n" + evidence))
    packet = write_packet(study, tmp_path / "packet", "--no-cache")
    section = _sections(packet)["precision-whatif"]
    assert section["verdict"] == "pass"
    assert section["tables"][0]["rows"][0][-3] == expected
    figures = section["tables"][2]["rows"]
    assert figures == ([["int8", "top-1 delta", -0.1, "points", "our eval run 7"]]
                       if "quality" in evidence else [])


def test_a_workload_file_variant_is_written_into_the_packet_and_verifies(tmp_path,
                                                                          capsys):
    plan = tmp_path / "plans" / "int8.yaml"
    plan.parent.mkdir()
    plan.write_text("name: int8_all\ndefault: {weight: [int8], activation: [int8]}\n")
    study = tmp_path / "study.yaml"
    study.write_text(_variant("  - {name: int8, plan: plans/int8.yaml}\n"))
    out = tmp_path / "packet"
    packet = write_packet(study, out, "--no-cache")
    written = out / "inputs" / "gemm_4096+int8.tpu_v5e_like.yaml"
    assert "dtype: int8" in written.read_text()
    entry = next(r for r in packet["results"] if r["workload"] == "gemm_4096+int8")
    result = json.loads((out / entry["path"]).read_text())
    assert (out / "results" / result["manifest"]["inputs"]["workload"]["path"]) \
        .resolve() == written.resolve()
    assert result["precision"]["operators"][0]["formats"] == {"weight": "int8",
                                                              "activation": "int8"}
    capsys.readouterr()
    assert main(["verify", str(out / "packet.json")]) == 0, capsys.readouterr().out


# --- bad precision input in a study: one clear error each, before any output ---

def _refused(tmp_path, capsys, text: str) -> str:
    study = tmp_path / "study.yaml"
    study.write_text(text)
    out = tmp_path / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert not out.exists()
    return line


def test_an_unknown_format_is_one_clear_error(tmp_path, capsys):
    line = _refused(tmp_path, capsys, _variant(
        "  - {name: v, inline: {default: {weight: [fp7]}}}\n"))
    assert line.startswith(f"accsim: error: {tmp_path / 'study.yaml'}: "
                           "precision_variants[0](v).inline.default.weight[0]: Input should be")


def test_a_chain_that_never_reaches_a_supported_format_is_one_clear_error(tmp_path,
                                                                         capsys):
    line = _refused(tmp_path, capsys, _variant(
        "  - {name: v, inline: {default: {weight: [fp8_e4m3, int4]}}}\n"))
    assert f"{tmp_path / 'study.yaml'}: precision_variants[0](v).inline.default.weight: " \
        "no format of the chain" in line
    assert "fp8_e4m3: platform lacks fp8_e4m3; int4: platform lacks int4" in line
    assert "(variant v, gemm_4096 on tpu_v5e_like)" in line


def test_an_n_of_m_pattern_with_n_not_below_m_is_one_clear_error(tmp_path, capsys):
    line = _refused(tmp_path, capsys, _variant(
        "  - {name: v, inline: {default: {sparsity: '4:4'}}}\n"))
    assert "precision_variants[0](v).inline.default.sparsity" in line and "N < M" in line


def test_a_tensor_file_of_the_wrong_shape_is_one_clear_error(tmp_path, capsys):
    np.save(tmp_path / "w.npy", np.ones((100, 64), dtype=np.float32))
    plan = tmp_path / "plan.yaml"
    plan.write_text("operators:\n  gemm: {weight: [int8], tensors: {b: w.npy}}\n")
    line = _refused(tmp_path, capsys, _variant("  - {name: v, plan: plan.yaml}\n"))
    assert re.search(r"w\.npy: operators\.gemm\.tensors\.b: shape \(100, 64\) does not "
                     r"fit gemm", line), line


@pytest.mark.parametrize("extra,expected", [
    ("  - {name: v}\n", "precision_variants[0](v): a precision variant names "
     "a plan file or an inline plan, exactly one"),
    ("  - {name: v, plan: none.yaml}\n",
     "precision_variants[0](v).plan: 'none.yaml': no such precision plan file"),
    ("  - {name: v, inline: {}}\n  - {name: v, inline: {}}\n",
     "precision_variants[1]: two precision variants are named 'v'"),
    ("  - {name: v, inline: {operators: {nope: {weight: [int8]}}}}\n",
     "precision_variants[0](v).inline.operators.nope: no operator 'nope'"),
    ("  - {name: v, inline: {}, quality: [{metric: acc, value: .nan, source: x}]}\n",
     "precision_variants[0](v).quality[0].value")])
def test_bad_precision_variants_are_one_clear_error_each(tmp_path, capsys, extra,
                                                         expected):
    assert expected in _refused(tmp_path, capsys, _variant(extra))


def test_precision_variants_on_a_multi_chip_system_are_refused(tmp_path, capsys):
    text = _variant("  - {name: v, inline: {}}\n").replace(
        "  workloads: [gemm_4096]\n", "  workloads: [gemm_4096]\n  system: {tp: 2}\n")
    assert "precision_variants[0](v): precision variants apply to single-chip studies" \
        in _refused(tmp_path, capsys, text)



def test_verify_accepts_a_precision_run_of_a_workload_file(tmp_path, capsys):
    """The run simulated the plan's formats (the embedded workload, not its file's) and
    recorded what the plan chose: verify reruns the former, takes the latter as
    recorded, and still catches an edited figure."""
    plan = tmp_path / "int8.yaml"
    plan.write_text("name: int8_all\ndefault: {weight: [int8], activation: [int8]}\n")
    out = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "gemm_4096",
                 "--precision", str(plan), "--json", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0, capsys.readouterr().out
    result = json.loads(out.read_text())
    result["workload"]["cycles"] += 1
    out.write_text(json.dumps(result))
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    assert ".workload.cycles" in capsys.readouterr().out


def test_a_sparse_variant_runs_sparse_where_the_platform_lists_the_pattern(tmp_path):
    """A plan's 2:4 weights: streamed at twice the rate on the 2:4 what-if, decompressed
    and dense on tpu_v5e_like; compressed off chip on both; the pruning's emulated
    error is shown, and with no guardrail and no figure the win is flagged."""
    sparse24 = Path(__file__).resolve().parents[1] / "arch_configs" / "whatif" / \
        "tpu_v5e_sparse24.yaml"
    study = tmp_path / "study.yaml"
    study.write_text(_variant("  - {name: sparse, inline: {default: {sparsity: '2:4'}}}\n")
                     .replace("[tpu_v5e_like]", f"[tpu_v5e_like, {sparse24}]"))
    out = tmp_path / "packet"
    packet = write_packet(study, out, "--no-cache")
    runs = {(r["platform"], r["workload"]): json.loads((out / r["path"]).read_text())
            for r in packet["results"]}
    modes, ratios = {}, {}
    for platform in ("tpu_v5e_like", "whatif/tpu_v5e_sparse24"):
        base, run = runs[(platform, "gemm_4096")], runs[(platform, "gemm_4096+sparse")]
        [op] = run["operators"]
        modes[platform] = op["precision"]["sparsity_mode"]
        ratios[platform] = run["workload"]["useful_array_cycles"] / \
            base["workload"]["useful_array_cycles"]
        assert op["per_instance_bytes"]["compulsory"]["b"] < \
            base["operators"][0]["per_instance_bytes"]["compulsory"]["b"]
    assert modes == {"tpu_v5e_like": "decompressed",
                     "whatif/tpu_v5e_sparse24": "structured"}
    assert ratios == {"tpu_v5e_like": 1.0, "whatif/tpu_v5e_sparse24": 0.5}
    section = _sections(packet)["precision-whatif"]
    operators = section["tables"][1]["rows"]
    assert {row[4] for row in operators} == {"2:4"} and all(row[6] > 0.1
                                                            for row in operators)
    assert section["verdict"] == "fail"
