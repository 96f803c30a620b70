"""Load studies over many runs of one setup: the latency-throughput curve over offered
rates, and the highest rate that meets the SLA (on a lattice of 1% steps)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from simulator.errors import AccsimError
from simulator.output.escape import csv_text
from simulator.output.files import write_file
from simulator.serving.kv_cache import blocks_for
from simulator.serving.serve import Setup, simulate_serving, summary
from simulator.serving.spec import ServeSpec
from simulator.serving.serving_plots import curve_figure

PointProgress = Callable[[int, int], None]

# One CSV column per figure: (column, summary key, statistic or None).
CURVE_COLUMNS = [("offered_rps", None, None), ("achieved_rps", "throughput_rps", None)] + [
    (f"{metric}_{stat}_ms", f"{metric}_ms", stat)
    for metric in ("latency", "ttft", "tpot") for stat in ("p50", "p95", "p99")] + [
    ("tokens_per_s", "tokens_per_s", None), ("goodput_rps", "goodput_rps", None),
    ("utilization", "utilization", None), ("completed", "completed", None),
    ("dropped", "dropped", None), ("preempted", "preempted", None)]
STEPS_PER_DOUBLING = 70   # rates searched: start x 2^(k/70), k whole: steps under 1%
SEARCH_TOLERANCE = 2 ** (1 / STEPS_PER_DOUBLING) - 1   # the lattice's step
MAX_STEPS = 40            # doublings or halvings of the start rate searched


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
    """Where the search starts: the spec's rate, else what full batches on every
    replica sustain (a plain workload's batch of max_batch; an LLM's, _llm_saturation)."""
    if spec.rate is not None:
        return spec.rate
    resolved = spec.resolved()
    if not setup.llm:
        batch = setup.cost.batch(resolved.max_batch).seconds
        return resolved.replicas * resolved.max_batch / batch
    return _llm_saturation(setup, resolved)


def _llm_saturation(setup: Setup, spec: ServeSpec) -> float:
    """The request rate an LLM deployment sustains with every batch full: per replica,
    each of its batches (max_batch, or as many mean requests as its KV blocks hold)
    prefills its prompts and decodes its outputs in turn, and a pipelined replica
    keeps min(stages, micro-batches) batches in flight. An estimate from the requests'
    mean prompt and output (the trace's, else the spec's) that ignores how chunked
    prefill shares iterations with decodes; the SLA capacity usually lies within a
    doubling of it, rather than several doublings from an arbitrary rate."""
    trace = setup.trace
    prompt, output = (spec.prompt_tokens, spec.output_tokens) if trace is None else (
        max(1, round(float(trace.prompt_tokens.mean()))),
        max(1, round(float(trace.output_tokens.mean()))))
    stages = spec.system.pp
    lanes = (spec.micro_batches or stages) if stages > 1 else 1
    per_request = blocks_for(prompt + output, spec.block_tokens)
    batch = max(1, min(spec.max_batch, setup.kv_blocks // (lanes * per_request)))
    chunk = min(prompt, spec.max_tokens)
    prefill = setup.cost.iteration([(chunk, 0)], ()).seconds * -(-prompt // chunk)
    decode = setup.cost.iteration((), [prompt + output // 2] * batch).seconds
    seconds = batch * prefill + output * decode
    return spec.replicas * min(stages, lanes) * batch / seconds


def _admissible(spec: ServeSpec, rate: float) -> bool:
    """Whether a run at `rate` is within the spec's bounds (rate, arrivals' span)."""
    try:
        ServeSpec.model_validate(spec.model_dump(exclude_unset=True) | {"rate": rate})
    except (ValidationError, AccsimError):
        return False
    return True


def lattice_rate(start: float, k: int) -> float:
    """The k-th rate of the search lattice: the start rate times 2^(k/70) (k a multiple
    of 70: the start doubled or halved, exactly in binary)."""
    return start * 2.0 ** (k / STEPS_PER_DOUBLING)


def sla_slack(report: dict) -> float | None:
    """How far a run is from its SLA: the largest log(value / target) of its targets
    (<= 0 exactly when every target is met); None where a value is missing or zero."""
    values = [(c["value"], c["target"]) for c in report["targets"].values()]
    if any(value is None or value <= 0 for value, _ in values):
        return None
    return max(math.log(value / target) for value, target in values)


def _probe(low: tuple[int, float | None], high: tuple[int, float | None]) -> int:
    """The next index strictly inside the bracket: where the slack's straight line
    between its ends crosses zero (the first index past it when that is the low end),
    or the midpoint when a slack is unknown."""
    (lo, slack_lo), (hi, slack_hi) = low, high
    if slack_lo is not None and slack_hi is not None:
        index = math.floor(lo + (hi - lo) * -slack_lo / (slack_hi - slack_lo))
    else:
        index = (lo + hi) // 2
    return min(max(index, lo + 1), hi - 1)


def _halved(end: tuple[int, float | None]) -> tuple[int, float | None]:
    """A bracket end whose slack counts half in the next probe's line (Illinois)."""
    index, slack = end
    return index, None if slack is None else slack / 2


