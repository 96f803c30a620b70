"""How much a result moves when an assumed platform value is wrong (DESIGN.md section
16): each assumed value set, one at a time, to the low and the high end of its range,
the workload simulated again, and the fields ordered by the spread of the metric (a
tornado). Elasticity = (d metric / metric) / (d value / value) across the two ends.

A perturbed platform is validated like a platform file (so a range end the schema
refuses is an error naming the field), and runs whose platform equals one already run
(an end at the value itself, the common case of a cost that can only grow) reuse that
run: the figures are exactly those of a rerun with the perturbed file.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.run_inputs import Inputs
from simulator.limits import MemoryBudget
from simulator.inputs.loader import validate_model
from simulator.simulate import RunResult, simulate

# Metrics in cycles or seconds, and the fields that cannot move them: energy
# coefficients change no cycle count, and the default search orders tilings by cycles
# first (energy only breaks ties between equal cycle counts), so the same cycles win.
TIMING_METRICS = ("time_s", "cycles")
NO_TIMING_EFFECT = ("energy.", "area.")

# The metrics a study may ask about: name -> (unit, value of a result).
METRICS: dict[str, tuple[str, Callable[[RunResult], float]]] = {
    "time_s": ("s", lambda r: r.platform.seconds(r.total.cycles)),
    "cycles": ("cycles", lambda r: float(r.total.cycles)),
    "energy_j": ("J", lambda r: r.total.energy_pj * 1e-12),
    "edp_js": ("J s", lambda r: r.platform.seconds(r.total.energy_pj * 1e-12
                                                   * r.total.cycles)),
}


@dataclass(frozen=True)
class Swing:
    """One assumed field's effect: the metric at the low and the high end of its range
    (the rest of the platform as it is)."""

    field: str
    value: float
    low: float
    high: float
    metric_low: float
    metric_high: float

    @property
    def spread(self) -> float:
        return abs(self.metric_high - self.metric_low)

    def elasticity(self, base: float) -> float | None:
        """Relative change of the metric over relative change of the value, across the
        range; None where the value is 0 or the range has no width."""
        if self.value == 0 or self.high == self.low or base == 0:
            return None
        return ((self.metric_high - self.metric_low) / base) \
            / ((self.high - self.low) / self.value)


@dataclass(frozen=True)
class Sensitivity:
    """The tornado of one metric: its base value and every assumed field's swing,
    widest first."""

    metric: str
    unit: str
    base: float
    swings: list[Swing]

    def as_dict(self) -> dict:
        return {"metric": self.metric, "unit": self.unit, "base": self.base,
                "fields": [{"field": s.field, "value": s.value, "low": s.low,
                            "high": s.high, "metric_low": s.metric_low,
                            "metric_high": s.metric_high, "spread": s.spread,
                            "elasticity": s.elasticity(self.base)} for s in self.swings]}


@contextmanager
def range_end(name: str, end, file: str):
    """Around what is done with one field at an end of its range: an error it raises
    (the platform's schema or a run refusing that value) names the range, not the
    field, whose own value is fine."""
    try:
        yield
    except AccsimError as exc:
        said = AccsimError(exc.rule, field=exc.field) if exc.file == file else exc
        raise AccsimError(f"at {name} = {end:g} (an end of its range): {said.message()}",
                          file=file, field=f"provenance.{name}.range") from None


def at_end(run: Callable[[Platform], float], candidate: Platform, name: str, end,
           file: str) -> float:
    """The metric of a platform with one field at an end of its range; a run that
    end makes impossible is an error naming the range."""
    with range_end(name, end, file):
        return run(candidate)


def finite_swing(swing: Swing, base: float, file: str) -> Swing:
    """The swing, if every figure a table or CSV shows of it is finite; else an error
    naming the range whose end made one infinite (a range such as [0, 1e308])."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            shown = (swing.metric_low, swing.metric_high, swing.spread,
                     swing.high - swing.low, swing.elasticity(base) or 0.0,
                     swing.spread / base if base else 0.0)
        except (OverflowError, ZeroDivisionError):
            shown = (math.inf,)
    if not all(math.isfinite(value) for value in shown):
        raise AccsimError(f"the range [{swing.low:g}, {swing.high:g}] puts a figure of the "
                          "tornado past a float's range (metric at its ends "
                          f"{swing.metric_low:g}, {swing.metric_high:g}): give a range "
                          "the value plausibly lies in", file=file,
                          field=f"provenance.{swing.field}.range")
    return swing


