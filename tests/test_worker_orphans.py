"""Pool workers end with their parent (issue 47, item 8): a deployment search killed
outright (SIGKILL: no cleanup runs) mid-search leaves no worker process behind 5 s
later, though the workers are busy in a point's simulation when it dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_llama import TINY_LLAMA
from timed_cli import HANG_S

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")


def children(pid: int) -> set[int]:
    """Processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("busy_s", [0.0, 3.0], ids=["starting", "busy"])
def test_workers_exit_when_the_search_is_killed(tmp_path, busy_s):
    """Killed as soon as its workers exist (still importing the simulator), and
    once they are busy in points."""
    model = tmp_path / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    # Enough points that the search is still running when it is killed.
    argv = [sys.executable, "-m", "simulator.cli", "plan-deployment", "--arch",
            "tpu_v5e_like", "--model", str(model), "--prompt-tokens", "64",
            "--output-tokens", "8", "--requests", "400", "--sla", "ttft_p99_ms=500",
            "--budget-chips", "8", "--max-batch", "4,8,16,32", "--no-prune",
            "--scheduler", "processes", "--workers", "2"]
    parent = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HANG_S
        workers: set[int] = set()
        while time.monotonic() < deadline and parent.poll() is None:
            # the pool's workers (spawned: each has the coordinator as parent), once
            # both run and have had time to take a point
            workers = {pid for pid in children(parent.pid) if "multiprocessing" in
                       Path(f"/proc/{pid}/cmdline").read_text(errors="replace")}
            if len(workers) >= 2:
                break
            time.sleep(0.2)
        assert parent.poll() is None, "the search ended before its workers started"
        assert len(workers) >= 2, "no pool workers seen"
        time.sleep(busy_s)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + HANG_S  # each checks its parent every second
        while (left := [pid for pid in workers if alive(pid)]) and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"workers {left} running {HANG_S} s after their parent died"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in children(parent.pid) | workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # gone, as it should be
                pass
