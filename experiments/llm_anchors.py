"""Two anchors of the LLM model on tpu_v5e_like, Llama-3.1-8B in bf16 (the LLM issue's
acceptance):

1. decode, batch 1, context 2048: one step is memory-bound, so its time should be near
   (weight bytes + KV bytes) / rated bandwidth, the figure serving engineers quote
   (weights: every parameter once, 16.06 GB; KV: 2048 tokens x 128 KiB);
2. prefill, 2048 tokens, batch 1: compute-bound, MFU = model FLOPs / (time x peak).

Each is simulated under the default mapping (`Mapping()`) and under the mapper's best
tilings (`accsim map`'s search, objective cycles), side by side. The test
tests/test_llm_anchors.py pins the bounds (decode within 1.3x of the formula, prefill
compute-bound with MFU >= 50%) under the default mapping.

Run: `python experiments/llm_anchors.py` (a few seconds).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from simulator.inputs.platform import Platform
from simulator.frontends.hf import (decode_workload, load_model_config, model_stats,
                                    prefill_workload)
from simulator.inputs.loader import load_model, locate
from simulator.search.workload_search import map_workload
from simulator.mapping.plan import Mapping
from simulator.metrics.totals import dominant_bottleneck
from simulator.simulate import Inputs, simulate

PLATFORM = "tpu_v5e_like"
MODEL = "llama_3_1_8b"
DTYPE = "bf16"
DECODE_BATCH, DECODE_CONTEXT = 1, 2048      # sequences, tokens of KV cache
PREFILL_BATCH, PREFILL_SEQ = 1, 2048        # sequences, prompt tokens
DECODE_RATIO_MAX = 1.3                       # simulated / formula, acceptance
PREFILL_MFU_MIN = 0.50                       # acceptance


def platform() -> Platform:
    return load_model(locate(PLATFORM, "platform"), Platform)[0]


def searched(inputs: Inputs) -> Mapping:
    """The mapper's best tilings by cycles, as a plan."""
    return map_workload(inputs, objective="cycles").plan()


def decode_anchor(mapping: str) -> dict:
    """Decode step time against (weight bytes + KV bytes) / rated bandwidth."""
    chip = platform()
    cfg = load_model_config(MODEL)
    stats = model_stats(cfg, dtype=DTYPE)
    inputs = Inputs(chip, decode_workload(cfg, batch=DECODE_BATCH, context=DECODE_CONTEXT,
                                          dtype=DTYPE), Mapping())
    plan = searched(inputs) if mapping == "searched" else Mapping()
    result = simulate(Inputs(chip, inputs.workload, plan))
    moved = stats.weight_bytes + DECODE_BATCH * stats.kv_bytes_per_request(DECODE_CONTEXT)
    formula_s = moved / (chip.offchip.bandwidth_gbps * 1e9)
    simulated_s = result.total.derived(chip)["time_s"]
    return {"mapping": mapping, "simulated_s": simulated_s, "formula_s": formula_s,
            "ratio": simulated_s / formula_s, "bytes": moved,
            "bottleneck": dominant_bottleneck(result.operators)}


def prefill_anchor(mapping: str) -> dict:
    """Prefill MFU and the class holding most cycles."""
    chip = platform()
    cfg = load_model_config(MODEL)
    inputs = Inputs(chip, prefill_workload(cfg, batch=PREFILL_BATCH, seq=PREFILL_SEQ,
                                           dtype=DTYPE), Mapping())
    plan = searched(inputs) if mapping == "searched" else Mapping()
    result = simulate(Inputs(chip, inputs.workload, plan))
    derived = result.total.derived(chip)
    return {"mapping": mapping, "simulated_s": derived["time_s"], "mfu": derived["mfu"],
            "bottleneck": dominant_bottleneck(result.operators)}


def main() -> None:
    console = Console()
    decode = Table(title=f"{MODEL} {DTYPE} decode, batch {DECODE_BATCH}, context "
                   f"{DECODE_CONTEXT}, on {PLATFORM}", title_justify="left")
    for column in ("mapping", "simulated ms", "(weights + KV) / BW ms", "ratio",
                   "bottleneck"):
        decode.add_column(column)
    for mapping in ("default", "searched"):
        row = decode_anchor(mapping)
        decode.add_row(mapping, f"{row['simulated_s'] * 1e3:.3f}",
                       f"{row['formula_s'] * 1e3:.3f}", f"{row['ratio']:.3f}",
                       row["bottleneck"])
    console.print(decode)
    prefill = Table(title=f"{MODEL} {DTYPE} prefill, batch {PREFILL_BATCH}, "
                    f"{PREFILL_SEQ} tokens, on {PLATFORM}", title_justify="left")
    for column in ("mapping", "simulated ms", "MFU %", "bottleneck"):
        prefill.add_column(column)
    for mapping in ("default", "searched"):
        row = prefill_anchor(mapping)
        prefill.add_row(mapping, f"{row['simulated_s'] * 1e3:.3f}",
                        f"{100 * row['mfu']:.1f}", row["bottleneck"])
    console.print(prefill)
    console.print(f"acceptance: decode ratio <= {DECODE_RATIO_MAX}, prefill compute-bound "
                  f"with MFU >= {100 * PREFILL_MFU_MIN:.0f}%")


if __name__ == "__main__":
    main()
