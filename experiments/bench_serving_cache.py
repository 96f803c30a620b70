"""Issue 26's serving acceptance: 100k requests of Llama-3.1-8B on tpu_v5e_like served
by `accsim serve`, whole process, with an empty cost cache (cold) and then with the
cache that run filled (warm); targets < 30 s cold and < 15 s warm. Then, in one
process with the warm cache, where the time goes: prepare (platform, model, cost
model), the event loop, the summary, the bucketing error (exact iterations, cached)
and the manifest, wall and CPU seconds each.

Arrivals: the shipped splitwise_conv trace rescaled to 0.25 requests/s (stable: about
68% utilisation), chunked-prefill budget 512 tokens. The command timed is printed,
with the machine's load average (a shared machine: quote ratios measured in one run).
`--code DIR` times another checkout's package too (e.g. `git archive <commit> | tar
-x -C DIR`), the same runs, so before and after are measured side by side.
Run: `python experiments/bench_serving_cache.py [--requests N] [--code DIR]
[--cost-cache DIR]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from checkout_env import where

COLD_TARGET_S, WARM_TARGET_S = 30.0, 15.0
ARGS = ["--model", "llama_3_1_8b", "--arch", "tpu_v5e_like", "--arrival-trace",
        "splitwise_conv", "--rate", "0.25", "--max-tokens", "512"]
# The per-phase breakdown, run in a child process (so `--code` applies to it too).
PHASES = """
import sys, time
from simulator.serving.cost_cache import CostCache
from simulator.serving.serve import (bucketing, prepare, serving_manifest,
                                     simulate_serving, summary)
from simulator.serving.spec import ServeSpec
spec = ServeSpec(arch="tpu_v5e_like", model="llama_3_1_8b", arrival="trace",
                 arrival_trace="splitwise_conv", rate=0.25, requests=int(sys.argv[1]),
                 max_tokens=512)
marks = [(time.perf_counter(), time.process_time())]
def mark():
    marks.append((time.perf_counter(), time.process_time()))
setup = prepare(spec, cost_cache=CostCache(sys.argv[2])); mark()
store, came = simulate_serving(setup, spec); mark()
summary(setup, spec, store, came); mark()
bucketing(setup, store); mark()
serving_manifest(setup, spec, came); mark()
names = ["prepare", "event loop", "summary", "bucketing", "manifest"]
for name, (w0, c0), (w1, c1) in zip(names, marks, marks[1:]):
    print(f"  {name:11s} {w1 - w0:7.2f} s wall {c1 - c0:7.2f} s CPU")
"""


def timed(args: list[str], code: str | None) -> tuple[float, float]:
    """Wall seconds and the child's CPU seconds of one whole process."""
    start, before = time.perf_counter(), os.times()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, **where(code))
    after = os.times()
    cpu = (after.children_user + after.children_system
           - before.children_user - before.children_system)
    return time.perf_counter() - start, cpu


def bench(requests: int, code: str | None, filled: str | None) -> None:
    serve = [sys.executable, "-m", "simulator.cli", "serve", *ARGS,
             "--requests", str(requests)]
    with tempfile.TemporaryDirectory() as empty:
        cache = filled or empty
        for name in ["warm"] if filled else ["cold", "warm"]:
            wall, cpu = timed(serve + ["--cost-cache", cache], code)
            target = COLD_TARGET_S if name == "cold" else WARM_TARGET_S
            print(f"  {name} ({'empty' if name == 'cold' else 'filled'} cost cache): "
                  f"{wall:6.1f} s wall, {cpu:6.1f} s CPU, whole process (target < "
                  f"{target:.0f} s): {'met' if wall < target else 'MISSED'}", flush=True)
        subprocess.run([sys.executable, "-c", PHASES, str(requests), cache], check=True,
                       **where(code))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--code", metavar="DIR", help="also time the package in DIR")
    parser.add_argument("--cost-cache", metavar="DIR", help="a cache folder the same "
                        "runs filled: warm runs only (the cold run is the longest)")
    args = parser.parse_args()
    print("command:", " ".join(["accsim", "serve", *ARGS, "--requests",
                                str(args.requests), "--cost-cache", "DIR"]))
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    for label, code in ([("other checkout " + args.code, args.code)] if args.code
                        else []) + [("this checkout", None)]:
        print(f"{label}:", flush=True)
        bench(args.requests, code, args.cost_cache)


if __name__ == "__main__":
    main()
