"""Whole models against public measurements on two chip families (issue 24, item 6):
before this issue's model (operator at a time, array results leaving for free) and
after it (the fusion planner, the vector output path where the chip has one).

Each platform is written from its vendor's published figures before any comparison
(experiments/whole_models/*.yaml, every other value an assumption marked there, taken
over from tpu_v5e_like); no value was changed after seeing a measurement.

Measurements (one model copy per core in every case):

- AWS Inferentia2, one NeuronCore-v2 (inf2.xlarge, "Data Parallel" over its two cores;
  model FP32 with matmuls autocast to BF16): Hugging Face BERT models at sequence length
  128, latency P50 per batch. Source: the Neuron SDK's published benchmark tables,
  github.com/aws-neuron/aws-neuron-sdk general/benchmarks/inf2/latency_data_encoder.csv
  (commit 0521004ce0ba18aa5313a835aacaabb31543af37; batch 1) and
  throughput_data_encoder.csv (commit 1351ee128a6f9e48407a2609f1b162d379ec0cac;
  batch 16 for base, 8 for large).
- Cloud TPU v3, one TensorCore (a v3-8: four chips, eight cores): MLPerf Inference v0.5,
  closed division, ResNet-50 v1.5, server scenario, bf16, 21,029.07 samples/s over 8
  cores, mean latency 7.35 ms. Source: Google's submission as published by cKnowledge,
  cknowledge.io/c/result/mlperf-inference-all-image-classification-datacenter-server/
  (users/Google/result-1.json). The batch is not in the result; the mean latency bounds
  one batch's run at about 7 ms, about 16 images per core at the measured rate, so the
  model runs batch 16 and the per-image time is compared (a stated assumption).

Before: `--fusion none`, output_path direct. After: `--fusion auto`, the platform as
written (NeuronCore-v2 evacuates PSUM through its vector engines). No per-call cost in
either: neither vendor publishes its launch overhead, so `invocation` stays 0.

Run: `python experiments/whole_models.py [--plot PATH] [--csv PATH]` (about a minute).
"""

from __future__ import annotations

import argparse
import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from simulator.inputs.platform import Platform
from simulator.output.figure import pyplot, save_figure
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.serving.cost import batched_workload
from simulator.simulate import simulate
from simulator.inputs.workload import Workload

HERE = Path(__file__).resolve().parent / "whole_models"
NEURON_LATENCY = ("github.com/aws-neuron/aws-neuron-sdk/blob/0521004ce0ba18aa5313a835aacaab"
                  "b31543af37/general/benchmarks/inf2/latency_data_encoder.csv")
NEURON_THROUGHPUT = ("github.com/aws-neuron/aws-neuron-sdk/blob/1351ee128a6f9e48407a2609f1b"
                     "162d379ec0cac/general/benchmarks/inf2/throughput_data_encoder.csv")
MLPERF = ("cknowledge.io/c/result/mlperf-inference-all-image-classification-datacenter-"
          "server/ (users/Google/result-1.json)")
# BERT sizes (Devlin et al., NAACL 2019): layers, hidden, heads, FFN.
BERT = {"bert-base-uncased": (12, 768, 12, 3072), "bert-large-uncased": (24, 1024, 16, 4096)}


@dataclass(frozen=True)
class Measurement:
    family: str
    platform: str        # file under experiments/whole_models/
    model: str
    batch: int
    seq: int | None
    precision: str
    seconds: float       # measured time of what `per` says
    per: str             # "batch" or "sample"
    source: str


MEASUREMENTS = [
    Measurement("Inferentia2 NeuronCore-v2", "neuroncore_v2", "bert-base-uncased", 1, 128,
                "bf16 matmuls", 0.99897385e-3, "batch", NEURON_LATENCY),
    Measurement("Inferentia2 NeuronCore-v2", "neuroncore_v2", "bert-large-uncased", 1, 128,
                "bf16 matmuls", 2.69365311e-3, "batch", NEURON_LATENCY),
    Measurement("Inferentia2 NeuronCore-v2", "neuroncore_v2", "bert-base-uncased", 16, 128,
                "bf16 matmuls", 10.8704567e-3, "batch", NEURON_THROUGHPUT),
    Measurement("Inferentia2 NeuronCore-v2", "neuroncore_v2", "bert-large-uncased", 8, 128,
                "bf16 matmuls", 17.42815971e-3, "batch", NEURON_THROUGHPUT),
    Measurement("Cloud TPU v3 TensorCore", "tpu_v3_core", "resnet50-v1.5", 16, None,
                "bf16", 8 / 21029.07, "sample", MLPERF),
]


