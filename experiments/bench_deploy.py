"""Deployment-search speed (issue 44, DESIGN.md section 20; issue 28 before it).
Whole `accsim plan-deployment` processes are timed, each with a cold cost cache (a
fresh, empty folder), and the commands printed with the machine's load (`uptime`):

- `issue`: the command issue 44 names, tpu_v5e_like and whatif/tpu_v5e_256x256
  serving Llama-3.1-8B on the whole splitwise_conv trace (19,366 requests), the default
  grid (8 chips: 60 deployments per platform); target <= 60 s on 2 cores;
- `grid`: 3 platforms x 105 deployments (chips per replica 1-16 with every T x P
  split, 1-16 replicas within 16 chips, max batch 16/64/256) of Llama-3.1-8B on 1,000
  requests of the trace; target <= 5 min; then the same search on a local Dask
  cluster of 2 workers, whose points must equal the process pool's;
- `rerun` (issue 28): the `grid` search of Llama-3.1-8B and -70B through a store
  (target <= 10 min each), then the same with only the SLA 20% tighter, which reads
  back the serving runs and roofline bounds stored and the iteration costs cached
  beside the store; target < 30 s.

A small untimed search first warms the compiled kernels (Numba's on-disk cache).

Run: `python experiments/bench_deploy.py [--parts issue,grid,rerun] [--requests N]
[--budget-chips N] [--max-batch N,...] [--archs a,b,c] [--model M] [--rerun-models
a,b]`. CPU seconds are
those of the search's process and its workers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ISSUE_TARGET_S, GRID_TARGET_S, RERUN_TARGET_S = 60.0, 300.0, 30.0
ISSUE_ARCHS = "tpu_v5e_like,whatif/tpu_v5e_256x256"
ARCHS = "tpu_v5e_like,whatif/tpu_v5e_256x256,tpu_v1"
# model -> (TTFT p99, TPOT p99) in ms (issue 44's for Llama-3.1-8B)
SLA_MS = {"llama_3_1_8b": (2000.0, 100.0), "llama_3_1_70b": (5000.0, 200.0)}
RERUN_MODELS = "llama_3_1_8b,llama_3_1_70b"
TIGHTER = 0.8


def command(model: str, archs: str, scale: float, *extra: str) -> list[str]:
    ttft, tpot = (value * scale for value in SLA_MS.get(model, SLA_MS["llama_3_1_8b"]))
    line = [sys.executable, "-m", "simulator.cli", "plan-deployment", "--model", model,
            "--arrival-trace", "splitwise_conv",
            "--sla", f"ttft_p99_ms={ttft:g},tpot_p99_ms={tpot:g}", *extra]
    for arch in archs.split(","):
        line += ["--arch", arch]
    return line


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every finished child process so far, worker
    processes included."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed(line: list[str], cache: Path) -> tuple[float, float, str, bool]:
    """Wall and CPU seconds of one whole process (its cost cache the folder `cache`,
    empty unless a store keeps its own), its summary lines and whether it succeeded."""
    print("command:", " ".join(line[1:]), flush=True)
    print("  load before:", load(), flush=True)
    environment = dict(os.environ, XDG_CACHE_HOME=str(cache))
    start, cpu = time.perf_counter(), children_cpu_s()
    done = subprocess.run(line, capture_output=True, text=True, env=environment)
    wall, used = time.perf_counter() - start, children_cpu_s() - cpu
    print("  load after:", load(), flush=True)  # a long run's load moves
    summary = [text for text in done.stdout.splitlines()
               if text.startswith(("searched ", "store "))]
    if done.returncode:  # e.g. every point pruned: what accsim said
        summary.append(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else
                       f"exit status {done.returncode}")
    return wall, used, "; ".join(summary), done.returncode == 0


def warm(root: Path, model: str) -> None:
    """One small search, untimed, in a cost cache of its own: compiled kernels
    (Numba's on-disk cache beside the sources) are then warm for the timed runs,
    whose cost caches stay cold. Two chips, so that pipelined replicas (P = 2) run
    too: the compiled serving loop has one kernel per replica kind."""
    line = command(model, "tpu_v5e_like", 1.0, "--requests", "20", "--budget-chips",
                   "2", "--max-batch", "16", "--scheduler", "serial")
    subprocess.run(line, capture_output=True, text=True,
                   env=dict(os.environ, XDG_CACHE_HOME=str(root / "warm-cache")))


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def report(label: str, measured: tuple[float, float, str, bool], target: float,
           cores: int = 2) -> None:
    """A timed process against its target (a failed process meets none), with its CPU
    seconds per core: the wall time it would take on `cores` idle cores at best (on
    a shared machine the wall time also counts other work's)."""
    seconds, cpu, summary, ok = measured
    print(f"  {label}: {seconds:7.1f} s whole process, {cpu:7.1f} CPU s ({cpu / cores:.1f}"
          f" s per core on {cores}) (target <= {target:.0f} s): "
          f"{verdict(ok and seconds <= target)}; {summary}", flush=True)


def points(path: Path) -> list[dict]:
    """A search's rows as --json writes them."""
    return json.loads(path.read_text())["points"]


def runs(path: Path) -> str:
    """How many serving runs the rate searches of a search's points took."""
    if not path.exists():
        return "no --json written"
    rows = points(path)
    taken = sum(row.get("evaluations", 0) for row in rows)
    return (f"{sum(row['status'] == 'searched' for row in rows)} points searched, "
            f"{taken} runs in their rate searches (shared runs counted per point)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="issue,grid,rerun")
    parser.add_argument("--requests", type=int, default=1000, help="grid and rerun")
    parser.add_argument("--budget-chips", type=int, default=16, help="grid and rerun")
    parser.add_argument("--max-batch", default="16,64,256", help="grid and rerun")
    parser.add_argument("--model", default="llama_3_1_8b")
    parser.add_argument("--archs", default=ARCHS, help="grid and rerun")
    parser.add_argument("--issue-archs", default=ISSUE_ARCHS)
    parser.add_argument("--rerun-models", default=RERUN_MODELS)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    grid = ["--requests", str(args.requests), "--budget-chips", str(args.budget_chips),
            "--max-batch", args.max_batch]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        warm(root, args.model)
        if "issue" in parts:
            out = root / "issue.json"
            line = command(args.model, args.issue_archs, 1.0, "--scheduler", "processes",
                           "--workers", "2", "--json", str(out))
            report("issue 44's command", timed(line, root / "issue-cache"),
                   ISSUE_TARGET_S)
            print(f"  {runs(out)}", flush=True)
        if "grid" in parts:
            pooled, dask = root / "pool.json", root / "dask.json"
            for scheduler, out, cache in (("processes", pooled, "pool-cache"),
                                          ("dask-local", dask, "dask-cache")):
                line = command(args.model, args.archs, 1.0, *grid, "--scheduler",
                               scheduler, "--workers", "2", "--json", str(out))
                report(f"grid on {scheduler} (2 workers)", timed(line, root / cache),
                       GRID_TARGET_S)
                print(f"  {runs(out)}", flush=True)
            same = pooled.exists() and dask.exists() and points(pooled) == points(dask)
            count = len(points(pooled)) if pooled.exists() else 0
            print(f"  Dask's points equal the process pool's (target: identical): "
                  f"{verdict(same)} ({count} points)", flush=True)
        for model in args.rerun_models.split(",") if "rerun" in parts else ():
            store, cache = root / f"{model}.sqlite", root / f"{model}-cache"
            first = command(model, args.archs, 1.0, *grid, "--store", str(store))
            report("first search through a store", timed(first, cache), 600.0)
            again = command(model, args.archs, TIGHTER, *grid, "--store", str(store))
            report(f"SLA {TIGHTER:g}x only", timed(again, cache), RERUN_TARGET_S)


if __name__ == "__main__":
    main()