class NoBracket(AccsimError):
    """The rate search found no rate that meets the SLA beside one that misses it:
    `unbounded`, every rate it ran met it (the deployment search's `unbounded`
    status), else none did."""

    def __init__(self, rule: str, *, field: str, unbounded: bool):
        super().__init__(rule, field=field)
        self.unbounded = unbounded


def find_max_rate(setup: Setup, spec: ServeSpec, *,
                  progress: PointProgress | None = None,
                  run: Callable[[float], dict] | None = None) -> dict:
    """The highest rate of the search lattice (Lattice: 1% steps from the start rate)
    whose run meets every SLA target while the next one up misses. From the start
    rate, doublings up while its run meets the SLA, else halvings down; then the
    bracket is narrowed to adjacent lattice rates, each probe where the SLA slack's
    line between the bracket's ends crosses zero; an end kept by two probes in a row
    has its slack halved (the Illinois rule of false position), so a curved slack
    cannot hold the probes to one side. Every step depends only on the runs' figures,
    so `serve --find-max-rate` and the deployment search find the same rate. `run`: a rate's summary (default
    run_at; the deployment search reads runs it already simulated back from its
    store)."""
    evaluations: list[dict] = []
    start = _start_rate(setup, spec)

    def probe(k: int) -> tuple[bool, tuple[int, float | None]]:
        """Whether the run at lattice index k meets the SLA, and (k, its slack)."""
        rate = lattice_rate(start, k)
        figures = run(rate) if run is not None else run_at(setup, spec, rate)
        met = figures["sla"]["met"]
        evaluations.append({"rate_rps": rate, "met": met, "figures": {
            name: value for name, value in figures.items() if name != "sla"}})
        if progress:
            progress(len(evaluations), 0)
        return met, (k, sla_slack(figures["sla"]))

    k = 0
    met, end = probe(k)
    low, high = (end, None) if met else (None, end)
    direction = STEPS_PER_DOUBLING if met else -STEPS_PER_DOUBLING
    for _ in range(MAX_STEPS):
        k += direction
        if not _admissible(spec, lattice_rate(start, k)):
            break
        met, end = probe(k)
        low, high = (end, high) if met else (low, end)
        if low is not None and high is not None:
            break
    if low is None or high is None:
        steps = "doublings" if high is None else "halvings"
        done, tried = len(evaluations) - 1, evaluations[-1]["rate_rps"]
        within = f"within {MAX_STEPS} {steps}" if done == MAX_STEPS else \
            f"in {done} {steps}"
        bound = "" if done == MAX_STEPS else ", the last the spec's bounds allow"
        raise NoBracket(f"no bracket found {within} of {start:g} requests/s{bound} "
                        f"(last tried {tried:g})", field="sla", unbounded=high is None)
    moved = None   # which end the last probe inside the bracket moved (True: low)
    while high[0] - low[0] > 1:
        met, end = probe(_probe(low, high))
        if met:
            low, high = end, _halved(high) if moved else high
        else:
            low, high = _halved(low) if moved is False else low, end
        moved = met
    return {"max_rate_rps": lattice_rate(start, low[0]),
            "bracket_rps": [lattice_rate(start, low[0]), lattice_rate(start, high[0])],
            "tolerance": SEARCH_TOLERANCE, "evaluations": evaluations}


def write_curve_csv(rows: list[dict], path: str | Path) -> None:
    write_file(path, csv_text(list(rows[0]), rows))


def write_curve_plot(rows: list[dict], title: str, sla: dict[str, float],
                     path: str | Path) -> None:
    """Latency percentiles against achieved throughput, offered load and the SLA's
    bounds marked."""
    curve_figure(rows, path, title, sla)
