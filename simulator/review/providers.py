"""The packet's parts that come from features outside the core (the hf frontend,
serving, platform area, sweeps), one function each.

Each returns its data, or `NotEvaluated` with the reason (the study does not ask for
it, or the platform gives no figure), so a section says "not evaluated" and why instead
of inventing a number.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator.inputs.platform import Platform
from simulator.frontends import hf
from simulator.inputs.loader import read_source
from simulator.output.files import OutputFolder
from simulator.review import serving_runs as serving
from simulator.review.study import Loaded, ModelUnderReview, ResolvedStudy
from simulator.review.sweep import SweepRecord, run_study_sweep
from simulator.frontends.hf.step import LlmOptions, LlmStep


@dataclass(frozen=True)
class NotEvaluated:
    """Why a part of the packet has no figures."""

    reason: str


def model_workload(model: ModelUnderReview, study: ResolvedStudy):
    """The Workload of a Hugging Face model in one phase (DESIGN.md section 9), built by
    the hf frontend, as a study input whose source is the config.json."""
    config = model_config_path(model, study)
    cfg = hf.load_model_config(config)
    dtypes = {"dtype": model.dtype, "weight_dtype": model.weight_dtype,
              "kv_dtype": model.kv_dtype}
    if model.phase == "prefill":
        workload = hf.prefill_workload(cfg, batch=model.batch, seq=model.seq, **dtypes)
    else:
        workload = hf.decode_workload(cfg, batch=model.batch, context=model.context,
                                      **dtypes)
    return Loaded(model.label, workload, read_source(hf.config.locate_config(config)))


def model_step(model: ModelUnderReview, study: ResolvedStudy):
    """The model's LLM step (simulator.frontends.hf.step.LlmStep), which a
    multi-chip system shards as `accsim run --model ... --tp T` does."""
    options = LlmOptions(dtype=model.dtype, weight_dtype=model.weight_dtype,
                         kv_dtype=model.kv_dtype)
    length = model.seq if model.phase == "prefill" else model.context
    return LlmStep(hf.load_model_config(model_config_path(model, study)), model.phase,
                   model.batch, length, options)


def model_config_path(model: ModelUnderReview, study: ResolvedStudy) -> str:
    """A config.json relative to the study file, else the name as given (a shipped
    config, which the frontend finds)."""
    beside = Path(study.source.path).parent / model.config
    return str(beside) if beside.is_file() else model.config


def serving_runs(study: ResolvedStudy, out: OutputFolder, *, cache: OutputFolder | None,
                 code: str, progress=None, check=None):
    """Every platform x workload or model served at scope.serving's loads (DESIGN.md
    section 10), as review.serving_runs records (`check`: as run_serving's)."""
    if study.study.scope.serving is None:
        return NotEvaluated("the study asks for no serving load (scope.serving)")
    subjects = [(w.label, w.source.path, False) for w in study.workloads]
    subjects += [(m.label, model_config_path(m, study), True)
                 for m in study.study.scope.models]
    return serving.run_serving(study, subjects, out, cache=cache, code=code,
                               progress=progress, check=check)


def platform_area_mm2(platform: Platform) -> float | NotEvaluated:
    """The platform's die area from its optional area table (DESIGN.md section 2)."""
    value = platform.area_mm2
    if value is None:
        return NotEvaluated(f"{platform.name} gives no area table")
    return float(value)


def design_sweep(study: ResolvedStudy, out: OutputFolder, *, cache: OutputFolder | None,
                 executor, progress=None) -> SweepRecord | NotEvaluated:
    """The sweep scope.sweep names (DESIGN.md section 11), run through simulator.sweep
    into the run cache's store (resumed by point key, so a second review computes
    nothing) and exported with its Pareto front over the spec's objectives into
    results/ (review.sweep), as a review.sweep.SweepRecord."""
    if study.sweep is None:
        return NotEvaluated("the study asks for no design-space sweep (scope.sweep)")
    return run_study_sweep(study.sweep, out, cache=cache, executor=executor,
                           progress=progress)
