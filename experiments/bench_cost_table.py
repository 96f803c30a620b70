"""The cold build of one T x P split's serving cost table (issue 44, DESIGN.md section
20): the grid points a serving run of Llama-3.1-8B on the splitwise_conv trace asks of
its iteration-cost model (serving.llm_cost.LlmCost: dense, prefill, decode and decode-pair
points), simulated again from nothing (no cost cache, a fresh unit memo and default-search
cache), timed in wall and CPU seconds, with the unit simulations it ran; every point is
checked equal to the serving run's.

The points are those of one `accsim serve` run (first, untimed: its grid points are what
a deployment search's rate probes of the split ask first), at `--rate` on `--requests`
requests of the trace. `--code DIR` times another checkout's package on the same points
(e.g. `git archive <commit> | tar -x -C DIR`), so before and after are measured side by
side on one machine state. Run: `python experiments/bench_cost_table.py [--arch A]
[--tp T] [--pp P] [--rate R] [--requests N] [--code DIR]`.
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

# Fill the table by a serving run, then write its grid points (and their costs) to argv[1].
FILL = """
import json, sys
from simulator.serving.cost_cache import CostCache
from simulator.serving.serve import prepare, simulate_serving
from simulator.serving.spec import ServeSpec
arch, tp, pp, rate, requests = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
    float(sys.argv[5]), int(sys.argv[6])
spec = ServeSpec(arch=arch, model="llama_3_1_8b", arrival="trace",
                 arrival_trace="splitwise_conv", rate=rate, requests=requests, tp=tp, pp=pp)
setup = prepare(spec, cost_cache=CostCache(None))
simulate_serving(setup, spec)
cost = setup.cost
json.dump({"dense": sorted(cost._dense.items()), "prefill": sorted(cost._prefill.items()),
           "decode": sorted(cost._decode.items()), "pair": sorted(cost._pair.items())},
          open(sys.argv[1], "w"))
"""
# Build the same points cold and time them; prints one JSON line.
BUILD = """
import json, sys, time
from simulator.serving.cost_cache import CostCache
from simulator.serving.iteration_cost import UnitCosts
from simulator.serving.serve import prepare
from simulator.serving.spec import ServeSpec
points = json.load(open(sys.argv[1]))
arch, tp, pp = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spec = ServeSpec(arch=arch, model="llama_3_1_8b", arrival="trace",
                 arrival_trace="splitwise_conv", rate=1.0, requests=10, tp=tp, pp=pp)
units = UnitCosts()
wall, cpu = time.perf_counter(), time.process_time()
cost = prepare(spec, cost_cache=CostCache(None), units=units).cost
for tokens, _ in points["dense"]:
    cost._dense_at(tokens)
for (new, cached), _ in points["prefill"]:
    cost._prefill_at(new, cached)
for context, _ in points["decode"] + points["pair"]:
    cost._decode_at(context)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
built = {"dense": cost._dense, "prefill": cost._prefill, "decode": cost._decode,
         "pair": cost._pair}
differ = sum(tuple(built[name][tuple(key) if isinstance(key, list) else key]) != tuple(value)
             for name in points for key, value in points[name])
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "points": sum(map(len, points.values())),
                  "units": cost.costs.distinct_operators,
                  "searches": units.searches.misses, "differ": differ}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="tpu_v5e_like")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--pp", type=int, default=1)
    parser.add_argument("--rate", type=float, default=2.0)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--code", metavar="DIR", help="also time the package in DIR")
    args = parser.parse_args()
    split = [args.arch, str(args.tp), str(args.pp)]
    print(f"split: {args.arch} tp={args.tp} pp={args.pp}; points of `accsim serve` at "
          f"{args.rate} req/s on {args.requests} requests of splitwise_conv")
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    with tempfile.TemporaryDirectory() as folder:
        points = str(Path(folder) / "points.json")
        subprocess.run([sys.executable, "-c", FILL, points, *split, str(args.rate),
                        str(args.requests)], check=True, **where(None))
        for label, code in ([("other checkout " + args.code, args.code)] if args.code
                            else []) + [("this checkout", None)]:
            out = subprocess.run([sys.executable, "-c", BUILD, points, *split],
                                 check=True, capture_output=True, text=True, **where(code))
            found = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {label}: {found['wall_s']:.1f} s wall, {found['cpu_s']:.1f} s CPU "
                  f"for {found['points']} grid points ({found['units']} unit simulations, "
                  f"{found['searches']} operator searches); {found['differ']} differ",
                  flush=True)


if __name__ == "__main__":
    main()
