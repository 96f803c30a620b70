"""Regression testing a mapping against a baseline result, for CI (`accsim regress`).

The baseline is a result JSON written by `accsim run --json` (report.result_dict). The
current run is compared per operator, by name, on total cycles and energy. A change is a
regression when the new figure exceeds the old by more than the relative tolerance AND
by more than the absolute floor (cycles; energy: by default the static energy of the
cycle floor on this platform); an improvement is the same the other way. Operators
present on one side only are listed as added or removed.

A baseline is refused (exit 2) when it is not a result file, or comes from another
platform (by name, or the same name with other values), another workload (by name), or
another MODEL_VERSION (timing semantics changed, so every number may differ). Another
accsim package version, or a workload of the same name whose operators changed, is only
a warning.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

import simulator
from simulator.metrics.energy import static_power_w
from simulator.errors import AccsimError
from simulator.inputs.loader import read_json, validate_model
from simulator.verification.rerun import differences
from simulator.output.wording import counted

EXIT_OK, EXIT_REGRESSION, EXIT_REFUSED = 0, 1, 2
DEFAULT_TOLERANCE = 0.01
DEFAULT_FLOOR_CYCLES = 100
METRICS = (("cycles", "cycles"), ("energy_pj", "energy"))
# Platform fields that do not change a number.
IGNORED_PLATFORM_FIELDS = ("description",)


class _Read(BaseModel):
    """Only what regress reads of a result file (it holds much more)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, defer_build=True)


class _Named(_Read):
    name: str


class _Input(_Read):
    canonical: _Named


class _Plan(_Read):
    name: str = "?"
    default: dict = {}


class _PlanInput(_Read):
    canonical: _Plan = _Plan()


class _Inputs(_Read):
    platform: _Input
    workload: _Input
    mapping: _PlanInput = _PlanInput()


class _Manifest(_Read):
    model_version: int
    accsim_version: str
    inputs: _Inputs


class _Figures(_Read):
    cycles: int = Field(ge=0, lt=2**63)
    energy_pj: float = Field(ge=0, allow_inf_nan=False)


class _Operator(_Read):
    name: str
    layer_type: str = ""
    totals: _Figures


class Baseline(_Read):
    """What regress reads of a baseline, each field of the type `accsim run --json`
    writes: a forged one is refused naming the field, not a traceback mid-report."""

    manifest: _Manifest
    operators: list[_Operator]
    workload: _Figures | None = None


class BaselineRefused(AccsimError):
    """The baseline cannot be compared with this run (exit status 2)."""


def read_baseline(path: str) -> dict:
    """The baseline's JSON, refused if it is not a result file or cannot be read (a
    name the system refuses among them: exit 2, never a regression's 1)."""
    try:
        missing = not Path(path).exists()
    except OSError:  # a name too long: read_json below names the system's reason
        missing = False
    if missing:
        raise BaselineRefused("baseline not found (write one with --update-baseline or "
                              "`accsim run --json`)", file=path)
    try:
        data, _ = read_json(path)
    except AccsimError as exc:
        raise BaselineRefused(exc.rule, file=exc.file, field=exc.field) from None
    try:
        validate_model(data, Baseline, file=path)
    except AccsimError as exc:
        missing = exc.rule.startswith("required field is missing") and exc.field
        detail = f"missing {exc.field.rpartition('.')[2]!r}" if missing else exc.rule
        raise BaselineRefused(f"not an accsim result file ({detail}); write baselines "
                              "with `accsim run --json`", file=path,
                              field=exc.field) from None
    return data


def admit_names(baseline: dict, model_version: int, names: dict[str, str], *,
                path: str) -> None:
    """Refuse a baseline from another MODEL_VERSION, or another platform or workload
    (`names`: this run's, by kind): what is known before the run simulates, so such a
    baseline costs no simulation."""
    old = baseline["manifest"]
    if int(old["model_version"]) != int(model_version):
        raise BaselineRefused(
            f"baseline has MODEL_VERSION {old['model_version']}, this accsim "
            f"{model_version}: timing semantics changed, so every number may "
            "differ; regenerate it (--update-baseline)", file=path,
            field="manifest.model_version")
    for kind, new_name in names.items():
        old_name = old["inputs"][kind]["canonical"]["name"]
        if old_name != new_name:
            raise BaselineRefused(f"baseline is for {kind} {old_name!r}, this run for "
                                  f"{new_name!r}", file=path,
                                  field=f"manifest.inputs.{kind}")


