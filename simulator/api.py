"""The Python API: what notebooks and pipelines call (`import simulator.api as accsim`).

Why `simulator.api` and not the package itself: `simulator.simulate` (the core's one
entry point) and `simulator.sweep` (the sweep subpackage) are modules, and Python sets a
package attribute to a submodule whenever it is imported, so a package-level function of
either name would silently become a module. `import simulator` stays light (no Numba);
importing this module loads the simulator.

The functions here load inputs, simulate and present results through the same
functions the `accsim` commands call (load_inputs, the capacity check, simulate,
result_dict/write_json, compare_table), so a result saved here is byte for byte the
file `accsim run --json` writes for the same inputs. Results are small objects with
`to_dict()`, `save_json(path)`, `to_pandas()` (pandas is the optional extra
`accsim[pandas]`) and an HTML table for Jupyter.

Every function checks its arguments by the rule of the command-line option it mirrors
(simulator.options: declared once, used by both) and raises ValueError or TypeError
naming the argument; a Platform, Workload or Mapping built or changed in code is checked
against its schema again when used.

Ratios (MFU, stall and the other fractions) are fractions from 0 to 1 in every
dictionary, DataFrame, JSON and CSV; tables print them as percent with a `%` header.

>>> import simulator.api as accsim
>>> platform = accsim.load_platform("tpu_v1")
>>> platform.systolic_array.rows, platform.systolic_array.cols
(256, 256)
>>> result = accsim.simulate("tpu_v1", "resnet50_b1")
>>> result.operators_count  # 72 operators, 16 residual adds fused into their convs
56
>>> round(result.summary()["mfu"], 3)
0.085
>>> both = accsim.compare(["tpu_v1", "edge_32x32"], "resnet50_b1")
>>> print(*(row["platform"] for row in both.rows()))
tpu_v1 edge_32x32
"""

from __future__ import annotations

import html
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from simulator.system.capacity import Capacity
from simulator.inputs.named_inputs import (DEFAULT_ARCH, DEFAULT_WORKLOAD,
                                           check_distinct_platforms, load_inputs,
                                           read_platform, read_workload, show_notes)
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.frontends.hf.step import LlmOptions, LlmStep, llm_step
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import (dump_json, load_model, locate, read_source,
                              validation_error)
from simulator.mapping.plan import Mapping
from simulator.metrics.totals import dominant_bottleneck
from simulator.present.run_report import COMPARE_GROUPS
from simulator.options.arguments import Mirror, check_fields, mirrors
from simulator.options.rules import Name
from simulator.present.run_report import compare_table, result_dict
from simulator.simulate import RunResult
from simulator.simulate import simulate as simulate_inputs
from simulator.precision.applied import applied as applied_precision
from simulator.system.plan_run import check_fit, run_plan
from simulator.system.parallelism import SystemPlan, system_plan
from simulator.output.terminal import Grouped, plain
from simulator.inputs.workload import Workload
from simulator.inputs.anchors import recorded_paths, relocated
from simulator.output.files import check_replaces_no_input, write_file
from simulator.serving.curves import find_max_rate
from simulator.serving.curves import sweep as rate_curve
from simulator.serving.serve import prepare
from simulator.serving.serve import serve as serve_spec
from simulator.serving.spec import ServeSpec
from simulator.sweep.coordinator import run_sweep
from simulator.sweep.executors import executor_for
from simulator.sweep.jobs import make_plan
from simulator.sweep.report import build_report, parse_objectives
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store

__all__ = ["load_platform", "load_workload", "load_mapping", "from_hf", "simulate",
           "compare", "serve", "sweep", "Result", "Comparison", "ServeReport",
           "SweepReport", "LlmStep"]

# The workload figures a summary and a compare row carry (all from Totals.derived).
SUMMARY_KEYS = ("cycles", "time_s", "mfu", "memory_stall_fraction", "energy_j",
                "average_power_w", "flops_per_joule", "offchip_read_bytes",
                "offchip_write_bytes")
PANDAS_HINT = "pandas is needed for to_pandas(): pip install 'accsim[pandas]'"


