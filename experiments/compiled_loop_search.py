"""A deployment search's speed under two checkouts (issue 44, speed): the reduced search
of docs/plan-deployment.md (Llama-3.1-8B on tpu_v5e_like, 2,000 requests of
splitwise_conv, 4 chips, serially), as whole `accsim plan-deployment` processes of
this checkout and of another (`--before DIR`, e.g. `git archive <commit> | tar -x -C
DIR`), interleaved: one untimed run of each (the first fills the cost cache, each
loads or compiles its kernels), then `--runs` timed runs of each in turn. Both read
one cost cache (a folder of this script's, `--cost-cache`) keyed alike: its entries'
code key is fixed here, as both checkouts cost the same grid points the same way.
Prints each run's CPU seconds and whether every run's `--json` result and table are
the same text (the table's line of wall seconds aside).

Run: `python experiments/compiled_loop_search.py --before DIR [--runs 2]
[--cost-cache DIR]`.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

SEARCH = ["plan-deployment", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b",
          "--arrival-trace", "splitwise_conv", "--sla", "ttft_p99_ms=2000,tpot_p99_ms=100",
          "--requests", "2000", "--budget-chips", "4", "--scheduler", "serial"]
# The child: the CLI, its cost cache's code key fixed (both checkouts share entries).
CHILD = ("import sys; import simulator.serving.cost_cache as cache; "
         "cache.code_version = lambda: 'compiled-loop-search'; "
         "from simulator.cli import main; sys.exit(main(sys.argv[1:]))")
HERE = Path(__file__).resolve().parent.parent
WALL = re.compile(r"[0-9.]+ s wall")  # the one figure of the table that is a timing


def run(code: Path, cost_cache: Path, out: Path) -> tuple[float, str, str]:
    """CPU seconds of one search in `code`, its table (stdout) and its JSON."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = os.environ | {"XDG_CACHE_HOME": str(cost_cache), "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", CHILD, *SEARCH, "--json", str(out)],
                          cwd=code, env=env, check=True, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return cpu, WALL.sub("? s wall", done.stdout), out.read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, metavar="DIR")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--cost-cache", metavar="DIR")
    args = parser.parse_args()
    codes = {"before": Path(args.before).resolve(), "after": HERE}
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(args.cost_cache or Path(scratch) / "xdg")
        outputs, times = set(), {name: [] for name in codes}
        for turn in range(args.runs + 1):
            for name, code in codes.items():
                cpu, table, result = run(code, cache, Path(scratch) / "result.json")
                outputs.add((table, result))
                if turn:  # the first of each: untimed
                    times[name].append(cpu)
                print(f"{name:7s}{'timed' if turn else 'untimed':>8s}{cpu:9.1f} CPU s",
                      flush=True)
    for name, each in times.items():
        print(f"{name}: " + ", ".join(f"{t:.1f}" for t in each) + " CPU s")
    print("outputs identical:", "yes" if len(outputs) == 1 else "NO")
    return 0 if len(outputs) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
