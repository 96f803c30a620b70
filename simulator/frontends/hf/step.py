"""An LLM step: a model, a phase and its sizes, with the precision and MoE options that
shape its workload (DESIGN.md section 9). `accsim run --model`, the Python API's
from_hf and a study's model all build it through `llm_step`, which checks every value
with its option's rule (simulator.frontends.llm_choices, the rules the options'
declarations take too) before the config is read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from simulator.errors import AccsimError
from simulator.frontends.hf.config import ModelConfig, load_model_config
from simulator.frontends.hf.llm_figures import figures_table, step_figures
from simulator.frontends.hf.quantization import fit_formats
from simulator.frontends.hf.stats import model_stats
from simulator.frontends.hf.workloads import decode_workload, prefill_workload
from simulator.frontends.llm_choices import PHASE, PHASE_LENGTH, RULES, SIZE
from simulator.inputs.workload import Workload

@dataclass(frozen=True)
class LlmOptions:
    """The precision and MoE options of a step (--dtype, --weight-dtype, --kv-dtype,
    --imbalance, --all-logits)."""

    dtype: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    imbalance: float = 1.0
    all_logits: bool = False


@dataclass(frozen=True)
class LlmStep:
    """A model, a phase and its sizes, as the options gave them."""

    config: ModelConfig
    phase: str
    batch: int
    length: int
    options: LlmOptions = LlmOptions()
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
        o = self.options
        precision = dict(dtype=o.dtype, weight_dtype=o.weight_dtype, kv_dtype=o.kv_dtype,
                         imbalance=o.imbalance)
        if self.phase == "prefill":
            workload = prefill_workload(self.config, batch=self.batch, seq=self.length,
                                        all_logits=o.all_logits, **precision)
        else:
            workload = decode_workload(self.config, batch=self.batch,
                                       context=self.length, **precision)
        stats = model_stats(self.config, dtype=o.dtype, weight_dtype=o.weight_dtype,
                            kv_dtype=o.kv_dtype)
        described = (f"{workload.description} Params {stats.params_total:,} total, "
                     f"{stats.params_active:,} active; {stats.flops_per_token:,} FLOPs "
                     f"and {stats.kv_bytes_per_token:,} KV bytes per token (dtype "
                     f"{o.dtype or 'bf16 assumed'})."
                     + "".join(f" {note}." for note in self.format_notes))
        return workload.model_copy(update={"description": described})

    def figures(self, result):
        """The model's and the step's figures for a simulated RunResult."""
        o = self.options
        return step_figures(self.config, result, phase=self.phase, batch=self.batch,
                            length=self.length, dtype=o.dtype,
                            weight_dtype=o.weight_dtype, kv_dtype=o.kv_dtype)

    def table(self, result):
        """figures() as the table `accsim run --model` prints."""
        return figures_table(self.figures(result))

    def record(self, result) -> dict:
        """The figures as the result JSON's `llm` block (simulator.present.results.LlmFigures)."""
        return asdict(self.figures(result))


def llm_step(config_path: str, phase: str | None, *, batch: int | None = None,
             seq: int | None = None, context: int | None = None,
             options: LlmOptions = LlmOptions()) -> LlmStep:
    """Check the phase and its length (one clear error for a phase without it, or with
    the other phase's), every value by its option's rule, then read the config. Errors
    name the flag (the API names its argument instead)."""
    if phase is None:
        raise AccsimError("needs --phase prefill (with --seq) or --phase decode (with "
                          "--context)", field="--phase")
    PHASE.check(phase, "--phase")
    length_name, meaning = PHASE_LENGTH[phase]
    other = next(name for each, (name, _) in PHASE_LENGTH.items() if each != phase)
    length = {"seq": seq, "context": context}
    if length[length_name] is None:
        raise AccsimError(f"--phase {phase} needs --{length_name} N ({meaning})",
                          field=f"--{length_name}")
    if length[other] is not None:
        raise AccsimError(f"--{other} does not apply to --phase {phase} (it takes "
                          f"--{length_name})", field=f"--{other}")
    batch = 1 if batch is None else batch
    SIZE.check(batch, "--batch")
    SIZE.check(length[length_name], f"--{length_name}")
    for name, value in asdict(options).items():
        if value is not None:
            RULES[name].check(value, "--" + name.replace("_", "-"))
    if options.all_logits and phase != "prefill":
        raise AccsimError("--all-logits applies to --phase prefill", field="--all-logits")
    config = load_model_config(config_path)
    # The last position a step uses: the prompt's last token, or the decoded token
    # after `context` cached ones.
    size = length[length_name]
    positions = size if phase == "prefill" else size + 1
    if config.max_positions is not None and positions > config.max_positions:
        raise AccsimError(f"--{length_name} {size:,} needs {positions:,} positions, more "
                          f"than the {config.max_positions:,} the model was built for",
                          file=config.source, field=config.max_positions_key)
    return LlmStep(config, phase, batch, size, options)
