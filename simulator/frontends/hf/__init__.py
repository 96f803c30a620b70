"""LLM workloads from Hugging Face config.json files (DESIGN.md section 9).

The public API (the serving simulator codes against these names):

- `load_model_config(path_or_shipped_name) -> ModelConfig`: read a config.json as
  Hugging Face writes it, or a shipped one by name (workloads/hf/NAME.json);
- `prefill_workload(cfg, *, batch, seq, dtype=None, ...) -> Workload`;
- `decode_workload(cfg, *, batch, context, dtype=None, ...) -> Workload`;
- `iteration_workload(cfg, *, prefill, decode, dtype=None) -> Workload`: one
  continuous-batching iteration (prefill chunks as (new_tokens, cached_tokens), decodes
  as context lengths);
- `model_stats(cfg, *, dtype=None) -> ModelStats`: parameters, weight bytes, KV bytes
  and FLOPs per token;
- `step_figures(cfg, result, ...)`: what an LLM result reports beside its time.
"""

from simulator.frontends.hf.config import ModelConfig, load_model_config, shipped_configs
from simulator.frontends.hf.llm_figures import StepFigures, step_figures
from simulator.frontends.hf.stats import FORMULAS, ModelStats, model_stats
from simulator.frontends.hf.workloads import (decode_workload, iteration_workload,
                                              prefill_workload)

__all__ = ["FORMULAS", "ModelConfig", "ModelStats", "StepFigures", "decode_workload",
           "iteration_workload", "load_model_config", "model_stats", "prefill_workload",
           "shipped_configs", "step_figures"]
