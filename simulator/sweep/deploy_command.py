"""`accsim plan-deployment`: which platform meets a serving SLA, at what perf per watt
or cost, limited by what (DESIGN.md section 18). Options, platforms and the grid are
checked before the first point is simulated."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pydantic import ValidationError
from rich.table import Table

from simulator.output import progress
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.output.escape import csv_text
from simulator.inputs.loader import dump_json, load_model, locate, validation_error
from simulator.precision.plan import PrecisionPlan
from simulator.options.catalog import add_options
from simulator.output.files import check_output_path, write_file, writing
from simulator.serving.sla import parse_sla
from simulator.serving.spec import ServeSpec
from simulator.sweep.deploy import (COST_OBJECTIVES, OBJECTIVES, Grid, deployments,
                                    search_platforms)
from simulator.serving.cost_cache import CostCache
from simulator.sweep.deploy_plot import capacity_figure
from simulator.sweep.deploy_report import conclude
from simulator.sweep.deploy_store import PointStore, cost_folder
from simulator.sweep.executors import executor_for
from simulator.sweep.store import Store
from simulator.output.terminal import console as report_console

DEFAULT_BUDGET = 8
CSV_COLUMNS = ("arch", "chips", "chips_per_replica", "tp", "pp", "replicas", "batching",
               "max_batch", "precision", "status", "sla_rate_rps", "goodput_rps",
               "tokens_per_s", "tokens_per_s_per_chip", "tokens_per_s_per_watt",
               "energy_per_token_j", "cost_per_mtok", "on_front", "reason")
# Spec fields set from the flags of the same name (serve's options, simulator.options).
SPEC_FLAGS = ("model", "dtype", "arrival", "rate", "cv", "arrival_trace", "prompt_tokens",
              "output_tokens", "requests", "seed", "max_tokens", "bucket_bits", "fusion",
              "heuristic")
# The --precision value that names the model's own formats (no plan).
BASELINE = "none"


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    """The arguments of `accsim plan-deployment`."""
    add = cmd.add_argument
    add_options(cmd, "plan-deployment", "inputs", "llm", "serving", "precision")
    add("--no-baseline", action="store_true", help="with --precision: search only the "
        f"plans named, not the model's own formats ({BASELINE})")
    add("--budget-chips", type=int, default=DEFAULT_BUDGET,
        help=f"chips a deployment may use in all (default {DEFAULT_BUDGET})")
    add("--chips-per-replica", metavar="N,...", help="default: powers of 2 up to the "
        "budget; every T x P split of each is searched")
    add("--objective", choices=list(OBJECTIVES), default="tokens_per_s_per_watt",
        help="what the best point of a platform maximises (cost: minimises)")
    add_options(cmd, "plan-deployment", "outputs", "store")
    add("--no-prune", action="store_true", help="search every point, even those the "
        "capacity rule or the roofline bound would prune (a check of the pruning)")
    # A pool by default, as for sweeps: on 2 idle cores a 20-point search took 56 s
    # against 84 s serial (experiments/bench_deploy.py), though each worker rebuilds
    # the memos one process shares across plans (+27% CPU).
    add_options(cmd, "plan-deployment", "executor", "table")
    cmd.set_defaults(handler=handle)


def _int_list(text: str | None, flag: str, default: tuple[int, ...]) -> tuple[int, ...]:
    if text is None:
        return default
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise AccsimError(f"expected whole numbers separated by commas, got {text!r}",
                          field=flag) from None
    if not values or any(value < 1 for value in values):
        raise AccsimError(f"expected whole numbers >= 1, got {text!r}", field=flag)
    return tuple(sorted(set(values)))


def powers_of_two(limit: int) -> tuple[int, ...]:
    return tuple(2 ** i for i in range(limit.bit_length()) if 2 ** i <= limit)


def precision_axis(args: argparse.Namespace) -> tuple[str | None, ...]:
    """The precision plans searched (None: the model's own formats), each plan file
    read and checked now; `none` among them names the baseline."""
    named = list(dict.fromkeys(args.precision or []))
    if args.no_baseline and not [name for name in named if name != BASELINE]:
        raise AccsimError("--no-baseline leaves no precision to search: name plans with "
                          "--precision", field="--no-baseline")
    for name in named:
        if name != BASELINE:
            load_model(name, PrecisionPlan)
    plans = tuple(None if name == BASELINE else name for name in named)
    baseline = () if args.no_baseline or None in plans else (None,)
    return baseline + plans


def grid_from_args(args: argparse.Namespace) -> Grid:
    if args.budget_chips < 1:
        raise AccsimError(f"must be >= 1, got {args.budget_chips}", field="--budget-chips")
    batching = tuple(dict.fromkeys(p.strip() for p in args.batching.split(",") if p.strip()))
    unknown = [p for p in batching if p not in ("static", "dynamic", "continuous")]
    if unknown or not batching:
        raise AccsimError(f"unknown batching policy {unknown[0] if unknown else '(none)'}"
                          " (known: static, dynamic, continuous)", field="--batching")
    grid = Grid(args.budget_chips,
                _int_list(args.chips_per_replica, "--chips-per-replica",
                          powers_of_two(args.budget_chips)),
                _int_list(args.replicas, "--replicas", powers_of_two(args.budget_chips)),
                batching, _int_list(args.max_batch, "--max-batch", ()),
                precision_axis(args))
    if not deployments("-", grid):
        raise AccsimError(f"the grid is empty: no chips per replica x replicas of "
                          f"{list(grid.chips_per_replica)} x {list(grid.replicas)} fits "
                          f"the budget of {grid.budget_chips} chips", field="--budget-chips")
    return grid


def spec_from_args(args: argparse.Namespace) -> ServeSpec:
    """The serving run every point shares (its rate searched), checked as serve's."""
    raw = {field: getattr(args, field) for field in SPEC_FLAGS
           if getattr(args, field) is not None}
    raw |= {"sla": parse_sla(args.sla), "find_max_rate": True}
    try:
        return ServeSpec.model_validate(raw).resolved()
    except ValidationError as exc:
        error = validation_error(exc, raw, file=None)
    except AccsimError as exc:
        error = exc
    name = (error.field or "").split(".")[0]
    raise AccsimError(error.rule, field="--" + name.replace("_", "-")) from None


def check_cost(archs: list[str], objective: str) -> None:
    """A cost objective needs a cost table on every platform searched."""
    if objective not in COST_OBJECTIVES:
        return
    for arch in archs:
        platform, source = load_model(locate(arch, "platform"), Platform)
        if platform.cost is None:
            raise AccsimError(f"objective {objective} needs the platform's cost table "
                              "(price_per_chip_hour, or capital_per_chip + "
                              "lifetime_years + power_price_per_kwh), which it lacks",
                              file=source.path, field="cost")


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def points_table(outcome) -> Table:
    table = Table(title=f"{outcome.arch}: {len(outcome.points)} searched, "
                  f"{len(outcome.pruned)} pruned", title_justify="left",
                  show_edge=False, pad_edge=False)
    for column in ("deployment", "chips", "SLA rate/s", "goodput/s", "tok/s",
                   "tok/s/chip", "tok/s/W", "J/tok", "$/Mtok"):
        table.add_column(column, justify="left" if column == "deployment" else "right")
    for row in outcome.points:
        table.add_row(_label(row), str(row["chips"]), _fmt(row["sla_rate_rps"], ",.3f"),
                      _fmt(row.get("goodput_rps"), ",.3f"),
                      _fmt(row.get("tokens_per_s"), ",.1f"),
                      _fmt(row.get("tokens_per_s_per_chip"), ",.1f"),
                      _fmt(row.get("tokens_per_s_per_watt"), ",.2f"),
                      _fmt(row.get("energy_per_token_j"), ",.4f"),
                      _fmt(row.get("cost_per_mtok"), ",.3f"))
    return table


def _label(row: dict) -> str:
    plan = row.get("precision", BASELINE)
    return (f"{row['replicas']} x (T{row['tp']} x P{row['pp']}) {row['batching']} "
            f"b{row['max_batch']}" + ("" if plan == BASELINE else f" {plan}"))


def _rows(outcomes, front: list[dict]) -> list[dict]:
    on_front = {row["key"] for row in front}
    rows = []
    for outcome in outcomes:
        rows += [{**row, "on_front": row["key"] in on_front,
                  "reason": row.get("reason") or row.get("note")} for row in outcome.points]
        rows += outcome.pruned
    return rows


def _search(spec: ServeSpec, archs: list[str], grid: Grid, args) -> tuple[list, str]:
    """Every platform's outcome, its points searched by the executor --scheduler
    names, through the store when one is named; and a line saying how many points
    were read back and how many computed."""
    executor = executor_for(args.scheduler, args.workers)
    if not args.store:
        with executor, progress.steps("searching deployments", after_s=2.0) as report:
            return search_platforms(spec, archs, grid, prune=not args.no_prune,
                                    progress=lambda a, done, total: report(done, total),
                                    executor=executor), ""
    cache = CostCache(cost_folder(args.store), strict=True)
    with Store(args.store) as store, executor, \
            progress.steps("searching deployments", after_s=2.0) as report:
        points = PointStore(store)
        outcomes = search_platforms(spec, archs, grid, prune=not args.no_prune,
                                    cost_cache=cache, store=points,
                                    progress=lambda a, done, total: report(done, total),
                                    executor=executor)
    return outcomes, (f"store {args.store}: {points.found} already stored, "
                      f"{points.computed} computed; serving runs: {points.runs_read} "
                      f"read back, {points.runs_stored} simulated")


def handle(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    grid = grid_from_args(args)
    for flag, suffixes in (("json", None), ("csv", (".csv",)),
                           ("plot", (".png", ".svg", ".pdf"))):
        if getattr(args, flag):
            check_output_path(getattr(args, flag), flag, suffixes)
    archs = list(dict.fromkeys(args.arch))
    check_cost(archs, args.objective)
    started = time.perf_counter()
    outcomes, stored = _search(spec, archs, grid, args)
    found = conclude(outcomes, args.objective, spec.dtype)
    console = report_console(wide=args.wide)
    for outcome in outcomes:
        console.print(points_table(outcome))
        for row in outcome.pruned:
            console.print(f"  pruned {_label(row)}: {row['reason']}", markup=False,
                          highlight=False)
    print(f"best per platform by {args.objective}:")
    for arch, top in found["best"].items():
        if top is None:
            print(f"  {arch}: no deployment meets the SLA")
            continue
        print(f"  {arch}: {_label(top)} ({top['chips']} chips): SLA rate "
              f"{top['sla_rate_rps']:,.3f}/s, {_fmt(top[args.objective], ',.4g')} "
              f"{args.objective}; {top['binding']['text']}")
    names = ", ".join(found["front_objectives"])
    print(f"Pareto front over {names}: " + "; ".join(
        f"{row['arch']} {_label(row)}" for row in found["front"]))
    searched = sum(len(o.points) for o in outcomes)
    print(f"searched {searched} points ({sum(len(o.pruned) for o in outcomes)} pruned) "
          f"in {time.perf_counter() - started:.1f} s wall")
    if stored:
        print(stored)
    rows = _rows(outcomes, found["front"])
    if args.json:
        with writing(args.json):
            write_file(args.json, dump_json({
                "sla": spec.sla, "objective": args.objective,
                "spec": spec.model_dump(mode="json"), "points": rows,
                "best": found["best"], "front": found["front"]}, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.csv:
        with writing(args.csv):
            write_file(args.csv, csv_text(list(CSV_COLUMNS), rows, extrasaction="ignore"))
        print(f"wrote {Path(args.csv)}")
    if args.plot:
        with writing(args.plot):
            targets = ", ".join(f"{key}={value:g}" for key, value in spec.sla.items())
            capacity_figure(rows, found["front"], args.plot,
                            f"SLA capacity vs chips ({targets})")
        print(f"wrote {args.plot}")
    return 0