def bert(name: str, batch: int, seq: int) -> Workload:
    """A BERT encoder (all layers, `repeat`) at batch x seq tokens, in the order of
    workloads/make_bert.py; the classifier head is left out."""
    layers, hidden, heads, ffn = BERT[name]
    tokens, head = batch * seq, hidden // heads

    def op(name, kind, **shape):
        return {"name": name, "layer_type": name, "kind": kind, "repeat": layers, **shape}

    return Workload.model_validate({"name": f"{name}_b{batch}_s{seq}", "operators": [
        op("qkv", "gemm", m=tokens, n=3 * hidden, k=hidden),
        op("qk", "gemm", batch=batch * heads, m=seq, n=seq, k=head),
        op("softmax", "softmax", rows=batch * heads * seq, cols=seq),
        op("pv", "gemm", batch=batch * heads, m=seq, n=head, k=seq),
        op("out", "gemm", m=tokens, n=hidden, k=hidden),
        op("attn_add", "elementwise", elements=tokens * hidden, op="add"),
        op("attn_norm", "norm", rows=tokens, cols=hidden),
        op("up", "gemm", m=tokens, n=ffn, k=hidden),
        op("gelu", "elementwise", elements=tokens * ffn, op="gelu"),
        op("down", "gemm", m=tokens, n=hidden, k=ffn),
        op("mlp_add", "elementwise", elements=tokens * hidden, op="add"),
        op("mlp_norm", "norm", rows=tokens, cols=hidden)]})


def workload(m: Measurement) -> Workload:
    if m.model in BERT:
        return bert(m.model, m.batch, m.seq)
    resnet, _ = load_model(locate("resnet50_b1", "workload"), Workload)
    return batched_workload(resnet, m.batch)


def platforms(name: str) -> tuple[Platform, Platform]:
    """(before, after): the platform with its array results leaving directly, and as
    written."""
    after, _ = load_model(str(HERE / f"{name}.yaml"), Platform)
    data = after.model_dump()
    data["systolic_array"].update(output_path="direct", evacuation=None)
    return Platform.model_validate(data), after


def simulated(m: Measurement) -> tuple[float, float]:
    """Seconds of what the measurement times, before and after."""
    before, after = platforms(m.platform)
    work = workload(m)
    times = []
    for platform, mode in ((before, "none"), (after, "auto")):
        total = simulate(Inputs(platform, work, Mapping(fusion=mode)), engine="fast").total
        seconds = total.cycles / (platform.clock_ghz * 1e9)
        times.append(seconds / m.batch if m.per == "sample" else seconds)
    return times[0], times[1]


def rows() -> list[dict]:
    found = []
    for m in MEASUREMENTS:
        before, after = simulated(m)
        found.append({"family": m.family, "model": m.model, "batch": m.batch,
                      "seq": m.seq, "precision": m.precision, "per": m.per,
                      "measured_ms": m.seconds * 1e3, "before_ms": before * 1e3,
                      "after_ms": after * 1e3,
                      "before_error": before / m.seconds - 1,
                      "after_error": after / m.seconds - 1, "source": m.source})
    return found


def summary(found: list[dict], key: str) -> tuple[float, float]:
    """(median, worst) of the error's magnitude."""
    errors = [abs(row[key]) for row in found]
    return statistics.median(errors), max(errors)


def plot(found: list[dict], path: str) -> None:
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(9, 4))
    labels = [f"{r['model']}\nb{r['batch']}" for r in found]
    xs = range(len(found))
    axes.bar([x - 0.2 for x in xs], [100 * r["before_error"] for r in found], 0.4,
             label="before (fusion none, direct output)")
    axes.bar([x + 0.2 for x in xs], [100 * r["after_error"] for r in found], 0.4,
             label="after (fusion auto, vector output path)")
    axes.axhline(0, color="black", linewidth=0.8)
    axes.set_xticks(list(xs), labels, fontsize=8)
    axes.set_ylabel("simulated / measured - 1 (%)")
    axes.set_title("Whole models against public measurements")
    axes.legend(fontsize=8)
    figure.tight_layout()
    save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", help="write the figure (PNG)")
    parser.add_argument("--csv", help="write the table")
    args = parser.parse_args()
    found = rows()
    table = Table(title="Whole models: simulated against measured")
    for column in ("family", "model", "batch", "seq", "measured ms", "before ms",
                   "error", "after ms", "error"):
        table.add_column(column, justify="left" if column in ("family", "model")
                         else "right")
    for r in found:
        table.add_row(r["family"], r["model"], str(r["batch"]), str(r["seq"] or "-"),
                      f"{r['measured_ms']:.3f}" + (" /img" if r["per"] == "sample" else ""),
                      f"{r['before_ms']:.3f}", f"{100 * r['before_error']:+.1f}%",
                      f"{r['after_ms']:.3f}", f"{100 * r['after_error']:+.1f}%")
    console = Console(width=140)
    console.print(table)
    for key, label in (("before_error", "before"), ("after_error", "after")):
        median, worst = summary(found, key)
        console.print(f"{label}: median |error| {100 * median:.1f}%, worst "
                      f"{100 * worst:.1f}%")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(found[0]))
            writer.writeheader()
            writer.writerows(found)
    if args.plot:
        plot(found, args.plot)


if __name__ == "__main__":
    main()
