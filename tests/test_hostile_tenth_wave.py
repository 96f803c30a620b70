"""Hostile input, tenth wave: `accsim verify` of forged review packets, whose result
files and study are the forger's, each hashed into packet.json so that every check
before the rerun passes. Table-driven like tests/test_hostile_ninth_wave.py and run by
the shared timed runner (tests/timed_cli.py): a refused packet ends in a non-zero exit
with one error line naming the file, field and rule, within SECONDS, with no traceback,
and writes no file (as do `accsim regress` of a forged baseline, `accsim review` of
a study asking for unbounded work and `accsim calibrate` of a ragged CSV); a packet
verify will not trust (a link out of its folder, a study asking for more than the
packet holds) is NOT verified, saying why.

Each row: (id, forge(folder) editing a copy of a genuine small packet in `folder`,
fragments the error line, or verify's report, holds).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from simulator.cli import main
from simulator.review.packet import inline_svg, rendered
from test_bad_inputs import dump
from test_hostile_sweep import refused_in
from timed_cli import run_main

SECONDS = 20
GEMM = {"name": "w", "operators": [
    {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 8, "n": 8, "k": 8}]}
STUDY = {"title": "one small GEMM", "objective": "forge its packet", "owners": ["a tester"],
         "scope": {"platforms": ["tpu_v1"], "workloads": ["w.yaml"],
                   "serving": {"rate_per_s": 100, "requests": 4}},
         "baseline": "tpu_v1", "risks": [{"risk": "none", "owner": "a tester"}]}
PACKET = "p/packet.json"
RUN = "results/tpu_v1.w.default.json"


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> Path:
    """A folder holding s.yaml, w.yaml and the packet p/ `accsim review` makes of them:
    one run result, one serving result, figures."""
    folder = tmp_path_factory.mktemp("genuine")
    (folder / "s.yaml").write_text(dump(STUDY))
    (folder / "w.yaml").write_text(dump(GEMM))
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        assert main(["review", "s.yaml", "--out", "p", "--no-cache"]) == 0
    finally:
        os.chdir(cwd)
    return folder


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def packet(folder: Path) -> dict:
    return json.loads((folder / PACKET).read_text())


def save(folder: Path, data: dict) -> None:
    """packet.json as given, and its pages rendered from it (as a review renders them),
    so that only what the case forges differs."""
    (folder / PACKET).write_text(json.dumps(data))
    figures = [fig["file"] for section in data["sections"] for fig in section["figures"]]
    svgs = {Path(file).stem: inline_svg((folder / "p" / file).read_text())
            for file in figures}
    for name, text in rendered(data, svgs).items():
        (folder / "p" / name).write_text(text)


def entry(data: dict, kind: str) -> dict:
    return next(e for e in data["results"] if e["kind"] == kind)


def result_file(kind: str, content) -> callable:
    """A forge: the packet's result of `kind` (a new assumptions result if it has none)
    holding `content` (a function of the genuine content, or the content), hashed."""
    def forge(folder: Path) -> None:
        data = packet(folder)
        if kind == "assumptions":
            data["results"].append({**entry(data, "run"), "kind": kind,
                                    "path": "results/assumptions.w.json"})
        found = entry(data, kind)
        path = folder / "p" / found["path"]
        old = json.loads(path.read_text()) if path.exists() else None
        new = content(old) if callable(content) else content
        path.write_text(new if isinstance(new, str) else json.dumps(new))
        found["sha256"] = sha(path)
        save(folder, data)
    return forge


def listed_twice(kind: str) -> callable:
    def forge(folder: Path) -> None:
        data = packet(folder)
        if kind == "results":
            data["results"] = data["results"] + data["results"][:1] * 1000
        else:
            section = next(s for s in data["sections"] if s["figures"])
            section["figures"] = section["figures"] + section["figures"][:1] * 1000
        save(folder, data)
    return forge


def loads(rates: int, requests: int, copies: int = 1) -> callable:
    """The serving result served at `rates` loads of `requests` requests, in `copies`
    result files."""
    def forge(folder: Path) -> None:
        data = packet(folder)
        served = entry(data, "serving")
        content = json.loads((folder / "p" / served["path"]).read_text())
        content["serving"]["rates_per_s"] = [50.0 + i for i in range(rates)]
        content["serving"]["spec"]["requests"] = requests
        data["results"].remove(served)
        for copy in range(copies):
            path = folder / "p" / "results" / f"serving.{copy}.json"
            path.write_text(json.dumps(content))
            data["results"].append({**served, "path": f"results/{path.name}",
                                    "sha256": sha(path)})
        save(folder, data)
    return forge


ASSUMED = {"format": "accsim-assumptions", "metric": "time_s", "fields": [],
           "engine": "auto", "workload": "w", "mapping": "default"}
INPUT = {"label": "a", "platform": {}, "workload": GEMM, "mapping": {}}


def assumptions(**changes) -> dict:
    return {"assumptions": ASSUMED, "inputs": [INPUT], "platforms": [], **changes}


def study(change) -> callable:
    """The packet's study file changed by `change(study, folder)`, its hash recorded."""
    def forge(folder: Path) -> None:
        content = yaml.safe_load((folder / "s.yaml").read_text())
        change(content, folder)
        (folder / "s.yaml").write_text(dump(content))
        data = packet(folder)
        data["study"]["sha256"] = sha(folder / "s.yaml")
        save(folder, data)
    return forge


