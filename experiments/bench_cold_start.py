"""The cost of the first run on a new machine (issue 26: a cold `accsim run` under 5 s,
with progress shown): whole-process `accsim run` and `accsim map` with an empty Numba
cache (NUMBA_CACHE_DIR a fresh folder: every kernel compiles), once as shipped (the
late kernels compiled ahead in a second process, simulator.kernels.ahead) and once with
ACCSIM_AHEAD=0 (all in one process, one after another), then warm (the first folder
again: every kernel loads). Then, for one cold `accsim run`, each kernel it compiled
itself or waited for (compiled ahead), with when it started and how long it took.

Printed: wall and CPU seconds (user + system of the command and its child; on a shared
machine the wall time also counts other jobs' turns, so the load is printed too).
Run: `python experiments/bench_cold_start.py` (about a minute on 2 quiet cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from bench_startup import ACCSIM, timed

COMMANDS = {"accsim run": ["run"], "accsim map": ["map"]}

# One cold run in-process with a listener on Numba's compile events: each outermost
# event (a kernel compiled here with what it inlines or calls, or a wait for the child
# compiling it ahead), its start after the interpreter began, its wall and CPU seconds.
_PROFILE = """
import contextlib, io, json, time
began = time.perf_counter()
from numba.core import event
from simulator.cli import main

class Compiles(event.Listener):
    def __init__(self):
        self.depth, self.started, self.rows = 0, None, []
    def on_start(self, ev):
        self.depth += 1
        if self.depth == 1:
            self.started = (time.perf_counter(), time.process_time())
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            function = ev.data["dispatcher"].py_func
            wall, cpu = self.started
            self.rows.append((f"{function.__module__}.{function.__name__}",
                              "waited" if ev.data["args"] == () else "compiled",
                              wall - began, time.perf_counter() - wall,
                              time.process_time() - cpu))

listener = Compiles()
with event.install_listener("numba:compile", listener), \\
        contextlib.redirect_stdout(io.StringIO()):
    main(["run"])
print(json.dumps([time.perf_counter() - began, listener.rows]))
"""


# A new machine has no kernel library (`accsim compile`) either: the JIT's first run.
JIT = dict(os.environ, ACCSIM_KERNEL_LIBRARY="0")


def cold_and_warm(args: list[str]) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as other:
        env = dict(JIT, NUMBA_CACHE_DIR=cache)
        cold = timed([str(ACCSIM), *args], env)
        serial = timed([str(ACCSIM), *args],
                       dict(JIT, NUMBA_CACHE_DIR=other, ACCSIM_AHEAD="0"))
        warm = timed([str(ACCSIM), *args], env)
    return {"cold": cold, "cold, ahead off": serial, "warm": warm}


def compile_events() -> tuple[float, list]:
    with tempfile.TemporaryDirectory() as cache:
        done = subprocess.run([sys.executable, "-c", _PROFILE], capture_output=True,
                              text=True, check=True, env=dict(JIT,
                                                              NUMBA_CACHE_DIR=cache))
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start")
    print(f"{'command':<12} {'cache':<16} {'wall s':>7} {'cpu s':>7}")
    for name, args in COMMANDS.items():
        for state, (wall, cpu) in cold_and_warm(args).items():
            print(f"{name:<12} {state:<16} {wall:7.2f} {cpu:7.2f}")
    total, rows = compile_events()
    print(f"\none cold `accsim run` in-process ({total:.2f} s wall): the kernels it "
          "compiled, or waited for while the child compiled them ahead")
    print(f"  {'kernel':<42} {'':<8} {'at s':>6} {'wall s':>6} {'cpu s':>6}")
    for kernel, how, at, wall, cpu in rows:
        print(f"  {kernel:<42} {how:<8} {at:6.2f} {wall:6.2f} {cpu:6.2f}")
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
