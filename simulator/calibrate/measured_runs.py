"""Measured whole-model runs for calibration (DESIGN.md section 19): each measurement is
the arguments of one or more `accsim run` commands, the measured value, its unit and
its source. A measurement of a whole generation (a prefill and then many decode steps)
lists its parts, each with how many times it ran; its simulated time is the sum.

A relative path in a run's arguments is read from the measurement file's folder when
a file of that name is there (so a measurement file and the platforms and workloads it
names travel together), else as `accsim run` reads it (a shipped name).

The file (YAML):

    measurements:
      - name: inf2_bert_base_b1
        run: --arch neuroncore_v2.yaml --workload bert_base_b1_s128.yaml
        value: 0.99897385
        unit: ms              # s, ms, us: the time of the run(s); or a rate
        source: github.com/... (commit); the row it comes from
      - name: gen
        runs:
          - {run: --arch ... --model ... --phase prefill --seq 128, times: 1}
          - {run: --arch ... --model ... --phase decode --context 192, times: 127}
        value: 152.5
        unit: tokens/s        # a rate: the time is `items` / value
        items: 256
        source: ...
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulator.commands.run import add_arguments as add_run_arguments
from simulator.commands.run import run_inputs
from simulator.errors import AccsimError
from simulator.inputs.loader import decode_text, parse_yaml, read_bytes, validate_model
from simulator.inputs.named_inputs import warn_unmatched
from simulator.inputs.platform import Platform
from simulator.inputs.run_inputs import Inputs
from simulator.limits import MemoryBudget
from simulator.precision.applied import applied as applied_precision
from simulator.simulate import simulate
from simulator.system import parallelism_command as system_command
from simulator.system.plan_run import check_fit, run_plan

# Seconds per unit of a measured time.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
# Rates: the measured time is `items` / value.
RATE_UNITS = ("samples/s", "inferences/s", "tokens/s")
# Bounds that keep every simulated and measured time, and their ratio, a finite float:
# a part runs at most 1e12 times; a measured time lies between a nanosecond and 1e9 s.
MAX_TIMES = 1e12
SECONDS = (1e-9, 1e9)
# Measurements in one file, and parts of one measurement: each part is parsed and
# simulated many times over in the fit (the shipped file holds 52 measurements of at
# most two parts); a file of tens of thousands ran for many minutes before any output.
MAX_MEASUREMENTS = 1_000
MAX_PARTS = 100
# Options of `accsim run` a measurement may not give: outputs, and what is not a run of
# the platform as written (a power cap lowers its clock; the fit never applies one).
REFUSED = ("json", "csv", "plot", "trace", "sheet", "sheet_best", "sheet_search",
           "validate", "plugin", "power_cap_w")
# Options whose value is a file: read from the measurement file's folder when there.
PATH_OPTIONS = ("--arch", "--workload", "--model", "--mapping", "--precision", "--onnx",
                "--kineto")


class Part(BaseModel):
    """One `accsim run` of a measurement and how many times it ran."""

    model_config = ConfigDict(extra="forbid", strict=True)

    run: str = Field(min_length=1, description="the `accsim run` arguments")
    times: int | float = Field(default=1, gt=0, le=MAX_TIMES, allow_inf_nan=False)


class Measurement(BaseModel):
    """One public measurement: what ran (`run`, or `runs` with counts), the measured
    value with its unit, and where it was published."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    run: str | None = Field(default=None, min_length=1)
    runs: list[Part] | None = Field(default=None, min_length=1, max_length=MAX_PARTS)
    value: int | float = Field(gt=0, allow_inf_nan=False)
    unit: str
    items: int | float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                      description="what a rate counts per run")
    source: str = Field(min_length=1, description="URL with commit or date, and the row")
    family: str | None = Field(default=None, description="the chip family, for tables")
    phase: str | None = Field(default=None, description="what it measures, for tables")

    @model_validator(mode="after")
    def _rules(self) -> Measurement:
        if (self.run is None) == (self.runs is None):
            raise ValueError("give `run` (one command) or `runs` (parts with times), "
                             "not both and not neither")
        if self.unit not in TIME_UNITS and self.unit not in RATE_UNITS:
            raise ValueError(f"unit {self.unit!r} is none of "
                             f"{', '.join([*TIME_UNITS, *RATE_UNITS])}")
        if self.unit in RATE_UNITS and self.items is None:
            raise ValueError(f"a rate ({self.unit}) needs `items`: how many the run "
                             "completes")
        if self.unit in TIME_UNITS and self.items is not None:
            raise ValueError(f"`items` only applies to a rate, not to a time in "
                             f"{self.unit}")
        if not SECONDS[0] <= self.seconds <= SECONDS[1]:
            raise ValueError(f"the measured time is {self.seconds:.3g} s; a measured time "
                             f"lies between {SECONDS[0]:g} s and {SECONDS[1]:g} s")
        return self

    @property
    def seconds(self) -> float:
        """The measured time of the run(s)."""
        if self.unit in TIME_UNITS:
            return self.value * TIME_UNITS[self.unit]
        return self.items / self.value

    @property
    def parts(self) -> list[Part]:
        return self.runs if self.runs is not None else [Part(run=self.run)]


class MeasurementFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    measurements: list[Measurement] = Field(min_length=1, max_length=MAX_MEASUREMENTS)

    @model_validator(mode="after")
    def _names_unique(self) -> MeasurementFile:
        names = [m.name for m in self.measurements]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"measurement names {twice} appear more than once")
        return self


@dataclass(frozen=True)
class Runs:
    """The measurements of one file and that file's sha256."""

    file: str
    sha256: str
    measurements: list[Measurement]


def is_runs_file(path: str) -> bool:
    """A YAML file whose top-level mapping holds `measurements` (a workload holds
    `operators`)."""
    if not path.endswith((".yaml", ".yml")):
        return False
    raw = parse_yaml(decode_text(read_bytes(path), file=path).text, file=path)
    return isinstance(raw, dict) and "measurements" in raw


def read_runs(path: str) -> Runs:
    data = read_bytes(path)
    raw = parse_yaml(decode_text(data, file=path).text, file=path)
    parsed = validate_model(raw, MeasurementFile, file=path)
    return Runs(path, hashlib.sha256(data).hexdigest(), parsed.measurements)


class _Parser(argparse.ArgumentParser):
    """`accsim run`'s parser whose errors are AccsimErrors naming the measurement."""

    def __init__(self, file: str, field: str) -> None:
        # no abbreviations: each option is spelt whole, so PATH_OPTIONS finds its paths
        super().__init__(prog="accsim run", add_help=False, allow_abbrev=False)
        self.file, self.field = file, field

    def error(self, message: str):
        raise AccsimError(f"not an `accsim run` command line: {message}", file=self.file,
                          field=self.field)


def _given(value) -> bool:
    """An option given, '' and 0 included (not read as absent): what is not its
    default of None, False or no values."""
    return value is not None and value is not False and value != []


def parse_run(text: str, folder: Path, *, file: str, field: str) -> argparse.Namespace:
    """The arguments of one run, paths read from `folder` where a file is there."""
    parser = _Parser(file, field)
    add_run_arguments(parser)
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise AccsimError(f"not a command line: {exc}", file=file, field=field) from None
    # `--arch=NAME` read as `--arch NAME`, so its path is found as the spaced form's
    words = [part for word in words for part in
             (word.split("=", 1) if word.startswith("--") and "=" in word else [word])]
    for index, word in enumerate(words[:-1]):
        if word in PATH_OPTIONS and (folder / words[index + 1]).is_file():
            words[index + 1] = str(folder / words[index + 1])
    args = parser.parse_args(words)
    if "--arch" not in words:
        raise AccsimError("each run names its platform with --arch", file=file,
                          field=field)
    given = [name for name in REFUSED if _given(getattr(args, name, None))]
    if given:
        raise AccsimError(f"--{given[0].replace('_', '-')} is no part of a measured run "
                          "(outputs, --validate, --plugin and --power-cap-w are refused)",
                          file=file, field=field)
    return args


@dataclass(frozen=True)
class PreparedRun:
    """One run's inputs, read once; `seconds` runs it on any variant of its platform
    (assumed values changed), as `accsim run` would with that platform file."""

    args: argparse.Namespace
    inputs: Inputs
    plan: object
    llm: object
    times: float

    @property
    def arch(self) -> str:
        return self.args.arch

    def seconds(self, platform: Platform, *, engine: str,
                budget: MemoryBudget | None) -> float:
        inputs = replace(self.inputs, platform=platform)
        inputs = system_command.applied_collectives(self.args, inputs, self.plan)
        if self.plan.single_chip:
            result = simulate(inputs, engine=engine, budget=budget)
            return float(platform.seconds(result.total.cycles))
        system = run_plan(inputs, self.plan, self.llm, engine=engine,
                          ignore_capacity=self.args.ignore_capacity)
        return float(system.figures()["time_s"])


def prepare(measurement: Measurement, index: int, runs: Runs,
            said: set[tuple[str, str]] | None = None) -> list[PreparedRun]:
    """Every part of a measurement read and checked as `accsim run` checks it (the
    plan's rules, capacity) before anything is simulated; its warnings too, each said
    once over the runs that share `said`."""
    folder = Path(runs.file).resolve().parent
    prepared = []
    for number, part in enumerate(measurement.parts):
        field = f"measurements[{index}] ({measurement.name})" + \
            (f".runs[{number}]" if measurement.runs is not None else ".run")
        args = parse_run(part.run, folder, file=runs.file, field=field)
        try:
            plan = system_command.plan_from_args(args)
            inputs, llm = run_inputs(args)
            warn_unmatched(inputs, said)
            inputs, precision = applied_precision(args.precision, inputs,
                                                  single_chip=plan.single_chip)
            check_fit(inputs, plan, llm, ignore=args.ignore_capacity,
                      planned=precision is not None)
        except AccsimError as exc:
            raise AccsimError(exc.message(), file=runs.file, field=field) from None
        prepared.append(PreparedRun(args, inputs, plan, llm, part.times))
    return prepared
