"""Deployment search with a store (a sweep store holding a `deployments` table):
killed with SIGKILL and resumed, every point is stored exactly once and the resumed
search computes only what was missing; a rerun after changing only the SLA simulates
no iteration shape again (the cost cache beside the store), only those its new probes
meet for the first time; a forged row is one clear error; and the figure and CSV are
written."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.serving.llm_cost import LlmCost
from simulator.sweep.executors import Processes
from timed_cli import HANG_S

ORIGINAL_PART = LlmCost._part

SLA = "ttft_p99_ms=0.5,tpot_p99_ms=0.2"
# 3 plans (1, 2 x 1, 1 x 2 chips) x 1 or 2 replicas x max batch 4, 8 or 16.
POINTS = 18


def args(folder, store, *extra, sla=SLA) -> list[str]:
    return ["plan-deployment", "--arch", "tpu_v5e_like", "--model",
            str(folder / "config.json"), "--prompt-tokens", "64", "--output-tokens", "8",
            "--requests", "48", "--sla", sla, "--budget-chips", "4", "--chips-per-replica",
            "1,2", "--replicas", "1,2", "--max-batch", "4,8,16", "--store", str(store),
            *extra]


def grid_points(costs) -> dict[str, dict]:
    """Each cost cache entry's grid points: (part, coordinates) -> (seconds, joules)."""
    entries = {}
    for path in costs.glob("*.json"):
        content = json.loads(path.read_text())
        entries[path.name] = {(part, tuple(row[:-2])): tuple(row[-2:])
                              for part in ("dense", "prefill", "decode")
                              for row in content[part]}
    return entries


def stored_keys(path) -> list[str]:
    try:
        with sqlite3.connect(path) as db:
            return [key for (key,) in db.execute("SELECT key FROM deployments")]
    except sqlite3.OperationalError:  # not created yet
        return []


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    return tmp_path


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """One search into a new store, its figure, CSV and JSON written: the module's one
    run of it (a search is deterministic), its folder (the store and the cost cache
    beside it) copied by a test that changes them."""
    folder = tmp_path_factory.mktemp("searched")
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    assert main(args(folder, folder / "deploy.sqlite",
                     "--plot", str(folder / "capacity.png"),
                     "--csv", str(folder / "points.csv"),
                     "--json", str(folder / "plan.json"))) == 0
    return folder


def test_killed_search_resumes_with_every_point_once(folder, capsys, searched):
    store = folder / "deploy.sqlite"
    run = subprocess.Popen([sys.executable, "-m", "simulator.cli", *args(folder, store)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and run.poll() is None:
        if store.exists() and len(stored_keys(store)) >= 3:
            break
        time.sleep(0.02)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert run.returncode == -signal.SIGKILL, run.stderr.read()
    before = len(stored_keys(store))
    assert 3 <= before < POINTS
    out = folder / "plan.json"
    assert main(args(folder, store, "--json", str(out))) == 0
    assert f"{before} already stored, {POINTS - before} computed" in capsys.readouterr().out
    keys = stored_keys(store)
    assert len(keys) == len(set(keys)) == POINTS
    result = json.loads(out.read_text())
    assert sorted(row["key"] for row in result["points"]) == sorted(keys)
    # Resumed or not, the search finds the same: a fresh search into a new store.
    assert json.loads((searched / "plan.json").read_text())["points"] == result["points"]
    assert main(args(folder, store)) == 0
    assert f"{POINTS} already stored, 0 computed" in capsys.readouterr().out


def test_a_rerun_with_only_another_sla_simulates_no_iteration_shape(folder, capsys,
                                                                  monkeypatch, searched):
    store = folder / "deploy.sqlite"
    shutil.copyfile(searched / "deploy.sqlite", store)
    shutil.copytree(searched / "deploy-costs", folder / "deploy-costs")
    plot, table = searched / "capacity.png", searched / "points.csv"
    assert plot.read_bytes().startswith(b"\x89PNG") and plot.stat().st_size > 5000
    with table.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == POINTS and sum(row["on_front"] == "True" for row in rows) >= 1
    costs = folder / "deploy-costs"
    before = grid_points(costs)
    assert len(before) == 3  # one entry per plan: its chips' iteration costs
    # The rerun's probes may meet iteration shapes the first search never did; every
    # grid point it simulates must be one of those (serial, so each is counted here).
    simulated = []
    monkeypatch.setattr(LlmCost, "_part", lambda self, *part: simulated.append(part)
                        or ORIGINAL_PART(self, *part))
    assert main(args(folder, store, "--scheduler", "serial",
                     sla="ttft_p99_ms=0.4,tpot_p99_ms=0.15")) == 0
    assert f"0 already stored, {POINTS} computed" in capsys.readouterr().out
    after = grid_points(costs)
    assert all(after[name].items() >= points.items() for name, points in before.items())
    assert len(simulated) == sum(len(points) for points in after.values()) \
        - sum(len(points) for points in before.values())


def test_workers_start_only_for_points_the_store_does_not_answer(folder, capsys,
                                                                  searched, monkeypatch):
    # a worker's start (importing the simulator) costs about a second of a CPU each
    started = []
    monkeypatch.setattr(Processes, "start", lambda self, warm=None: started.append(warm))
    store = folder / "deploy.sqlite"
    shutil.copy(searched / "deploy.sqlite", store)
    assert main(args(folder, store, "--json", str(folder / "plan.json"))) == 0
    assert started == []
    again, first = (json.loads((where / "plan.json").read_text())
                    for where in (folder, searched))
    assert [again[key] for key in ("points", "best", "front")] == \
        [first[key] for key in ("points", "best", "front")]
    with sqlite3.connect(store) as db:  # one searched point forgotten
        (key,) = next(row for row in db.execute("SELECT key, outcome FROM deployments")
                      if json.loads(row[1])["status"] != "pruned")[:1]
        db.execute("DELETE FROM deployments WHERE key = ?", (key,))
    assert main(args(folder, store)) == 0
    assert len(started) == 1 and key in stored_keys(store)


def test_a_forged_row_is_one_clear_error(folder, capsys):
    store = folder / "deploy.sqlite"
    assert main(args(folder, store, "--budget-chips", "1", "--max-batch", "4")) == 0
    capsys.readouterr()
    with sqlite3.connect(store) as db:
        db.execute("UPDATE deployments SET outcome = '{\"status\": \"made up\"}'")
    assert main(args(folder, store, "--budget-chips", "1", "--max-batch", "4")) == 1
    err = capsys.readouterr().err
    assert "deployments[1].outcome: status not one of" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("make, extra, message", [
    (lambda f: (f / "notes.txt").write_text("not a store\n"), ("--store", "notes.txt"),
     "notes.txt: not an SQLite database"),
    (lambda f: None, ("--store", "nowhere/s.sqlite"), "--store"),
    (lambda f: None, ("--plot", "capacity.txt"), "--plot: must end in .png or .svg or .pdf"),
])
def test_a_bad_store_or_figure_path_is_one_clear_error(folder, capsys, monkeypatch, make,
                                                       extra, message):
    monkeypatch.chdir(folder)
    make(folder)
    line = args(folder, folder / "unused.sqlite")
    line = line[:line.index("--store")] + list(extra)
    assert main(line) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (folder / "unused-costs").exists()
