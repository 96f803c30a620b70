"""SLA checks, shared by the SLA, serving, fit and efficiency sections: a run's checks
one request at a time, and a serving result's at each offered load."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.present.results import ServeResult
from simulator.review.providers import NotEvaluated
from simulator.review.runs import RunRecord
from simulator.review.serving_runs import ServingRecord
from simulator.review.sections.blocks import Context, workload_metric

SERVING_TARGETS = ("ttft_ms", "tpot_ms", "min_tokens_per_s")


@dataclass(frozen=True)
class Check:
    """One target judged: `value` against `limit` by `bound` ("<=" or ">=")."""

    target: str
    bound: str
    limit: float
    value: float

    @property
    def met(self) -> bool:
        return self.value <= self.limit if self.bound == "<=" else self.value >= self.limit

    @property
    def headroom(self) -> float:
        """The fraction of the limit to spare (negative: missed)."""
        spare = self.limit - self.value if self.bound == "<=" else self.value - self.limit
        return spare / self.limit


def sla_checks(ctx: Context, record: RunRecord) -> list[Check]:
    """Every SLA target a workload run can be judged on. Without serving there is one
    request at a time and no queueing, so every latency percentile is the latency."""
    sla = ctx.study.study.sla
    checks = []
    if sla.latency_ms is not None:
        latency = workload_metric(record, "latency_ms")
        checks += [Check(f"latency_ms {p}", "<=", bound, latency)
                   for p, bound in sla.latency_ms.bounds().items()]
    if sla.min_throughput_per_s is not None:
        checks.append(Check("min_throughput_per_s", ">=", sla.min_throughput_per_s,
                             workload_metric(record, "throughput_per_s")))
    if sla.power_cap_w is not None:
        checks.append(Check("power_cap_w", "<=", sla.power_cap_w,
                             workload_metric(record, "average_power_w")))
    return checks


def serving_targets(ctx: Context) -> list[str]:
    sla = ctx.study.study.sla
    return [name for name in SERVING_TARGETS if getattr(sla, name) is not None]


def served(ctx: Context) -> list[ServingRecord]:
    """The serving records that have results."""
    return [] if isinstance(ctx.serving, NotEvaluated) else \
        [r for r in ctx.serving if r.data is not None]


def serving_point(record: ServingRecord, rate: float) -> tuple[int, ServeResult]:
    """A serving record's result at one offered load, and its index in the file."""
    index = record.data.serving.rates_per_s.index(rate)
    return index, record.data.points[index]


def serving_checks(ctx: Context, point: ServeResult, *, llm: bool,
                   throughput: bool = True) -> list[Check]:
    """The SLA targets a serving result at one load is judged on: latency percentiles
    under queueing, TTFT and TPOT for LLMs, and (with `throughput`: at the load the
    SLA is judged at, since below it the achieved rate is the offered one) tokens and
    requests per second."""
    sla = ctx.study.study.sla
    checks = []
    for metric in ("latency", "ttft", "tpot") if llm else ("latency",):
        bounds = getattr(sla, f"{metric}_ms")
        stats = point.stats(metric)
        for percentile, bound in (bounds.bounds() if bounds else {}).items():
            if stats is not None and stats.at(percentile) is not None:
                checks.append(Check(f"{metric}_ms {percentile}", "<=", bound,
                                    stats.at(percentile)))
    if not throughput:
        return checks
    if sla.min_tokens_per_s is not None and llm and point.tokens_per_s is not None:
        checks.append(Check("min_tokens_per_s", ">=", sla.min_tokens_per_s,
                            point.tokens_per_s))
    if sla.min_throughput_per_s is not None:
        checks.append(Check("min_throughput_per_s", ">=", sla.min_throughput_per_s,
                            point.throughput_rps))
    return checks


def operating_checks(ctx: Context, record: ServingRecord) -> tuple[list[Check], str]:
    """A serving record's checks at the load the SLA is judged at, and their evidence."""
    index, point = serving_point(record, ctx.study.study.scope.serving.rate_per_s)
    return serving_checks(ctx, point, llm=record.llm), \
        f"{record.file}#/points/{index}"


def serving_notes(ctx: Context) -> list[str]:
    """Why serving figures are missing, where they are."""
    if isinstance(ctx.serving, NotEvaluated):
        return [ctx.serving.reason]
    return [f"serving {r.subject} on {r.platform} not evaluated: {r.reason}"
            for r in ctx.serving if r.data is None]
