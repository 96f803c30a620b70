"""Roofline anchors: what fraction of peak FLOP/s and of rated HBM bandwidth the model
sustains on the shapes whose real-chip behaviour is well known (issue 10's acceptance).

On tpu_v5e_like in bf16 with the default (searched) mapping: a GEMV 1 x 8192 x 8192
streams its 128 MiB of weights once, so it is bound by HBM and should sustain close to
the rated 819 GB/s; large square GEMMs are compute bound and should reach most of the
197 TFLOP/s peak. Each shape also runs under model version 1's view of the chip (one
256x256 array, every fold filling, rated bandwidth sustained, no dispatch overhead,
the array_aligned heuristic) to show what the real-chip timing changed.

Run: `python experiments/roofline_anchors.py [--csv PATH] [--plot PATH]` (a few seconds).
"""

from __future__ import annotations

import argparse
import csv
import time

from rich.console import Console
from rich.table import Table

from simulator.inputs.platform import Platform
from simulator.inputs.loader import locate
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.inputs.platform_file import load_platform
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

# (name, M, N, K): C(M x N) = A(M x K) . B(K x N), bf16.
SHAPES = [("gemv 1x8192x8192", 1, 8192, 8192), ("gemm 1024^3", 1024, 1024, 1024),
          ("gemm 2048^3", 2048, 2048, 2048), ("gemm 8192^3", 8192, 8192, 8192)]
PLATFORM = "tpu_v5e_like"
ONE_ARRAY = "whatif/tpu_v5e_256x256"


def shipped(name: str) -> Platform:
    return load_platform(locate(name, "platform"))[0]


def model_version_1(platform: Platform) -> Platform:
    """The what-if one-array chip as model version 1 saw it."""
    data = platform.model_dump()
    data["systolic_array"].update(fold_model="scalesim", count=1)
    data["offchip"]["efficiency"] = 1.0
    data["runtime"] = {"op_overhead_cycles": 0}
    return Platform.model_validate(data)


def anchor_rows() -> list[dict]:
    """One row per shape and model: cycles, fraction of peak and of rated bandwidth."""
    models = [("v2 default", shipped(PLATFORM), Mapping()),
              ("v1 view", model_version_1(shipped(ONE_ARRAY)),
               Mapping(default=TilingSpec(heuristic="array_aligned")))]
    rows = []
    for name, m, n, k in SHAPES:
        workload = Workload(name=name, operators=[
            {"name": "op", "layer_type": "gemm", "kind": "gemm", "m": m, "n": n, "k": k,
             "dtype": "bf16"}])
        for label, platform, mapping in models:
            result = simulate(Inputs(platform, workload, mapping))
            op = result.operators[0]
            derived = result.total.derived(platform)
            rows.append({
                "shape": name, "model": label, "tiling": op.lowered.tiling.describe(),
                "cycles": result.total.cycles,
                "peak_fraction": derived["mfu"],
                "hbm_fraction": derived["offchip_bandwidth_fraction"],
                "bottleneck": op.verdict.bottleneck})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", metavar="PATH", help="write the table as CSV")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of both fractions")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = anchor_rows()
    table = Table(title=f"Roofline anchors on {PLATFORM}, bf16 (peak "
                  f"{shipped(PLATFORM).peak_flops / 1e12:.1f} TFLOP/s, rated "
                  f"{shipped(PLATFORM).offchip.bandwidth_gbps:g} GB/s)",
                  title_justify="left", show_edge=False, pad_edge=False)
    for header in ("shape", "model", "tiling", "cycles", "% of peak FLOP/s",
                   "% of rated HBM", "bottleneck"):
        table.add_column(header, justify="right" if header.startswith(("%", "cyc"))
                         else "left", no_wrap=True)
    for row in rows:
        table.add_row(row["shape"], row["model"], row["tiling"], f"{row['cycles']:,}",
                      f"{100 * row['peak_fraction']:.1f}",
                      f"{100 * row['hbm_fraction']:.1f}", row["bottleneck"])
    Console(width=160).print(table)
    print(f"{len(rows)} runs in {time.perf_counter() - started:.1f} s wall")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
        for axis, key, label in ((axes[0], "peak_fraction", "% of peak FLOP/s"),
                                 (axes[1], "hbm_fraction", "% of rated HBM bandwidth")):
            for offset, model in enumerate(("v1 view", "v2 default")):
                picked = [r for r in rows if r["model"] == model]
                axis.bar([i + 0.4 * offset for i in range(len(picked))],
                         [100 * r[key] for r in picked], width=0.4, label=model)
            axis.set_xticks([i + 0.2 for i in range(len(SHAPES))],
                            [s[0] for s in SHAPES], rotation=20, fontsize=8)
            axis.set_ylabel(label)
            axis.set_ylim(0, 100)
        axes[0].legend()
        figure.tight_layout()
        figure.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
