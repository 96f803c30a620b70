"""The model against a real TPU v5e: bf16 matrix products timed on the chip, replayed on
tpu_v5e_like under the same tiling.

The measurements are the recorded outputs of the JAX documentation's Pallas TPU guide
"Matrix Multiplication" (docs.jax.dev/en/latest/pallas/tpu/matmul.html), run on one
TPU v5e chip: a Pallas kernel with blocks bm x bk x bn on a grid (m/bm, n/bn, k/bk), k
innermost and double buffered, and XLA's own jnp.matmul; each time is the mean of 100
calls through timeit, so it includes the host's dispatch of the call. The model knows
nothing of the host, so the dispatch is estimated once from the run with the fewest
grid steps (1024^3 in two steps: its device time is a few microseconds) and added to
every other model figure; the rest of the gap, spread over the grid steps, is what each
step costs on the chip that the model does not charge.

Run: `python experiments/v5e_measured.py [--csv PATH]` (under a minute).
"""

from __future__ import annotations

import argparse
import csv
import time

from rich.console import Console
from rich.table import Table

from simulator.inputs.platform import Platform
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

PLATFORM = "tpu_v5e_like"
# (kernel, blocks (bm, bk, bn) or None for XLA, size of the square product, measured
# seconds per call): the guide's recorded outputs.
MEASURED = [
    ("pallas", (128, 128, 128), 1024, 0.00029766598949208854),
    ("pallas", (128, 128, 128), 4096, 0.011771515250438824),
    ("pallas", (128, 128, 128), 8192, 0.09183577066054567),
    ("pallas", (512, 1024, 1024), 1024, 0.00012708659982308746),
    ("pallas", (512, 1024, 1024), 4096, 0.00088908776990138),
    ("pallas", (512, 1024, 1024), 8192, 0.006099433819763363),
    ("xla", None, 1024, 0.00011943008983507753),
    ("xla", None, 4096, 0.0008272899803705514),
    ("xla", None, 8192, 0.006047147869830951),
]
RATED_FLOPS = 197e12  # the guide's v5e figure, the denominator of its utilisation


def mapping_of(blocks: tuple[int, int, int] | None) -> Mapping:
    """The Pallas kernel's tiling (k innermost, double buffered), or the searched
    default that stands for XLA's own choice."""
    if blocks is None:
        return Mapping()
    bm, bk, bn = blocks
    return Mapping(default=TilingSpec(tm=bm, tk=bk, tn=bn, loop_order="mnk",
                                      dataflow="ws", depth=2))


def comparison_rows() -> list[dict]:
    """One row per measurement: model and measured seconds, grid steps, the tiling."""
    platform = load_model(locate(PLATFORM, "platform"), Platform)[0]
    rows = []
    for kernel, blocks, size, measured_s in MEASURED:
        workload = Workload(name=f"gemm {size}^3", operators=[
            {"name": "op", "layer_type": "gemm", "kind": "gemm", "m": size, "n": size,
             "k": size, "dtype": "bf16"}])
        result = simulate(Inputs(platform, workload, mapping_of(blocks)))
        op = result.operators[0]
        rows.append({"kernel": kernel, "size": size,
                     "tiling": op.lowered.tiling.describe(),
                     "steps": op.lowered.program.steps,
                     "model_s": result.total.cycles / (platform.clock_ghz * 1e9),
                     "measured_s": measured_s,
                     "flops": 2 * size ** 3})
    dispatch = min(rows, key=lambda r: r["steps"])
    host_s = dispatch["measured_s"] - dispatch["model_s"]
    for row in rows:
        row["host_dispatch_s"] = host_s
        row["model_plus_dispatch_s"] = row["model_s"] + host_s
        row["ratio"] = row["model_plus_dispatch_s"] / row["measured_s"]
        row["unmodelled_per_step_s"] = (
            (row["measured_s"] - row["model_plus_dispatch_s"]) / row["steps"]
            if row is not dispatch else 0.0)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", metavar="PATH", help="write the table as CSV")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = comparison_rows()
    table = Table(title=f"bf16 matrix products on a real TPU v5e (JAX Pallas guide) and "
                  f"on {PLATFORM}; host dispatch {1e6 * rows[0]['host_dispatch_s']:.0f} "
                  f"us per call, estimated from the two-step run",
                  title_justify="left", show_edge=False, pad_edge=False)
    for header in ("kernel", "size", "tiling", "steps", "measured us", "% of 197 TF/s",
                   "model us", "model + dispatch %", "model/measured",
                   "unmodelled us/step"):
        table.add_column(header, justify="left" if header in ("kernel", "tiling")
                         else "right", no_wrap=True)
    for row in rows:
        table.add_row(row["kernel"], f"{row['size']}^3", row["tiling"],
                      f"{row['steps']:,}", f"{1e6 * row['measured_s']:,.1f}",
                      f"{100 * row['flops'] / row['measured_s'] / RATED_FLOPS:.1f}",
                      f"{1e6 * row['model_s']:,.1f}",
                      f"{100 * row['flops'] / row['model_plus_dispatch_s'] / RATED_FLOPS:.1f}",
                      f"{row['ratio']:.3f}", f"{1e6 * row['unmodelled_per_step_s']:.3f}")
    Console(width=180).print(table)
    print(f"{len(rows)} runs in {time.perf_counter() - started:.1f} s wall")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
