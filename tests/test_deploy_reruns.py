"""A deployment search rerun after changing only the SLA (issue 28, DESIGN.md section
18): every (point, rate) serving run is kept in the store by content, so the rerun
searches over the runs already simulated and simulates only the rates it lacks (each
run's goodput under the new SLA counted from its stored requests; a run stored without
them, by an earlier accsim, is simulated again where it is the SLA capacity); its
points equal a fresh search's under the new SLA."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.sweep import deploy
from simulator.sweep.deploy_store import cost_folder

SLA = "ttft_p99_ms=0.5,tpot_p99_ms=0.2"
# 64 requests: a burst of 48 meets the TTFT target on the pipelined point at every
# rate (a decode batch's attention as one launch), leaving it no bracket to search.
WORKLOAD = ["--prompt-tokens", "64", "--output-tokens", "8", "--requests", "64"]
GRID = ["--budget-chips", "2", "--replicas", "1", "--max-batch", "4,16"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("reruns") / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    return path


def search(model, capsys, sla: str, store=None) -> tuple[list[dict], str]:
    out = model.parent / "plan.json"
    out.unlink(missing_ok=True)
    args = ["plan-deployment", "--arch", "tpu_v5e_like", "--model", str(model), *WORKLOAD,
            "--sla", sla, *GRID, "--json", str(out)]
    assert main(args + (["--store", str(store)] if store else [])) == 0
    text = capsys.readouterr().out
    return json.loads(out.read_text())["points"], text


@pytest.fixture(scope="module")
def searched_once(tmp_path_factory) -> dict:
    """The searches every test starts from, each run once per module (keyed by its SLA
    and whether it keeps a store); a search is deterministic, so a test given one sees
    what running it would have printed and stored."""
    return {"folder": tmp_path_factory.mktemp("searched-once")}


def first_search(model, capsys, searched_once: dict, store) -> tuple[list[dict], str]:
    """search(model, capsys, SLA, store) into a new store: the module's one run of it,
    its store and the cost cache beside it copied to `store` and its cache folder (the
    test's own, which it may change)."""
    kept = searched_once["folder"] / "deploy.sqlite"
    if "first" not in searched_once:
        searched_once["first"] = search(model, capsys, SLA, kept)
    shutil.copyfile(kept, store)
    shutil.copytree(cost_folder(kept), cost_folder(store))
    return searched_once["first"]


def fresh_search(model, capsys, searched_once: dict, sla: str) -> list[dict]:
    """search(model, capsys, sla)'s points, with no store: run once per module."""
    if sla not in searched_once:
        searched_once[sla] = search(model, capsys, sla)[0]
    return searched_once[sla]


def runs(text: str) -> tuple[int, int]:
    read, simulated = re.search(r"serving runs: (\d+) read back, (\d+) simulated",
                                text).groups()
    return int(read), int(simulated)


def test_a_tighter_sla_simulates_only_the_rates_it_lacks(model, capsys, tmp_path,
                                                          searched_once):
    store = tmp_path / "deploy.sqlite"
    first, text = first_search(model, capsys, searched_once, store)
    read, simulated = runs(text)
    searched = [row for row in first if row["status"] == "searched"]
    assert read == 0 and simulated >= sum(row["evaluations"] for row in searched) > 0
    tighter = "ttft_p99_ms=0.4,tpot_p99_ms=0.16"
    again, text = search(model, capsys, tighter, store)
    read, simulated = runs(text)
    fresh = fresh_search(model, capsys, searched_once, tighter)
    assert again == fresh  # every point, figure for figure, goodput included
    evaluated = sum(row.get("evaluations", 0) for row in fresh)
    assert read > 0 and simulated < evaluated
    assert any(row["sla_rate_rps"] != before["sla_rate_rps"]
               for row, before in zip(fresh, first) if row["status"] == "searched")


def test_an_sla_deciding_alike_simulates_nothing_and_counts_its_goodput(
        model, capsys, tmp_path, searched_once):
    store = tmp_path / "deploy.sqlite"
    first, _ = first_search(model, capsys, searched_once, store)
    # A loose extra target: every run is judged as before, but goodput is kept per SLA:
    # it is counted from the requests each run stored, nothing is simulated again.
    looser = SLA + ",latency_max_ms=100000"
    again, text = search(model, capsys, looser, store)
    fresh = fresh_search(model, capsys, searched_once, looser)
    assert again == fresh
    searched = [row for row in fresh if row["status"] == "searched"]
    assert [row["sla_rate_rps"] for row in searched] == \
        [row["sla_rate_rps"] for row in first if row["status"] == "searched"]
    read, simulated = runs(text)
    assert simulated == 0
    assert read == sum(row.get("evaluations", 0) for row in fresh)


def test_runs_stored_without_requests_rerun_only_each_capacity_for_its_goodput(
        model, capsys, tmp_path, searched_once):
    store = tmp_path / "deploy.sqlite"
    first_search(model, capsys, searched_once, store)
    with sqlite3.connect(store) as db:  # as an earlier accsim stored them
        for rowid, text in db.execute("SELECT rowid, outcome FROM serving_runs").fetchall():
            outcome = json.loads(text)
            del outcome["requests"]
            db.execute("UPDATE serving_runs SET outcome = ? WHERE rowid = ?",
                       (json.dumps(outcome), rowid))
    looser = SLA + ",latency_max_ms=100000"
    again, text = search(model, capsys, looser, store)
    fresh = fresh_search(model, capsys, searched_once, looser)
    assert again == fresh
    searched = [row for row in fresh if row["status"] == "searched"]
    read, simulated = runs(text)
    assert simulated == len(searched)
    assert read == sum(row.get("evaluations", 0) for row in fresh)


def test_a_rerun_computes_no_roofline_bound_again(model, capsys, tmp_path, searched_once,
                                                  monkeypatch):
    store = tmp_path / "deploy.sqlite"
    first_search(model, capsys, searched_once, store)
    with sqlite3.connect(store) as db:
        bounds = db.execute("SELECT count(*) FROM iteration_bounds").fetchone()[0]
    assert bounds == 6  # TPOT and TTFT bounds of each of 3 T x P splits

    def recomputed(*_):
        raise AssertionError("a bound computed again")

    monkeypatch.setattr(deploy, "phase_bound_ms", recomputed)
    # A new SLA: every plan's bounds are read back, none prunes here.
    again, _ = search(model, capsys, "ttft_p99_ms=0.45,tpot_p99_ms=0.18", store)
    assert [row["status"] for row in again].count("pruned") == 0
    # A TPOT target below every decode step's bound prunes all, from the stored bounds.
    assert main(["plan-deployment", "--arch", "tpu_v5e_like", "--model", str(model),
                 *WORKLOAD, "--sla", "ttft_p99_ms=0.45,tpot_p99_ms=0.0001", *GRID,
                 "--store", str(store)]) == 1
    assert "all 6 points were pruned" in capsys.readouterr().err


def test_a_forged_run_row_is_one_clear_error(model, capsys, tmp_path, searched_once):
    store = tmp_path / "deploy.sqlite"
    first_search(model, capsys, searched_once, store)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE serving_runs SET outcome = '{\"figures\": 1}' WHERE rowid = 1")
    args = ["plan-deployment", "--arch", "tpu_v5e_like", "--model", str(model), *WORKLOAD,
            "--sla", "ttft_p99_ms=0.45,tpot_p99_ms=0.18", *GRID, "--store", str(store)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "serving_runs[1].outcome: not a run's figures and goodput" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("requests, rule", [
    ("[]", "requests: not an object"),
    ('{"horizon_s": -1}', "requests: horizon_s is not a duration"),
    ('{"horizon_s": 1, "latency": "%%", "ttft": "", "tpot": ""}',
     "requests: latency is not base64 text"),
    ('{"horizon_s": 1, "latency": "AAAAAAAAAAA=", "ttft": "", "tpot": ""}',
     "requests: the columns differ in length")])
def test_a_forged_run_rows_requests_are_one_clear_error(model, capsys, tmp_path,
                                                        searched_once, requests, rule):
    store = tmp_path / "deploy.sqlite"
    first_search(model, capsys, searched_once, store)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE serving_runs SET outcome = json_set(outcome, '$.requests', "
                   "json(?)) WHERE rowid = 1", (requests,))
    args = ["plan-deployment", "--arch", "tpu_v5e_like", "--model", str(model), *WORKLOAD,
            "--sla", "ttft_p99_ms=0.45,tpot_p99_ms=0.18", *GRID, "--store", str(store)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"serving_runs[1].outcome: {rule}" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
