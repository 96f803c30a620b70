"""Fitting a platform's assumed values to measured whole-model times (DESIGN.md section
19), with the leave-one-out error of every case.

A whole-model run takes a second or more, so the fit searches a surrogate and never
reports one: each case's time is simulated at the platform as written and with one
field at a time moved to points across its range (its two ends, its value and the
midpoints between them); the surrogate adds up each field's move, interpolated
linearly between those points. Bounded least squares
(scipy.optimize.least_squares) of the relative errors simulated / measured - 1 over the
chosen fields, each within its range, runs on that surrogate. Every figure reported is
a full simulation at the values chosen: the uncalibrated time, the leave-one-out time
(each case simulated at the values fitted to all the others) and the time at the
values fitted to all cases (those written to the fitted platform). A field no case's
time depends on is unidentifiable: reported and left unchanged.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from simulator.calibrate.measured_runs import PreparedRun, Runs, parse_run, prepare
from simulator.calibrate.sensitivity import NO_TIMING_EFFECT, with_values
from simulator.errors import AccsimError
from simulator.inputs.loader import locate, validate_model
from simulator.inputs.platform import Platform
from simulator.limits import MemoryBudget

# A field whose move across its range changes no case's time by this fraction: the
# measurements cannot tell its values apart.
IDENTIFIABLE = 1e-4
# Points across a field's range, as fractions, beside its own value.
GRID = (0.0, 0.5, 1.0)


@dataclass(frozen=True)
class CaseFit:
    """One measured case: its measured time and the simulated times before fitting,
    held out (fitted to the other cases) and fitted to all cases."""

    name: str
    family: str | None
    phase: str | None
    source: str
    measured_s: float
    before_s: float
    heldout_s: float
    fitted_s: float

    def error(self, simulated: float) -> float:
        return simulated / self.measured_s - 1.0

    def as_dict(self) -> dict:
        return {"name": self.name, "family": self.family, "phase": self.phase,
                "source": self.source, "measured_s": self.measured_s,
                "before_s": self.before_s, "heldout_s": self.heldout_s,
                "fitted_s": self.fitted_s, "error_before": self.error(self.before_s),
                "error_heldout": self.error(self.heldout_s),
                "error_fitted": self.error(self.fitted_s)}


@dataclass(frozen=True)
class WholeCalibration:
    """The fit of one platform to its measured cases."""

    platform: str
    cases: list[CaseFit]
    fitted: dict[str, float]
    before: dict[str, float]
    unidentifiable: list[str]

    def median(self, which: str) -> float:
        """Median |relative error| of `which`: before, heldout or fitted."""
        return statistics.median(abs(c.error(getattr(c, f"{which}_s"))) for c in self.cases)

    def worst(self, which: str) -> float:
        return max(abs(c.error(getattr(c, f"{which}_s"))) for c in self.cases)

    def as_dict(self) -> dict:
        return {"platform": self.platform, "fitted": self.fitted, "before": self.before,
                "unidentifiable": self.unidentifiable,
                "median_error": {which: self.median(which)
                                 for which in ("before", "heldout", "fitted")},
                "cases": [case.as_dict() for case in self.cases]}


def select(runs: Runs, arch: str) -> list[int]:
    """Indices of the measurements whose runs all name the platform `arch` (a path or
    a shipped name) with --arch; every run's command line is checked first, so a fault
    in any measurement is named, whichever platform it runs on."""
    target = Path(locate(arch, "platform")).resolve()
    folder = Path(runs.file).resolve().parent
    chosen = []
    for index, measurement in enumerate(runs.measurements):
        named = set()
        for number, part in enumerate(measurement.parts):
            field = f"measurements[{index}] ({measurement.name})" + \
                (f".runs[{number}]" if measurement.runs is not None else ".run")
            args = parse_run(part.run, folder, file=runs.file, field=field)
            path = Path(locate(args.arch, "platform"))
            if not path.is_file():
                raise AccsimError(f"--arch {args.arch}: no such platform file (looked "
                                  f"in {folder}) and no shipped platform of that name",
                                  file=runs.file, field=field)
            named.add(path.resolve())
        if named == {target}:
            chosen.append(index)
    return chosen


class Cases:
    """Simulated seconds of each measured case on variants of one platform (the
    assumed values changed), each (case, platform) simulated once: cases that run the
    same parts (the same `accsim run` arguments, as often) share their simulations."""

    def __init__(self, platform: Platform, runs: Runs, chosen: list[int], engine: str,
                 budget: MemoryBudget | None, file: str) -> None:
        self.platform, self.engine, self.budget, self.file = platform, engine, budget, file
        self.measurements = [runs.measurements[i] for i in chosen]
        said: set[tuple[str, str]] = set()  # a plan's warnings, once for all the runs
        self.prepared: list[list[PreparedRun]] = [
            prepare(runs.measurements[i], i, runs, said) for i in chosen]
        self.measured = np.array([m.seconds for m in self.measurements])
        first: dict[tuple, int] = {}
        # each case's first case of the same parts, whose simulations it takes
        self.same_as = [first.setdefault(tuple((p.run, p.times) for p in m.parts), row)
                        for row, m in enumerate(self.measurements)]
        self.cache: dict[tuple[int, str], float] = {}

    def variant(self, values: dict) -> Platform:
        return validate_model(with_values(self.platform, values), Platform, file=self.file)

    def seconds(self, values: dict, rows=None) -> np.ndarray:
        platform = self.variant(values)
        key = json.dumps(platform.model_dump(mode="json"), sort_keys=True)
        rows = range(len(self.prepared)) if rows is None else rows
        found = []
        for row in rows:
            same = self.same_as[row]
            if (same, key) not in self.cache:
                self.cache[(same, key)] = sum(
                    part.times * part.seconds(platform, engine=self.engine,
                                              budget=self.budget)
                    for part in self.prepared[same])
            found.append(self.cache[(same, key)])
        return np.array(found)


class Surrogate:
    """Each case's time as the platform's plus each field's own move, interpolated
    between the points simulated across the field's range."""

    def __init__(self, cases: Cases, fields: dict[str, tuple],
                 progress: Callable[[int], None] | None = None) -> None:
        self.fields = fields
        self.before = {name: value for name, (value, _, _) in fields.items()}
        self.base = cases.seconds(self.before)
        self.points: dict[str, np.ndarray] = {}
        self.moves: dict[str, np.ndarray] = {}
        for index, (name, (value, low, high)) in enumerate(fields.items()):
            if progress:
                progress(index)
            xs = sorted({self.value(name, low + f * (high - low)) for f in GRID}
                        | {value} | {self.value(name, (low + value) / 2),
                                     self.value(name, (value + high) / 2)})
            times = [self.base if x == value else cases.seconds({name: x}) for x in xs]
            self.points[name] = np.array(xs, dtype=float)
            self.moves[name] = np.array(times) - self.base  # points x cases

    def value(self, name: str, x: float):
        """`x` as the field holds it (whole-number fields rounded)."""
        return round(x) if isinstance(self.fields[name][0], int) else x

    def strength(self, name: str) -> float:
        return float(np.max(np.abs(self.moves[name]) / self.base))

    def seconds(self, values: dict) -> np.ndarray:
        total = self.base.copy()
        for name, x in values.items():
            xs, moves = self.points[name], self.moves[name]
            total += np.array([np.interp(x, xs, moves[:, case])
                               for case in range(moves.shape[1])])
        return total

    def fit(self, names: list[str], measured: np.ndarray, rows: np.ndarray) -> dict:
        """Values of `names` (the others as written) minimising the relative errors of
        cases `rows` on the surrogate."""
        spans = [self.fields[name] for name in names]

        def values(unit: np.ndarray) -> dict:  # continuous: the surrogate interpolates
            return {name: low + float(np.clip(u, 0, 1)) * (high - low)
                    for u, name, (_, low, high) in zip(unit, names, spans)}

        def residuals(unit: np.ndarray) -> np.ndarray:
            return (self.seconds(values(unit)) / measured - 1.0)[rows]

        start = np.array([(value - low) / (high - low) for value, low, high in spans])
        solution = least_squares(residuals, start, bounds=(0.0, 1.0), diff_step=1e-3,
                                 xtol=1e-8, ftol=1e-10, max_nfev=400)
        return {name: self.value(name, x) for name, x in values(solution.x).items()}


