"""Whole models against public measurements, uncalibrated and left one out calibrated
(issue 41, DESIGN.md section 19).

The measurements, each with its source and the exact row, are data:
experiments/whole_models/measurements.yaml (what `accsim calibrate --measured` reads
too). Each platform (experiments/whole_models/*.yaml) was written from its vendor's
published figures; every other value is an assumption marked there with the range it
plausibly lies in. Where a value or model changed after a comparison, it changed to a
published fact, cited where it stands (the collective ranks are NeuronCores, so TP
runs one rank per core: inferentia2_core / trainium_core; a group holding both cores
of its devices rings over the devices, the runtime's KangaRing; NeuronCore-v2's two-input
vector cost; its HBM traffic at its 16 DMA engines' published 272 GB/s, not half the
device's 820; transformers-neuronx's attention buckets in measurements.yaml); no
assumed value or range was moved to fit.

For each platform this script runs what `accsim calibrate` runs
(simulator.calibrate.whole): the uncalibrated time of every case (the platform as
written, `accsim run`'s defaults), and the leave-one-out time: the case simulated with
the assumed values FIT fitted, within their ranges, to the platform's other cases. It
prints both tables (median and worst |error|) and writes the platforms fitted to all
cases to experiments/whole_models/fitted/ (base: the platform as written; only the
fitted values, `kind: fitted` with the measurement file's sha256).

Run: `python experiments/whole_models.py [--csv PATH] [--no-write] [--platforms NAME...]`
(3m20s on a 2-core machine, 2026-12-07; `--platforms` runs only the named
platforms' cases, for iteration).
`--write-workloads` rewrites experiments/whole_models/workloads/ from the model sizes
below (BERT: Devlin et al., NAACL 2019; DistilBERT: Sanh et al., 2019; ResNet-50: the
shipped resnet50_b1 batched; Stable Diffusion XL: experiments/sdxl_workloads.py).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from simulator.calibrate.fitted_file import fitted_platform_yaml
from simulator.calibrate.measured_runs import read_runs
from simulator.calibrate.sensitivity import assumed_ranges
from simulator.calibrate.whole import CaseFit, Cases, WholeCalibration, calibrate_runs, select
from simulator.inputs.loader import load_model, locate
from simulator.inputs.platform_file import load_platform
from simulator.inputs.workload import Workload
from simulator.serving.iteration_cost import batched_workload
from sdxl_workloads import sdxl_unet_step, sdxl_vae_decode

HERE = Path(__file__).resolve().parent / "whole_models"
MEASUREMENTS = HERE / "measurements.yaml"
# Tensor-parallel decode steps over NeuronCores or TPU v4 chips: dispatch per operator and per step,
# the collectives' fixed cost and hop latency, and the sustained bandwidth fraction.
RANK_FIT = ["runtime.op_overhead_cycles", "runtime.invocation_overhead_us",
            "interconnect.collective_fixed_us", "interconnect.link_latency_cycles",
            "offchip.efficiency"]
# One card's generation runs (prefill and decode steps, no collective): dispatch per
# operator and per step, and the sustained bandwidth fraction.
CARD_FIT = ["runtime.op_overhead_cycles", "runtime.invocation_overhead_us",
            "offchip.efficiency"]
# The assumed values fitted per platform: the fixed costs no vendor publishes (per
# operator dispatch, per call, per PSUM copy) and the sustained bandwidth fraction.
FIT = {
    "neuroncore_v2": ["runtime.op_overhead_cycles", "runtime.invocation_overhead_us",
                      "systolic_array.evacuation.tile_cycles", "offchip.efficiency"],
    "trainium_core": RANK_FIT,
    "inferentia2_core": RANK_FIT,
    "tpu_v4": RANK_FIT,
    "gaudi3": CARD_FIT,
    "gaudi2": CARD_FIT,
}
# Compared uncalibrated only: tpu_v3_core, tpu_v5e and tpu_v6e have one case each
# (leaving it out leaves nothing).
UNCALIBRATED = ["tpu_v3_core", "tpu_v5e", "tpu_v6e"]
# Encoder sizes: layers, hidden, heads, FFN.
ENCODERS = {"bert_base": (12, 768, 12, 3072), "bert_large": (24, 1024, 16, 4096),
            "distilbert": (6, 768, 12, 3072)}
WORKLOADS = {("bert_base", 1), ("bert_base", 16), ("bert_large", 1), ("bert_large", 8),
             ("bert_large", 16), ("distilbert", 1), ("distilbert", 16)}
RESNET_BATCHES = (16, 64)


def encoder(name: str, batch: int, seq: int = 128) -> dict:
    """A BERT-shaped encoder (all layers, `repeat`) at batch x seq tokens, in the order
    of workloads/make_bert.py; embeddings and the classifier head are left out. Its
    self-attention is one `attention` operator (QK^T, softmax and PV of every head,
    not a KV cache), as the HF frontend writes a transformer's: the lowering prices it
    as kernels run it (flash or unfused, either orientation, the vector unit where
    faster) instead of batch x heads separate products; its softmax stays at the
    products' bf16 (one operator, one dtype)."""
    layers, hidden, heads, ffn = ENCODERS[name]
    tokens, head = batch * seq, hidden // heads

    def op(op_name, kind, **shape):
        # The rows' "Model Data Type FP32, Compilation Autocast Data Type Matmult-BF16":
        # only matrix products are cast to bf16, the vector operators run in fp32.
        dtype = {"dtype": "fp32"} if kind in ("elementwise", "norm") else {}
        return {"name": op_name, "layer_type": op_name, "kind": kind, "repeat": layers,
                **dtype, **shape}

    return {"name": f"{name}_b{batch}_s{seq}", "operators": [
        op("qkv", "gemm", m=tokens, n=3 * hidden, k=hidden),
        op("attention", "attention", batch=batch, heads=heads, kv_heads=heads,
           q_len=seq, kv_len=seq, head_dim=head, kv_cache=False),
        op("out", "gemm", m=tokens, n=hidden, k=hidden),
        op("attn_add", "elementwise", elements=tokens * hidden, op="add"),
        op("attn_norm", "norm", rows=tokens, cols=hidden),
        op("up", "gemm", m=tokens, n=ffn, k=hidden),
        op("gelu", "elementwise", elements=tokens * ffn, op="gelu"),
        op("down", "gemm", m=tokens, n=hidden, k=ffn),
        op("mlp_add", "elementwise", elements=tokens * hidden, op="add"),
        op("mlp_norm", "norm", rows=tokens, cols=hidden)]}