def more_platforms(content: dict, folder: Path) -> None:
    content["scope"]["platforms"] += [{"base": "tpu_v1", "name": f"v{i}",
                                       "set": {"clock_ghz": 0.7 + i / 1000}}
                                      for i in range(250)]


def a_sweep(content: dict, folder: Path) -> None:
    (folder / "sw.yaml").write_text(dump({
        "name": "sw", "platform": "tpu_v1", "workloads": ["gemm_4096"],
        "axes": {"systolic_array.rows": list(range(8, 16_000, 8))},
        "objectives": {"time_s": "min"}}))
    content["scope"]["sweep"] = "sw.yaml"


def linked(relative: str, target: str | None) -> callable:
    """The packet's file at `relative` moved beside the packet and linked to there
    (`target` None: a link to itself), its hash unchanged."""
    def forge(folder: Path) -> None:
        path = folder / "p" / relative
        if target is None:
            path.unlink()
            os.symlink(path.name, path)
            return
        shutil.move(path, folder / target)
        os.symlink(os.path.relpath(folder / target, path.parent), path)
    return forge


REFUSED: list[tuple[str, callable, list[str]]] = []
NOT_VERIFIED: list[tuple[str, callable, list[str]]] = []
REGRESSED: list[tuple[str, callable, list[str]]] = []  # (id, baseline maker, fragments)

# --- a packet naming one file many times: each was hashed and rerun every time (a
# thousand copies of a run result: a thousand simulations) -------------------------
for kind in ("results", "figures"):
    REFUSED.append((f"{kind} listing one file 1001 times", listed_twice(kind),
                    [PACKET, "sections" if kind == "figures" else "results", "twice"]))

# --- serving results inside verify's work bound one by one, not together or not per
# load: a curve of 100,000 loads of 4 requests (400,000 requests: a tenth of the bound,
# served for over an hour), two results each at two thirds of the bound -------------
REFUSED.append(("a serving result of 100,000 loads", loads(100_000, 4),
                ["serving.0.json", "serving.spec.requests", "100,000 loads",
                 "verify's bound"]))
REFUSED.append(("two serving results sharing the bound", loads(40, 1_000_000, copies=2),
                ["serving.1.json", "for the reruns before it", "verify's bound"]))

# --- an assumptions result file: read with no schema (a KeyError or TypeError
# traceback at each missing or mistyped field), computed again however many platforms
# it embeds ----------------------------------------------------------------------
for label, content, fragments in (
        ("an empty mapping", {}, ["assumptions", "required"]),
        ("a list", [], ["expected a mapping"]),
        ("its head a string", assumptions(assumptions="x"), ["assumptions"]),
        ("its head without a metric", assumptions(assumptions={"fields": [],
                                                               "engine": "auto"}),
         ["assumptions.metric", "required"]),
        ("an unknown metric", assumptions(assumptions={**ASSUMED, "metric": "speed"}),
         ["assumptions.metric"]),
        ("an unknown engine", assumptions(assumptions={**ASSUMED, "engine": "os"}),
         ["assumptions.engine"]),
        ("an input without its platform", assumptions(inputs=[{"label": "a"}]),
         ["inputs[0].platform", "required"]),
        ("an input's workload a string", assumptions(inputs=[{**INPUT,
                                                              "workload": "w"}]),
         ["inputs[0].workload"]),
        ("a platform's serving a list", assumptions(platforms=[{"serving": []}]),
         ["platforms[0].serving"]),
        ("201 platforms", assumptions(inputs=[INPUT] * 201),
         ["inputs", "201 platforms", "verify's bound"])):
    REFUSED.append((f"an assumptions result of {label}",
                    result_file("assumptions", content),
                    ["assumptions.w.json", *fragments]))

