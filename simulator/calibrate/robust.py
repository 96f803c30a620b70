"""Whether a ranking of platforms survives their assumptions (DESIGN.md section 16).

Each platform's tornado (simulator.calibrate.sensitivity) tells which end of each
assumed range lowers the metric and which raises it; setting every field to its
favourable end gives the platform's best corner, every field to its other end its worst.
A ranking of A before B holds if A at its worst still beats B at its best. Otherwise the
fields whose range alone crosses the break-even are named, each with the value at which
the ranking flips, found by bisection on that one field within its range (the other
platform at its values as given). Every metric here is better lower.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from simulator.calibrate.sensitivity import METRICS, Sensitivity, Swing, assumed_ranges, \
    sensitivity, with_values
from simulator.inputs.platform import Platform
from simulator.inputs.run_inputs import Inputs
from simulator.limits import MemoryBudget
from simulator.inputs.loader import validate_model
from simulator.simulate import simulate

# How the winner of a metric is said: "B faster", "B lower energy".
BETTER = {"time_s": "faster", "cycles": "faster", "energy_j": "lower energy",
          "edp_js": "lower EDP"}
# Bisection stops when the bracket is this fraction of the range wide (or one step of a
# whole-number field).
TOLERANCE = 1e-3


@dataclass(frozen=True)
class Flip:
    """One assumed field of one platform whose range alone crosses the break-even:
    the ranking flips once the field is beyond `threshold` in the direction `sign`."""

    platform: str
    field: str
    sign: str            # ">" or "<"
    threshold: float
    fraction: float      # how far from the value towards the range's end, 0..1

    def text(self) -> str:
        return f"{self.platform}.{self.field} {self.sign} {self.threshold:.3g}"

    def as_dict(self) -> dict:
        return {"platform": self.platform, "field": self.field, "sign": self.sign,
                "threshold": self.threshold}


@dataclass(frozen=True)
class Corners:
    """A platform's metric at its values as given and at its best and worst corners
    (every assumed field at the end of its range that lowers, resp. raises, it)."""

    label: str
    study: Sensitivity
    best: float
    worst: float
    best_values: dict[str, float]
    worst_values: dict[str, float]

    @property
    def base(self) -> float:
        return self.study.base

    def as_dict(self) -> dict:
        return {"platform": self.label, "base": self.base, "best": self.best,
                "worst": self.worst, "best_corner": self.best_values,
                "worst_corner": self.worst_values}


@dataclass(frozen=True)
class Verdict:
    """A pair's ranking on the metric: who wins at the values as given, whether that
    holds at the corners, and the single assumptions that can flip it."""

    first: str
    second: str
    metric: str
    winner: str | None   # None: a tie at the values as given
    holds: bool
    flips: list[Flip]

    def line(self) -> str:
        head = f"{self.first} vs {self.second}: "
        if self.winner is None:
            return head + f"equal {self.metric} at the values as given"
        said = f"{self.winner} {BETTER[self.metric]}"
        if self.holds:
            return head + f"{said}; holds across the assumed ranges"
        if self.flips:
            return head + f"{said} unless " + " or ".join(f.text() for f in self.flips)
        return head + (f"{said}, but the ranking can flip when several assumptions "
                       "combine (no single one flips it)")

    def as_dict(self) -> dict:
        return {"first": self.first, "second": self.second, "metric": self.metric,
                "winner": self.winner, "holds": self.holds,
                "flips": [f.as_dict() for f in self.flips], "line": self.line()}


class Evaluator:
    """The metric of a platform on one workload, each distinct platform run once."""

    def __init__(self, inputs: Inputs, label: str, metric: str, engine: str,
                 budget: MemoryBudget | None) -> None:
        self.inputs, self.label, self.engine, self.budget = inputs, label, engine, budget
        self.measure = METRICS[metric][1]
        self.file = inputs.platform_source.path if inputs.platform_source \
            else inputs.platform.name
        self.runs: dict[str, float] = {}

    def platform(self, values: dict[str, float]) -> Platform:
        platform = self.inputs.platform
        return validate_model(with_values(platform, values), Platform, file=self.file) \
            if values else platform

    def __call__(self, values: dict[str, float]) -> float:
        return self.measured(self.platform(values))

    def measured(self, candidate: Platform) -> float:
        """The metric of one platform, each distinct one run once."""
        key = json.dumps(candidate.model_dump(mode="json"), sort_keys=True)
        if key not in self.runs:
            self.runs[key] = self.measure(simulate(Inputs(
                candidate, self.inputs.workload, self.inputs.mapping),
                engine=self.engine, budget=self.budget))
        return self.runs[key]


def _ends(swing: Swing) -> tuple[float, float] | None:
    """(favourable end, unfavourable end) of a field, None if it moves nothing."""
    if swing.metric_low == swing.metric_high:
        return None
    return (swing.low, swing.high) if swing.metric_low < swing.metric_high \
        else (swing.high, swing.low)


def corners(evaluate: Evaluator, study: Sensitivity) -> Corners:
    """The platform's best and worst corners from its tornado's directions."""
    best, worst = {}, {}
    for swing in study.swings:
        ends = _ends(swing)
        if ends:
            best[swing.field], worst[swing.field] = ends
    return Corners(evaluate.label, study, evaluate(best), evaluate(worst), best, worst)


def _bisect(evaluate: Evaluator, swing: Swing, end: float,
            flipped: Callable[[float], bool]) -> Flip:
    """The value between the field's value (not flipped) and `end` (flipped) where the
    ranking flips, to TOLERANCE of the range (one step of a whole-number field)."""
    whole = isinstance(swing.value, int) and isinstance(end, int)
    inside, outside = swing.value, end
    width = TOLERANCE * (swing.high - swing.low)
    while abs(outside - inside) > (1 if whole else width):
        middle = (inside + outside) // 2 if whole else (inside + outside) / 2
        if flipped(evaluate({swing.field: middle})):
            outside = middle
        else:
            inside = middle
    threshold = outside if whole else (inside + outside) / 2
    sign = ">" if end > swing.value else "<"
    if whole:
        sign += "="
    span = abs(end - swing.value)
    return Flip(evaluate.label, swing.field, sign, threshold,
                abs(threshold - swing.value) / span if span else 0.0)


def _single_flips(winner: Evaluator, win: Corners, loser: Evaluator,
                  lose: Corners) -> list[Flip]:
    """The winner's fields whose unfavourable end alone loses to the loser as given,
    and the loser's whose favourable end alone beats the winner as given; the flip
    nearest its field's value first."""
    flips = []
    for swing in win.study.swings:
        ends = _ends(swing)
        if ends and winner({swing.field: ends[1]}) >= lose.base:
            flips.append(_bisect(winner, swing, ends[1], lambda m: m >= lose.base))
    for swing in lose.study.swings:
        ends = _ends(swing)
        if ends and loser({swing.field: ends[0]}) <= win.base:
            flips.append(_bisect(loser, swing, ends[0], lambda m: m <= win.base))
    return sorted(flips, key=lambda f: (f.fraction, f.platform, f.field))