def _pandas():
    """pandas, or one clear error naming the extra that installs it."""
    try:
        import pandas  # optional: the `pandas` extra
    except ImportError:
        raise AccsimError(PANDAS_HINT, field="to_pandas") from None
    return pandas


def _html_table(rows: list[dict], title: str) -> str:
    """A plain HTML table of dictionaries (Jupyter's display, no pandas needed)."""
    if not rows:
        return f"<p>{html.escape(title)}: no rows</p>"
    head = "".join(f"<th>{html.escape(str(key))}</th>" for key in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>"
                                    for v in row.values()) + "</tr>" for row in rows)
    return (f"<table><caption>{html.escape(title)}</caption><thead><tr>{head}</tr>"
            f"</thead><tbody>{body}</tbody></table>")


def _summary_repr(name: str, figures: dict, limit: int = 12) -> str:
    """`name(key=value, ...)` of a result's headline figures, at most `limit` of them,
    numbers to 4 significant figures: what printing a result shows."""
    shown = [f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value!r}"
             for key, value in list(figures.items())[:limit]
             if isinstance(value, (int, float, str)) or value is None]
    more = len(figures) - limit
    return f"{name}({', '.join(shown)}{', ...' if more > 0 else ''})"


def _save(document: dict, path: str | Path) -> None:
    """Write a result document as the command's --json writes it, never over a file
    it was computed from (the command refuses that output: the input would be lost)."""
    check_replaces_no_input(path, recorded_paths(document))
    write_file(path, dump_json(relocated(document, Path(path).parent), indent=1) + "\n")


