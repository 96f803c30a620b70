"""Warm whole-process `accsim run` (the shipped defaults: no arguments) of this tree
against another checkout of accsim (`--before DIR`, run with DIR/.venv's accsim), and the
fast-engine figures of experiments/bench_engines.py in both (issue 40: both within 5% of
before, three interleaved whole-process runs).

Each tree runs on both kernel paths: its kernel library (`accsim compile`, built into a
folder of that tree's own, ACCSIM_KERNEL_DIR=DIR/.accsim-kernels, so the two libraries
do not replace each other in the shared cache) and the JIT (ACCSIM_KERNEL_LIBRARY=0,
each tree's Numba cache beside its sources). Both trees' bytecode is compiled first
(`python -m compileall`: with PYTHONDONTWRITEBYTECODE set, an editable install otherwise
recompiles every module on every run), and one untimed run of each tree and path warms
the caches. The rounds then interleave the trees and paths, so a change in the machine's
load falls on both. Printed: the median user + system CPU seconds and wall seconds per
tree and path, this tree's over the other's, and the load average; then bench_engines.py
in both trees, ROUNDS_ENGINES times interleaved (with the kernel library unless
`--engines-path jit`), the median of each of its figures side by side and their ratio.
Run: `python experiments/bench_warm_run.py --before ../base` (about 2 minutes on 2 quiet
cores for the warm runs, 6 more for bench_engines.py; `--no-engines`, `--engines-only`).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from bench_startup import timed

HERE = Path(__file__).resolve().parents[1]
ROUNDS_ENGINES = 3
PATHS = {"library": {}, "jit": {"ACCSIM_KERNEL_LIBRARY": "0"}}
# A figure row of bench_engines.py's table: its name, then its value after two spaces.
_ROW = re.compile(r"^(?P<name>\S.*?)\s{2,}(?P<value>[0-9][0-9,.]*)x?(\s|$)")


def tree_env(tree: Path, path: str) -> dict:
    return {**os.environ, "ACCSIM_KERNEL_DIR": str(tree / ".accsim-kernels"),
            **PATHS[path]}


def prepare(tree: Path) -> Path:
    """Compile the tree's bytecode and (unless current) its kernel library; its
    accsim."""
    python = tree / ".venv" / "bin" / "python"
    subprocess.run([python, "-m", "compileall", "-q", str(tree / "simulator")],
                   check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    accsim = python.with_name("accsim")
    env = tree_env(tree, "library")
    if subprocess.run([accsim, "compile", "--check"], capture_output=True,
                      env=env).returncode != 0:   # not current: build it
        subprocess.run([accsim, "compile"], check=True, capture_output=True, env=env)
    for path in PATHS:  # warm each path's caches
        timed([str(accsim), "run"], tree_env(tree, path))
    return accsim


def warm_runs(trees: dict[str, Path], accsims: dict[str, Path], rounds: int) -> None:
    loads, samples = [], {(t, p): [] for t in trees for p in PATHS}
    for _ in range(rounds):
        loads.append(os.getloadavg()[0])
        for path in PATHS:
            for name, tree in trees.items():
                samples[name, path].append(
                    timed([str(accsims[name]), "run"], tree_env(tree, path)))
    print(f"warm `accsim run` (shipped defaults), {rounds} interleaved rounds, "
          f"{os.cpu_count()} CPUs, load {min(loads):.2f}-{max(loads):.2f} "
          f"(median {statistics.median(loads):.2f})")
    print(f"{'path':<8} {'tree':<8} {'cpu s':>7} {'wall s':>7}")
    for path in PATHS:
        medians = {}
        for name in trees:
            runs = samples[name, path]
            medians[name] = (statistics.median(r[1] for r in runs),
                             statistics.median(r[0] for r in runs))
            print(f"{path:<8} {name:<8} {medians[name][0]:7.3f} {medians[name][1]:7.3f}")
        (cpu, wall), (cpu0, wall0) = medians["this"], medians["before"]
        print(f"{path:<8} {'ratio':<8} {cpu / cpu0:7.3f} {wall / wall0:7.3f}"
              f"   (this / before)")


def engine_runs(trees: dict[str, Path], path: str) -> None:
    outputs = {name: [] for name in trees}
    for _ in range(ROUNDS_ENGINES):
        for name, tree in trees.items():
            done = subprocess.run(
                [tree / ".venv" / "bin" / "python", "experiments/bench_engines.py"],
                capture_output=True, text=True, cwd=tree,
                env=tree_env(tree, path))
            if done.returncode != 0:
                raise SystemExit(f"bench_engines.py in {tree} failed:\n{done.stderr}")
            outputs[name].append(done.stdout)
    figures = {name: [figure_rows(text) for text in texts]
               for name, texts in outputs.items()}
    print(f"\nbench_engines.py ({path}), {ROUNDS_ENGINES} interleaved runs per tree "
          f"(load now {os.getloadavg()[0]:.2f}), medians:")
    print(f"{'figure':<52} {'this':>14} {'before':>14} {'ratio':>7}")
    rows = dict.fromkeys([*figures["this"][0], *figures["before"][0]])
    for row in rows:   # a figure one tree's bench_engines.py lacks: "-"
        this, before = (statistics.median(run[row] for run in figures[name])
                        if row in figures[name][0] else None for name in trees)
        shown = [f"{v:14,.2f}" if v is not None else f"{'-':>14}" for v in (this, before)]
        ratio = f"{this / before:7.3f}" if this and before else f"{'-':>7}"
        print(f"{row:<52} {shown[0]} {shown[1]} {ratio}")


def figure_rows(text: str) -> dict[str, float]:
    """bench_engines.py's table as {figure: value}."""
    rows = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            # the lowering kernel's name changed (gemm_steps, then fill_steps)
            name = re.sub(r"^lowering kernel \w+", "lowering kernel", match["name"])
            rows[name] = float(match["value"].replace(",", ""))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Warm `accsim run` and bench_engines.py: this checkout against "
                    "--before DIR")
    parser.add_argument("--before", type=Path, required=True,
                        help="the other checkout (with its own .venv)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--no-engines", action="store_true",
                        help="skip bench_engines.py")
    parser.add_argument("--engines-only", action="store_true",
                        help="only bench_engines.py")
    parser.add_argument("--engines-path", choices=PATHS, default="library",
                        help="the kernels bench_engines.py runs (jit: its cold-compile "
                             "figures too; with the library they read 0)")
    options = parser.parse_args()
    trees = {"this": HERE, "before": options.before.resolve()}
    accsims = {name: prepare(tree) for name, tree in trees.items()}
    if not options.engines_only:
        warm_runs(trees, accsims, options.rounds)
    if not options.no_engines:
        engine_runs(trees, options.engines_path)


if __name__ == "__main__":
    sys.exit(main())
