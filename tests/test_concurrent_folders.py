"""Output and cache folders made by several processes at once (issue 42): the folder
guard makes a folder another process made at the same moment its own, so no run dies
with "cannot write: File exists" (DESIGN.md section 12)."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

from tiny_llama import TINY_LLAMA

from simulator.output.files import OutputFolder
from simulator.serving.cost_cache import CostCache
from timed_cli import HANG_S

PROCESSES = 8
ROUNDS = 40  # new folders each process makes, released together for each


def _write_in(root: str, gate, index: int, results) -> None:
    try:
        for round_ in range(ROUNDS):
            folder = f"{root}/{round_}/out"
            gate.wait()
            with OutputFolder.plain(folder, field="--out") as out:
                out.write(f"deep/er/part-{index}.json", json.dumps({"index": index}))
            gate.wait()
            CostCache(f"{folder}-costs", strict=True).store(
                f"key{index % 2}", {"compute": {(index,): (1, 2)}})
        results.put((index, "ok"))
    except BaseException as exc:  # reported to the parent, which asserts on it
        results.put((index, f"{type(exc).__name__}: {exc}"))


def test_processes_making_the_same_folder_at_once_all_succeed(tmp_path):
    """N processes released together make the same new folder, the same subfolders
    and the same cost-cache folder (ROUNDS times over, so that their creations
    overlap): every one succeeds and every file is there."""
    context = multiprocessing.get_context("fork")
    gate, results = context.Barrier(PROCESSES, timeout=HANG_S), context.Queue()
    workers = [context.Process(target=_write_in, args=(str(tmp_path), gate, i, results))
               for i in range(PROCESSES)]
    for worker in workers:
        worker.start()
    outcomes = dict(results.get(timeout=HANG_S) for _ in workers)
    for worker in workers:
        worker.join(timeout=HANG_S)
    assert outcomes == {i: "ok" for i in range(PROCESSES)}
    for round_ in range(ROUNDS):
        folder = tmp_path / str(round_) / "out"
        written = sorted(path.name for path in (folder / "deep" / "er").iterdir())
        assert written == sorted(f"part-{i}.json" for i in range(PROCESSES))
        costs = sorted(path.name for path in (folder.parent / "out-costs").iterdir())
        assert costs == ["key0.json", "key1.json"]


def test_two_deployment_searches_into_one_store_at_once(tmp_path):
    """Two `plan-deployment --store` processes started together on a new store (and
    so a new cost-cache folder beside it) both finish with the same answer."""
    model = tmp_path / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    store = tmp_path / "deploy.sqlite"
    command = [sys.executable, "-m", "simulator.cli", "plan-deployment",
               "--arch", "tpu_v5e_like", "--model", str(model), "--prompt-tokens", "64",
               "--output-tokens", "8", "--requests", "24",
               "--sla", "ttft_p99_ms=0.5,tpot_p99_ms=0.2", "--budget-chips", "2",
               "--replicas", "1", "--max-batch", "4", "--store", str(store)]
    runs = [subprocess.Popen([*command, "--json", str(tmp_path / f"plan{i}.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path) for i in range(2)]
    finished = [run.communicate(timeout=300) for run in runs]
    for run, (out, err) in zip(runs, finished):
        assert run.returncode == 0, err
    plans = [json.loads((tmp_path / f"plan{i}.json").read_text())["points"]
             for i in range(2)]
    assert plans[0] == plans[1]
