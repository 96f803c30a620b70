"""The cost of the first run on a new machine (issue 26: a cold `accsim run` under 5 s,
with progress shown): whole-process `accsim run` and `accsim map` with an empty Numba
cache (NUMBA_CACHE_DIR a fresh folder: every kernel compiles) and then warm (the same
folder again: every kernel loads), and the kernels compiled in the cold run with each
one's compile time.

Printed: wall and CPU seconds (user + system of the child; on a shared machine the wall
time also counts other jobs' turns) per command and cache state, and the cold/warm
ratio. Run: `python experiments/bench_cold_start.py` (about a minute on 2 cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from bench_startup import ACCSIM, timed

COMMANDS = {"accsim run": ["run"], "accsim map": ["map"]}

# One cold run in-process with a listener on Numba's compile events: the outermost
# compilations (a kernel and what it inlines or calls) and their seconds.
_PROFILE = """
import contextlib, io, json, sys, time
from numba.core import event
from simulator.cli import main

class Compiles(event.Listener):
    def __init__(self):
        self.depth, self.started, self.rows = 0, 0.0, []
    def on_start(self, ev):
        self.depth += 1
        if self.depth == 1:
            self.started = time.perf_counter()
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            function = ev.data["dispatcher"].py_func
            self.rows.append((f"{function.__module__}.{function.__name__}",
                              round(time.perf_counter() - self.started, 2)))

listener = Compiles()
with event.install_listener("numba:compile", listener), \\
        contextlib.redirect_stdout(io.StringIO()):
    main(["run"])
print(json.dumps(listener.rows))
"""


def cold_and_warm(args: list[str]) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold = timed([str(ACCSIM), *args], env)
        warm = timed([str(ACCSIM), *args], env)
    return {"cold": cold, "warm": warm}


def compiled_kernels() -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory() as cache:
        done = subprocess.run([sys.executable, "-c", _PROFILE], capture_output=True,
                              text=True, check=True, env=dict(os.environ,
                                                              NUMBA_CACHE_DIR=cache))
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'command':<12} {'cold wall':>9} {'cold cpu':>9} {'warm wall':>9} "
          f"{'warm cpu':>9} {'cpu ratio':>9}")
    for name, args in COMMANDS.items():
        runs = cold_and_warm(args)
        (cold_wall, cold_cpu), (warm_wall, warm_cpu) = runs["cold"], runs["warm"]
        print(f"{name:<12} {cold_wall:9.2f} {cold_cpu:9.2f} {warm_wall:9.2f} "
              f"{warm_cpu:9.2f} {cold_cpu / warm_cpu:9.1f}")
    print("\nkernels compiled by a cold `accsim run` (outermost, seconds):")
    for kernel, seconds in compiled_kernels():
        print(f"  {seconds:6.2f}  {kernel}")


if __name__ == "__main__":
    main()
