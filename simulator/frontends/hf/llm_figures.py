"""What an LLM result reports beside its simulated time (DESIGN.md section 9): the
model's sizes, the step's arithmetic intensity and roofline bound, tokens/s and
ms/token."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

from simulator.frontends.hf.config import ModelConfig
from simulator.frontends.hf.stats import FORMULAS, model_stats


@dataclass(frozen=True)
class StepFigures:
    """One simulated LLM step (a prefill, a decode step or an iteration)."""

    model: str
    phase: str
    batch: int
    length: int                   # prompt tokens (prefill) or context (decode)
    tokens: int                   # tokens processed by the step
    params_total: int
    params_active: int
    flops_per_token: int          # weights only (model_stats)
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    weight_bytes: int
    step_flops: int               # simulated model FLOPs of the step
    offchip_bytes: int            # simulated
    compulsory_bytes: int
    arithmetic_intensity: float   # step FLOPs per compulsory byte
    machine_balance: float        # peak FLOP/s per byte/s
    roofline_s: float             # sum of the operators' roofline bounds
    simulated_s: float
    mfu: float
    tokens_per_s: float
    ms_per_token: float           # per request: step time / tokens each request adds


def step_figures(cfg: ModelConfig, result, *, phase: str, batch: int, length: int,
                 dtype: str | None = None, weight_dtype: str | None = None,
                 kv_dtype: str | None = None) -> StepFigures:
    """The figures of a simulated prefill (length = prompt) or decode step (length =
    context) of `batch` sequences. `dtype` None: the platform's default."""
    dtype = dtype or result.platform.systolic_array.input_dtypes[0]
    stats = model_stats(cfg, dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    per_request = length if phase == "prefill" else 1
    tokens = batch * per_request
    return StepFigures(
        model=cfg.name, phase=phase, batch=batch, length=length, tokens=tokens,
        params_total=stats.params_total, params_active=stats.params_active,
        flops_per_token=stats.flops_per_token,
        kv_bytes_per_token=stats.kv_bytes_per_token,
        kv_bytes_per_request=stats.kv_bytes_per_request(length),
        weight_bytes=stats.weight_bytes,
        **simulated_figures(result, tokens=tokens, per_request=per_request))


def simulated_figures(result, *, tokens: int, per_request: int) -> dict:
    """The StepFigures fields a simulated step gives (the rest come from the config):
    what `accsim verify` recomputes on a rerun."""
    platform, total = result.platform, result.total
    derived = total.derived(platform)
    seconds = derived["time_s"]
    return {"step_flops": total.model_flops, "offchip_bytes": total.offchip_bytes,
            "compulsory_bytes": total.compulsory_bytes,
            "arithmetic_intensity": derived["arithmetic_intensity"],
            "machine_balance": derived["machine_balance"],
            "roofline_s": platform.seconds(total.roofline_bound_cycles),
            "simulated_s": seconds, "mfu": derived["mfu"],
            "tokens_per_s": tokens / seconds if seconds else 0.0,
            "ms_per_token": 1e3 * seconds / per_request}


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {prefix}{unit}"
    return f"{value:,.2f} {unit}"


def _binary(value: float) -> str:
    for scale, prefix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if value >= scale:
            return f"{value / scale:,.2f} {prefix}"
    return f"{value:,.0f} B"


HOW_WIDTH = 38  # characters of a formula's line in the figures table


def figures_table(fig: StepFigures) -> Table:
    """The figures as a two-column table with the formula or source of each."""
    table = Table(title=f"{fig.model} {fig.phase}, batch {fig.batch}, "
                  f"{'prompt' if fig.phase == 'prefill' else 'context'} {fig.length}",
                  title_justify="left")
    for column in ("figure", "value"):
        table.add_column(column)
    # The formulas wrap at their words: a table of 80 columns holds the figure and
    # either part beside it whole (its numbers are never cut).
    table.add_column("how", max_width=HOW_WIDTH)
    rows = [
        ("parameters (total / active)",
         f"{_si(fig.params_total, '')} / {_si(fig.params_active, '')}",
         FORMULAS["params"]),
        ("FLOPs per token", _si(fig.flops_per_token, "FLOP"), FORMULAS["flops_per_token"]),
        ("KV bytes per token / per request", f"{_binary(fig.kv_bytes_per_token)} / "
         f"{_binary(fig.kv_bytes_per_request)}", FORMULAS["kv_bytes_per_token"]),
        ("weight bytes", _binary(fig.weight_bytes), FORMULAS["weight_bytes"]),
        ("step FLOPs / off-chip bytes", f"{_si(fig.step_flops, 'FLOP')} / "
         f"{_binary(fig.offchip_bytes)}", "simulated"),
        ("arithmetic intensity", f"{fig.arithmetic_intensity:,.1f} FLOP/B (machine "
         f"balance {fig.machine_balance:,.1f})", "step FLOPs / compulsory bytes"),
        ("roofline bound / simulated", f"{fig.roofline_s * 1e3:,.3f} ms / "
         f"{fig.simulated_s * 1e3:,.3f} ms",
         "sum of max(FLOPs / peak, compulsory bytes / bandwidth) per operator"),
        ("MFU", f"{100 * fig.mfu:.1f}%", "step FLOPs / (time x peak)"),
        ("tokens/s", f"{fig.tokens_per_s:,.1f}", "tokens of the step / simulated time"),
        ("ms/token", f"{fig.ms_per_token:,.3f}",
         "simulated time / tokens each request adds"),
    ]
    for row in rows:
        table.add_row(*row)
    return table
