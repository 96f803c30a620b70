"""The packet's parts that need features built outside the core, one function each.

Each returns its data, or `NotEvaluated` with the reason, so a section that needs a
missing feature says "not evaluated" and why instead of inventing a number. Wiring a
feature in when it lands changes one function here.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.config import Platform
from simulator.review.study import ModelUnderReview, ResolvedStudy


@dataclass(frozen=True)
class NotEvaluated:
    """Why a part of the packet has no figures."""

    reason: str


def model_workload(model: ModelUnderReview, study: ResolvedStudy):
    """The Workload of a Hugging Face model in one phase (DESIGN.md section 9), as a
    study Loaded input; needs the hf frontend."""
    return NotEvaluated("Hugging Face model workloads (simulator.frontends.hf, "
                        "`accsim import hf`) are not in this build")


def serving_curves(study: ResolvedStudy, records: list) -> dict | NotEvaluated:
    """Latency-throughput curves with p50/p95/p99 TTFT, TPOT and end-to-end latency per
    platform over the offered loads of scope.serving (DESIGN.md section 10); needs the
    serving simulator."""
    if study.study.scope.serving is None:
        return NotEvaluated("the study asks for no serving load (scope.serving)")
    return NotEvaluated("the serving simulation (simulator.serving, `accsim serve`) is "
                        "not in this build")


def platform_area_mm2(platform: Platform) -> float | NotEvaluated:
    """The platform's die area from its optional area table (DESIGN.md section 2)."""
    area = getattr(platform, "area_mm2", None)
    if area is None:
        return NotEvaluated("platform area (Platform.area_mm2 from an `area` table) is "
                            "not in this build")
    value = area() if callable(area) else area
    if value is None:
        return NotEvaluated(f"{platform.name} gives no area table")
    return float(value)


def design_sweep(study: ResolvedStudy) -> dict | NotEvaluated:
    """The Pareto front of the sweep named by scope.sweep (DESIGN.md section 11);
    needs the sweep package."""
    if study.study.scope.sweep is None:
        return NotEvaluated("the study asks for no design-space sweep (scope.sweep)")
    return NotEvaluated("design-space sweeps (simulator.sweep, `accsim sweep`) are not in "
                        "this build")
