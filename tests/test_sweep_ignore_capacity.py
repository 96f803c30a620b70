"""`accsim sweep run --ignore-capacity` (issue 23 item 1): a point whose chip cannot
hold its workload fails with the capacity refusal unless the flag is given; with it,
the point runs under a key of its own that records the flag (every other key is as
before), and `accsim verify` reruns a review's sweep with the flag its keys carry."""

from __future__ import annotations

import json
import sqlite3

import simulator
from simulator.cli import main
from simulator.review.sweep import rerun_differences
from simulator.sweep.coordinator import run_sweep
from simulator.sweep.executors import Serial
from simulator.sweep.jobs import IGNORE_CAPACITY, canonical_json, make_plan, sha256
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store
from simulator.sweep.task import evaluate_point

# 64 x 32 one-byte weights alone are 2,048 bytes: a 1,024-byte chip cannot hold them.
GEMM = """\
name: small_gemm
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 32, n: 32, k: 64}
"""
SMALL, LARGE = 1024, 1_000_000_000
SPEC = f"""\
name: cap
platform: edge_32x32
workloads: [small_gemm.yaml]
axes:
  offchip.capacity_bytes: [{SMALL}, {LARGE}]
  systolic_array.rows: [16, 32]
objectives: {{time_s: min, mfu: max}}
"""
STUDY = """\
title: a sweep with a what-if chip
objective: check --ignore-capacity on the study's sweep
owners: [a tester]
scope:
  platforms: [edge_32x32]
  workloads: [small_gemm.yaml]
  sweep: cap.yaml
baseline: edge_32x32
"""


def spec_file(folder):
    (folder / "small_gemm.yaml").write_text(GEMM)
    (folder / "cap.yaml").write_text(SPEC)
    return folder / "cap.yaml"


def rows(path) -> dict[str, tuple]:
    with sqlite3.connect(path) as db:
        return {key: (json.loads(point), status, error, json.loads(inputs)) for
                key, point, status, error, inputs in
                db.execute("SELECT key, point, status, error, inputs FROM results")}


def small(point: dict) -> bool:
    return point["offchip.capacity_bytes"] == SMALL


def test_a_point_that_does_not_fit_fails_without_the_flag_and_runs_with_it(tmp_path):
    spec = str(spec_file(tmp_path))
    plain, flagged = tmp_path / "plain.sqlite", tmp_path / "flagged.sqlite"
    assert main(["sweep", "run", spec, "--store", str(plain), "--scheduler",
                 "serial"]) == 0
    assert main(["sweep", "run", spec, "--store", str(flagged), "--scheduler", "serial",
                 "--ignore-capacity"]) == 0
    without, with_flag = rows(plain), rows(flagged)
    assert len(without) == len(with_flag) == 4
    for point, status, error, inputs in without.values():
        assert status == ("failed" if small(point) else "ok")
        if small(point):
            assert "does not fit" in error and "--ignore-capacity" in error
        assert IGNORE_CAPACITY not in inputs
    for point, status, error, inputs in with_flag.values():
        assert (status, error) == ("ok", None)
        assert inputs[IGNORE_CAPACITY] is True  # the stamp, in what the key hashes
    # Same points, other keys: a what-if never answers for a checked point.
    assert not set(without) & set(with_flag)
    # The points that fit have the same figures either way.
    with sqlite3.connect(plain) as a, sqlite3.connect(flagged) as b:
        query = ("SELECT point, cycles, energy_j FROM results WHERE status = 'ok' "
                 f"AND json_extract(point, '$.\"offchip.capacity_bytes\"') = {LARGE} "
                 "ORDER BY point")
        assert a.execute(query).fetchall() == b.execute(query).fetchall()


def test_the_cli_says_capacity_is_ignored(tmp_path, capsys):
    spec = str(spec_file(tmp_path))
    assert main(["sweep", "run", spec, "--store", str(tmp_path / "s.sqlite"),
                 "--scheduler", "serial", "--ignore-capacity"]) == 0
    assert "capacity IGNORED (--ignore-capacity)" in capsys.readouterr().out


def test_default_keys_hash_exactly_what_they_did_before(tmp_path):
    plan = make_plan(load_sweep(spec_file(tmp_path)))
    for job in plan.jobs:
        assert set(job.inputs) == {"platform", "workload", "mapping", "model_version"}
        assert not job.ignore_capacity
        assert job.key == sha256(canonical_json({
            "platform": job.platform.model_dump(mode="json"),
            "workload": job.inputs["workload"], "mapping": job.inputs["mapping"],
            "model_version": simulator.MODEL_VERSION}))
    flagged = make_plan(load_sweep(spec_file(tmp_path)), ignore_capacity=True)
    assert [j.point for j in flagged.jobs] == [j.point for j in plan.jobs]
    assert all(a.key != b.key for a, b in zip(plan.jobs, flagged.jobs))


def test_the_flag_reaches_every_executor_and_evaluate_point(tmp_path):
    plan = make_plan(load_sweep(spec_file(tmp_path)), ignore_capacity=True)
    job = next(j for j in plan.jobs if small(j.point))
    refused = evaluate_point(job.platform, job.workload, job.mapping, job.system)
    assert refused["status"] == "failed" and "does not fit" in refused["error"]
    assert evaluate_point(job.platform, job.workload, job.mapping, job.system,
                          True)["status"] == "ok"
    with Store(tmp_path / "s.sqlite") as store, Serial() as executor:
        summary = run_sweep(plan, store, executor)
    assert (summary.computed, summary.failed) == (4, 0)


def test_review_with_the_flag_stamps_its_sweep_and_verify_reruns_it(tmp_path):
    spec_file(tmp_path)
    (tmp_path / "study.yaml").write_text(STUDY)
    out = tmp_path / "packet"
    assert main(["review", str(tmp_path / "study.yaml"), "--out", str(out),
                 "--no-cache", "--scheduler", "serial", "--ignore-capacity"]) == 0
    export = json.loads((out / "results" / "sweep.cap.json").read_text())
    assert export["sweep"][IGNORE_CAPACITY] is True
    assert all(p["status"] == "ok" for p in export["points"])
    front = [p for p in export["points"] if p["on_front"]]
    assert front and all(p["inputs"][IGNORE_CAPACITY] is True for p in front)
    # The front holds a point whose chip is too small: verify must rerun it as a what-if.
    assert any(small(p["point"]) for p in front)
    packet = json.loads((out / "packet.json").read_text())
    sweep = next(s for s in packet["sections"] if s["id"] == "sweep")
    assert any("Capacity IGNORED" in line for line in sweep["text"])
    assert main(["verify", str(out / "packet.json")]) == 0
    # Dropping the stamp from a front point breaks its key: verify says so.
    point = front[0]
    del point["inputs"][IGNORE_CAPACITY]
    _, found = rerun_differences(export, file="sweep.cap.json")
    assert any("do not hash to its key" in d for d in found)


def test_review_without_the_flag_writes_no_stamp(tmp_path):
    spec_file(tmp_path)
    (tmp_path / "study.yaml").write_text(STUDY)
    out = tmp_path / "packet"
    assert main(["review", str(tmp_path / "study.yaml"), "--out", str(out),
                 "--no-cache", "--scheduler", "serial"]) == 0
    export = json.loads((out / "results" / "sweep.cap.json").read_text())
    assert IGNORE_CAPACITY not in export["sweep"]
    assert {p["status"] for p in export["points"] if small(p["point"])} == {"failed"}
    assert main(["verify", str(out / "packet.json")]) == 0
