"""`accsim import hf CONFIG --phase prefill|decode --batch B --seq S | --context C` and
`accsim run --model CONFIG --phase ...`: the LLM frontend's command-line options
(DESIGN.md section 9). Options are validated before anything is simulated."""

from __future__ import annotations

import argparse

from simulator.errors import AccsimError
from simulator.frontends.imported import Imported
from simulator.frontends.hf.config import shipped_configs
from simulator.frontends.hf.step import LlmStep, llm_step
from simulator.inputs.loader import read_source

HELP = "a Hugging Face config.json: an LLM's prefill or decode step"
PHASES = ("prefill", "decode")
DTYPES = ("int8", "int16", "int32", "fp8", "bf16", "fp16", "fp32")


def add_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The phase, sizes and precision options (shared by `import hf` and `run`)."""
    parser.add_argument("--phase", choices=PHASES, required=required)
    parser.add_argument("--batch", type=int, default=None,
                        help="sequences in the step (default 1)")
    parser.add_argument("--seq", type=int, help="prefill: prompt tokens per sequence")
    parser.add_argument("--context", type=int,
                        help="decode: tokens in each sequence's KV cache")
    parser.add_argument("--dtype", "--act-dtype", choices=DTYPES, dest="dtype",
                        help="activations (default: the platform's); a precision plan "
                        "(run --precision) sets fallback chains per operator instead")
    parser.add_argument("--weight-dtype", choices=DTYPES,
                        help="weights, e.g. int8 beside bf16 activations (default: "
                        "--dtype)")
    parser.add_argument("--kv-dtype", choices=DTYPES,
                        help="the KV cache (default: --dtype)")
    parser.add_argument("--imbalance", type=float, default=1.0,
                        help="MoE: busiest expert's tokens over the mean (default 1.0)")
    parser.add_argument("--all-logits", action="store_true",
                        help="prefill: lm_head on every token, not only the last")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """`accsim run --model CONFIG` and the options that go with it."""
    parser.add_argument("--model", metavar="CONFIG",
                        help="a Hugging Face config.json, or a shipped one "
                        f"({', '.join(shipped_configs())}), instead of --workload; "
                        "needs --phase")
    add_arguments(parser, required=False)


def load(args: argparse.Namespace) -> Imported:
    """`accsim import hf`: the workload of the phase the options name."""
    step = llm_step(args, args.file)
    groups = step.config.groups()
    if len(groups) == 1:
        note = (f"{step.config.name}: one layer simulated, repeat {step.config.layers} "
                "on each of its operators")
    else:
        kinds = ", ".join(f"{mixer}/{ffn} x {count}" for (mixer, ffn), count in groups)
        note = (f"{step.config.name}: one layer of each kind simulated, repeated over "
                f"its layers ({kinds})")
    return Imported(step.workload(), [note])


def run_step(args: argparse.Namespace) -> tuple[LlmStep | None, object]:
    """For `accsim run`: (the LLM step of --model, or None, and the config's Source for
    the manifest); the LLM options without --model are an error."""
    if args.model is None:
        given = [f"--{name.replace('_', '-')}" for name in
                 ("phase", "batch", "seq", "context", "dtype", "weight_dtype", "kv_dtype")
                 if getattr(args, name) is not None]
        if args.all_logits or args.imbalance != 1.0:
            given.append("--all-logits" if args.all_logits else "--imbalance")
        if given:
            raise AccsimError(f"{', '.join(given)}: only with --model CONFIG",
                              field=given[0])
        return None, None
    step = llm_step(args, args.model)
    return step, read_source(step.config.source)
