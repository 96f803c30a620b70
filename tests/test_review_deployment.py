"""A review study that names a deployment search (scope.deployment_search): the packet
gets the search's section (each platform's best deployment, its binding constraint as
a finding, the front) from an export whose sha256 it records, `accsim verify` accepts
the packet and searches again to check its export, a second review searches nothing again, and the page renders in headless
Chromium. The shipped example study runs with a tiny model so the test stays short."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from test_review import CHROMIUM, STUDIES, chromium

SHIPPED = STUDIES / "llama31_8b_deployment_search.yaml"


def tiny_study(*, requests: int, edits=()) -> str:
    """The shipped study's text for the tiny model (config.json beside it): its
    workload and SLA scaled to it, `requests` requests, then `edits` (old, new)."""
    text = SHIPPED.read_text()
    for old, new in (("config: llama_3_1_8b", "config: config.json"),
                     ("model: llama_3_1_8b", "model: config.json"),
                     ("prompt_tokens: 512", "prompt_tokens: 64"),
                     ("output_tokens: 128", "output_tokens: 8"),
                     ("requests: 100", f"requests: {requests}"),
                     ("ttft_p99_ms: 1000, tpot_p99_ms: 60", "ttft_p99_ms: 0.5, "
                      "tpot_p99_ms: 0.2"),
                     ("../../arch_configs/", str(STUDIES.parents[1] / "arch_configs") + "/"),
                     *edits):
        assert old in text
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def packet(tmp_path_factory):
    """The shipped study with a tiny model, its workload and SLA scaled to it."""
    folder = tmp_path_factory.mktemp("deployment")
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    text = tiny_study(requests=48)
    study = folder / "study.yaml"
    study.write_text(text)
    out, cache = folder / "packet", folder / "cache"
    assert main(["review", str(study), "--out", str(out), "--cache", str(cache)]) == 0
    return study, out, cache, json.loads((out / "packet.json").read_text())


def test_the_search_is_a_section_with_each_binding_constraint_a_finding(packet, capsys):
    study, out, cache, data = packet
    (section,) = [s for s in data["sections"] if s["id"] == "deployment"]
    assert section["verdict"] == "pass"
    export = json.loads((out / "results" / "deployment.json").read_text())
    platforms = ["tpu_v5e_like", "whatif/tpu_v5e_256x256", "tpu_v5e_like_hbm3_whatif"]
    assert list(export["best"]) == platforms
    bindings = [f for f in data["findings"] if f["kind"] == "binding constraint"]
    assert len(bindings) == 3
    for platform, found in zip(platforms, bindings):
        top = export["best"][platform]
        assert found["text"].startswith(f"{platform}: best ")
        assert found["text"].endswith(top["binding"]["text"])
    (best,) = [t for t in section["tables"] if t["id"] == "deployment-best"]
    assert [row[0] for row in best["rows"]] == platforms
    assert [row[3] for row in best["rows"]] == \
        [export["best"][p]["sla_rate_rps"] for p in platforms]
    (entry,) = [r for r in data["results"] if r["kind"] == "deployment"]
    assert entry["path"] == "results/deployment.json"
    capsys.readouterr()
    assert main(["verify", str(out / "packet.json"), "--cache", str(cache)]) == 0
    # A second review reads every point back from the store in the run cache.
    again = study.parent / "again"
    assert main(["review", str(study), "--out", str(again), "--cache", str(cache)]) == 0
    assert (again / "results" / "deployment.json").read_text() == \
        (out / "results" / "deployment.json").read_text()
    (store,) = (cache / "deployments").glob("*.sqlite")  # one store, read back
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM deployments").fetchone()[0] == \
            len(export["points"])


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs "
                    "Debian's chromium package; apt-get install chromium)")
def test_the_deployment_packet_renders_in_headless_chromium(packet):
    _, out, _, data = packet
    shown = chromium("--virtual-time-budget=5000", "--dump-dom",
                     (out / "index.html").as_uri())
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert [line for line in shown.stderr.splitlines() if ":CONSOLE" in line] == []
    dom = shown.stdout
    assert re.search(r'<section id="s-deployment">', dom)
    assert 'id="table-deployment-best"' in dom and "Deployment search" in dom
    for found in data["findings"]:
        if found["kind"] == "binding constraint":
            assert found["text"].split(": best ")[0] in dom


def test_an_export_forged_with_its_hash_does_not_verify(packet, tmp_path, capsys):
    # verify searches again (here from the store in the run cache) and compares
    _, out, cache, _ = packet
    forged = out.parent / f"forged-{tmp_path.name}"
    shutil.copytree(out, forged)
    export = forged / "results" / "deployment.json"
    data = json.loads(export.read_text())
    (index, best), = [(i, p) for i, p in enumerate(data["points"])
                      if p["key"] == data["best"]["tpu_v5e_like"]["key"]]
    best["sla_rate_rps"] *= 2
    export.write_text(json.dumps(data, indent=1) + "\n")
    index_file = forged / "packet.json"
    recorded = json.loads(index_file.read_text())
    (entry,) = [r for r in recorded["results"] if r["kind"] == "deployment"]
    entry["sha256"] = hashlib.sha256(export.read_bytes()).hexdigest()
    index_file.write_text(json.dumps(recorded, indent=1) + "\n")
    capsys.readouterr()
    assert main(["verify", str(index_file), "--cache", str(cache)]) == 1
    assert f"differs on rerun: results/deployment.json: .points[{index}].sla_rate_rps" \
        in capsys.readouterr().out


def test_fit_curves_and_perf_per_watt_come_from_the_search(packet):
    _, out, _, data = packet
    export = json.loads((out / "results" / "deployment.json").read_text())
    sections = {s["id"]: s for s in data["sections"]}
    points = export["points"]
    searched = [row for row in points if row.get("sla_rate_rps") is not None]
    assert searched and len(searched) < len(points)  # some pruned or unmet, left out

    def rows(section_id: str) -> list[dict]:
        (found,) = sections[section_id]["tables"]
        names = [column["name"] for column in found["columns"]]
        return [dict(zip(names, row)) for row in found["rows"]]

    def pointed(row: dict) -> dict:  # the export's point the row's evidence names
        file, index = row["evidence"]["href"].split("#/points/")
        assert file == "results/deployment.json"
        return points[int(index)]

    # Fit: one row per platform of the search (not per run of the study's own model).
    fit = rows("fit")
    assert [row["platform"] for row in fit] == list(export["best"])
    for row in fit:
        mine = [p for p in searched if p["platform"] == row["platform"]]
        assert row["meets SLA"] == ("yes" if mine else "NO")
        assert row["deployments meeting it"] == len(mine)
        top = export["best"][row["platform"]]
        assert row["SLA capacity req/s"] == top["sla_rate_rps"] == \
            pointed(row)["sla_rate_rps"]
        assert 0 <= row["headroom %"] < 1
    assert sections["fit"]["verdict"] == "pass"
    # Latency-throughput: every point with an SLA capacity, its percentiles there.
    curves = rows("serving")
    assert len(curves) == len(searched)
    for row in curves:
        point = pointed(row)
        assert (row["SLA capacity req/s"], row["achieved req/s"], row["ttft p99 ms"],
                row["tpot p99 ms"]) == (point["sla_rate_rps"], point["throughput_rps"],
                                        point["ttft_p99_ms"], point["tpot_p99_ms"])
        assert row["just above: missed"] == ", ".join(point["above"]["missed"])
    assert [f["id"] for f in sections["serving"]["figures"]] == \
        ["serving-deployment-search"]
    # Perf per watt: each point's, against the baseline platform's best.
    base = export["best"]["tpu_v5e_like"]["tokens_per_s_per_watt"]
    watts = rows("efficiency")
    assert len(watts) == len(searched)
    for row in watts:
        point = pointed(row)
        assert row["tokens/s/W"] == point["tokens_per_s_per_watt"]
        assert row["x baseline best"] == pytest.approx(point["tokens_per_s_per_watt"] / base)
        assert row["W per chip"] == pytest.approx(point["power_w"] / point["chips"])
    assert max(row["x baseline best"] for row in watts
               if row["platform"] == "tpu_v5e_like") == pytest.approx(1.0)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_search_derived_sections_render_in_headless_chromium(packet):
    _, out, _, _ = packet
    shown = chromium("--virtual-time-budget=5000", "--dump-dom",
                     (out / "index.html").as_uri())
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert [line for line in shown.stderr.splitlines() if ":CONSOLE" in line] == []
    for table_id in ("fit", "serving", "efficiency"):
        assert f'id="table-{table_id}"' in shown.stdout
    assert "Latency-throughput points of the deployment search" in shown.stdout
    assert "<svg" in shown.stdout.split('id="s-serving"')[1].split("</section>")[0]


@pytest.mark.parametrize("line, replaced, fragment", [
    ("    model: llama_3_1_8b", "    model: no_such_model",
     "scope.deployment_search.model: no_such_model"),
    # each searched axis within plan-deployment's bounds (2**40 chips reached the
    # system plan's own check as a traceback)
    ("    chips_per_replica: [1, 2]", "    chips_per_replica: [1, 1099511627776]",
     "scope.deployment_search.chips_per_replica[1]: Input should be less than or equal "
     "to 65536"),
    ("    replicas: [1]", "    replicas: [1099511627776]",
     "scope.deployment_search.replicas[0]: Input should be less than or equal to 65536"),
    ("    max_batch: [32]", "    max_batch: [1099511627776]",
     "scope.deployment_search.max_batch[0]: Input should be less than or equal to 16384"),
])
def test_a_bad_search_is_refused_before_any_simulation(tmp_path, capsys, line, replaced,
                                                        fragment):
    study = tmp_path / "study.yaml"
    text = SHIPPED.read_text()
    assert line in text
    study.write_text(text.replace(line, replaced)
                     .replace("../../arch_configs/",
                              str(STUDIES.parents[1] / "arch_configs") + "/"))
    assert main(["review", str(study), "--out", str(tmp_path / "packet"), "--no-cache"]) == 1
    err = capsys.readouterr().err
    assert fragment in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "packet" / "results").exists()


def test_a_study_searches_precision_plans_beside_the_models_formats(tmp_path):
    """scope.deployment_search.precision is plan-deployment's --precision: every point
    once per plan (`none`: the model's own formats), each named by its plan; a plan
    path is relative to the study."""
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    plan = STUDIES / "precision" / "int8_weights.yaml"
    (tmp_path / "int8.yaml").write_text(plan.read_text())
    # Two of the shipped study's three platforms (the base and its HBM3 what-if): the
    # plans meet every platform's points, not only the first one's.
    whatif = str(STUDIES.parents[1] / "arch_configs" / "whatif" / "tpu_v5e_256x256.yaml")
    # 4 requests a load: the test asserts which points the search runs and names, not
    # what they sustain, and every point runs at any request count.
    text = tiny_study(requests=4, edits=(
        (f"    - {whatif}\n", ""),
        ("chips_per_replica: [1, 2]", "chips_per_replica: [1]\n"
         "    precision: [none, int8.yaml]"),
        ("budget_chips: 2", "budget_chips: 1")))
    study = tmp_path / "study.yaml"
    study.write_text(text)
    out = tmp_path / "packet"
    assert main(["review", str(study), "--out", str(out), "--no-cache"]) == 0
    export = json.loads((out / "results" / "deployment.json").read_text())
    assert list(export["best"]) == ["tpu_v5e_like", "tpu_v5e_like_hbm3_whatif"]
    names = {(row["platform"], row["precision"]) for row in export["points"]}
    assert names == {(platform, precision) for platform in export["best"]
                     for precision in ("none", "int8")}
    int8 = [row for row in export["points"] if row["precision"] == "int8"]
    assert all(row["precision_file"] == str(tmp_path / "int8.yaml") for row in int8)


def test_a_missing_precision_plan_is_refused_before_any_simulation(tmp_path, capsys):
    study = tmp_path / "study.yaml"
    study.write_text(SHIPPED.read_text().replace(
        "    budget_chips: 2", "    budget_chips: 2\n    precision: [none, gone.yaml]")
                     .replace("../../arch_configs/",
                              str(STUDIES.parents[1] / "arch_configs") + "/"))
    assert main(["review", str(study), "--out", str(tmp_path / "packet"), "--no-cache"]) == 1
    err = capsys.readouterr().err
    assert "scope.deployment_search.precision[1]" in err and "gone.yaml" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "packet" / "results").exists()


@pytest.mark.parametrize("edits, said", [
    # a grid of millions of points: refused on its count, without laying it out
    ((("budget_chips: 2", "budget_chips: 65536"),
      ("chips_per_replica: [1, 2]", "chips_per_replica: [%s]"
       % ", ".join(map(str, range(1, 65537)))),
      ("replicas: [1]", "replicas: [%s]" % ", ".join(map(str, range(1, 65537))))),
     "more than 900 points"),
    # its 9 points, each serving a million requests at least once
    ((("requests: 48", "requests: 1000000"),), "x 9 points (one load each at least)")],
    ids=["points", "requests"])
def test_a_forged_study_searching_past_verify_s_bounds_is_refused_before_searching(
        packet, tmp_path, capsys, edits, said):
    # the study edited (and its hash in the packet) after the review: step 1 reruns
    # the packet's results; the second review would search the forged study's grid
    study, out, cache, _ = packet
    shutil.copytree(out, tmp_path / "packet")
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    text = study.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    forged = tmp_path / "study.yaml"
    forged.write_text(text)
    index = tmp_path / "packet" / "packet.json"
    recorded = json.loads(index.read_text())
    recorded["study"].update(path="../study.yaml",
                             sha256=hashlib.sha256(forged.read_bytes()).hexdigest())
    index.write_text(json.dumps(recorded))
    capsys.readouterr()
    assert main(["verify", str(index), "--cache", str(cache)]) == 1
    printed = capsys.readouterr().out
    assert "packet.json: its study could not be reviewed again" in printed, printed
    assert said in printed and "--allow-long" in printed and \
        "scope.deployment_search" in printed, printed