# --- the study reviewed again asked for more than the packet holds: 251 runs beside
# a packet of one run result, a sweep of 1,999 points beside none (hours of them) ----
NOT_VERIFIED.append(("a study of 251 platforms", study(more_platforms),
                     ["asks for 251 runs, the packet holds 1"]))
NOT_VERIFIED.append(("a study sweeping 1,999 points", study(a_sweep),
                     ["asks for 1,999 sweep points, the packet holds 0"]))

# --- a packet's own file a link leading out of its folder: read (and, its hash
# recorded, trusted) wherever it led --------------------------------------------
NOT_VERIFIED.append(("a run result linked outside", linked(RUN, "r.json"),
                     ["results/", "a link leading outside the packet's folder"]))
NOT_VERIFIED.append(("the results folder linked outside", linked("results", "elsewhere"),
                     ["a link leading outside the packet's folder"]))
NOT_VERIFIED.append(("a figure linked outside", linked("figures", "figs"),
                     ["figure: ", "a link leading outside the packet's folder"]))
NOT_VERIFIED.append(("a run result linked to itself", linked(RUN, None),
                     ["a link loop"]))


# --- accsim regress: a baseline was checked field by field by hand, so an operator
# named by a number or a list, a workload total or a mapping of the wrong type was a
# traceback mid-report, and operators given as a mapping or cycles as a string were
# compared as no operators, or as the number the string spells --------------------
REGRESS = ["regress", "--arch", "tpu_v1", "--workload", "gemm_4096", "--baseline",
           "b.json"]


