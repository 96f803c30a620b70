"""What an LLM step's options may be (phase, sizes, formats, MoE imbalance) and the
names of the shipped model configs: plain constants and rules that the options'
declarations (simulator.options.catalog) and the step builder (simulator.frontends.hf.step)
both read, so that declaring the options imports none of the Hugging Face readers (a
warm `accsim run` or `accsim check` without --model never uses them)."""

from __future__ import annotations

from simulator.inputs.loader import shipped_folder
from simulator.options.rules import Number, OneOf, Switch, Whole

# Where the shipped configs live: workloads/hf/ (package simulator.workloads.hf).
SHIPPED_SUBFOLDER = "hf"

PHASES = ("prefill", "decode")
# The length option each phase needs, and what it means.
PHASE_LENGTH = {"prefill": ("seq", "the prompt length"),
                "decode": ("context", "the KV-cache length")}
DTYPES = ("int8", "int16", "int32", "fp8", "bf16", "fp16", "fp32")
# Largest --batch, --seq or --context: their products with the model's sizes stay
# far inside int64 (DESIGN.md section 7).
MAX_SIZE = 2**31 - 1
# The rules of the step's options: the flags' declarations (simulator.options.catalog)
# take these, so `accsim run --model` and the API check each value alike.
PHASE = OneOf(PHASES, "phase")
SIZE = Whole(1, MAX_SIZE)
DTYPE = OneOf(DTYPES, "dtype")
IMBALANCE = Number(1.0, "busiest expert's tokens over the mean")
RULES = {"dtype": DTYPE, "weight_dtype": DTYPE, "kv_dtype": DTYPE, "imbalance": IMBALANCE,
         "all_logits": Switch()}


def shipped_configs() -> list[str]:
    """Names of the config.json files shipped in workloads/hf/."""
    folder = shipped_folder("workload") / SHIPPED_SUBFOLDER
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir()
                  if p.name.endswith(".json"))