def admit(baseline: dict, current: dict, *, path: str) -> list[str]:
    """Refuse a baseline from another platform, workload or MODEL_VERSION; return the
    warnings (another package version, a changed workload of the same name)."""
    old, new = baseline["manifest"], current["manifest"]
    admit_names(baseline, new["model_version"],
                {kind: new["inputs"][kind]["canonical"]["name"]
                 for kind in ("platform", "workload")}, path=path)
    old_platform = old["inputs"]["platform"]["canonical"]
    new_platform = new["inputs"]["platform"]["canonical"]
    changed = [where.lstrip(".") for where, _ in differences(
        {k: v for k, v in old_platform.items() if k not in IGNORED_PLATFORM_FIELDS},
        {k: v for k, v in new_platform.items() if k not in IGNORED_PLATFORM_FIELDS})]
    if changed:
        raise BaselineRefused(f"platform {new_platform['name']!r} differs from the "
                              f"baseline's in {', '.join(changed)}", file=path,
                              field="manifest.inputs.platform")
    old_workload = old["inputs"]["workload"]["canonical"]
    new_workload = new["inputs"]["workload"]["canonical"]
    warnings = []
    if old["accsim_version"] != new["accsim_version"]:
        warnings.append(f"baseline written by accsim {old['accsim_version']}, this is "
                        f"{new['accsim_version']} (same MODEL_VERSION, compared anyway)")
    if old_workload != new_workload:
        warnings.append(f"workload {new_workload['name']!r} differs from the baseline's "
                        "(operators added, removed or reshaped are listed)")
    return warnings


@dataclass(frozen=True)
class Change:
    """One metric of one operator, baseline against now."""

    metric: str        # cycles or energy
    old: float
    new: float

    @property
    def delta(self) -> float:
        return self.new - self.old

    @property
    def relative(self) -> float:
        return self.delta / self.old if self.old else float("inf") if self.delta else 0.0

    def describe(self) -> str:
        if self.metric == "cycles":
            return (f"cycles {self.old:,.0f} -> {self.new:,.0f} ({self.delta:+,.0f}, "
                    f"{100 * self.relative:+.2f}%)")
        return (f"energy {self.old / 1e6:,.3f} -> {self.new / 1e6:,.3f} uJ "
                f"({self.delta / 1e6:+,.3f} uJ, {100 * self.relative:+.2f}%)")


@dataclass(frozen=True)
class OperatorComparison:
    """One operator, baseline against now, and what the thresholds made of it."""

    name: str
    layer_type: str
    status: str                       # regressed, improved, unchanged, added, removed
    changes: tuple[Change, ...] = ()  # both metrics when on both sides
    regressed: tuple[str, ...] = ()   # metrics beyond tolerance and floor, upwards
    improved: tuple[str, ...] = ()

    def describe(self) -> str:
        return "; ".join(c.describe() for c in self.changes)


@dataclass(frozen=True)
class Regression:
    """The comparison of a run with its baseline."""

    baseline: str
    platform: str
    workload: str
    tolerance: float
    floor_cycles: float
    floor_energy_pj: float
    operators: list[OperatorComparison]
    totals: tuple[Change, ...]
    warnings: list[str] = field(default_factory=list)
    baseline_mapping: str = ""
    mapping: str = ""

    def having(self, status: str) -> list[OperatorComparison]:
        return [op for op in self.operators if op.status == status]

    @property
    def exit_code(self) -> int:
        return EXIT_REGRESSION if self.having("regressed") else EXIT_OK


def _mapping_label(result: dict) -> str:
    plan = result["manifest"]["inputs"].get("mapping", {}).get("canonical", {})
    name = plan.get("name", "?")
    heuristic = plan.get("default", {}).get("heuristic")
    return f"{name} (heuristic {heuristic})" if heuristic else f"{name} (searched)"


def compare(baseline: dict, current: dict, *, path: str, platform,
            tolerance: float = DEFAULT_TOLERANCE,
            floor_cycles: float = DEFAULT_FLOOR_CYCLES,
            floor_energy_pj: float | None = None) -> Regression:
    """Compare per operator (see the module docstring); refuses as `admit` does."""
    if tolerance < 0 or floor_cycles < 0 or (floor_energy_pj is not None
                                             and floor_energy_pj < 0):
        raise AccsimError("tolerance and floors must be >= 0", field="regress")
    warnings = admit(baseline, current, path=path)
    if floor_energy_pj is None:
        floor_energy_pj = static_power_w(platform) * floor_cycles / platform.clock_ghz * 1e3
    floors = {"cycles": floor_cycles, "energy": floor_energy_pj}
    old_ops = {op["name"]: op for op in baseline["operators"]}
    new_ops = {op["name"]: op for op in current["operators"]}
    compared = []
    for name, op in new_ops.items():
        if name not in old_ops:
            compared.append(OperatorComparison(name, op.get("layer_type", ""), "added",
                                               tuple(Change(label, 0, op["totals"][key])
                                                     for key, label in METRICS)))
            continue
        changes = tuple(Change(label, float(old_ops[name]["totals"][key]),
                               float(op["totals"][key])) for key, label in METRICS)
        worse = tuple(c.metric for c in changes
                      if c.delta > floors[c.metric] and c.delta > tolerance * c.old)
        better = tuple(c.metric for c in changes
                       if -c.delta > floors[c.metric] and -c.delta > tolerance * c.old)
        status = "regressed" if worse else "improved" if better else "unchanged"
        compared.append(OperatorComparison(name, op.get("layer_type", ""), status, changes,
                                           worse, better))
    for name, op in old_ops.items():
        if name not in new_ops:
            compared.append(OperatorComparison(name, op.get("layer_type", ""), "removed",
                                               tuple(Change(label, op["totals"][key], 0)
                                                     for key, label in METRICS)))
    totals = tuple(Change(label, float(baseline["workload"][key]),
                          float(current["workload"][key])) for key, label in METRICS) \
        if baseline.get("workload") is not None else ()
    return Regression(path, current["manifest"]["inputs"]["platform"]["canonical"]["name"],
                      current["manifest"]["inputs"]["workload"]["canonical"]["name"],
                      tolerance, floor_cycles, floor_energy_pj, compared, totals, warnings,
                      _mapping_label(baseline), _mapping_label(current))