def robust_ranking(every: list[Inputs], labels: list[str], metric: str = "time_s", *,
                   engine: str = "fast", budget: MemoryBudget | None = None,
                   progress: Callable[[int, int, str], None] | None = None,
                   fields: dict[str, list[str] | None] | None = None,
                   ) -> tuple[list[Corners], list[Verdict]]:
    """Each platform's corners and each pair's verdict (pairs in the order given);
    `fields`: per label, only those assumed fields (an empty list: none)."""
    evaluators = [Evaluator(inputs, label, metric, engine, budget)
                  for inputs, label in zip(every, labels)]
    found = []
    for evaluate in evaluators:
        chosen = (fields or {}).get(evaluate.label)
        if assumed_ranges(evaluate.inputs.platform) and chosen != []:
            study = sensitivity(evaluate.inputs, metric, engine=engine, fields=chosen,
                                progress=progress, budget=budget,
                                measured=evaluate.measured)
        else:  # nothing assumed: the platform's figure is fixed
            study = Sensitivity(metric, METRICS[metric][0], evaluate({}), [])
        found.append(corners(evaluate, study))
    verdicts = []
    for i, first in enumerate(found):
        for j in range(i + 1, len(found)):
            second = found[j]
            verdicts.append(_verdict(evaluators[i], first, evaluators[j], second, metric))
    return found, verdicts


def _verdict(a: Evaluator, first: Corners, b: Evaluator, second: Corners,
             metric: str) -> Verdict:
    if first.base == second.base:
        return Verdict(first.label, second.label, metric, None, False, [])
    (winner, win), (loser, lose) = sorted(((a, first), (b, second)),
                                          key=lambda pair: pair[1].base)
    holds = win.worst < lose.best
    flips = [] if holds else _single_flips(winner, win, loser, lose)
    return Verdict(first.label, second.label, metric, win.label, holds, flips)
