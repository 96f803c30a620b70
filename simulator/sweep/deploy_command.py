"""`accsim plan-deployment`: which platform meets a serving SLA, at what perf per watt
or cost, limited by what (DESIGN.md section 18). Options, platforms and the grid are
checked before the first point is simulated."""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from pathlib import Path

from pydantic import ValidationError
from rich.table import Table

from simulator.output import progress
from simulator.errors import AccsimError
from simulator.output.escape import csv_text
from simulator.options.rules import in_range, real, requires, whole, whole_numbers
from simulator.precision.precision_plan import PrecisionPlan
from simulator.output.files import check_file_name
from simulator.inputs.loader import dump_json, load_model, validation_error
from simulator.options.catalog import add_options
from simulator.output.files import check_distinct_outputs, check_output_path, write_file, writing
from simulator.serving.sla import parse_sla
from simulator.serving.spec import MAX_BATCH, ServeSpec
from simulator.sweep.deploy_axes import BASELINE, check_cost, powers_of_two
from simulator.sweep.deploy import OBJECTIVES, Grid, search_platforms
from simulator.serving.cost_cache import CostCache
from simulator.sweep.deploy_plot import capacity_figure
from simulator.sweep.deploy_pools import pool_pairs
from simulator.sweep.deploy_verdict import verdict
from simulator.sweep.deploy_report import all_pruned, conclude
from simulator.sweep.deploy_store import PointStore, cost_folder
from simulator.sweep.executors import executor_for
from simulator.sweep.power_budget import POWER_KEY, sla_keys
from simulator.sweep.store import Store
from simulator.system.parallelism import MAX_CHIPS
from simulator.output.terminal import echo, plain
from simulator.output.terminal import console as report_console

DEFAULT_BUDGET = 8
DEFAULT_MAX_BATCH = (16, 64, 256)
# Deployments a search takes per platform: each is a serving rate search (seconds), so
# a grid past this is hours of work no one meant to start.
MAX_DEPLOYMENTS = 10_000
CSV_COLUMNS = ("arch", "chips", "chips_per_replica", "tp", "pp", "replicas", "batching",
               "max_batch", "precision", "status", "sla_rate_rps", "throughput_rps",
               "goodput_rps", "tokens_per_s", "tokens_per_s_per_chip",
               "tokens_per_s_per_watt", "energy_per_token_j", "cost_per_mtok",
               *(f"{metric}_{p}_ms" for metric in ("ttft", "tpot", "latency")
                 for p in ("p50", "p95", "p99")), "on_front", "reason")
# Columns a search with --disaggregate adds (empty for co-located points).
POOL_COLUMNS = ("prefill_replicas", "kv_link")
# What a point's rates are: the search's answer (the offered rate) is not the rate its
# token and efficiency figures are counted at (the achieved throughput at that load).
RATE_FIGURES = {
    "sla_rate_rps": "offered rate at the SLA: the highest arrival rate (requests/s) at "
                    "which every SLA target is met (serve --find-max-rate)",
    "throughput_rps": "achieved throughput: requests completed per second in the run at "
                      "the offered rate; tokens/s, per chip, per watt and $/Mtok count "
                      "these",
    "goodput_rps": "the achieved requests/s that met every SLA target"}
PRUNED_SHOWN = 3  # pruned points listed by default (all with --show-pruned)
# With --power-budget-w, the CSV's columns also hold each point's power and what
# missed first above its SLA capacity (the SLA's metrics, or power).
BUDGET_COLUMNS = ("power_w", "limited_by")
# A budget above this is no deployment's (a million chips at 1 kW each).
MAX_POWER_BUDGET_W = 1e9
# Spec fields set from the flags of the same name (serve's options, simulator.options).
SPEC_FLAGS = ("model", "dtype", "arrival", "rate", "cv", "arrival_trace", "prompt_tokens",
              "output_tokens", "requests", "seed", "max_tokens", "bucket_bits", "fusion",
              "heuristic", "collectives", "prefix_hit_rate",
              "kv_host_tier", "power_cap_w")


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    """The arguments of `accsim plan-deployment`."""
    add = cmd.add_argument
    add_options(cmd, "plan-deployment", "inputs", "llm", "serving", "precision",
                "collectives", "kv", "power")
    add("--no-baseline", action="store_true", help="with --precision: search only the "
        f"plans named, not the model's own formats ({BASELINE})")
    add("--budget-chips", type=whole, default=DEFAULT_BUDGET,
        help=f"chips a deployment may use in all (default {DEFAULT_BUDGET})")
    add("--chips-per-replica", metavar="N,...", help="default: powers of 2 up to the "
        "budget; every T x P split of each is searched")
    add("--objective", choices=list(OBJECTIVES), default="tokens_per_s_per_watt",
        help="what the best point of a platform maximises (cost: minimises)")
    add("--power-budget-w", type=real, metavar="W", help="the whole deployment's power "
        "budget in watts (its chips at their modelled power, static included, at its "
        "SLA capacity): held like the SLA, so a point's capacity is the highest rate "
        "that meets the SLA within it; points whose static power alone passes it are "
        "pruned")
    add_options(cmd, "plan-deployment", "outputs", "store")
    add("--no-prune", action="store_true", help="search every point, even those the "
        "capacity rule or the roofline bound would prune (a check of the pruning)")
    add("--show-pruned", action="store_true", help="list every pruned point with its "
        f"reason (default: a count by reason and the first {PRUNED_SHOWN}; --json and "
        "--csv hold them all)")
    # A pool by default, as for sweeps: on 2 idle cores a 20-point search took 56 s
    # against 84 s serial (experiments/bench_deploy.py), though each worker rebuilds
    # the memos one process shares across plans (+27% CPU).
    add_options(cmd, "plan-deployment", "executor", "table")
    cmd.set_defaults(handler=handle)


