"""One LLM step as the options name it (a model's config, a phase and its sizes): its
workload, and the model's and the step's figures for a simulated result. The commands,
the Python API and the review packet all build steps here."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, replace

from simulator.errors import AccsimError
from simulator.frontends.hf.config import ModelConfig, load_model_config
from simulator.frontends.hf.figures import figures_table, step_figures
from simulator.frontends.hf.quantization import fit_formats
from simulator.frontends.hf.stats import model_stats
from simulator.frontends.hf.workloads import decode_workload, prefill_workload
from simulator.inputs.workload import Workload

# The length option each phase needs, and what it means.
PHASE_LENGTH = {"prefill": ("seq", "the prompt length"),
                "decode": ("context", "the KV-cache length")}
# Largest --batch, --seq or --context: their products with the model's sizes stay
# far inside int64 (DESIGN.md section 7).
MAX_SIZE = 2**31 - 1


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