def write_workloads() -> None:
    folder = HERE / "workloads"
    folder.mkdir(exist_ok=True)
    for name, batch in sorted(WORKLOADS):
        data = encoder(name, batch)
        (folder / f"{data['name']}.yaml").write_text(
            "# written by experiments/whole_models.py --write-workloads\n"
            + yaml.safe_dump(data, sort_keys=False))
    resnet, _ = load_model(locate("resnet50_b1", "workload"), Workload)
    for batch in RESNET_BATCHES:
        data = batched_workload(resnet, batch).model_dump(mode="json", exclude_none=True)
        data["name"] = f"resnet50_b{batch}"
        (folder / f"resnet50_b{batch}.yaml").write_text(
            "# written by experiments/whole_models.py --write-workloads: the shipped "
            f"resnet50_b1 at batch {batch}\n" + yaml.safe_dump(data, sort_keys=False))
    for data in (sdxl_unet_step(1), sdxl_vae_decode(1)):
        (folder / f"{data['name']}.yaml").write_text(
            "# written by experiments/whole_models.py --write-workloads from "
            "experiments/sdxl_workloads.py\n" + yaml.safe_dump(data, sort_keys=False))


def calibrations(only: set[str] | None = None) -> list[tuple[str, WholeCalibration]]:
    runs = read_runs(str(MEASUREMENTS))
    found = []
    for name, fields in FIT.items():
        if only is not None and name not in only:
            continue
        path = str(HERE / f"{name}.yaml")
        platform, _ = load_platform(path)
        ranges = assumed_ranges(platform)
        found.append((path, calibrate_runs(platform, runs, path,
                                           {field: ranges[field] for field in fields},
                                           file=path)))
    return found


def uncalibrated(only: set[str] | None = None) -> list[CaseFit]:
    """The cases of the platforms compared uncalibrated, as written (no held-out time)."""
    runs = read_runs(str(MEASUREMENTS))
    found = []
    for name in UNCALIBRATED:
        if only is not None and name not in only:
            continue
        path = str(HERE / f"{name}.yaml")
        platform, _ = load_platform(path)
        chosen = select(runs, path)
        cases = Cases(platform, runs, chosen, "fast", None, path)
        for m, seconds in zip(cases.measurements, cases.seconds({})):
            found.append(CaseFit(m.name, m.family, m.phase, m.source, m.seconds,
                                 float(seconds), float("nan"), float("nan")))
    return found


