"""Issue 28's speed acceptance: `accsim plan-deployment` over 3 platforms x about 100
deployments (chips per replica 1-16 with every T x P split, 1-16 replicas within 16
chips, max batch 16/64/256: 105 points per platform) of Llama-3.1-8B and of
Llama-3.1-70B, each point's SLA capacity searched over 1,000 requests of the shipped
splitwise_conv trace; then the same search with only the SLA changed (20% tighter),
which reuses the iteration costs cached beside the store and the serving runs and
roofline bounds kept in it (only rates the new rate search has not tried are
simulated; the goodput of those read back is counted from their stored requests).
Targets: each first search <= 10 min on 2 cores, the SLA-only rerun < 30 s. Whole
processes are timed and the commands printed. The full run takes about 3 minutes on 2
quiet cores; --requests, --budget-chips and --max-batch make a reduced run.

Run: `python experiments/bench_deploy.py [--requests N] [--budget-chips N]
[--max-batch N,...] [--models a,b] [--archs a,b,c] [--scheduler serial|processes]`.
CPU seconds are those of the search's process and its workers.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST_TARGET_S, RERUN_TARGET_S = 600.0, 30.0
ARCHS = "tpu_v5e_like,whatif/tpu_v5e_256x256,tpu_v1"
MODELS = "llama_3_1_8b,llama_3_1_70b"
# model -> (TTFT p99, TPOT p99) in ms
SLA_MS = {"llama_3_1_8b": (2000.0, 100.0), "llama_3_1_70b": (5000.0, 200.0)}
TIGHTER = 0.8


def command(args, model: str, store: Path, scale: float) -> list[str]:
    ttft, tpot = (value * scale for value in SLA_MS.get(model, (2000.0, 100.0)))
    line = [sys.executable, "-m", "simulator.cli", "plan-deployment", "--model", model,
            "--arrival-trace", "splitwise_conv", "--requests", str(args.requests),
            "--sla", f"ttft_p99_ms={ttft:g},tpot_p99_ms={tpot:g}",
            "--budget-chips", str(args.budget_chips), "--max-batch", args.max_batch,
            "--store", str(store), "--scheduler", args.scheduler]
    for arch in args.archs.split(","):
        line += ["--arch", arch]
    return line


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every finished child process so far, worker
    processes included."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(line: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one whole process and its summary lines."""
    start, cpu = time.perf_counter(), children_cpu_s()
    done = subprocess.run(line, capture_output=True, text=True)
    summary = [text for text in done.stdout.splitlines()
               if text.startswith(("searched ", "store "))]
    if done.returncode:  # e.g. every point pruned: what accsim said
        summary.append(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else
                       f"exit status {done.returncode}")
    return time.perf_counter() - start, children_cpu_s() - cpu, "; ".join(summary)


def verdict(seconds: float, target: float) -> str:
    return "met" if seconds <= target else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--budget-chips", type=int, default=16)
    parser.add_argument("--max-batch", default="16,64,256")
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--archs", default=ARCHS)
    parser.add_argument("--scheduler", default="processes", help="plan-deployment's "
                        "(serial: one process, for a before/after of the pool)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for model in args.models.split(","):
            store = Path(folder) / f"{model}.sqlite"
            first = command(args, model, store, 1.0)
            print("command:", " ".join(first))
            seconds, cpu, summary = timed(first)
            print(f"  first search: {seconds:7.1f} s whole process, {cpu:7.1f} CPU s "
                  f"(target <= {FIRST_TARGET_S:.0f} s): {verdict(seconds, FIRST_TARGET_S)}"
                  f"; {summary}")
            seconds, cpu, summary = timed(command(args, model, store, TIGHTER))
            print(f"  SLA {TIGHTER:g}x only: {seconds:7.1f} s whole process, {cpu:7.1f} "
                  f"CPU s (target < {RERUN_TARGET_S:.0f} s): "
                  f"{verdict(seconds, RERUN_TARGET_S)}; {summary}")


if __name__ == "__main__":
    main()