def calibrate_runs(platform: Platform, runs: Runs, arch: str, fields: dict[str, tuple], *,
                   engine: str = "fast", budget: MemoryBudget | None = None, file: str,
                   progress: Callable[[int, int], None] | None = None
                   ) -> WholeCalibration:
    """Fit `fields` (name -> (value, low, high)) to the measurements of `runs` that run
    on `arch`; the leave-one-out error of every case. `progress(done, total)`: steps
    done (a field's points, a held-out case, the final fit) of all."""
    chosen = select(runs, arch)
    if len(chosen) < 2:
        raise AccsimError(f"{len(chosen)} measurements run on {arch} (each run's --arch); "
                          "a fit with a held-out case needs at least 2", file=runs.file,
                          field="measurements")
    cases = Cases(platform, runs, chosen, engine, budget, file)
    timeless = [name for name in fields if name.startswith(NO_TIMING_EFFECT)]
    fields = {name: span for name, span in fields.items() if name not in timeless}
    steps = len(fields) + len(chosen) + 1
    surrogate = Surrogate(cases, fields,
                          (lambda done: progress(done, steps)) if progress else None)
    unidentifiable = timeless + [name for name in fields
                                 if surrogate.strength(name) < IDENTIFIABLE]
    names = [name for name in fields if name not in unidentifiable]
    if not names:
        raise AccsimError(f"no measured case depends on {', '.join(fields)}: nothing to "
                          "fit", file=runs.file, field="--fit")
    count = len(chosen)
    heldout = []
    for row in range(count):
        if progress:
            progress(len(fields) + row, steps)
        others = np.array([r for r in range(count) if r != row])
        values = surrogate.fit(names, cases.measured, others)
        heldout.append(float(cases.seconds(values, [row])[0]))
    if progress:
        progress(steps - 1, steps)
    fitted = surrogate.fit(names, cases.measured, np.arange(count))
    fitted_s = cases.seconds(fitted)
    if progress:
        progress(steps, steps)
    found = [CaseFit(m.name, m.family, m.phase, m.source, float(cases.measured[row]),
                     float(surrogate.base[row]), heldout[row], float(fitted_s[row]))
             for row, m in enumerate(cases.measurements)]
    return WholeCalibration(platform.name, found, fitted,
                            {name: surrogate.before[name] for name in fitted},
                            unidentifiable)