def table(results: list[WholeCalibration], alone: list[CaseFit]) -> Table:
    shown = Table(title="Whole models: simulated / measured - 1 (left one out: the "
                  "assumed values fitted to the platform's other cases)")
    for column in ("case", "family", "measured ms", "uncalibrated ms", "error",
                   "left one out ms", "error"):
        shown.add_column(column, justify="left" if column in ("case", "family")
                         else "right")
    for result in results:
        for case in result.cases:
            shown.add_row(case.name, case.family or "", f"{case.measured_s * 1e3:.3f}",
                          f"{case.before_s * 1e3:.3f}",
                          f"{100 * case.error(case.before_s):+.1f}%",
                          f"{case.heldout_s * 1e3:.3f}",
                          f"{100 * case.error(case.heldout_s):+.1f}%")
    for case in alone:
        shown.add_row(case.name, case.family or "", f"{case.measured_s * 1e3:.3f}",
                      f"{case.before_s * 1e3:.3f}",
                      f"{100 * case.error(case.before_s):+.1f}%", "-", "(not fitted)")
    return shown


def summary(cases: list[CaseFit], which: str) -> tuple[float, float]:
    errors = [abs(case.error(getattr(case, f"{which}_s"))) for case in cases]
    return statistics.median(errors), max(errors)


def by_family(cases: list[CaseFit]) -> list[tuple[str, float, float, CaseFit]]:
    """Per chip family: the median uncalibrated and left-one-out |error| (NaN where the
    family was not fitted) and the case furthest off uncalibrated (as a ratio either
    way), in the order the families first appear."""
    families: dict[str, list[CaseFit]] = {}
    for case in cases:
        families.setdefault(case.family or "", []).append(case)
    return [(family, statistics.median(abs(c.error(c.before_s)) for c in members),
             statistics.median(abs(c.error(c.heldout_s)) for c in members),
             max(members, key=lambda c: max(c.before_s / c.measured_s,
                                            c.measured_s / c.before_s)))
            for family, members in families.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", help="write one row per case")
    parser.add_argument("--no-write", action="store_true",
                        help="do not rewrite experiments/whole_models/fitted/")
    parser.add_argument("--write-workloads", action="store_true",
                        help="rewrite experiments/whole_models/workloads/ and stop")
    parser.add_argument("--platforms", nargs="+", metavar="NAME",
                        choices=sorted([*FIT, *UNCALIBRATED]),
                        help="run only these platforms' cases (for iteration; the "
                        "summary then covers only them)")
    args = parser.parse_args()
    if args.write_workloads:
        write_workloads()
        return
    only = set(args.platforms) if args.platforms else None
    found = calibrations(only)
    results = [result for _, result in found]
    alone = uncalibrated(only)
    fitted_cases = [case for result in results for case in result.cases]
    console = Console(width=150)
    console.print(table(results, alone))
    for which, label, cases in (("before", "uncalibrated", fitted_cases + alone),
                                ("heldout", "left one out", fitted_cases)):
        if not cases:
            continue
        median, worst = summary(cases, which)
        console.print(f"{label}: median |error| {100 * median:.1f}%, worst "
                      f"{100 * worst:.1f}% over {len(cases)} cases")
    for family, median, heldout, case in by_family(fitted_cases + alone):
        left_out = "" if math.isnan(heldout) else f" ({100 * heldout:.1f}% left one out)"
        console.print(f"{family}: median |error| {100 * median:.1f}% uncalibrated"
                      f"{left_out}, worst {case.name} at "
                      f"{case.before_s / case.measured_s:.2f}x the measured time",
                      markup=False, highlight=False)
    for path, result in found:
        values = ", ".join(f"{name} {result.before[name]:g} -> {value:.4g}"
                           for name, value in result.fitted.items())
        console.print(f"{result.platform} fitted to all its cases: {values}",
                      markup=False, highlight=False)
        if not args.no_write:
            runs = read_runs(str(MEASUREMENTS))
            platform, _ = load_platform(path)
            ranges = assumed_ranges(platform)
            out = HERE / "fitted" / f"{result.platform}.yaml"
            out.write_text(fitted_platform_yaml(path, platform, result.fitted,
                                                ranges, runs, str(out)))
            console.print(f"wrote {out.relative_to(HERE.parent.parent)}")
    if args.csv:
        rows = [case.as_dict() for case in fitted_cases + alone]
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