def _int_list(text: str | None, flag: str, default: tuple[int, ...],
              high: int) -> tuple[int, ...]:
    return default if text is None else whole_numbers(text, flag, low=1, high=high)


def grid_size(grid: Grid) -> int:
    """Deployments of the grid per platform, counted without listing them."""
    splits = sum(divisors(chips) * sum(1 for r in grid.replicas
                                       if chips * r <= grid.budget_chips)
                 for chips in grid.chips_per_replica)
    pooled = sum(divisors(chips) * len(pool_pairs(grid.replicas, chips, grid.budget_chips))
                 for chips in grid.chips_per_replica) \
        if grid.disaggregate and "continuous" in grid.batching else 0
    return (splits * len(grid.batching) + pooled) * len(grid.max_batch) \
        * len(grid.precision)


def divisors(n: int) -> int:
    """How many T x P splits `n` chips have (simulator.sweep.deploy.plans)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return 2 * len(small) - (math.isqrt(n) ** 2 == n)


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
    in_range(args.budget_chips, "--budget-chips", low=1, high=MAX_CHIPS)
    batching = tuple(dict.fromkeys(p.strip() for p in args.batching.split(",")))
    unknown = [p or "(empty)" for p in batching if p not in ("static", "dynamic",
                                                             "continuous")]
    if unknown or not batching:
        raise AccsimError(f"unknown batching policy {unknown[0] if unknown else '(none)'}"
                          " (known: static, dynamic, continuous)", field="--batching")
    grid = Grid(budget_chips=args.budget_chips,
                chips_per_replica=_int_list(args.chips_per_replica, "--chips-per-replica",
                                            powers_of_two(args.budget_chips), MAX_CHIPS),
                replicas=_int_list(args.replicas, "--replicas",
                                   powers_of_two(args.budget_chips), MAX_CHIPS),
                batching=batching,
                max_batch=_int_list(args.max_batch, "--max-batch", DEFAULT_MAX_BATCH,
                                    MAX_BATCH),
                precision=precision_axis(args), disaggregate=bool(args.disaggregate),
                kv_link=args.kv_link or "interconnect")
    if args.kv_link and not args.disaggregate:
        raise AccsimError("--kv-link is what disaggregated points' KV crosses: give "
                          "--disaggregate", field="--kv-link")
    if args.disaggregate and "continuous" not in batching:
        raise AccsimError("disaggregated pools batch continuously: add continuous to "
                          "--batching", field="--disaggregate")
    count = grid_size(grid)
    if not count:
        raise AccsimError(f"the grid is empty: no chips per replica x replicas of "
                          f"{list(grid.chips_per_replica)} x {list(grid.replicas)} fits "
                          f"the budget of {grid.budget_chips} chips", field="--budget-chips")
    if count > MAX_DEPLOYMENTS:
        raise AccsimError(f"the grid holds {count:,} deployments per platform, more than "
                          f"the {MAX_DEPLOYMENTS:,} a search takes: narrow "
                          "--chips-per-replica, --replicas or --max-batch",
                          field="--budget-chips")
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


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def points_table(outcome, budget_w: float | None = None) -> Table:
    """A platform's searched points; with a power budget, also each one's watts and
    what missed first above its SLA capacity (limited_by)."""
    table = Table(title=f"{outcome.arch}: {len(outcome.points)} searched, "
                  f"{len(outcome.pruned)} pruned", title_justify="left",
                  show_edge=False, pad_edge=False)
    budget = ("W", "limited by") if budget_w is not None else ()
    for column in ("deployment", "chips", "offered/s", "achieved/s", "goodput/s", "tok/s",
                   "tok/s/chip", "tok/s/W", "J/tok", "$/Mtok", *budget):
        table.add_column(column, justify="left" if column in ("deployment", "limited by")
                         else "right")
    for row in outcome.points:
        table.add_row(_label(row), str(row["chips"]), _fmt(row["sla_rate_rps"], ",.3f"),
                      _fmt(row.get("throughput_rps"), ",.3f"),
                      _fmt(row.get("goodput_rps"), ",.3f"),
                      _fmt(row.get("tokens_per_s"), ",.1f"),
                      _fmt(row.get("tokens_per_s_per_chip"), ",.1f"),
                      _fmt(row.get("tokens_per_s_per_watt"), ",.2f"),
                      _fmt(row.get("energy_per_token_j"), ",.4f"),
                      _fmt(row.get("cost_per_mtok"), ",.3f"),
                      *((_fmt(row.get("power_w"), ",.0f"), limited_by(row) or "-")
                        if budget else ()))
    return table


def limited_by(row: dict) -> str | None:
    """What missed first above a searched point's SLA capacity: the SLA's keys, and
    `power` where the run there drew more than the power budget."""
    missed = (row.get("above") or {}).get("missed") or []
    return " ".join(sla_keys(missed) + ["power"] * (POWER_KEY in missed)) or None


def pruned_summary(rows: list[dict]) -> dict[str, int]:
    """Pruned points counted by the kind of reason (its words before the first colon),
    most first."""
    kinds = Counter(str(row.get("reason") or "").partition(":")[0]
                    for row in rows if row.get("status") == "pruned")
    return dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0])))


def pruned_lines(pruned: list[dict], *, every: bool) -> list[str]:
    """What the terminal shows of a platform's pruned points: a count by reason and the
    first PRUNED_SHOWN (every one with --show-pruned)."""
    if not pruned:
        return []
    counts = "; ".join(f"{count} {kind}" for kind, count in pruned_summary(
        [{**row, "status": "pruned"} for row in pruned]).items())
    shown = pruned if every else pruned[:PRUNED_SHOWN]
    lines = [f"  pruned {len(pruned)}: {counts}"]
    lines += [f"    {_label(row)}: {row['reason']}" for row in shown]
    if len(shown) < len(pruned):
        lines.append(f"    ... {len(pruned) - len(shown)} more (--show-pruned lists them; "
                     "--json and --csv hold them)")
    return lines


def _label(row: dict) -> str:
    plan = row.get("precision", BASELINE)
    replicas = row["replicas"] if row.get("prefill_replicas") is None else \
        f"P{row['prefill_replicas']}+D{row['replicas']}"
    return (f"{replicas} x (T{row['tp']} x P{row['pp']}) {row['batching']} "
            f"b{row['max_batch']}" + ("" if plan == BASELINE else f" {plan}"))


def verdict_lines(verdicts: dict) -> list[str]:
    """Per platform, disaggregated against co-located (nothing without --disaggregate)."""
    if not any(verdicts.values()):
        return []
    return ["disaggregated vs co-located:"] + [
        f"  {arch}: {found['text']}" for arch, found in verdicts.items() if found]


def conclusion_lines(found: dict, objective: str) -> list[str]:
    """Each platform's best point, or why it has none: points that meet the SLA at
    every rate tried (unbounded: no SLA capacity to rank) or none that meets it; and
    the Pareto front, or why it is empty."""
    lines = [f"best per platform by {objective}:"]
    for arch, top in found["best"].items():
        unbounded = found["unbounded"][arch]
        if top is None and unbounded:
            lines.append(f"  {arch}: {len(unbounded)} deployments meet the SLA at every "
                         f"rate tried (unbounded, no SLA capacity to rank by {objective}"
                         f"), e.g. {_label(unbounded[0])}")
        elif top is None:
            lines.append(f"  {arch}: no deployment meets the SLA")
        else:
            lines.append(f"  {arch}: {_label(top)} ({top['chips']} chips): offered rate "
                         f"at the SLA {top['sla_rate_rps']:,.3f}/s, achieved throughput "
                         f"{_fmt(top.get('throughput_rps'), ',.3f')}/s, "
                         f"{_fmt(top[objective], ',.4g')} {objective}; "
                         f"{top['binding']['text']}")
    names = ", ".join(found["front_objectives"]) or "the front objectives"
    if found["front"]:
        lines.append(f"Pareto front over {names}: " + "; ".join(
            f"{row['arch']} {_label(row)}" for row in found["front"]))
    else:
        count = sum(map(len, found["unbounded"].values()))
        lines.append(f"Pareto front over {names}: empty, no point has an SLA capacity"
                     + (f" ({count} meet the SLA at every rate tried)" if count else ""))
    return lines


def _rows(outcomes, front: list[dict], budget_w: float | None = None) -> list[dict]:
    on_front = {row["key"] for row in front}
    rows = []
    for outcome in outcomes:
        rows += [{**row, "on_front": row["key"] in on_front,
                  **({"limited_by": limited_by(row)} if budget_w is not None else {}),
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
                                    executor=executor,
                                    power_budget_w=args.power_budget_w), ""
    cache = CostCache(cost_folder(args.store), strict=True)
    with Store(args.store) as store, executor, \
            progress.steps("searching deployments", after_s=2.0) as report:
        points = PointStore(store)
        outcomes = search_platforms(spec, archs, grid, prune=not args.no_prune,
                                    cost_cache=cache, store=points,
                                    progress=lambda a, done, total: report(done, total),
                                    executor=executor, power_budget_w=args.power_budget_w)
    return outcomes, (f"store {args.store}: {points.found} already stored, "
                      f"{points.computed} computed; serving runs: {points.runs_read} "
                      f"read back, {points.runs_stored} simulated")


def handle(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    grid = grid_from_args(args)
    for flag, suffixes in (("json", None), ("csv", (".csv",)),
                           ("plot", (".png", ".svg", ".pdf"))):
        if getattr(args, flag) is not None:
            check_output_path(getattr(args, flag), flag, suffixes)
    check_distinct_outputs(args, ("json", "csv", "plot", "store"))
    if args.store is not None:
        check_file_name(args.store, "--store")
    requires(args, "--cv", "--arrival", "gamma")
    if args.power_budget_w is not None:
        in_range(args.power_budget_w, "--power-budget-w", low=1e-9, high=MAX_POWER_BUDGET_W)
    archs = list(dict.fromkeys(args.arch))
    check_cost(archs, args.objective)
    started = time.perf_counter()
    outcomes, stored = _search(spec, archs, grid, args)
    found = conclude(outcomes, args.objective, spec.dtype)
    verdicts = {outcome.arch: verdict(outcome.points, args.objective)
                for outcome in outcomes}
    console = report_console(wide=args.wide)
    for outcome in outcomes:
        console.print(points_table(outcome, args.power_budget_w))
        for line in pruned_lines(outcome.pruned, every=args.show_pruned):
            console.print(line, markup=False, highlight=False)
    refused = all_pruned(outcomes, args.power_budget_w)
    if refused is None:
        echo("offered/s: the highest arrival rate at which every SLA target is met\n"
             "achieved/s: requests/s completed at that rate (tok/s, per chip, per watt\n"
             "  and $/Mtok count these); goodput/s: those that met every SLA target")
        for line in conclusion_lines(found, args.objective) + verdict_lines(verdicts):
            echo(plain(line))  # platform names are paths the user gave
    searched = sum(len(o.points) for o in outcomes)
    shared = sum(o.runs_shared for o in outcomes)
    echo(f"searched {searched} points ({sum(len(o.pruned) for o in outcomes)} pruned) "
         f"in {time.perf_counter() - started:.1f} s wall" + (
             f"; {shared} serving runs taken from another point's identical run"
             if shared else ""))
    if stored:
        echo(stored)
    rows = _rows(outcomes, found["front"], args.power_budget_w)
    columns = list(CSV_COLUMNS) + (list(POOL_COLUMNS) if grid.disaggregate else [])
    if args.json is not None:  # written when every point was pruned too: their reasons
        with writing(args.json):
            budget = {} if args.power_budget_w is None else \
                {"power_budget_w": args.power_budget_w}
            write_file(args.json, dump_json({
                "sla": spec.sla, **budget, "objective": args.objective, "rates": RATE_FIGURES,
                "pruned": pruned_summary(rows),
                "spec": spec.model_dump(mode="json"), "points": rows,
                "best": found["best"], "front": found["front"],
                **({"disaggregation": verdicts} if grid.disaggregate else {}),
                "unbounded": {arch: [row["key"] for row in listed] for arch, listed
                              in found["unbounded"].items()}}, indent=1) + "\n")
        print(f"wrote {args.json}")
    columns = list(CSV_COLUMNS) + \
        (list(BUDGET_COLUMNS) if args.power_budget_w is not None else [])
    if refused is not None:
        if args.csv is not None:
            write_file(args.csv, csv_text(columns, rows, extrasaction="ignore"),
                       field="--csv")
            print(f"wrote {Path(args.csv)}")
        raise refused
    if args.csv:
        with writing(args.csv):
            write_file(args.csv, csv_text(columns, rows, extrasaction="ignore"))
        print(f"wrote {Path(args.csv)}")
    if args.plot:
        with writing(args.plot):
            targets = ", ".join(f"{key}={value:g}" for key, value in spec.sla.items())
            capacity_figure(rows, found["front"], args.plot,
                            f"SLA capacity vs chips ({targets})")
        print(f"wrote {args.plot}")
    return 0
