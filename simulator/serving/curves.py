"""Load studies over many runs of one setup: the latency-throughput curve over offered
rates, and the highest rate that meets the SLA (bisection to within 1%)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from simulator.errors import AccsimError
from simulator.escape import csv_text
from simulator.outputs import write_file
from simulator.serving.serve import Setup, simulate_serving, summary
from simulator.serving.spec import ServeSpec
from simulator.serving.plots import curve_figure

PointProgress = Callable[[int, int], None]

# One CSV column per figure: (column, summary key, statistic or None).
CURVE_COLUMNS = [("offered_rps", None, None), ("achieved_rps", "throughput_rps", None)] + [
    (f"{metric}_{stat}_ms", f"{metric}_ms", stat)
    for metric in ("latency", "ttft", "tpot") for stat in ("p50", "p95", "p99")] + [
    ("tokens_per_s", "tokens_per_s", None), ("goodput_rps", "goodput_rps", None),
    ("utilization", "utilization", None), ("completed", "completed", None),
    ("dropped", "dropped", None), ("preempted", "preempted", None)]
SEARCH_TOLERANCE = 0.01   # the bracket's width over its low end when bisection stops
MAX_STEPS = 40            # doublings or halvings while bracketing, then bisections


def run_at(setup: Setup, spec: ServeSpec, rate: float) -> dict:
    """The summary of one run at an offered rate."""
    at = spec.at_rate(rate)
    return summary(setup, at, *simulate_serving(setup, at))


def curve_row(rate: float, figures: dict) -> dict:
    row = {}
    for column, key, stat in CURVE_COLUMNS:
        value = rate if key is None else figures[key]
        row[column] = value[stat] if stat and value is not None else \
            (None if stat else value)
    row["sla_met"] = figures["sla"]["met"] if figures["sla"] else None
    return row


def sweep(setup: Setup, spec: ServeSpec, *, progress: PointProgress | None = None
          ) -> list[dict]:
    """One curve row per offered rate of spec.sweep_rate."""
    rates = spec.sweep_rate.rates
    rows = []
    for index, rate in enumerate(rates):
        rows.append(curve_row(rate, run_at(setup, spec, rate)))
        if progress:
            progress(index + 1, len(rates))
    return rows


def _start_rate(setup: Setup, spec: ServeSpec) -> float:
    """Where the search starts: the spec's rate, else the trace's own rate, else what
    full batches on every replica sustain."""
    if spec.rate is not None:
        return spec.rate
    if setup.trace is not None:
        times = setup.trace.times_s
        if len(times) > 1 and times[-1] > 0:
            return (len(times) - 1) / float(times[-1])
    resolved = spec.resolved()
    if not setup.llm:
        batch = setup.cost.batch(resolved.max_batch).seconds
        return resolved.replicas * resolved.max_batch / batch
    return 1.0


def _admissible(spec: ServeSpec, rate: float) -> bool:
    """Whether a run at `rate` is within the spec's bounds (rate, arrivals' span)."""
    try:
        ServeSpec.model_validate(spec.model_dump(exclude_unset=True) | {"rate": rate})
    except (ValidationError, AccsimError):
        return False
    return True


def find_max_rate(setup: Setup, spec: ServeSpec, *,
                  progress: PointProgress | None = None,
                  run: Callable[[float], dict] | None = None) -> dict:
    """The highest offered rate whose run meets every SLA target: bracket by doubling
    or halving from the start rate (within the rates a spec may ask for), then bisect
    until the bracket is within 1%. `run`: a rate's summary (default run_at; the
    deployment search reads runs it already simulated back from its store)."""
    evaluations: list[dict] = []

    def met(rate: float) -> bool:
        figures = run(rate) if run is not None else run_at(setup, spec, rate)
        evaluations.append({"rate_rps": rate, "met": figures["sla"]["met"],
                            "figures": {k: v for k, v in figures.items() if k != "sla"}})
        if progress:
            progress(len(evaluations), 0)
        return figures["sla"]["met"]

    rate = _start_rate(setup, spec)
    low = high = None
    if met(rate):
        low = rate
        for _ in range(MAX_STEPS):
            rate *= 2
            if not _admissible(spec, rate):
                break
            if not met(rate):
                high = rate
                break
            low = rate
    else:
        high = rate
        for _ in range(MAX_STEPS):
            rate /= 2
            if not _admissible(spec, rate):
                break
            if met(rate):
                low = rate
                break
            high = rate
    if low is None or high is None:
        steps = "doublings" if high is None else "halvings"
        raise AccsimError(f"no bracket found within {MAX_STEPS} {steps} of "
                          f"{_start_rate(setup, spec):g} requests/s (last tried {rate:g})",
                          field="sla")
    while high / low - 1 > SEARCH_TOLERANCE:
        middle = (low + high) / 2
        low, high = (middle, high) if met(middle) else (low, middle)
    return {"max_rate_rps": low, "bracket_rps": [low, high],
            "tolerance": SEARCH_TOLERANCE, "evaluations": evaluations}


def write_curve_csv(rows: list[dict], path: str | Path) -> None:
    write_file(path, csv_text(list(rows[0]), rows))


def write_curve_plot(rows: list[dict], title: str, sla: dict[str, float],
                     path: str | Path) -> None:
    """Latency percentiles against achieved throughput, offered load and the SLA's
    bounds marked."""
    curve_figure(rows, path, title, sla)
