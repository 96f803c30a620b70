"""How fast a design-space sweep runs: 1,000 platform points x ResNet-50 with the
default mapping (`Mapping()`, whatever that means in this checkout; `--heuristic NAME`
maps with that heuristic instead) on a local process pool, from an empty store; then
the same sweep again, which must compute nothing.

The points are a 10 x 10 x 10 grid around TPU v1: array rows, array columns and DRAM
bandwidth. Peak memory is the sum of the resident sets of the coordinator and its
worker processes, sampled every SAMPLE_S seconds from /proc (Linux), so it counts
everything the sweep holds at once; ru_maxrss of the coordinator is printed beside it.
The issue's targets: <= 10 minutes on 2 cores and <= 2 GB peak.

Run: `python experiments/bench_sweep.py [--workers 2] [--heuristic array_aligned]`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

from simulator.mapping.plan import Mapping, with_heuristic
from simulator.sweep.coordinator import run_sweep
from simulator.sweep.executors import Processes
from simulator.sweep.jobs import make_plan
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store
from simulator.sweep.task import mapping_mode

POINTS = 1_000
WORKERS = 2                          # worker processes (the 2 cores)
SAMPLE_S = 0.1                       # memory sampling period, seconds
TARGET_S = 600                       # 10 minutes
TARGET_BYTES = 2 * 1024**3           # 2 GiB
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
SPEC = """\
name: bench_tpu_v1_1000
platform: tpu_v1
workloads: [resnet50_b1]
axes:
  systolic_array.rows: [16, 32, 48, 64, 96, 128, 160, 192, 224, 256]
  systolic_array.cols: [16, 32, 48, 64, 96, 128, 160, 192, 224, 256]
  offchip.bandwidth_gbps: {range: [17, 170, 17]}
objectives: {time_s: min, tops_per_w: max}
"""


def resident_bytes(pid: int) -> int:
    """Resident set of one process (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


class PeakMemory:
    """Samples the coordinator's and its children's resident sets in a thread."""

    def __init__(self) -> None:
        self.peak_bytes = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            pids = [os.getpid()] + [p.pid for p in multiprocessing.active_children()]
            self.peak_bytes = max(self.peak_bytes, sum(map(resident_bytes, pids)))

    def __enter__(self) -> PeakMemory:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--heuristic", help="map with this heuristic, not the default")
    parser.add_argument("--sample", type=int, metavar="N", help="only N of the points, "
                        "drawn at random (seed 1), with the full sweep's time projected")
    args = parser.parse_args()
    points = args.sample or POINTS
    mapping = with_heuristic(Mapping(), args.heuristic)
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "bench.yaml"
        sampling = f"sampling: {{method: random, n: {points}, seed: 1}}\n" if args.sample \
            else ""
        spec.write_text(SPEC + sampling)
        started = time.perf_counter()
        plan = make_plan(load_sweep(spec), mapping)
        planned_s = time.perf_counter() - started
        assert plan.points == points, plan.points
        with Store(Path(folder) / "bench.sqlite") as store, PeakMemory() as memory:
            first = run_sweep(plan, store, Processes(args.workers))
            again = run_sweep(plan, store, Processes(args.workers))
    coordinator_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"{points} of the {POINTS} platform points x resnet50_b1, mapping: "
          f"{mapping_mode(mapping)}; {args.workers} worker processes (spawned), empty store")
    print(f"  planning (sampling, validation, keys): {planned_s:.2f} s")
    rate = first.computed / first.elapsed_s
    projected = first.elapsed_s * POINTS / points
    print(f"  sweep: {first.elapsed_s:.1f} s wall, {rate:.2f} points/s, {first.failed} "
          f"failed points")
    print(f"  {POINTS} points: {'projected ' if args.sample else ''}{projected:.0f} s "
          f"(target <= {TARGET_S} s: {'met' if projected <= TARGET_S else 'MISSED'})")
    print(f"  peak memory, coordinator + workers: {memory.peak_bytes / 2**20:,.0f} MiB "
          f"(target <= {TARGET_BYTES / 2**20:,.0f} MiB: "
          f"{'met' if memory.peak_bytes <= TARGET_BYTES else 'MISSED'}); coordinator "
          f"ru_maxrss {coordinator_peak / 2**20:,.0f} MiB")
    print(f"  rerun on the finished store: {again.computed} computed, "
          f"{again.already_stored} already stored, {again.elapsed_s:.2f} s")


if __name__ == "__main__":
    main()
