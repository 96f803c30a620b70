"""`accsim import hf CONFIG --phase prefill|decode --batch B --seq S | --context C` and
`accsim run --model CONFIG --phase ...`: the LLM frontend's command-line options
(DESIGN.md section 9), declared in simulator.options.catalog, turned into the typed
call of simulator.frontends.hf.step.llm_step. Options are validated before anything is
simulated."""

from __future__ import annotations

import argparse

from simulator.errors import AccsimError
from simulator.frontends.imported import Imported
from simulator.frontends.hf.step import LlmOptions, LlmStep
from simulator.frontends.hf.step import llm_step as typed_llm_step
from simulator.inputs.loader import read_source
from simulator.options.catalog import add_options

HELP = "a Hugging Face config.json: an LLM's prefill or decode step"


def add_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The phase, sizes and precision options: as `import hf` takes them (--phase
    required), or as the simulating verbs do."""
    add_options(parser, "import hf" if required else "run", "llm")


def llm_step(args: argparse.Namespace, config_path: str) -> LlmStep:
    """The LLM step the parsed options name (simulator.frontends.hf.step.llm_step)."""
    return typed_llm_step(config_path, args.phase, batch=args.batch, seq=args.seq,
                          context=args.context, options=llm_options(args))


def llm_options(args: argparse.Namespace) -> LlmOptions:
    return LlmOptions(dtype=args.dtype, weight_dtype=args.weight_dtype,
                      kv_dtype=args.kv_dtype, imbalance=args.imbalance,
                      all_logits=args.all_logits)


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
