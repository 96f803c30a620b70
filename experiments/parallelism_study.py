"""Parallelism study: Llama-3.1-8B and -70B prefill and decode on tpu_v5e_like systems,
tensor parallelism 1..16 by pipeline parallelism 1..4 (issue 18): latency, tokens/s
per chip and the communication fraction per plan, or why a plan does not fit.

Prefill: batch 1, a 2,048-token prompt. Decode: batch 8, 2,048 tokens of context each.
bf16 throughout, the searched default mapping, collectives not overlapped with compute.

Run: `python experiments/parallelism_study.py [--csv PATH] [--plot PATH]` (a few
minutes on 2 cores: one shard simulated per plan).
"""

from __future__ import annotations

import argparse
import csv
import time

from rich.console import Console
from rich.table import Table

from simulator.cli import build_parser
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.frontends.hf.llm_command import run_step
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs
from simulator.system.plan_run import run_plan
from simulator.system.parallelism import SystemPlan

PLATFORM = "tpu_v5e_like"
MODELS = ("llama_3_1_8b", "llama_3_1_70b")
STEPS = {"prefill": ["--batch", "1", "--seq", "2048"],
         "decode": ["--batch", "8", "--context", "2048"]}
TP = (1, 2, 4, 8, 16)
PP = (1, 2, 3, 4)
FIELDS = ["model", "phase", "chips", "tp", "pp", "fits", "latency_ms", "tokens_per_s",
          "tokens_per_s_per_chip", "communication_fraction", "mfu",
          "weight_gb_per_chip", "kv_gb_per_chip", "refusal"]


def study_rows() -> list[dict]:
    platform, source = load_model(locate(PLATFORM, "platform"), Platform)
    rows = []
    for model in MODELS:
        for phase, sizes in STEPS.items():
            args = build_parser().parse_args(["run", "--model", model, "--phase", phase,
                                              *sizes])
            step, _ = run_step(args)
            inputs = Inputs(platform, step.workload(), Mapping(), source)
            for tp in TP:
                for pp in PP:
                    plan = SystemPlan(chips=tp * pp, tp=tp, pp=pp)
                    row = {"model": model, "phase": phase, "chips": plan.chips,
                           "tp": tp, "pp": pp}
                    try:
                        figures = run_plan(inputs, plan, step).figures()
                    except AccsimError as refused:
                        rows.append({**row, "fits": False, "refusal": refused.rule})
                        continue
                    rows.append({
                        **row, "fits": True, "latency_ms": 1e3 * figures["time_s"],
                        "tokens_per_s": figures["tokens"] / figures["time_s"],
                        "tokens_per_s_per_chip": figures["tokens_per_s_per_chip"],
                        "communication_fraction": figures["communication_fraction"],
                        "mfu": figures["mfu"],
                        "weight_gb_per_chip": figures["weight_bytes_per_chip"] / 1e9,
                        "kv_gb_per_chip": figures["kv_bytes_per_chip"] / 1e9})
    return rows


def print_table(rows: list[dict]) -> None:
    table = Table(title=f"Parallelism on {PLATFORM} (bf16; collectives not overlapped)",
                  title_justify="left", show_edge=False, pad_edge=False)
    for header in ("model", "phase", "chips", "T", "P", "latency ms", "tok/s/chip",
                   "comm %", "MFU %", "weights GB/chip", "KV GB/chip"):
        table.add_column(header, justify="left" if header in ("model", "phase")
                         else "right", no_wrap=True)
    for row in rows:
        cells = [row["model"], row["phase"], str(row["chips"]), str(row["tp"]),
                 str(row["pp"])]
        if not row["fits"]:
            table.add_row(*cells, "does not fit", *["-"] * 5)
            continue
        table.add_row(*cells, f"{row['latency_ms']:,.2f}",
                      f"{row['tokens_per_s_per_chip']:,.1f}",
                      f"{100 * row['communication_fraction']:.1f}",
                      f"{100 * row['mfu']:.1f}", f"{row['weight_gb_per_chip']:.2f}",
                      f"{row['kv_gb_per_chip']:.2f}")
    Console(width=160).print(table)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(3, 4, figsize=(16, 9), sharex=True)
    panels = [(model, phase) for model in MODELS for phase in STEPS]
    for column, (model, phase) in enumerate(panels):
        for pp in PP:
            picked = [r for r in rows if r["model"] == model and r["phase"] == phase
                      and r["pp"] == pp and r["fits"]]
            tps = [r["tp"] for r in picked]
            for row_index, (key, scale) in enumerate((("latency_ms", 1),
                                                      ("tokens_per_s_per_chip", 1),
                                                      ("communication_fraction", 100))):
                axes[row_index][column].plot(tps, [r[key] * scale for r in picked],
                                             marker="o", label=f"P = {pp}")
        axes[0][column].set_title(f"{model} {phase}", fontsize=9)
        axes[2][column].set_xlabel("tensor parallelism T")
        axes[2][column].set_xscale("log", base=2)
    for row_index, label in enumerate(("latency ms", "tokens/s per chip",
                                       "communication %")):
        axes[row_index][0].set_ylabel(label)
    axes[0][0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", metavar="PATH", help="write one row per plan as CSV")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG: latency, tokens/s "
                        "per chip and communication fraction against T, one line per P")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = study_rows()
    print_table(rows)
    print(f"{len(rows)} plans in {time.perf_counter() - started:.1f} s wall")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.csv}")
    if args.plot:
        plot(rows, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
