"""The default mapping's attention searches alone (search.operator._search_attention,
issue 44): the searches one serving run's cost table asks for (its prefill and decode
grid points' attention units), timed in CPU seconds per search, and every search's
best tiling, cycles, energy and counts checked equal between checkouts.

The searches are those of one `accsim serve` run of Llama-3.1-8B on the splitwise_conv
trace (as experiments/bench_cost_table.py's), captured as the search tasks they run. Each
checkout replays them `--rounds` times, each round on fresh copies, and reports the
fastest round (the machine is shared: the minimum is the least disturbed). `--code DIR`
times another checkout's package on the same tasks (e.g. `git archive <commit> | tar -x
-C DIR`), the two run at once so that both see the same load. Run: `python
experiments/bench_attention_search.py [--arch A] [--tp T] [--searches N] [--rounds R]
[--code DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from checkout_env import where

SEARCHES = 300      # searches timed per round (the first ones of the run)
ROUNDS = 10         # rounds per checkout; the fastest is reported
WARM_UP = 20        # searches run once before timing (the kernels' first calls)

# Run a serving run, keeping the attention searches' tasks (pickled) in argv[1].
CAPTURE = """
import pickle, sys
import simulator.search.operator as operator
from simulator.serving.cost_cache import CostCache
from simulator.serving.serve import prepare, simulate_serving
from simulator.serving.spec import ServeSpec
tasks, search = [], operator._search_attention
def kept(task):
    tasks.append(task)
    return search(task)
operator._search_attention = kept
spec = ServeSpec(arch=sys.argv[2], model="llama_3_1_8b", arrival="trace",
                 arrival_trace="splitwise_conv", rate=2.0, requests=2000,
                 tp=int(sys.argv[3]), pp=1)
simulate_serving(prepare(spec, cost_cache=CostCache(None)), spec)
pickle.dump(tasks, open(sys.argv[1], "wb"))
"""
# Time the searches of argv[1]; print one JSON line with each search's outcome.
TIME = """
import json, pickle, sys, time
from simulator.search.operator import _search_attention
path, searches, rounds, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4])
for task in pickle.load(open(path, "rb"))[:warm]:
    _search_attention(task)
fastest, found = None, None
for _ in range(rounds):
    tasks = pickle.load(open(path, "rb"))[:searches]
    cpu = time.process_time()
    found = [_search_attention(task) for task in tasks]
    cpu = time.process_time() - cpu
    fastest = cpu if fastest is None else min(fastest, cpu)
outcomes = [None if s.best is None else [s.best.tiling.record(), s.best.cycles,
                                         repr(s.best.energy_pj)] for s in found]
print(json.dumps({"cpu_s": fastest, "searches": len(found), "outcomes": outcomes,
                  "stats": [list(s.stats.__dict__.values()) for s in found]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="tpu_v5e_like")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--searches", type=int, default=SEARCHES)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--code", metavar="DIR", help="also time the package in DIR")
    args = parser.parse_args()
    print(f"attention searches of `accsim serve` on {args.arch} tp={args.tp} "
          f"(splitwise_conv, 2000 requests at 2 req/s); load average:",
          " ".join(f"{v:.2f}" for v in os.getloadavg()))
    with tempfile.TemporaryDirectory() as folder:
        tasks = str(Path(folder) / "tasks.pickle")
        subprocess.run([sys.executable, "-c", CAPTURE, tasks, args.arch, str(args.tp)],
                       check=True, **where(None))
        labels = ([("other checkout " + args.code, args.code)] if args.code else []) + \
            [("this checkout", None)]
        running = [(label, subprocess.Popen(
            [sys.executable, "-c", TIME, tasks, str(args.searches), str(args.rounds),
             str(WARM_UP)], stdout=subprocess.PIPE, text=True, **where(code)))
            for label, code in labels]
        found = {}
        for label, process in running:
            out, _ = process.communicate()
            if process.returncode:
                sys.exit(f"{label}: the timing run failed")
            found[label] = json.loads(out.strip().splitlines()[-1])
        for label, result in found.items():
            per_search = 1e3 * result["cpu_s"] / result["searches"]
            print(f"  {label}: {per_search:.3f} ms CPU per search (fastest of "
                  f"{args.rounds} rounds of {result['searches']})")
        if args.code:
            first, second = found.values()
            same = first["outcomes"] == second["outcomes"] and \
                first["stats"] == second["stats"]
            print("  every search's best and counts", "equal" if same else "DIFFER")


if __name__ == "__main__":
    main()
