"""How the time of `accsim calibrate`'s operator fit grows with the measured rows when
they repeat a few operator shapes (each repeat with its own measured time, as repeated
timings are), and with all-distinct rows.

The fit's cost is its parameter points, each a simulation of the measured operators on
one variant of the platform. For each file this times one point, cold (the platform as
written, offchip.efficiency fitted): as the fit simulates it, each distinct operator once
(simulator.calibrate.distinct), and, up to --reference-rows rows, row by row (the whole
measured workload simulated as measured, each row alone: the fit's way before), checking
that both give every row the same seconds. Reading the CSV and setting up the model are
timed apart.

Run: `python experiments/calibrate_scaling.py [--rows 50,200,1000,5000] [--shapes 3]`
(under half a minute).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np

from simulator.calibrate.measured import read_measured
from simulator.calibrate.operator_fit import Model
from simulator.calibrate.sensitivity import assumed_ranges, with_values
from simulator.inputs.loader import validate_model
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.platform import Platform
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.workload import Workload
from simulator.mapping.plan import Mapping
from simulator.simulate import simulate

PLATFORM = "tpu_v5e_like"
FIELD = "offchip.efficiency"
# (operator, shape, a typical measured time in seconds): repeated shapes cycle in order.
SHAPES = [("gemm", "m=8 n=1024 k=2048", 8.0e-6), ("softmax", "rows=512 cols=512", 2.3e-6),
          ("gemm", "m=8 n=4096 k=2048", 2.9e-5), ("softmax", "rows=256 cols=512", 1.2e-6),
          ("gemm", "m=64 n=2048 k=1024", 6.0e-6)]
NOISE = 0.03      # relative spread of the repeats' measured times
DISTINCT_ROWS = 100  # rows of the all-distinct file


def write_csv(path: Path, rows: int, shapes: int) -> None:
    """`rows` rows cycling through the first `shapes` SHAPES (0: every row its own)."""
    rng = np.random.default_rng(7)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["operator", "shape", "dtype", "measured_s"])
        for i in range(rows):
            if shapes:
                kind, shape, seconds = SHAPES[i % shapes]
            elif i % 2 == 0:
                kind, shape, seconds = "gemm", f"m=8 n={1024 + 16 * i} k=2048", 8e-6
            else:
                kind, shape, seconds = "softmax", f"rows={256 + 2 * i} cols=512", 1.2e-6
            noisy = seconds * (1 + NOISE * rng.standard_normal())
            writer.writerow([kind, shape, "bf16", f"{noisy:.9g}"])


def row_by_row(platform: Platform, measured, values: dict) -> np.ndarray:
    """Every row's seconds with the whole measured workload simulated as measured."""
    variant = validate_model(with_values(platform, values), Platform, file=PLATFORM)
    workload = Workload(name="measured", operators=measured.operators)
    result = simulate(Inputs(variant, workload, Mapping(fusion="none")), engine="fast")
    seconds = {op.lowered.name: op.totals.cycles / variant.clock_hz
               for op in result.operators}
    return np.array([seconds[op.name] for op in measured.operators])


def measure(path: Path, platform: Platform, reference: bool) -> str:
    start = time.perf_counter()
    measured = read_measured(str(path))
    read = time.perf_counter() - start
    value, low, high = assumed_ranges(platform)[FIELD]
    start = time.perf_counter()
    model = Model(platform, measured, {FIELD: (value, low, high)}, "fast", None,
                  str(path))
    setup = time.perf_counter() - start
    start = time.perf_counter()
    seconds = model.seconds({FIELD: value})
    point = time.perf_counter() - start
    line = (f"{len(measured.operators):>6} {len(model.distinct.workload.operators):>8} "
            f"{read:>7.2f} {setup:>7.2f} {point:>11.2f}")
    if not reference:
        return line + f" {'-':>13}"
    start = time.perf_counter()
    every = row_by_row(platform, measured, {FIELD: value})
    by_row = time.perf_counter() - start
    if not np.array_equal(seconds, every):
        raise SystemExit(f"{path.name}: the distinct operators' seconds differ from "
                         "the row-by-row simulation")
    return line + f" {by_row:>11.2f} ="


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="50,200,1000,5000",
                        help="row counts of the repeated-shape files")
    parser.add_argument("--shapes", type=int, default=3, choices=range(1, len(SHAPES) + 1),
                        help="distinct shapes the rows repeat")
    parser.add_argument("--reference-rows", type=int, default=200,
                        help="time the row-by-row simulation up to this many rows")
    args = parser.parse_args()
    platform = load_inputs(PLATFORM, None, None).platform
    # one warm-up point: the kernels' compilation and the first search tables
    with tempfile.TemporaryDirectory() as folder:
        files = [(Path(folder) / f"repeated_{rows}.csv", rows, args.shapes)
                 for rows in map(int, args.rows.split(","))]
        files.append((Path(folder) / "distinct.csv", DISTINCT_ROWS, 0))
        for path, rows, shapes in files:
            write_csv(path, rows, shapes)
        measure(files[0][0], platform, False)
        print(f"one parameter point of the fit on {PLATFORM}, seconds "
              f"(rows repeating {args.shapes} shapes; the last file all-distinct)")
        print(f"{'rows':>6} {'distinct':>8} {'read':>7} {'setup':>7} {'point':>11} "
              f"{'row by row':>11}")
        for path, rows, _ in files:
            print(measure(path, platform, rows <= args.reference_rows), flush=True)


if __name__ == "__main__":
    main()