def _cell(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


@mirrors(name_or_path="--arch")
def load_platform(name_or_path: str | Path) -> Platform:
    """A platform by shipped name (`tpu_v1`), YAML path or SCALE-Sim .cfg, as `--arch`
    takes it, checked against its schema.

    >>> load_platform("tpu_v1").name
    'tpu_v1'
    """
    platform, _, notes = read_platform(str(name_or_path))  # a SCALE-Sim .cfg too
    show_notes(notes)
    return platform


@mirrors(name_or_path="--workload")
def load_workload(name_or_path: str | Path) -> Workload:
    """A workload by shipped name (`resnet50_b1`) or YAML path, or a SCALE-Sim
    topology .csv, as `--workload` takes it.

    >>> len(load_workload("resnet50_b1").operators)
    72
    """
    workload, _, notes = read_workload(str(name_or_path))
    show_notes(notes)
    return workload


@mirrors(name_or_path="--mapping")
def load_mapping(name_or_path: str | Path) -> Mapping:
    """A tiling plan by shipped name or YAML path."""
    return load_model(locate(str(name_or_path), "mapping"), Mapping)[0]


@mirrors(config="--model", phase="--phase", batch="--batch", seq="--seq",
         context="--context", dtype="--dtype", weight_dtype="--weight-dtype",
         kv_dtype="--kv-dtype", imbalance="--imbalance", all_logits="--all-logits")
def from_hf(config: str | Path, *, phase: str, batch: int = 1, seq: int | None = None,
            context: int | None = None, dtype: str | None = None,
            weight_dtype: str | None = None, kv_dtype: str | None = None,
            imbalance: float = 1.0, all_logits: bool = False) -> LlmStep:
    """An LLM step from a Hugging Face config.json (path or shipped name): `phase`
    prefill takes `seq`, decode takes `context`; checked as `accsim run --model` checks
    its flags (errors, ValueError or TypeError, name the argument). Pass it to
    simulate() or compare() as the workload; `.workload()` is the Workload itself.

    >>> step = from_hf("llama_3_1_8b", phase="decode", batch=8, context=1024)
    >>> step.workload().name
    'llama_3_1_8b_decode_b8_c1024'
    """
    return llm_step(str(config), phase, batch=batch, seq=seq, context=context,
                    options=LlmOptions(dtype=dtype, weight_dtype=weight_dtype,
                                       kv_dtype=kv_dtype, imbalance=imbalance,
                                       all_logits=all_logits))


def _validated(model, argument: str):
    """A Platform, Workload or Mapping built or changed in code (model_copy skips the
    schema) checked against its schema again, as a file of it would be."""
    raw = model.model_dump()
    try:
        return type(model).model_validate(raw)
    except ValidationError as exc:
        error = validation_error(exc, raw, file=None)
    raise AccsimError(error.rule, field=f"{argument}.{error.field}" if error.field
                      else argument) from None


def _inputs(platform, workload, mapping, heuristic, fusion,
            orientation=None) -> tuple[Inputs, LlmStep | None]:
    """The run's inputs as `accsim run` loads them: names and paths through
    load_inputs; objects built in code are used as they are (no source file)."""
    llm = workload if isinstance(workload, LlmStep) else None
    named_workload = workload if isinstance(workload, (str, Path)) else DEFAULT_WORKLOAD
    named_platform = platform if isinstance(platform, (str, Path)) else DEFAULT_ARCH
    named_mapping = mapping if isinstance(mapping, (str, Path)) or mapping is None else None
    base = load_inputs(str(named_platform), str(named_workload),
                       None if named_mapping is None else str(named_mapping),
                       heuristic_name=heuristic, fusion=fusion, orientation=orientation)
    replaced = {}
    if isinstance(platform, Platform):
        replaced.update(platform=_validated(platform, "platform"), platform_source=None)
    if isinstance(workload, Workload):
        replaced.update(workload=_validated(workload, "workload"), workload_source=None)
    if llm is not None:
        llm = llm.on(replaced.get("platform", base.platform))
        replaced.update(workload=llm.workload(),
                        workload_source=read_source(llm.config.source))
    if isinstance(mapping, Mapping):
        replaced.update(mapping=_validated(mapping, "mapping"), mapping_source=None)
    fields = dict(base.__dict__) | replaced
    return Inputs(**fields), llm


@dataclass(frozen=True)
class Result:
    """One simulated workload: the run (`.run`, a RunResult; one chip's shard under a
    multi-chip plan), the LLM step it came from (or None), the capacity check it
    passed, and the result file's blocks of the plan's figures (`system`) and of what
    a precision plan chose (`precision`), or None."""

    run: RunResult
    llm: LlmStep | None = None
    capacity: Capacity | None = None
    system: dict | None = None
    precision: dict | None = None

    @property
    def operators_count(self) -> int:
        """How many operators the run simulated."""
        return len(self.run.operators)

    def summary(self) -> dict:
        """The workload's headline figures; ratios are fractions (0..1)."""
        derived = self.run.total.as_dict(self.run.platform)
        return {"platform": self.run.platform.name,
                "workload": self.run.inputs.workload.name,
                **{key: derived[key] for key in SUMMARY_KEYS},
                "bottleneck": dominant_bottleneck(self.run.operators)}

    def _blocks(self) -> dict:
        blocks = {"capacity": self.capacity.record() if self.capacity else None,
                  "system": self.system, "precision": self.precision}
        if self.llm is not None:
            blocks["llm"] = self.llm.record(self.run)
        return blocks

    def to_dict(self) -> dict:
        """The full result document (the JSON `accsim run --json` writes, before its
        recorded paths are made relative to the file)."""
        return result_dict(self.run, **self._blocks())

    def save_json(self, path: str | Path) -> None:
        """Write the result exactly as `accsim run --json PATH` does."""
        _save(self.to_dict(), path)

    def operator_rows(self) -> list[dict]:
        """One flat row per operator: name, layer_type, kind, and its totals."""
        rows = []
        for op, record in zip(self.run.operators, self.to_dict()["operators"]):
            totals = record["totals"]
            rows.append({"name": record["name"], "layer_type": record["layer_type"],
                         "kind": record["kind"], "runs": record["runs"],
                         **{k: v for k, v in totals.items()
                            if isinstance(v, (int, float))},
                         "bottleneck": op.verdict.bottleneck})
        return rows

    def to_pandas(self):
        """A DataFrame of operator_rows() (needs the `pandas` extra)."""
        return _pandas().DataFrame(self.operator_rows())

    def _repr_html_(self) -> str:
        return _html_table([self.summary()], "accsim result")

    def __repr__(self) -> str:
        """A summary line (the full document is to_dict())."""
        return _summary_repr("Result", self.summary())


# The arguments simulate() and compare() share, as the options of `accsim run`.
RUN_ARGUMENTS = dict(workload=Mirror("--workload", (Workload, LlmStep)),
                     mapping=Mirror("--mapping", (Mapping,)), heuristic="--heuristic",
                     fusion="--fusion", orientation="--orientation", engine="--engine",
                     chips="--chips", tp="--tp", pp="--pp", ep="--ep",
                     overlap="--overlap", ignore_capacity="--ignore-capacity")


def _planned(inputs: Inputs, llm: LlmStep | None, plan: SystemPlan,
             precision: str | Path | None, ignore_capacity: bool):
    """One platform's inputs under the precision plan, and the capacity check they
    pass (sized at the plan's formats), as `accsim run` and `compare` make them before
    any simulation."""
    inputs, chosen = applied_precision(None if precision is None else str(precision),
                                       inputs, single_chip=plan.single_chip)
    fit = check_fit(inputs, plan, llm, ignore=ignore_capacity, planned=chosen is not None)
    return inputs, chosen, fit


def _run(inputs: Inputs, llm: LlmStep | None, plan: SystemPlan, chosen, fit, *,
         engine: str, ignore_capacity: bool) -> Result:
    """One platform simulated (one chip's shard under a multi-chip plan), with the
    blocks `accsim run --json` writes beside it."""
    if plan.single_chip:
        return Result(simulate_inputs(inputs, engine=engine), llm, fit,
                      precision=chosen.record() if chosen else None)
    system = run_plan(inputs, plan, llm, engine=engine, ignore_capacity=ignore_capacity)
    return Result(system.result, llm, fit, system=system.figures())


@mirrors(platform=Mirror("--arch", (Platform,)), **RUN_ARGUMENTS)
def simulate(platform: str | Path | Platform = DEFAULT_ARCH,
             workload: str | Path | Workload | LlmStep = DEFAULT_WORKLOAD,
             mapping: str | Path | Mapping | None = None, *, heuristic: str | None = None,
             fusion: str | None = None, orientation: str | None = None,
             engine: str = "auto", chips: int | None = None, tp: int = 1, pp: int = 1,
             ep: int = 1, overlap: str = "none", precision: str | Path | None = None,
             ignore_capacity: bool = False) -> Result:
    """Simulate one workload on a platform, as `accsim run` does with the same options:
    `chips`, `tp`, `pp`, `ep` and `overlap` a multi-chip plan (one chip's shard is
    simulated), `precision` a precision plan file; the same capacity rule refuses a
    workload that does not fit, unless `ignore_capacity`.

    >>> simulate("tpu_v1", "resnet50_b1").summary()["bottleneck"]
    'memory-bandwidth'
    """
    inputs, llm = _inputs(platform, workload, mapping, heuristic, fusion, orientation)
    plan = system_plan(chips, tp, pp, ep, overlap)
    inputs, chosen, fit = _planned(inputs, llm, plan, precision, ignore_capacity)
    return _run(inputs, llm, plan, chosen, fit, engine=engine,
                ignore_capacity=ignore_capacity)


def platform_labels(names: list[str], given: list[str]) -> list[str]:
    """A distinct label per compared platform: its name, or where names clash (a copied
    file, say) the name with the file stem (or the path as given; else, for Platform
    objects changed in code, which keep their name, its place in the list), with a
    warning."""
    clashing = {name for name, count in Counter(names).items() if count > 1}
    labels = [f"{name} ({Path(arg).stem})" if name in clashing else name
              for name, arg in zip(names, given)]
    if len(set(labels)) < len(labels):
        labels = [f"{name} ({arg})" if name in clashing else name
                  for name, arg in zip(names, given)]
    if len(set(labels)) < len(labels):  # no file tells them apart
        labels = [f"{name} (#{place})" if name in clashing else name
                  for place, name in enumerate(names, 1)]
    for name in sorted(clashing):
        print(f"accsim: warning: several platforms are named {plain(name)!r}; labelled "
              "by file, else by place", file=sys.stderr)
    return labels


@dataclass(frozen=True)
class Comparison:
    """One workload on several platforms; `labels` name them (the platforms' names,
    or with the file where names clash)."""

    results: list[Result]
    labels: list[str] = field(default_factory=list)

    def table(self) -> Grouped:
        """The table `accsim compare` prints, for a rich console: printed on a narrow
        one it splits into parts that fit, each repeating the platform column, so no
        number is cut."""
        return Grouped(compare_table([r.run for r in self.results], self.labels), key=1,
                       groups=COMPARE_GROUPS)

    def rows(self) -> list[dict]:
        """One row per platform: summary() with its label and the ratios to the first
        platform (`x_latency`, `x_energy`, `x_flops_per_joule`)."""
        base = self.results[0].summary()
        rows = []
        for label, result in zip(self.labels, self.results):
            row = {"platform": label} | {k: v for k, v in result.summary().items()
                                         if k != "platform"}
            for key, name in (("time_s", "x_latency"), ("energy_j", "x_energy"),
                              ("flops_per_joule", "x_flops_per_joule")):
                row[name] = row[key] / base[key] if base[key] else None
            rows.append(row)
        return rows

    def to_dict(self) -> dict:
        """{"workload", "platforms": [{"label", "result"}]}: each result the document
        `accsim run --json` writes for that platform."""
        return {"workload": self.results[0].run.inputs.workload.name,
                "platforms": [{"label": label, "result": result.to_dict()}
                              for label, result in zip(self.labels, self.results)]}

    def save_json(self, path: str | Path) -> None:
        """Write to_dict() as `accsim compare --json PATH` does."""
        _save(self.to_dict(), path)

    def to_pandas(self):
        """A DataFrame of rows() (needs the `pandas` extra)."""
        return _pandas().DataFrame(self.rows())

    def _repr_html_(self) -> str:
        return _html_table(self.rows(), "platforms compared")

    def __repr__(self) -> str:
        """One summary line per platform (the documents are to_dict())."""
        return (f"Comparison(workload={self.results[0].run.inputs.workload.name!r}, "
                f"{len(self.results)} platforms)\n" + "\n".join(
                    "  " + _summary_repr(label, {k: v for k, v in row.items()
                                                 if k not in ("platform", "workload")})
                    for label, row in zip(self.labels, self.rows())))


@mirrors(platforms=Mirror("--arch", (Platform,), several=True), **RUN_ARGUMENTS)
def compare(platforms: list, workload: str | Path | Workload | LlmStep = DEFAULT_WORKLOAD,
            mapping: str | Path | Mapping | None = None, *, heuristic: str | None = None,
            fusion: str | None = None, orientation: str | None = None,
            engine: str = "auto", chips: int | None = None, tp: int = 1, pp: int = 1,
            ep: int = 1, overlap: str = "none", precision: str | Path | None = None,
            ignore_capacity: bool = False) -> Comparison:
    """One workload on several platforms, as `accsim compare` does with the same
    options (those of simulate(): a multi-chip plan, a precision plan); every
    platform's capacity is checked before any is simulated."""
    every = [_inputs(p, workload, mapping, heuristic, fusion, orientation)
             for p in platforms]
    given = [str(p) if isinstance(p, (str, Path)) else p.name for p in platforms]
    check_distinct_platforms([inputs for inputs, _ in every], given, field="platforms")
    plan = system_plan(chips, tp, pp, ep, overlap)
    planned = [(_planned(inputs, llm, plan, precision, ignore_capacity), llm)
               for inputs, llm in every]
    results = [_run(inputs, llm, plan, chosen, fit, engine=engine,
                    ignore_capacity=ignore_capacity)
               for (inputs, chosen, fit), llm in planned]
    return Comparison(results, platform_labels([r.run.platform.name for r in results],
                                               given))


@dataclass(frozen=True)
class ServeReport:
    """A serving run's result document (`accsim serve --json`): one run's figures, a
    rate curve's {"curve": rows} (sweep_rate) or the highest rate meeting the SLA
    (find_max_rate)."""

    result: dict

    def save_json(self, path: str | Path) -> None:
        """Write the result exactly as `accsim serve --json PATH` does."""
        _save(self.result, path)

    def rows(self) -> list[dict]:
        """A curve's rows, else one row: the document's headline figures (its numbers
        and strings)."""
        if "curve" in self.result:
            return list(self.result["curve"])
        return [{k: v for k, v in self.result.items() if isinstance(v, (int, float, str))}]

    def to_pandas(self):
        """A DataFrame of rows() (needs the `pandas` extra)."""
        return _pandas().DataFrame(self.rows())

    def _repr_html_(self) -> str:
        return _html_table(self.rows(), "accsim serve")

    def __repr__(self) -> str:
        """The headline figures (the document is `.result`)."""
        return _summary_repr("ServeReport", self.rows()[0])


@mirrors("serve", ignore_capacity="--ignore-capacity")
def serve(*, ignore_capacity: bool = False, **fields) -> ServeReport:
    """A serving run (the fields of `accsim serve --spec`, e.g. arch, workload or model,
    rate, requests, batching); the report holds the document `accsim serve --json`
    writes. A file field may be a Path, as every function here takes one;
    `ignore_capacity` serves what a chip cannot hold, as simulate()'s does."""
    check_fields("serve", fields)
    fields = {name: os.fspath(value) if isinstance(value, os.PathLike) else value
              for name, value in fields.items()}  # the spec's fields are text
    try:
        spec = ServeSpec.model_validate(fields)
    except ValidationError as exc:
        raise validation_error(exc, fields, file=None, model=ServeSpec) from None
    setup = prepare(spec, ignore_capacity=ignore_capacity)
    if spec.sweep_rate is not None:  # as `accsim serve --sweep-rate`: a curve, no run
        return ServeReport({"curve": rate_curve(setup, spec)})
    if spec.find_max_rate:
        return ServeReport(find_max_rate(setup, spec))
    return ServeReport(serve_spec(setup, spec)[0])


@dataclass(frozen=True)
class SweepReport:
    """Every row of a sweep's store (ratios as fractions, as stored)."""

    rows: list[dict]

    def to_pandas(self):
        """A DataFrame of the rows (needs the `pandas` extra)."""
        return _pandas().DataFrame(self.rows)

    def _repr_html_(self) -> str:
        return _html_table(self.rows, "accsim sweep")

    def __repr__(self) -> str:
        """How many rows (the rows are `.rows`)."""
        return f"SweepReport({len(self.rows)} rows)"


@mirrors(spec=Name(), store="--store", scheduler="--scheduler", workers="--workers")
def sweep(spec: str | Path, store: str | Path, *, scheduler: str = "serial",
          workers: int | None = None) -> SweepReport:
    """Run a sweep spec into a SQLite store (resuming it: stored points are not
    recomputed) as `accsim sweep run` does, and return every row of the store.
    Interrupted (Ctrl-C, a notebook's stop), it raises KeyboardInterrupt, as the
    command exits 130: the points stored stay stored, and a rerun computes the rest.
    A serving sweep (a spec with `serving:`) is `accsim sweep run`'s alone."""
    loaded = load_sweep(spec)
    if loaded.serving is not None:  # its points are deployments, not operator runs
        raise AccsimError("a serving sweep: its points are searched deployments, which "
                          "sweep() does not run; run `accsim sweep run SPEC --store "
                          "FILE`", file=str(spec), field="serving")
    plan = make_plan(loaded)
    with Store(str(store)) as opened, executor_for(scheduler, workers) as executor:
        if run_sweep(plan, opened, executor).interrupted:
            raise KeyboardInterrupt  # not a partial store returned as the whole sweep
    with Store(str(store), create=False) as opened:
        report = build_report(opened, parse_objectives(None, opened))
    return SweepReport(report.rows)
