"""Fitting assumed platform values to measured operator times (DESIGN.md section 16).

The residuals are the relative errors simulated / measured - 1, one per measured
operator; scipy.optimize.least_squares moves the chosen fields, each within its range
(the variables are scaled to [0, 1] across the range so that the fields weigh alike;
whole-number fields are rounded). Each measured row is one kernel timed alone, so it is
simulated alone (fusion none: a fused member would have no time of its own); each
parameter point simulates each distinct operator once (simulator.calibrate.distinct),
its time shared by the rows that repeat it. A field whose Jacobian column is ~0 over
the data (no measured operator depends on it) is unidentifiable: reported and left
unchanged.
k-fold cross-validation by operator reports the error on held-back operators before and
after a fit to the others; the values written are the fit to all operators.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from simulator.calibrate.distinct import distinct_operators
from simulator.calibrate.measured import Measured
from simulator.calibrate.sensitivity import with_values
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.run_inputs import Inputs
from simulator.limits import MemoryBudget
from simulator.inputs.loader import validate_model
from simulator.mapping.plan import Mapping
from simulator.simulate import simulate
from simulator.inputs.workload import Workload

# A Jacobian column (d relative error / d fraction of the range) below this on every
# operator: the data cannot tell the field's values apart.
IDENTIFIABLE = 1e-4
# Finite-difference step as a fraction of the range: wide enough to cross the steps of
# whole cycle counts.
STEP = 0.02
# A relative error past this (simulated 10^150 times the measured time) is a unit
# mistake, and its square would overflow the least-squares sum.
MAX_ERROR = 1e150


@dataclass(frozen=True)
class Calibration:
    """The fit: values before and after, fields the data cannot identify, and the mean
    absolute relative error on held-back operators before and after (cross-validated)."""

    fitted: dict[str, float]
    before: dict[str, float]
    unidentifiable: list[str]
    folds: int
    heldout_before: float
    heldout_after: float
    train_after: float

    def as_dict(self) -> dict:
        return {"fitted": self.fitted, "before": self.before,
                "unidentifiable": self.unidentifiable, "folds": self.folds,
                "heldout_error_before": self.heldout_before,
                "heldout_error_after": self.heldout_after,
                "error_after_on_all": self.train_after}


class Model:
    """Simulated seconds of every measured operator for values of the fitted fields,
    each distinct platform simulated once, each distinct operator once on it."""

    def __init__(self, platform: Platform, measured: Measured, fields: dict,
                 engine: str, budget: MemoryBudget | None, file: str) -> None:
        self.platform, self.fields, self.engine, self.budget, self.file = \
            platform, fields, engine, budget, file
        # Each row is one kernel timed alone (a profile's rows): simulated alone, never
        # fused with the rows beside it (a fused member has no time of its own).
        self.mapping = Mapping(fusion="none")
        self.distinct = distinct_operators(Workload(name="measured",
                                                    operators=measured.operators))
        self.names = [op.name for op in measured.operators]
        self.measured = np.array([op.measured_s for op in measured.operators])
        self.runs: dict[str, np.ndarray] = {}

    def narrowed(self, fields: dict) -> Model:
        """This model fitting `fields` only, the platforms simulated so far shared."""
        narrowed = copy.copy(self)
        narrowed.fields = fields
        return narrowed

    def values(self, unit: np.ndarray) -> dict[str, float]:
        """Field values at fractions `unit` of their ranges (whole numbers rounded)."""
        chosen = {}
        for u, (name, (value, low, high)) in zip(unit, self.fields.items()):
            x = low + float(np.clip(u, 0.0, 1.0)) * (high - low)
            chosen[name] = round(x) if isinstance(value, int) else x
        return chosen

    def unit(self, values: dict[str, float]) -> np.ndarray:
        return np.array([(values[name] - low) / (high - low) if high > low else 0.0
                         for name, (_, low, high) in self.fields.items()])

    def seconds(self, values: dict[str, float]) -> np.ndarray:
        platform = validate_model(with_values(self.platform, values), Platform,
                                  file=self.file)
        key = json.dumps(platform.model_dump(mode="json"), sort_keys=True)
        if key not in self.runs:
            workload = self.distinct.workload
            result = simulate(Inputs(platform, workload, self.mapping),
                              engine=self.engine, budget=self.budget)
            clock = platform.clock_hz
            by_name: dict[str, float] = {}
            for op in result.operators:
                by_name[op.lowered.name] = by_name.get(op.lowered.name, 0.0) \
                    + op.totals.cycles / clock
            simulated = np.array([by_name[op.name] for op in workload.operators])
            self.runs[key] = simulated[self.distinct.row_of]
        return self.runs[key]

    def errors(self, values: dict[str, float]) -> np.ndarray:
        with np.errstate(over="ignore"):
            errors = self.seconds(values) / self.measured - 1.0
        if not np.all(np.isfinite(errors)) or np.max(np.abs(errors)) > MAX_ERROR:
            name = self.names[int(np.argmax(~np.isfinite(errors) | (np.abs(errors) > MAX_ERROR)))]
            raise AccsimError(f"{name}: simulated / measured time is past {MAX_ERROR:g}, "
                              "too far apart to fit (is measured_s in seconds?)",
                              file=self.file, field="measured_s")
        return errors


def _steps(model: Model) -> np.ndarray:
    """Finite-difference step per field as a fraction of its range: STEP, and at least
    one unit of a whole-number field (a smaller step would round to no change)."""
    return np.array([max(STEP, 1.0 / (high - low)) if isinstance(value, int) else STEP
                     for value, low, high in model.fields.values()])


def _jacobian(model: Model, unit: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """d relative error / d fraction of range, forward (backward at the top end)."""
    base = model.errors(model.values(unit))[rows]
    columns = []
    for index, step in enumerate(_steps(model)):
        moved = unit.copy()
        step = step if unit[index] + step <= 1.0 else -step
        moved[index] += step
        columns.append((model.errors(model.values(moved))[rows] - base) / step)
    return np.array(columns).T


def _fit(model: Model, start: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Fractions of the ranges minimising the relative errors of operators `rows`."""
    solution = least_squares(lambda u: model.errors(model.values(u))[rows], start,
                             jac=lambda u: _jacobian(model, u, rows), bounds=(0.0, 1.0),
                             x_scale=1.0, xtol=1e-6, ftol=1e-8, max_nfev=100)
    return solution.x


