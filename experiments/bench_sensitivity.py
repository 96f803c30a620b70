"""Speed of `accsim sensitivity` (issue 27: Llama-3.1-8B decode on tpu_v5e_like over all
its assumed fields in under 20 s on 2 cores): the whole command in a fresh process
(Numba kernels loaded from the cache), for the time metric (energy coefficients are
skipped by proof: they change no cycle count) and the energy metric (every field
rerun), with the number of assumed fields and the wall and CPU seconds.

Run: `python experiments/bench_sensitivity.py` (about a minute on 2 cores).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

COMMAND = ["sensitivity", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b",
           "--phase", "decode", "--context", "2048"]
TARGET_S = 20.0


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and child CPU seconds of `accsim ARGV` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simulator.cli", *argv], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    print(f"accsim {' '.join(COMMAND)}  (target < {TARGET_S:g} s, {os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory() as folder:
        for metric in ("time_s", "energy_j"):
            out = os.path.join(folder, f"{metric}.json")
            wall, cpu = timed([*COMMAND, "--metric", metric, "--json", out])
            with open(out, encoding="utf-8") as handle:
                fields = json.load(handle)["fields"]
            verdict = "within" if wall < TARGET_S else "OVER"
            print(f"  --metric {metric:8} {len(fields)} assumed fields: {wall:6.1f} s wall, "
                  f"{cpu:6.1f} s CPU ({verdict} target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
