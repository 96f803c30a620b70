"""How a run's time and memory grow with its tile steps (issue 26): GEMMs of 1e6, 1e7,
1e8 (and, with --slow, 1e9) steps in 32^3 tiles on the edge_32x32 platform, each run
end to end (`simulate.simulate`: search-free resolve with a fixed plan, streamed
lowering, fast engine, metrics) in its own interpreter with a warm JIT cache, after an
untimed 343,000-step run there that loads the cached kernels.

Per case it prints the wall and CPU seconds of the simulate() call, the program's steps
per second of that whole run (per wall and per CPU second: on a shared machine the CPU
figure is the steadier), how many of the steps the engine replayed and how many it
skipped, the steps/s of the replay kernel alone (engines.fast._replay on one block of the
same program, the block generated beforehand), and the peak RSS of the interpreter
(VmHWM in /proc/self/status; ru_maxrss where /proc is missing). Programs longer than a
block (simulator.program.streamed.DEFAULT_BLOCK_STEPS) are counted and checked in closed form and
generated and replayed block by block inside one compiled call (engines.nest), and
their per-tile load tables are held per class of tile row and column
(lowering.tile_table), so the peak RSS should not grow with the steps above 1e7 (issue
26 allows 10%): the last line prints each case's peak RSS over the 1e7 case's.

Skipped steps: once the replay's state repeats from one period of the loop nest to the
next, and so do the next periods' steps, engines.nest adds those periods in closed form
(engines.steady) instead of replaying them; the result is the same. So a run's steps/s
counts steps simulated, not steps the kernel replayed: the kernel's own speed is the
last figure but one, and "replayed" says how many steps it ran (counted by a second
replay of the case's program with engines.nest.replay_nest_counted, not timed).

Run: `python experiments/bench_scaling.py` (1e6 .. 1e8: under a minute on one core);
`python experiments/bench_scaling.py --slow` adds 1e9 (run by hand: about a minute);
`--cases 1e6 1e7` picks cases. Prints one table; writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

# Tile counts (m, n, k) per case: tm = tn = tk = TILE elements.
CASES = {"1e6": (100, 100, 100), "1e7": (200, 250, 200), "1e8": (400, 500, 500),
         "1e9": (1000, 1000, 1000)}
SLOW = ("1e9",)
TILE = 32
PLATFORM = "edge_32x32"
LOOP_ORDER = "mnk"          # k innermost: no partial sums spill
DATAFLOW = "os"
DEPTH = 2
KERNEL_BLOCK = 1 << 20      # steps of the block the kernel alone replays
WARM_TILES = (70, 70, 70)   # a run just over one block: loads every streamed kernel


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def inputs(tiles: tuple[int, int, int]):
    """The case's GEMM on PLATFORM with the fixed 32^3 plan."""
    from simulator.inputs.named_inputs import load_inputs
    from simulator.mapping.plan import Mapping, TilingSpec
    from simulator.simulate import Inputs
    from simulator.inputs.workload import Workload
    platform = load_inputs(PLATFORM, "gemm_4096", None).platform
    m, n, k = (t * TILE for t in tiles)
    workload = Workload.model_validate({"name": "scaling", "operators": [
        {"name": "gemm", "layer_type": "gemm", "kind": "gemm", "m": m, "n": n, "k": k}]})
    mapping = Mapping(name="scaling", default=TilingSpec(
        tm=TILE, tn=TILE, tk=TILE, loop_order=LOOP_ORDER, dataflow=DATAFLOW, depth=DEPTH))
    return Inputs(platform, workload, mapping)


def kernel_steps_per_second(case) -> float:
    """The replay kernel alone on the first KERNEL_BLOCK steps of the case's program
    (generated first; the kernel's warm second call timed)."""
    from simulator.engines.fast import replay_stream
    from simulator.lowering import lower_compute
    from simulator.mapping.plan import Tiling
    from simulator.program.tile_program import memory_params
    from simulator.program.streamed import WholeProgram, as_streamed
    tiling = Tiling(TILE, TILE, TILE, LOOP_ORDER, DATAFLOW, DEPTH)
    lowered = lower_compute(case.workload.operators[0], tiling, case.platform,
                            block_steps=KERNEL_BLOCK)
    block = WholeProgram(next(as_streamed(lowered.program).blocks(KERNEL_BLOCK)).program)
    memory = memory_params(case.platform)
    replay_stream(block, memory, block_steps=block.steps, checked=True)
    began = time.perf_counter()
    replay_stream(block, memory, block_steps=block.steps, checked=True)
    return block.steps / (time.perf_counter() - began)


def skipped_steps(case, program) -> int:
    """Steps of the case's program its replay adds in closed form (0 when the program
    is not a streamed GEMM: it is replayed step by step)."""
    from simulator.engines.nest_replay import replay_nest_counted
    from simulator.lowering.gemm_stream import GemmStream
    from simulator.program.tile_program import memory_params
    if not isinstance(program, GemmStream):
        return 0
    return replay_nest_counted(program, memory_params(case.platform))[1]


def child(name: str) -> None:
    """One case in this interpreter: print its figures as JSON."""
    from simulator.simulate import simulate
    simulate(inputs(WARM_TILES))  # loads the cached kernels, so the case times the run
    case = inputs(CASES[name])
    began, cpu = time.perf_counter(), time.process_time()
    result = simulate(case)
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    rss = peak_rss_mib()
    steps = result.operators[0].lowered.program.steps
    print(json.dumps({"case": name, "steps": steps, "wall_s": wall, "cpu_s": cpu,
                      "peak_rss_mib": rss,
                      "cycles": result.total.cycles,
                      "skipped": skipped_steps(case, result.operators[0].lowered.program),
                      "kernel_steps_per_s": kernel_steps_per_second(case)}))


def run_case(name: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"case {name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", action="store_true", help="add the 1e9-step case")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), help="run these")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    names = args.cases or [n for n in CASES if args.slow or n not in SLOW]
    run_case(min(CASES))  # fills the on-disk JIT cache, so no case pays compilation
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'case':>5} {'steps':>14} {'wall s':>9} {'CPU s':>7} {'run steps/s':>13} "
          f"{'per CPU s':>11} {'replayed':>14} {'skipped':>14} {'kernel steps/s':>15} "
          f"{'peak RSS MiB':>13}")
    peaks = {}
    for name in names:
        r = run_case(name)
        peaks[name] = r["peak_rss_mib"]
        print(f"{name:>5} {r['steps']:>14,} {r['wall_s']:>9.2f} {r['cpu_s']:>7.2f} "
              f"{r['steps'] / r['wall_s'] / 1e6:>11.1f} M "
              f"{r['steps'] / max(r['cpu_s'], 1e-9) / 1e6:>9.1f} M "
              f"{r['steps'] - r['skipped']:>14,} {r['skipped']:>14,} "
              f"{r['kernel_steps_per_s'] / 1e6:>13.1f} M "
              f"{r['peak_rss_mib']:>13.1f}", flush=True)
    if "1e7" in peaks:
        print("peak RSS over 1e7's: " + ", ".join(
            f"{name} {peak / peaks['1e7']:.3f}" for name, peak in peaks.items()))


if __name__ == "__main__":
    main()