def perturbed_raw(platform: Platform, field: str, value) -> dict:
    """The platform as a file would hold it (provenance included) with one field set."""
    return with_values(platform, {field: value})


def with_values(platform: Platform, values: dict) -> dict:
    """The platform as a file would hold it (provenance included) with several fields
    set (field path -> value)."""
    raw = platform.model_dump(mode="json")
    raw["provenance"] = {path: entry.dump() for path, entry in platform.provenance.items()}
    for field, value in values.items():
        node = raw
        *parents, leaf = field.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(leaf)] = value
        else:
            node[leaf] = value
    return raw


def perturbed(platform: Platform, field: str, value, *, file: str) -> Platform:
    """The platform with one field set, validated as its file would be."""
    return validate_model(perturbed_raw(platform, field, value), Platform, file=file)


def assumed_ranges(platform: Platform) -> dict[str, tuple[float, float, float]]:
    """field -> (value, low, high) of every assumed value with a range of some width."""
    values = platform.numeric_fields()
    return {path: (values[path], entry.range[0], entry.range[1])
            for path, entry in platform.provenance.items()
            if entry.kind == "assumed" and entry.range[0] != entry.range[1]}


def sensitivity(inputs: Inputs, metric: str = "time_s", *, engine: str = "fast",
                fields: list[str] | None = None,
                progress: Callable[[int, int, str], None] | None = None,
                budget: MemoryBudget | None = None,
                measured: Callable[[Platform], float] | None = None) -> Sensitivity:
    """Perturb each assumed field of the platform (or those of `fields`) to both ends
    of its range and measure `metric`; fields widest first (ties by name).
    `measured`: the metric of a platform on these inputs, where a caller keeps the runs
    it has made (simulator.calibrate.robust), so none is made twice."""
    if metric not in METRICS:
        raise AccsimError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})",
                          field="--metric")
    unit, measure = METRICS[metric]
    platform = inputs.platform
    file = inputs.platform_source.path if inputs.platform_source else platform.name
    ranges = assumed_ranges(platform)
    if not ranges:
        raise AccsimError("the platform assumes no value with a range (no provenance "
                          "table, or none of kind assumed)", file=file,
                          field="provenance")
    unknown = [name for name in fields or () if name not in ranges]
    if unknown:
        raise AccsimError(f"{unknown} are no assumed fields with a range (assumed: "
                          f"{', '.join(ranges)})", file=file, field="--field")
    chosen = {name: ranges[name] for name in fields} if fields else ranges
    runs: dict[str, float] = {}

    def run(candidate: Platform) -> float:
        if measured is not None:
            return measured(candidate)
        key = json.dumps(candidate.model_dump(mode="json"), sort_keys=True)
        if key not in runs:
            runs[key] = measure(simulate(Inputs(candidate, inputs.workload,
                                                inputs.mapping), engine=engine,
                                         budget=budget))
        return runs[key]

    base = run(platform)
    swings = []
    for index, (name, (value, low, high)) in enumerate(chosen.items()):
        if progress:
            progress(index, len(chosen), name)
        candidates = []
        for end in (low, high):
            with range_end(name, end, file):
                candidates.append(perturbed(platform, name, end, file=file))
        timeless = metric in TIMING_METRICS and name.startswith(NO_TIMING_EFFECT)
        ends = [base if timeless else at_end(run, candidate, name, end, file)
                for candidate, end in zip(candidates, (low, high))]
        swings.append(finite_swing(Swing(name, value, low, high, *ends), base, file))
    if progress:
        progress(len(chosen), len(chosen), "")
    swings.sort(key=lambda s: (-s.spread, s.field))
    return Sensitivity(metric, unit, base, swings)
