"""The serving event loop's CPU cost per run (issues 26 and 28: plan-deployment runs
about 8 serving runs of 1,000 requests per deployment point, so the loop's cost per
run is the search's): a few `accsim serve` runs of Llama-3.1-8B on tpu_v5e_like
covering the loop's paths (continuous batching on the shipped trace with a large
batch, tensor-parallel replicas, pipelined replicas whose micro-batches share stages,
preemptions, a shared queue), each timed with warm memos and cost cache (the event
loop only: simulate_serving), best of --repeat.

`--code DIR` times another checkout's package too (e.g. `git archive <commit> | tar
-x -C DIR`), in alternation with this one, and says whether each case's per-request
times and per-replica totals are identical (a SHA-256 of them), so before and after are
measured side by side. CPU seconds of this process (the machine may be shared).
A cost cache's entries are keyed by the code's digest (simulator.code_version), so
each checkout fills its own, cold (minutes per T x P split); `--same-costs` keys both
checkouts' by this one's, so one fill serves both: only for checkouts whose iteration
costs are the same code (the digests say whether the runs are the same).
The last three cases are runs as the deployment search makes them near a point's SLA
capacity (max batch 256: each iteration's Python work is over ~256 requests; the
issue 44 command's search on the whole trace, 4 replicas of T2 at max batch 64: 164,251
iterations of ~40 decoding requests each, the compiled kernel's work).
Run: `python experiments/bench_serving_loop.py [--code DIR] [--cost-cache DIR]
[--same-costs] [--repeat N] [--rounds N] [--case NAME ...]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LLAMA = dict(arch="tpu_v5e_like", model="llama_3_1_8b")
TRACE = dict(arrival="trace", arrival_trace="splitwise_conv", requests=1000)
CASES = {
    "trace b256 rate 3": LLAMA | TRACE | dict(rate=3, max_batch=256),
    "tp2 b256 rate 10": LLAMA | TRACE | dict(rate=10, max_batch=256, chips=2, tp=2),
    "tp4 b64 rate 20": LLAMA | TRACE | dict(rate=20, max_batch=64, chips=4, tp=4),
    "pp4 b64 rate 2": LLAMA | TRACE | dict(rate=2, max_batch=64, chips=4, pp=4),
    "tp2 pp2 x2 rate 2": LLAMA | TRACE | dict(rate=2, requests=300, chips=4, tp=2, pp=2,
                                             replicas=2, routing="least_loaded"),
    "preemptions": LLAMA | dict(rate=4, requests=400, prompt_tokens=2048,
                                output_tokens=600, max_batch=64, arrival="gamma", cv=2,
                                seed=3),
    "shared queue x3": LLAMA | dict(replicas=3, routing="shared_queue", rate=3,
                                    requests=500, prompt_tokens=700, output_tokens=90,
                                    max_tokens=256),
    "tp2 b256 8.72/s 2k": LLAMA | TRACE | dict(rate=8.72, requests=2000, max_batch=256,
                                               chips=2, tp=2),
    "pp4 b256 20/s 2k": LLAMA | TRACE | dict(rate=20.07, requests=2000, max_batch=256,
                                             chips=4, pp=4),
    "tp2 x4 b64 24.8/s all": LLAMA | TRACE | dict(rate=24.8, requests=None, max_batch=64,
                                                  chips=2, tp=2, replicas=4),
}
# Run in a child process per checkout: CPU seconds of the best run and the digest.
CHILD = """
import hashlib, sys, time
from simulator.serving.cost_cache import CostCache
from simulator.serving.serve import prepare, simulate_serving
from simulator.serving.spec import ServeSpec
spec = ServeSpec(**eval(sys.argv[1]))
cache = CostCache(sys.argv[2])
cache.code = sys.argv[4] or cache.code  # --same-costs: the other checkout's digest
setup = prepare(spec, cost_cache=cache)
simulate_serving(setup, spec)  # memos warm, grid points cached
best = None
for _ in range(int(sys.argv[3])):
    start = time.process_time()
    store, _ = simulate_serving(setup, spec)
    used = time.process_time() - start
    best = used if best is None else min(best, used)
rows = sorted((r.id, r.first_token_s, r.finish_s, r.preemptions)
              for r in store.finished + store.dropped)
totals = (store.busy_s, store.energy_j, store.iterations, store.sample.shapes)
print(best, hashlib.sha256(repr((rows, totals)).encode()).hexdigest()[:12])
"""


def time_case(kwargs: dict, code: str, cache: str, repeat: int, costs_code: str = ""
              ) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=code)
    done = subprocess.run([sys.executable, "-c", CHILD, repr(kwargs), cache, str(repeat),
                           costs_code],
                          check=True, capture_output=True, text=True, cwd=code, env=env)
    cpu, digest = done.stdout.split()
    return float(cpu), digest


def code_digest(code: str) -> str:
    """simulator.code_version of the checkout in `code`."""
    return subprocess.run([sys.executable, "-c", "from simulator.code_version import "
                           "code_version; print(code_version())"], check=True,
                          capture_output=True, text=True, cwd=code,
                          env=dict(os.environ, PYTHONPATH=code)).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", metavar="DIR", help="also time the package in DIR")
    parser.add_argument("--cost-cache", metavar="DIR", help="cost cache folder "
                        "(default: a fresh one, filled by the first run of each case)")
    parser.add_argument("--same-costs", action="store_true", help="key both checkouts' "
                        "cost cache entries by this one's code digest (one fill serves "
                        "both; only where their iteration costs are the same code)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="alternations of the "
                        "checkouts (the best of each is kept)")
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="time only these cases (default: all)")
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent.parent)
    codes = ([("other", args.code)] if args.code else []) + [("this", here)]
    costs_code = code_digest(here) if args.same_costs else ""
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    with tempfile.TemporaryDirectory() as fresh:
        cache = args.cost_cache or fresh
        header = "".join(f"{name + ' CPU s':>14s}" for name, _ in codes)
        print(f"{'case':20s}{header}{'ratio':>8s}  identical")
        sums = [0.0] * len(codes)
        for case, kwargs in CASES.items():
            if args.case and case not in args.case:
                continue
            best, digests = [None] * len(codes), [None] * len(codes)
            for _ in range(args.rounds):
                for index, (_, code) in enumerate(codes):
                    cpu, digests[index] = time_case(kwargs, code, cache, args.repeat,
                                                    costs_code)
                    best[index] = cpu if best[index] is None else min(best[index], cpu)
            sums = [a + b for a, b in zip(sums, best)]
            ratio = f"{best[0] / best[-1]:8.2f}" if args.code else ""
            same = ("yes" if len(set(digests)) == 1 else "NO") if args.code else "-"
            print(f"{case:20s}" + "".join(f"{cpu:14.3f}" for cpu in best)
                  + f"{ratio}  {same}", flush=True)
        ratio = f"{sums[0] / sums[-1]:8.2f}" if args.code else ""
        print(f"{'all':20s}" + "".join(f"{cpu:14.3f}" for cpu in sums) + ratio)


if __name__ == "__main__":
    main()