def report_lines(regression: Regression) -> list[str]:
    """The comparison as plain lines (CI logs are read with grep)."""
    r = regression
    lines = [f"regress: {r.workload} on {r.platform}: mapping {r.mapping} against "
             f"baseline {r.baseline} (mapping {r.baseline_mapping})",
             f"threshold: more than {100 * r.tolerance:g}% and more than "
             f"{r.floor_cycles:,.0f} cycles / {r.floor_energy_pj / 1e6:,.4f} uJ"]
    lines += [f"warning: {w}" for w in r.warnings]
    for status, title in (("regressed", "REGRESSED"), ("improved", "IMPROVED"),
                          ("added", "ADDED"), ("removed", "REMOVED")):
        members = r.having(status)
        if not members:
            continue
        lines.append(f"{title} ({len(members)}):")
        for op in members:
            if status in ("added", "removed"):
                side = op.changes[0].new if status == "added" else op.changes[0].old
                lines.append(f"  {op.name} ({op.layer_type}): {side:,.0f} cycles")
            else:
                lines.append(f"  {op.name} ({op.layer_type}): {op.describe()}")
    unchanged = len(r.having("unchanged"))
    lines.append(f"unchanged within the threshold: {counted(unchanged, 'operator')}")
    if r.totals:
        lines.append("workload: " + "; ".join(c.describe() for c in r.totals))
    regressed = len(r.having("regressed"))
    verdict = (f"FAIL: {regressed} operator{'s' if regressed > 1 else ''} regressed"
               if r.exit_code else "OK: no operator regressed")
    lines.append(verdict)
    return lines


def junit_xml(regression: Regression | None, *, refused: str | None = None,
              suite: str = "accsim.regress") -> str:
    """JUnit XML: one test case per operator (a regression is a failure, a removed
    operator is skipped); a refused baseline is one test case with an error."""
    # (name, failure message, skipped message, error message, comparison)
    cases: list[tuple[str, str | None, str | None, str | None,
                      OperatorComparison | None]] = []
    if regression is None:
        name = suite
        cases.append(("baseline", None, None, refused or "refused", None))
    else:
        name = f"{suite}.{regression.workload}.{regression.platform}"
        for op in regression.operators:
            failure = "; ".join(c.describe() for c in op.changes
                                if c.metric in op.regressed) or None
            skipped = ("removed: in the baseline, not in this run"
                       if op.status == "removed" else None)
            cases.append((op.name, failure, skipped, None, op))
    attrs = {"tests": str(len(cases)),
             "failures": str(sum(1 for c in cases if c[1])),
             "errors": str(sum(1 for c in cases if c[3])),
             "skipped": str(sum(1 for c in cases if c[2]))}
    root = ET.Element("testsuites", name="accsim regress", **attrs)
    element = ET.SubElement(root, "testsuite", name=name, **attrs)
    if regression is not None:
        properties = ET.SubElement(element, "properties")
        for key, value in (("baseline", regression.baseline),
                           ("baseline_mapping", regression.baseline_mapping),
                           ("mapping", regression.mapping),
                           ("tolerance", f"{regression.tolerance:g}"),
                           ("floor_cycles", f"{regression.floor_cycles:g}"),
                           ("floor_energy_pj", f"{regression.floor_energy_pj:g}"),
                           ("accsim_version", simulator.__version__)):
            ET.SubElement(properties, "property", name=key, value=value)
    classname = name.removeprefix(f"{suite}.") if regression is not None else suite
    for case_name, failure, skipped, error, op in cases:
        case = ET.SubElement(element, "testcase", classname=classname, name=case_name,
                             time="0")
        if failure:
            ET.SubElement(case, "failure", message=failure, type="regression").text = \
                op.describe()
        elif skipped:
            ET.SubElement(case, "skipped", message=skipped)
        elif error:
            ET.SubElement(case, "error", message=error, type="refused-baseline")
        elif op is not None:
            ET.SubElement(case, "system-out").text = f"{op.status}: {op.describe()}"
    ET.indent(root)
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")