def calibrate(platform: Platform, measured: Measured, fields: dict[str, tuple], *,
              folds: int = 5, engine: str = "fast", budget: MemoryBudget | None = None,
              file: str) -> Calibration:
    """Fit `fields` (name -> (value, low, high)) to the measured operators."""
    model = Model(platform, measured, fields, engine, budget, file)
    before = {name: value for name, (value, _, _) in fields.items()}
    start = model.unit(before)
    strength = np.max(np.abs(_jacobian(model, start, np.arange(len(model.names)))), axis=0)
    unidentifiable = [name for name, s in zip(fields, strength) if s < IDENTIFIABLE]
    if len(unidentifiable) == len(fields):
        raise AccsimError(f"no measured operator depends on {', '.join(fields)}: "
                          "nothing to fit", file=measured.file, field="--fit")
    fitted_fields = {name: span for name, span in fields.items()
                     if name not in unidentifiable}
    model = model.narrowed(fitted_fields)
    start = model.unit(before)
    count = len(model.names)
    folds = max(2, min(folds, count))
    held_before, held_after = [], []
    for fold in range(folds):
        held = np.arange(count) % folds == fold
        solution = _fit(model, start, np.flatnonzero(~held))
        held_before += list(np.abs(model.errors(before)[held]))
        held_after += list(np.abs(model.errors(model.values(solution))[held]))
    solution = _fit(model, start, np.arange(count))
    fitted = model.values(solution)
    return Calibration(fitted, {name: before[name] for name in fitted}, unidentifiable,
                       folds, float(np.mean(held_before)), float(np.mean(held_after)),
                       float(np.mean(np.abs(model.errors(fitted)))))
