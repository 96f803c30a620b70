"""Start-up of the light commands against issue 26's targets: `accsim --help` < 0.3 s
and `python -c "import simulator"` < 0.2 s whole process (median of a farm of 5), and
whether `--help`, `check` and `schema` import Numba (they must not: the kernels load it
on first use, simulator.kernels.jit, and the CLI imports only the verb's command module). Then
the split of a warm `accsim run` of SCALE-Sim's alexnet (issue 26: 300x SCALE-Sim's
whole process) into interpreter, accsim's imports, Numba's import and the rest, the
same run with the kernel library (`accsim compile`: no Numba) when it is current, and,
in one process, the CPU of each part of the JIT run (the tiling search among them).

Each command runs FARM times in a fresh interpreter; printed: the median wall time and
the median CPU time (user + system of the child: on a shared machine the wall time also
counts other jobs' turns), and the heavy libraries the same call leaves in sys.modules.
Run: `python experiments/bench_startup.py` (about 30 s).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

FARM = 5
HEAVY = ("numba", "matplotlib", "jinja2", "onnx", "distributed")
TARGETS_S = {"accsim --help": 0.3, "import simulator": 0.2}
ACCSIM = Path(sys.executable).with_name("accsim")
# SCALE-Sim v3's whole process on alexnet, scale.cfg (32x32 ws), traces off, as
# validate_scalesim.py measured it on this 2-core machine beside accsim at commit 10f1eee
# (issue 26 asks accsim to be 300x faster; SCALE-Sim's own command, saving traces, took
# 113.3 s in that run).
SCALESIM_ALEXNET_S = 85.2

# name: (process argv, the same call in-process for the sys.modules probe)
COMMANDS = {
    "accsim --help": ([str(ACCSIM), "--help"], "main(['--help'])"),
    "import simulator": ([sys.executable, "-c", "import simulator"], None),
    "accsim check tpu_v1": ([str(ACCSIM), "check", "tpu_v1"], "main(['check', 'tpu_v1'])"),
    "accsim schema platform": ([str(ACCSIM), "schema", "platform"],
                               "main(['schema', 'platform'])"),
}

_PROBE = """
import contextlib, io, json, sys
from simulator.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        {call}
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


# `accsim run`'s imports as main() makes them (its start-up: no garbage collection).
_VERB_IMPORTS = ("import simulator.cli\n"
                 "with simulator.cli._start_up(): import simulator.commands.run")

# One warm alexnet run in-process: the CPU seconds of each part, each without the parts
# it calls (Numba's first use inside the search counts as Numba).
_PARTS = """
import contextlib, io, json, time
cpu = time.process_time
began = cpu()
import simulator.cli
with simulator.cli._start_up():  # as main() imports the verb
    import simulator.commands.run, simulator.kernels.jit, simulator.simulate
NUMBA = "Numba: its import, registries, cache loads"
parts, nested = {{"accsim imports": cpu() - began}}, []
began = cpu()
from numba.core import caching
parts[NUMBA] = cpu() - began
def timed(name, function):
    def call(*args, **kwargs):
        start = cpu()
        nested.append(0.0)
        try:
            return function(*args, **kwargs)
        finally:
            spent = cpu() - start
            parts[name] = parts.get(name, 0.0) + spent - nested.pop()
            if nested:
                nested[-1] += spent
    return call
simulator.kernels.jit._dispatcher = timed(NUMBA, simulator.kernels.jit._dispatcher)
caching.Cache.load_overload = timed(NUMBA, caching.Cache.load_overload)
simulator.simulate.resolve_checked = timed("tiling search (resolve)",
                                           simulator.simulate.resolve_checked)
before, started = sum(parts.values()), cpu()
with contextlib.redirect_stdout(io.StringIO()):
    simulator.cli.main({argv!r})
parts["rest of the run"] = cpu() - started - (sum(parts.values()) - before)
print(json.dumps(parts))
"""


def timed(argv: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def heavy_loaded(call: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _PROBE.format(call=call, heavy=HEAVY)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def alexnet_split() -> None:
    """Where a warm whole-process `accsim run` of SCALE-Sim's alexnet on its scale.cfg
    (32x32, ws) spends its time: each row is one more part than the row above, run
    FARM times (median), so the differences are the parts."""
    data = Path(__file__).resolve().parents[1] / "tests" / "data" / "scalesim"
    run = [str(ACCSIM), "run", "--arch", str(data / "scale.cfg"), "--workload",
           str(data / "alexnet.csv")]
    jit = {**os.environ, "ACCSIM_KERNEL_LIBRARY": "0"}
    timed(run, jit)  # fills the Numba cache if it is cold
    library = subprocess.run([str(ACCSIM), "compile", "--check"],
                             capture_output=True).returncode == 0
    rows = {"interpreter": ([sys.executable, "-c", "pass"], None),
            "+ accsim imports": ([sys.executable, "-c", _VERB_IMPORTS], None),
            "+ numba import": ([sys.executable, "-c", _VERB_IMPORTS + "\nimport numba"],
                               None),
            "whole run, JIT": (run, jit)}
    if library:
        rows["whole run, kernel library (no Numba)"] = (run, None)
    print(f"\naccsim run alexnet on scale.cfg (warm), farm of {FARM}: "
          f"{'wall':>7} {'cpu':>7}")
    for name, (argv, env) in rows.items():
        runs = [timed(argv, env) for _ in range(FARM)]
        print(f"  {name:<50} {statistics.median(r[0] for r in runs):7.3f} "
              f"{statistics.median(r[1] for r in runs):7.3f}")
    if not library:
        print("  (no current kernel library: `accsim compile` builds it)")
    print(f"  300x SCALE-Sim's {SCALESIM_ALEXNET_S} s (measured by "
          f"validate_scalesim.py) needs {SCALESIM_ALEXNET_S / 300:.3f} s")
    farm = [json.loads(subprocess.run(
        [sys.executable, "-c", _PARTS.format(argv=run[1:])], capture_output=True,
        text=True, check=True, env=jit).stdout.splitlines()[-1]) for _ in range(FARM)]
    print(f"\nthe same run in one process with the JIT, CPU s by part (median of {FARM}):")
    for name in farm[0]:
        print(f"  {name:<50} {statistics.median(parts[name] for parts in farm):7.3f}")


def main() -> None:
    print(f"farm of {FARM}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'command':<24} {'wall':>7} {'cpu':>7} {'target':>7}  heavy modules loaded")
    for name, (argv, call) in COMMANDS.items():
        runs = [timed(argv) for _ in range(FARM)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        target = f"{TARGETS_S[name]:.2f}" if name in TARGETS_S else "-"
        loaded = "-" if call is None else (", ".join(heavy_loaded(call)) or "none")
        print(f"{name:<24} {wall:7.3f} {cpu:7.3f} {target:>7}  {loaded}")
    alexnet_split()


if __name__ == "__main__":
    main()