@functools.cache
def baseline_result() -> str:
    """What `accsim run --json` writes for REGRESS's run."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "b.json"
        assert main(["run", *REGRESS[1:5], "--json", str(path)]) == 0
        return path.read_text()


def baseline(change) -> callable:
    """A file maker: the baseline with `change(content)` made to it."""
    def make_file(path: Path) -> None:
        content = json.loads(baseline_result())
        change(content)
        path.write_text(json.dumps(content))
    return make_file


def setting(dotted: str, value) -> callable:
    def change(content: dict) -> None:
        *parents, leaf = dotted.split(".")
        node = content
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[leaf] = value
    return change


for dotted, value, fragments in (
        ("operators.0.name", 5, ["operators[0].name", "string"]),
        ("operators.0.name", [1], ["operators[0].name", "string"]),
        ("operators", {}, ["operators", "list"]),
        ("operators.0.totals.cycles", "123", ["operators[0](gemm).totals.cycles"]),
        ("operators.0.totals.cycles", 10**4000, ["totals.cycles", "less than"]),
        ("operators.0.totals.energy_pj", "nan", ["totals.energy_pj", "number"]),
        ("workload", "x", ["workload", "not an accsim result file"]),
        ("workload.cycles", "x", ["workload.cycles", "integer"]),
        ("manifest.inputs.mapping", [], ["manifest.inputs.mapping"]),
        ("manifest.inputs.mapping.canonical.default", [],
         ["manifest.inputs.mapping.canonical.default"])):
    REGRESSED.append((f"regress: a baseline's {dotted} of {str(value)[:12]}",
                      baseline(setting(dotted, value)), ["b.json", *fragments]))


# --- accsim review: a study's latency-throughput curve took any number of loads (a
# forged study of 100,000 ran for hours) where serve's --sweep-rate takes 1,000 -------
REVIEW = ["review", "s.yaml", "--out", "o", "--no-cache"]
CURVE = {**STUDY, "scope": {**STUDY["scope"], "serving": {
    "rate_per_s": 100, "curve_rates_per_s": [1.0 + i for i in range(1001)]}}}
REVIEWED = [("a curve of 1,001 loads", {"s.yaml": dump(CURVE), "w.yaml": dump(GEMM)},
             ["s.yaml", "scope.serving.curve_rates_per_s", "at most 1000"])]

# --- accsim calibrate: a measurement CSV's row of fewer fields than its header was an
# AttributeError traceback (its missing fields read as None), one of more fields was
# fitted as if the extra were not there, a field past the csv module's limit was a
# csv.Error traceback ---------------------------------------------------------------
CALIBRATE = ["calibrate", "--arch", "tpu_v5e_like", "--measured", "m.csv", "-o",
             "o.yaml", "--folds", "2"]
MEASURED = ("operator,shape,dtype,measured_s\n"
            "gemm,m=8 n=8 k=8,bf16,1e-5\ngemm,m=8 n=16 k=8,bf16,1e-5\n")
CALIBRATED = [
    ("a row of one field", MEASURED + "gemm\n", ["m.csv", "line 4", "1 fields", "4"]),
    ("a row of five fields", MEASURED + "gemm,m=8 n=32 k=8,bf16,1e-5,x\n",
     ["m.csv", "line 4", "5 fields"]),
    ("a field of 400,000 characters", MEASURED + "gemm," + "m=8 " * 100_000 + ",bf16,1\n",
     ["m.csv", "line 4", "malformed CSV", "field limit"])]


def forged(genuine: Path, folder: Path, forge) -> None:
    for name in ("s.yaml", "w.yaml"):
        shutil.copy(genuine / name, folder / name)
    shutil.copytree(genuine / "p", folder / "p", symlinks=True)
    forge(folder)


def test_the_genuine_packet_verifies(genuine, tmp_path, monkeypatch, capsys):
    """What every case forges is a packet that verifies as the review wrote it, and
    whose run result is the file the link cases move."""
    monkeypatch.chdir(tmp_path)
    forged(genuine, tmp_path, lambda folder: save(folder, packet(folder)))
    assert entry(packet(tmp_path), "run")["path"] == RUN
    code, out, err, _ = run_main(["verify", PACKET], capsys, SECONDS)
    assert code == 0, out + err


@pytest.mark.parametrize("name, forge, fragments", REFUSED,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in REFUSED])
def test_a_forged_packet_is_one_clear_error(name, forge, fragments, genuine, tmp_path,
                                            monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    forged(genuine, tmp_path, forge)
    _, changed = refused_in(tmp_path, {}, ["verify", PACKET], capsys, SECONDS, fragments)
    assert not changed


@pytest.mark.parametrize("name, forge, fragments", NOT_VERIFIED,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in NOT_VERIFIED])
def test_a_forged_packet_is_not_verified(name, forge, fragments, genuine, tmp_path,
                                         monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    forged(genuine, tmp_path, forge)
    code, out, err, elapsed = run_main(["verify", PACKET], capsys, SECONDS)
    assert code == 1 and "NOT verified" in err, out + err
    assert "Traceback" not in out + err and elapsed < SECONDS
    for fragment in fragments:
        assert fragment in out, out


@pytest.mark.parametrize("name, make_baseline, fragments", REGRESSED,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in REGRESSED])
def test_a_forged_baseline_is_one_clear_error(name, make_baseline, fragments, tmp_path,
                                              monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _, changed = refused_in(tmp_path, {"b.json": make_baseline}, REGRESS, capsys,
                            SECONDS, fragments)
    assert not changed


@pytest.mark.parametrize("name, files, fragments", REVIEWED,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in REVIEWED])
def test_a_hostile_study_is_one_clear_error(name, files, fragments, tmp_path,
                                            monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _, changed = refused_in(tmp_path, files, REVIEW, capsys, SECONDS, fragments)
    assert not changed


@pytest.mark.parametrize("name, measured, fragments", CALIBRATED,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CALIBRATED])
def test_a_hostile_measurement_file_is_one_clear_error(name, measured, fragments,
                                                       tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _, changed = refused_in(tmp_path, {"m.csv": measured}, CALIBRATE, capsys, SECONDS,
                            fragments)
    assert not changed
