"""`accsim serve`: its options (flags, or a YAML spec with the same fields) and its
handler. Options are checked, and output folders looked at, before anything runs."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pydantic import ValidationError
from rich.table import Table

from simulator.output import progress
from simulator.inputs.anchors import relocated
from simulator.errors import AccsimError
from simulator.output.terminal import console as report_console, echo
from simulator.inputs.loader import (dump_json, parse_model, read_source, refuse_empty_name,
                                     validation_error)
from simulator.options.catalog import add_options
from simulator.options.rules import number, whole
from simulator.output.files import check_output_options, write_file, writing
from simulator.serving.cost_cache import CostCache, user_folder
from simulator.serving.curves import find_max_rate, sweep, write_curve_csv, write_curve_plot
from simulator.serving.metrics import RequestTimes
from simulator.serving.pools import POOL_KEYS, ROLES, parse_pool
from simulator.serving.tails import CAUSES, TAIL_PERCENTILES
from simulator.serving.serve import prepare, serve
from simulator.serving.sla import parse_sla
from simulator.serving.spec import ServeSpec
from simulator.serving.serving_plots import distribution_figure

PROGRESS_AFTER_S = 2.0  # runs shorter than this show no bar
# Output option -> the suffixes it may end in (None: any).
OUTPUT_SUFFIXES = {"json": None, "plot": (".png", ".svg", ".pdf"), "csv": (".csv",)}


def add_arguments(serve_cmd: argparse.ArgumentParser) -> None:
    """The arguments of `accsim serve`."""
    add = serve_cmd.add_argument
    add("--spec", metavar="SPEC.yaml", help="a YAML file with the fields below (flags "
        "override it)")
    add_options(serve_cmd, "serve", "inputs", "llm", "precision", "serving", "system",
                "collectives", "kv", "power",
                "capacity", "outputs")
    for role in ROLES:
        add(f"--{role}-pool", metavar="KEY=N,...", help=f"with --disaggregate: the "
            f"{role} pool, keys {', '.join(POOL_KEYS)} (each default: replicas 1, "
            "the run's --tp, --pp, --max-batch, --max-tokens)")
    add("--duration", type=number, dest="duration_s", metavar="SECONDS",
        help="stop arrivals after this many simulated seconds")
    add("--max-wait-ms", type=number, help="static: wait to fill at most this long after "
        "the first request (default: until full); dynamic: default 0")
    add("--block-tokens", type=whole, help="KV cache block size in tokens (default 16)")
    add("--micro-batches", type=whole, help="micro-batches in a replica's pipeline "
        "(default --pp; 1 runs the stages in turn)")
    add("--memory-tails", action="store_true", default=None, help="report what share of "
        "the latency tails at p50, p95 and p99 each request lost to queueing, queueing "
        "for KV blocks, preemption (recompute) and swaps (--kv-host-tier)")
    add("--routing", choices=["round_robin", "least_loaded", "shared_queue"],
        help="default round_robin")
    add("--sweep-rate", metavar="A:B:N", help="latency-throughput curve: N rates from A "
        "to B requests/s")
    add("--find-max-rate", action="store_true", default=None,
        help="search the highest rate meeting --sla (on a lattice of 1%% steps)")
    cache = serve_cmd.add_mutually_exclusive_group()
    cache.add_argument("--cost-cache", metavar="DIR", help="folder of cached LLM grid "
                       "costs (default: $XDG_CACHE_HOME/accsim/serving-costs)")
    cache.add_argument("--no-cost-cache", action="store_true", help="neither read nor "
                       "write cached LLM grid costs")
    add_options(serve_cmd, "serve", "table")
    serve_cmd.set_defaults(handler=handle)


SPEC_FIELDS = [name for name in ServeSpec.model_fields]
FLAG_NAMES = {name: "--" + name.replace("_", "-") for name in SPEC_FIELDS} | {
    "duration_s": "--duration", "mapping_plan": "--mapping"}


def spec_from_args(args: argparse.Namespace) -> ServeSpec:
    """The spec file (if any) overridden by the flags given."""
    raw: dict = {}
    if args.spec is not None:
        refuse_empty_name(args.spec, "serve spec", "--spec")
        source = read_source(args.spec)
        try:
            raw = parse_model(source.text, ServeSpec, file=source.path).model_dump(
                exclude_unset=True)
        except AccsimError as exc:  # a rule across fields: name the file too
            raise AccsimError(exc.rule, file=source.path, field=exc.field) from None
    flags = {name: getattr(args, name) for name in SPEC_FIELDS
             if getattr(args, name, None) is not None}
    if "sla" in flags:
        flags["sla"] = parse_sla(flags["sla"])
    flags |= _disaggregation_flags(args, raw)
    merged = raw | flags
    try:
        spec = ServeSpec.model_validate(merged)
        broken = [AccsimError(rule, field=field)
                  for wrong, field, rule in spec.llm_only_rules() if wrong]
        if not broken:
            return spec
        error = broken[0]
    except ValidationError as exc:
        error = validation_error(exc, merged, file=args.spec or None, model=ServeSpec)
    except AccsimError as exc:
        error = exc
    name = (error.field or "").split(".")[0]
    if name in flags or (args.spec is None and name in FLAG_NAMES):
        # the flag the user typed, or, with no spec file, the one to type
        raise AccsimError(error.rule, field=FLAG_NAMES.get(name, name)) from None
    raise AccsimError(error.rule, file=args.spec or None, field=error.field) from None


def _disaggregation_flags(args: argparse.Namespace, raw: dict) -> dict:
    """--disaggregate, --prefill-pool, --decode-pool and --kv-link as the spec's
    `disaggregate` (over the spec file's), or {} when none is given; a pool flag
    without --disaggregate (here or in the file) is refused."""
    pools = {role: parse_pool(getattr(args, f"{role}_pool"), f"--{role}-pool")
             for role in ROLES if getattr(args, f"{role}_pool", None) is not None}
    link = {"kv_link": args.kv_link} if getattr(args, "kv_link", None) else {}
    switched = getattr(args, "disaggregate", None)
    if not switched and not pools and not link:
        return {}
    base = raw.get("disaggregate")
    if not switched and base is None:
        flag = next(iter([f"--{role}-pool" for role in pools] + ["--kv-link"]))
        raise AccsimError("pools and the KV link shape a disaggregated run: give "
                          "--disaggregate", field=flag)
    merged = dict(base or {})
    for role, pool in pools.items():
        merged[role] = {**(merged.get(role) or {}), **pool}
    return {"disaggregate": merged | link}


def _check_outputs(args: argparse.Namespace) -> None:
    check_output_options(args, OUTPUT_SUFFIXES)
    if args.csv and not args.sweep_rate:
        raise AccsimError("--csv writes the --sweep-rate curve; give --sweep-rate",
                          field="--csv")


def _figures_table(result: dict) -> Table:
    table = Table(title="Per request (ms)", title_justify="left", show_edge=False,
                  pad_edge=False)
    table.add_column("metric")
    for stat in ("p50", "p90", "p95", "p99", "mean", "max"):
        table.add_column(stat, justify="right")
    for metric in ("latency", "ttft", "tpot"):
        stats = result[f"{metric}_ms"]
        if stats is not None:
            table.add_row(metric, *(f"{stats[s]:,.3f}" for s in
                                    ("p50", "p90", "p95", "p99", "mean", "max")))
    return table


def _energy_line(result: dict, opt) -> str:
    """Energy per request and token: the system's (every chip of a replica) when the
    replicas are multi-chip, with one chip's stated as such beside it."""
    request, token = result["energy_per_request_j"], result["energy_per_token_j"]
    one_chip = f"{opt(request, ',.4f')} J/request, {opt(token, ',.5f')} J/token"
    system = result.get("system")
    if result.get("disaggregated"):
        return (f"energy (system: both pools' chips and the KV link) "
                f"{opt(request, ',.4f')} J/request, {opt(token, ',.5f')} J/token")
    if not system:
        return f"energy {one_chip}"
    chips = system["chips_per_replica"]
    return (f"energy (system: {chips} chips a replica) "
            f"{opt(request * chips if request is not None else None, ',.4f')} J/request, "
            f"{opt(system['energy_per_token_j'], ',.5f')} J/token; per chip {one_chip}")


def _summary_lines(result: dict) -> list[str]:
    def opt(value, fmt):
        return "-" if value is None else format(value, fmt)
    lines = [f"requests {result['requests']:,}: completed {result['completed']:,}, "
             f"dropped {result['dropped']:,}, preempted {result['preempted']:,}",
             f"throughput {result['throughput_rps']:,.2f} requests/s, tokens "
             f"{opt(result['tokens_per_s'], ',.1f')}/s, goodput "
             f"{opt(result['goodput_rps'], ',.2f')} requests/s, utilization "
             f"{100 * result['utilization']:.1f}%",
             _energy_line(result, opt) + "; service alone "
             f"{opt(result['service_ms'], ',.3f')} ms"]
    lines += pool_lines(result.get("disaggregated"))
    lines += prefix_lines(result.get("prefix_cache"))
    lines += tail_lines(result.get("memory_tails"))
    cap = result.get("power_cap")
    if cap is not None:  # the clock a power cap left the chips (simulator.metrics.power_cap)
        lines.append(f"power cap {cap['cap_w']:,.4g} W: clock {cap['clock_mhz']:,.0f} MHz "
                     f"of {cap['nominal_clock_mhz']:,.0f} nominal, a chip draws "
                     f"{cap['power_w']:,.4g} W in a full-load iteration")
    bucketing = result["bucketing"]
    if bucketing["samples"]:
        lines.append(f"bucketing ({bucketing['bits']} bits) vs exact simulation on "
                     f"{bucketing['samples']} sampled iterations: mean |error| "
                     f"{100 * bucketing['mean_abs_error']:.2f}%, max "
                     f"{100 * bucketing['max_abs_error']:.2f}%, summed time "
                     f"{100 * bucketing['total_time_error']:+.2f}%")
    if result["sla"]:
        parts = [f"{key} {c['value'] if c['value'] is None else round(c['value'], 3)} <= "
                 f"{c['target']:g}: {'met' if c['met'] else 'MISSED'}"
                 for key, c in result["sla"]["targets"].items()]
        lines.append(f"SLA {'met' if result['sla']['met'] else 'NOT met'}: "
                     + "; ".join(parts))
    return lines


def prefix_lines(cache: dict | None) -> list[str]:
    """What the prefix cache (the trace's prefix_id, prefix_len) saved."""
    if cache is None:
        return []
    return [f"prefix cache: {cache['hits']:,} of {cache['lookups']:,} admissions hit, "
            f"{cache['tokens_saved']:,} of {cache['prompt_tokens']:,} prompt tokens not "
            f"prefilled ({100 * cache['token_hit_rate']:.1f}%), "
            f"{cache['evicted_blocks']:,} cached blocks evicted"]


def tail_lines(tails: dict | None) -> list[str]:
    """Each latency percentile's tail: the share each memory cause holds."""
    if not tails:
        return []
    lines = ["memory tails (share of the latency of requests at or above each "
             "percentile):"]
    for p in TAIL_PERCENTILES:
        row = tails[f"p{p}"]
        lines.append(f"  p{p} {row['latency_ms']:,.3f} ms ({row['requests']:,} requests): "
                     + ", ".join(f"{name.replace('_', ' ')} {100 * row[name]:.1f}%"
                                 for name in CAUSES))
    return lines


def pool_lines(pools: dict | None) -> list[str]:
    """A disaggregated run's pools and KV moves (nothing for a co-located one)."""
    if not pools:
        return []

    def p99(stats) -> str:
        return "-" if stats is None else f"{stats['p99']:,.3f}"

    lines = []
    for role, metric in (("prefill", "ttft"), ("decode", "tpot")):
        pool = pools[role]
        lines.append(f"{role} pool {pool['replicas']} x (T{pool['tp']} x P{pool['pp']}) "
                     f"= {pool['chips']} chips, max_batch {pool['max_batch']}: "
                     f"utilization {100 * pool['utilization']:.1f}%, {metric} p99 "
                     f"{p99(pool[f'{metric}_ms'])} ms"
                     + (" (to the prefill's end, before the KV move)"
                        if role == "prefill" else ""))
    moved = pools["kv_transfer"]
    lines.append(f"KV moved over the {moved['link']}: {moved['requests']:,} requests, "
                 f"{moved['bytes']:,} bytes ({moved['kv_bytes_per_token']:,} a token), "
                 f"move p99 {p99(moved['ms'])} ms of which waiting for the link "
                 f"{p99(moved['wait_ms'])} ms")
    return lines


# Curve columns that are fractions (0..1) in the CSV, printed as percent.
PERCENT_COLUMNS = ("utilization",)


def _curve_table(rows: list[dict]) -> Table:
    table = Table(title="Latency-throughput curve", title_justify="left", show_edge=False,
                  pad_edge=False)
    columns = ["offered_rps", "achieved_rps", "latency_p50_ms", "latency_p95_ms",
               "latency_p99_ms", "ttft_p99_ms", "tpot_p99_ms", "utilization", "sla_met"]
    for column in columns:  # a ratio is a percent in a table (docs/reference/ratios.md)
        table.add_column(f"{column}%" if column in PERCENT_COLUMNS else column,
                         justify="right")
    for row in rows:
        table.add_row(*("-" if row[c] is None else
                        f"{100 * row[c]:.1f}" if c in PERCENT_COLUMNS else
                        f"{row[c]:,.3f}" if isinstance(row[c], float) else str(row[c])
                        for c in columns))
    return table


def _write(path: str | None, writer, *payload) -> None:
    if not path:
        return
    with writing(path):
        writer(*payload, path)
    print(f"wrote {path}")


def _write_json(payload: dict, path: str) -> None:
    write_file(path, dump_json(relocated(payload, Path(path).parent), indent=1) + "\n")


def _write_distribution(times: RequestTimes, title: str, sla: dict[str, float],
                        path: str) -> None:
    series = {"latency": times.latency_s, "ttft": times.ttft_s}
    if times.tpot_s.size:
        series["tpot"] = times.tpot_s
    distribution_figure(series, path, title, sla)


def _cost_cache(args: argparse.Namespace) -> CostCache:
    if args.no_cost_cache:
        return CostCache(None)
    if args.cost_cache is not None:
        return CostCache(args.cost_cache, strict=True)
    return CostCache(user_folder())


def handle(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    _check_outputs(args)
    started = time.perf_counter()
    setup = prepare(spec, ignore_capacity=args.ignore_capacity,
                    cost_cache=_cost_cache(args))
    if setup.capacity is not None and setup.capacity.note():
        echo(setup.capacity.note())
    resolved = spec.resolved()
    served = resolved.model if resolved.llm else resolved.workload
    title = f"{served} on {resolved.arch}: {resolved.batching} batching"
    console = report_console(wide=args.wide)
    if spec.sweep_rate is not None:
        with progress.steps("rates", after_s=PROGRESS_AFTER_S) as report:
            rows = sweep(setup, spec, progress=report)
        console.print(_curve_table(rows))
        echo(f"swept {len(rows)} rates in {time.perf_counter() - started:.2f} s wall")
        _write(args.csv, write_curve_csv, rows)
        _write(args.plot, write_curve_plot, rows, title, resolved.sla)
        _write(args.json, _write_json, {"curve": rows})
        return 0
    if spec.find_max_rate:
        with progress.steps("searching", after_s=PROGRESS_AFTER_S) as report:
            found = find_max_rate(setup, spec, progress=report)
        echo(f"highest rate meeting the SLA: {found['max_rate_rps']:,.3f} requests/s "
             f"(bracket {found['bracket_rps'][0]:,.3f}-{found['bracket_rps'][1]:,.3f}, "
             f"{len(found['evaluations'])} runs, {time.perf_counter() - started:.2f} s "
             "wall)")
        _write(args.json, _write_json, found)
        return 0
    with progress.steps("serving", after_s=PROGRESS_AFTER_S) as report:
        result, times = serve(setup, spec, progress=report)
    console.print(_figures_table(result))
    for line in _summary_lines(result):
        console.print(line, markup=False, highlight=False)
    echo(f"simulated {result['requests']:,} requests in "
         f"{time.perf_counter() - started:.2f} s wall")
    _write(args.json, _write_json, result)
    _write(args.plot, _write_distribution, times, title, resolved.sla)
    return 0
