"""`accsim import hf CONFIG --phase prefill|decode --batch B --seq S | --context C` and
`accsim run --model CONFIG --phase ...`: the LLM frontend's command-line options
(DESIGN.md section 9). Options are validated before anything is simulated."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, replace

from simulator.errors import AccsimError
from simulator.frontends.command import Imported
from simulator.frontends.hf.config import ModelConfig, load_model_config, shipped_configs
from simulator.frontends.hf.figures import figures_table, step_figures
from simulator.frontends.hf.quantization import fit_formats
from simulator.frontends.hf.stats import model_stats
from simulator.frontends.hf.workloads import decode_workload, prefill_workload
from simulator.inputs.loader import read_source
from simulator.inputs.workload import Workload

HELP = "a Hugging Face config.json: an LLM's prefill or decode step"
PHASES = ("prefill", "decode")
# The length option each phase needs, and what it means.
PHASE_LENGTH = {"prefill": ("seq", "the prompt length"),
                "decode": ("context", "the KV-cache length")}
DTYPES = ("int8", "int16", "int32", "fp8", "bf16", "fp16", "fp32")


# Largest --batch, --seq or --context: their products with the model's sizes stay
# far inside int64 (DESIGN.md section 7).
MAX_SIZE = 2**31 - 1


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


@dataclass(frozen=True)
class LlmStep:
    """A model, a phase and its sizes, as the options gave them."""

    config: ModelConfig
    phase: str
    batch: int
    length: int
    args: argparse.Namespace
    format_notes: tuple[str, ...] = ()   # declared weight formats a platform lacks

    def on(self, platform) -> LlmStep:
        """The step on a platform: the weight formats config.json declares, each
        falling back (quantization.fit_formats) where the platform's array lacks it."""
        fitted, notes = fit_formats(dict(self.config.weight_formats),
                                    tuple(platform.systolic_array.input_dtypes))
        config = replace(self.config, weight_formats=tuple(sorted(fitted.items())))
        return replace(self, config=config, format_notes=tuple(notes))

    def workload(self) -> Workload:
        """The step as a Workload, its description naming the model's sizes."""
        a = self.args
        precision = dict(dtype=a.dtype, weight_dtype=a.weight_dtype, kv_dtype=a.kv_dtype,
                         imbalance=a.imbalance)
        if self.phase == "prefill":
            workload = prefill_workload(self.config, batch=self.batch, seq=self.length,
                                        all_logits=a.all_logits, **precision)
        else:
            workload = decode_workload(self.config, batch=self.batch,
                                       context=self.length, **precision)
        stats = model_stats(self.config, dtype=a.dtype, weight_dtype=a.weight_dtype,
                            kv_dtype=a.kv_dtype)
        described = (f"{workload.description} Params {stats.params_total:,} total, "
                     f"{stats.params_active:,} active; {stats.flops_per_token:,} FLOPs "
                     f"and {stats.kv_bytes_per_token:,} KV bytes per token (dtype "
                     f"{a.dtype or 'bf16 assumed'})."
                     + "".join(f" {note}." for note in self.format_notes))
        return workload.model_copy(update={"description": described})

    def figures(self, result):
        """The model's and the step's figures for a simulated RunResult."""
        a = self.args
        return step_figures(self.config, result, phase=self.phase, batch=self.batch,
                            length=self.length, dtype=a.dtype,
                            weight_dtype=a.weight_dtype, kv_dtype=a.kv_dtype)

    def table(self, result):
        """figures() as the table `accsim run --model` prints."""
        return figures_table(self.figures(result))

    def record(self, result) -> dict:
        """The figures as the result JSON's `llm` block (simulator.present.results.LlmFigures)."""
        return asdict(self.figures(result))


def llm_step(args: argparse.Namespace, config_path: str) -> LlmStep:
    """Check the phase and its length (one clear error for a phase without it, or with
    the other phase's), then read the config."""
    if args.phase is None:
        raise AccsimError("needs --phase prefill (with --seq) or --phase decode (with "
                          "--context)", field="--phase")
    length_name, meaning = PHASE_LENGTH[args.phase]
    other = next(name for phase, (name, _) in PHASE_LENGTH.items() if phase != args.phase)
    length = getattr(args, length_name)
    if length is None:
        raise AccsimError(f"--phase {args.phase} needs --{length_name} N ({meaning})",
                          field=f"--{length_name}")
    if getattr(args, other) is not None:
        raise AccsimError(f"--{other} does not apply to --phase {args.phase} (it takes "
                          f"--{length_name})", field=f"--{other}")
    batch = 1 if args.batch is None else args.batch
    for name, value in (("--batch", batch), (f"--{length_name}", length)):
        if not 1 <= value <= MAX_SIZE:
            raise AccsimError(f"must be a whole number from 1 to {MAX_SIZE:,}, found "
                              f"{value:,}", field=name)
    if not math.isfinite(args.imbalance) or args.imbalance < 1.0:
        raise AccsimError("must be a finite number >= 1 (busiest expert's tokens over "
                          f"the mean), found {args.imbalance!r}", field="--imbalance")
    if args.all_logits and args.phase != "prefill":
        raise AccsimError("--all-logits applies to --phase prefill", field="--all-logits")
    config = load_model_config(config_path)
    # The last position a step uses: the prompt's last token, or the decoded token
    # after `context` cached ones.
    positions = length if args.phase == "prefill" else length + 1
    if config.max_positions is not None and positions > config.max_positions:
        raise AccsimError(f"--{length_name} {length:,} needs {positions:,} positions, more "
                          f"than the {config.max_positions:,} the model was built for",
                          file=config.source, field=config.max_positions_key)
    return LlmStep(config, args.phase, batch, length, args)


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
