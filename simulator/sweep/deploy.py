"""Deployment search (DESIGN.md section 18): for each platform, every deployment of a
grid (chips per replica split T x P, replicas within a chip budget, batching policy,
max batch, precision plan: `serve --precision`'s, None the model's own formats) is
pruned before any simulation when it cannot be built, cannot hold the model (the
capacity rule, simulator.system.capacity, at the plan's weight and KV formats) or when the
roofline bound of one batch-1 iteration already misses the SLA; every other point
gets its SLA capacity from serve's --find-max-rate search
(simulator.serving.curves.find_max_rate), and its figures at that rate. Pruned
points are kept with their reason, never dropped. Each point is keyed by the sha256
of what its outcome depends on, so a store of points (simulator.sweep.deploy_store)
lets a search resume and never compute a point twice."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol


from simulator.collectives.cost import with_collectives
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.frontends import hf as hf_frontend
from simulator.inputs.loader import locate
from simulator.inputs.platform_file import load_platform
from simulator.kernels import ahead
from simulator.search.default import SearchCache
from simulator.serving import llm_cost
from simulator.serving.iteration_cost import UnitCosts
from simulator.serving.cost_cache import CostCache
from simulator.serving.curves import NoBracket, find_max_rate
from simulator.serving.precision import ServingPrecision
from simulator.serving.serve import prepare, replica_capacity, stored_share
from simulator.serving.sla import sla_report
from simulator.serving.spec import ServeSpec
from simulator.serving.arrival_trace import Trace, load_trace
from simulator.sweep.deploy_identity import point_key, search_identity
from simulator.sweep.deploy_pools import point_spec, pool_axes
from simulator.sweep.deploy_runs import PointRuns, RunStore, SharedRuns, StoredRuns
from simulator.sweep.power_budget import BUDGET_KEY, POWER_KEY, judged, static_floor_reason
from simulator.sweep.roofline_bound import bound_misses, iteration_bound_s
from simulator.sweep.rows import stored_key
from simulator.system.parallelism import SystemPlan, check_plan
from simulator.system.serving import ShardedFrontend
from simulator.system.shard import model_limits

# Objective -> whether larger is better.
OBJECTIVES = {"tokens_per_s_per_watt": "max", "tokens_per_s_per_chip": "max",
              "cost_per_mtok": "min"}
# Every figure of a searched point a sweep may take as an objective (the SLA's
# percentiles are at the point's SLA capacity).
POINT_METRICS = {**OBJECTIVES, "sla_rate_rps": "max", "goodput_rps": "max",
                 "tokens_per_s": "max", "energy_per_token_j": "min",
                 **{f"{metric}_{stat}_ms": "min" for metric in ("ttft", "tpot", "latency")
                    for stat in ("p50", "p99")}}
COST_OBJECTIVES = ("cost_per_mtok",)
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Grid:
    """The deployment axes searched on every platform."""

    budget_chips: int
    chips_per_replica: tuple[int, ...]
    replicas: tuple[int, ...]
    batching: tuple[str, ...]
    max_batch: tuple[int, ...]
    precision: tuple[str | None, ...] = (None,)   # plan files; None: no plan
    disaggregate: bool = False   # also every split of replicas into prefill + decode pools
    kv_link: str = "interconnect"  # what a disaggregated point's KV crosses


@dataclass(frozen=True)
class Deployment:
    """One point: a platform and how it serves (what `accsim serve` flags say)."""

    arch: str
    plan: SystemPlan
    replicas: int
    batching: str
    max_batch: int
    precision: str | None = None   # a precision plan file, None: the model's formats
    prefill_replicas: int | None = None  # disaggregated: `replicas` decode beside these
    kv_link: str | None = None           # and the KV's link (DESIGN.md section 20)

    @property
    def chips(self) -> int:
        return self.plan.chips * (self.replicas + (self.prefill_replicas or 0))

    def fields(self) -> dict:
        pools = {"prefill_replicas": self.prefill_replicas, "kv_link": self.kv_link} \
            if self.prefill_replicas else {}
        return {"arch": self.arch, "chips": self.chips, "chips_per_replica": self.plan.chips,
                "tp": self.plan.tp, "pp": self.plan.pp, "replicas": self.replicas,
                "batching": self.batching, "max_batch": self.max_batch,
                "precision": precision_name(self.precision),
                "precision_file": self.precision, **pools}

    def label(self) -> str:
        replicas = str(self.replicas) if self.prefill_replicas is None else \
            f"prefill {self.prefill_replicas} + decode {self.replicas}"
        return (f"{replicas} x (T{self.plan.tp} x P{self.plan.pp}), {self.batching} "
                f"max_batch {self.max_batch}, precision {precision_name(self.precision)}")


def precision_name(path: str | None) -> str:
    """How a point names its precision plan: the file's stem, `none` without one."""
    return "none" if path is None else Path(path).stem


@dataclass
class Outcome:
    """What the search found for every point of one platform."""

    arch: str
    platform: Platform
    platform_file: str
    config: object = None                              # the model, as the frontend reads it
    hf: object = None                                  # the frontend that read it
    context: int = 0                                   # mean decode context of a request
    prefill: int = 0                                   # tokens of a mean prefill chunk
    request: int = 0                                   # a mean request's whole KV tokens
    weight_bytes: int = 0                              # the model's, at its own formats
    precisions: dict = field(default_factory=dict)     # plan file -> ServingPrecision
    points: list[dict] = field(default_factory=list)   # searched, with figures
    pruned: list[dict] = field(default_factory=list)   # with their reason
    runs_shared: int = 0                               # runs a point took from another's
    # The roofline bounds' tiling searches by operator content, shared by the T x P
    # splits of one platform (a stage lowers the replica's shapes); None: each its own.
    searches: SearchCache | None = None


def plans(chips: int) -> list[SystemPlan]:
    """Every T x P split of `chips` (fewest stages first)."""
    return [SystemPlan(chips=chips, tp=chips // pp, pp=pp)
            for pp in range(1, chips + 1) if chips % pp == 0]


def deployments(arch: str, grid: Grid) -> list[Deployment]:
    """The grid's points for one platform, within the chip budget; with
    grid.disaggregate, then each plan's replicas split into prefill and decode pools."""
    colocated = [Deployment(arch, plan, replicas, batching, max_batch, precision)
                 for chips in grid.chips_per_replica for plan in plans(chips)
                 for replicas in grid.replicas if chips * replicas <= grid.budget_chips
                 for batching in grid.batching for max_batch in grid.max_batch
                 for precision in grid.precision]
    return colocated + [Deployment(arch, plan, decode, "continuous", batch, precision,
                                   prefill, grid.kv_link)
                        for plan, prefill, decode, batch, precision in pool_axes(grid, plans)]


def _smallest_request(spec: ServeSpec, trace: Trace | None) -> tuple[int, int]:
    """(prompt, output) of the request with the fewest tokens: what every bound and the
    capacity rule are taken at (the smallest is the one every run must serve)."""
    if trace is None:
        return spec.prompt_tokens, spec.output_tokens
    sizes = trace.prompt_tokens + trace.output_tokens
    row = int(sizes.argmin())
    return int(trace.prompt_tokens[row]), int(trace.output_tokens[row])


def _mean_context(spec: ServeSpec, trace: Trace | None) -> tuple[int, int, int]:
    """A decoding request's mean context (its prompt and half its output), a mean
    prefill chunk (its prompt, at most max_tokens) and a mean request's tokens."""
    if trace is None:
        prompt, output = spec.prompt_tokens, spec.output_tokens
    else:
        prompt, output = trace.prompt_tokens.mean(), trace.output_tokens.mean()
    return (int(prompt + output / 2), int(min(prompt, spec.max_tokens)),
            int(prompt + output))


def phase_bound_ms(outcome: Outcome, dtype: str | None, plan: SystemPlan,
                   precision: ServingPrecision | None, prompt: int, metric: str) -> float:
    """The roofline bound (ms) of one batch-1 decode step (metric "tpot") or prefill
    ("ttft") of a `prompt`-token request on one chip of `plan`, under the precision
    plan if any."""
    platform = outcome.platform
    frontend = outcome.hf if plan.single_chip else \
        ShardedFrontend(outcome.hf, plan, platform)
    prefill, decode = {"tpot": ((), [prompt]), "ttft": ([(prompt, 0)], ())}[metric]
    workload = frontend.iteration_workload(outcome.config, prefill=list(prefill),
                                           decode=list(decode), dtype=dtype)
    if precision is not None:
        workload = precision.apply(workload)
    return iteration_bound_s(platform, workload, outcome.searches) * 1e3


def _prune_reason(spec: ServeSpec, outcome: Outcome, trace: Trace | None, plan: SystemPlan,
                  precision: str | None, bound: Callable[[str], float]) -> str | None:
    """Why a plan (under a precision plan, or none) is pruned before simulation on
    this platform, or None: serve's capacity rule for one chip of a replica, at the
    plan's weight and KV formats, then the roofline bound (`bound`: a metric's)."""
    platform, config, hf = outcome.platform, outcome.config, outcome.hf
    try:
        check_plan(plan, platform, model_limits(config), platform_file=outcome.platform_file)
    except AccsimError as exc:
        return f"cannot be built: {exc.rule}"
    share, weight_bytes = None, outcome.weight_bytes
    if precision is not None:
        chip = hf if plan.single_chip else ShardedFrontend(hf, plan, platform)
        weight_bytes = chip.model_stats(config, dtype=spec.dtype).weight_bytes
        try:  # as serve sizes one chip of the replica: its shard under the plan
            share = stored_share(outcome.precisions[precision], config, spec, platform,
                                 chip)
        except AccsimError as exc:
            return f"precision: {exc.rule}"
    at = spec.model_copy(update={"chips": plan.chips, "tp": plan.tp, "pp": plan.pp})
    fit = replica_capacity(config, at, trace, platform, outcome.platform_file, ignore=True,
                           share=share, model_weight_bytes=weight_bytes)
    if fit is not None and fit.fits is False:
        return (f"capacity: each chip needs {fit.footprint.total_bytes:,} bytes of "
                f"{fit.capacity_bytes:,}")
    return bound_misses(spec, bound)


def point_figures(point: Deployment, figures: dict, rate: float,
                  platform: Platform) -> dict:
    """A searched point's figures at its SLA capacity: rates, tokens/s per chip and per
    watt (tokens per joule of the whole system), energy per token, cost per million
    tokens (None without a cost table)."""
    tokens_s = figures["tokens_per_s"] or 0.0
    per_chip_j = figures["energy_per_token_j"]
    energy = per_chip_j * point.plan.chips if per_chip_j else None
    energy = (per_chip_j or None) if figures.get("disaggregated") else energy  # system's
    watts = tokens_s * energy if energy else 0.0
    cost = None
    if platform.cost is not None and tokens_s > 0:
        chip_hour = platform.cost.chip_hour(watts / point.chips)
        cost = point.chips * chip_hour / (tokens_s * SECONDS_PER_HOUR) * 1e6
    per_watt = 1 / energy if energy else None
    for value, figure in ((cost, "cost"), (per_watt, "energy")):
        if value is not None and not math.isfinite(value):  # a subnormal J or a 1e308 $
            raise AccsimError(f"{point.label()}: its {figure} figure passes a double's "
                              "range", field=figure)
    percentiles = {f"{metric}_{stat}_ms": (figures[f"{metric}_ms"] or {}).get(stat)
                   for metric in ("ttft", "tpot", "latency")
                   for stat in ("p50", "p95", "p99")}
    return {**point.fields(), **percentiles, "sla_rate_rps": rate,
            "goodput_rps": figures["goodput_rps"],
            "throughput_rps": figures["throughput_rps"], "tokens_per_s": tokens_s,
            "tokens_per_s_per_chip": tokens_s / point.chips,
            "tokens_per_s_per_watt": per_watt,
            "energy_per_token_j": energy, "power_w": watts, "cost_per_mtok": cost}


def _bracket_figures(found: dict) -> tuple[dict, dict]:
    """The figures of the runs at the bracket's ends: at the SLA capacity (met) and
    just above it (missed)."""
    low, high = found["bracket_rps"]
    at = {e["rate_rps"]: e for e in found["evaluations"]}
    return at[low]["figures"], at[high]


def search_point(setup, point: Deployment, inputs: dict | None = None,
                 store: RunStore | None = None, shared: SharedRuns | None = None,
                 budget_w: float | None = None) -> dict:
    """serve's max-rate search on one point (one cost memo per platform and plan) and
    its figures at the rate found; the runs a store holds for it (`inputs`: its stored
    inputs) are read back (simulator.sweep.deploy_runs), and with `shared`, another
    point's run that is this point's own is taken. `budget_w`: a power budget, judged
    as the SLA is (simulator.sweep.power_budget)."""
    at = point_spec(point, setup.spec)
    runs = PointRuns(replace(setup, spec=at), at, inputs,
                     store if inputs is not None else None, shared,
                     budget=(point.plan.chips, budget_w) if budget_w is not None else None)
    try:
        found = find_max_rate(replace(setup, spec=at), at, run=runs)
    except AccsimError as exc:  # met at every rate a spec may ask for, or at none
        unbounded = isinstance(exc, NoBracket) and exc.unbounded
        return {**point.fields(), "status": "unbounded" if unbounded else
                "no rate meets the SLA", "sla_rate_rps": None, "unbounded": unbounded,
                "note": ("the SLA is met at every rate tried: " if unbounded else
                         "no rate meets the SLA: ") + exc.rule}
    met, above = _bracket_figures(found)
    met = runs.with_goodput(found["max_rate_rps"], met)
    row = {"status": "searched",
           **point_figures(point, met, found["max_rate_rps"], setup.platform)}
    checks = judged(sla_report(at.sla, above["figures"]), above["figures"],
                    point.plan.chips, budget_w)["targets"]
    figures = above["figures"]
    row["above"] = {"rate_rps": above["rate_rps"],
                    "missed": [key for key, c in checks.items() if not c["met"]],
                    **{name: figures[name] for name in (
                        "preempted", "dropped", "requests", "utilization",
                        "throughput_rps", "latency_ms", "ttft_ms", "tpot_ms")}}
    if budget_w is not None:  # what the deployment draws there, against the budget
        row["above"]["power"] = checks[POWER_KEY]
    if setup.power_cap is not None:  # the clock a power cap left its chips
        row["power_cap"] = setup.power_cap
    row["evaluations"] = len(found["evaluations"])
    if setup.kv_blocks is not None:
        row["kv_tokens_per_replica"] = setup.kv_blocks * at.block_tokens
    return row


Progress = Callable[[str, int, int], None]


class PointStore(Protocol):
    """Where finished points (their runs, the roofline bounds of their plans) are
    kept by key (simulator.sweep.deploy_store.PointStore); only the process that
    opened it reads and writes it."""

    runs_read: int

    def get(self, key: str) -> dict | None: ...

    def put(self, key: str, inputs: dict, row: dict) -> None: ...

    def get_bound(self, key: str) -> dict | None: ...

    def put_bound(self, key: str, inputs: dict, outcome: dict) -> None: ...

    def runs_of(self, point_inputs: dict) -> dict[str, dict]: ...


def stored_bound(store: PointStore | None, identity: dict, outcome: Outcome,
                 dtype: str | None, plan: SystemPlan, precision: str | None, prompt: int,
                 metric: str) -> float:
    """phase_bound_ms, kept in the store by content (the platform, the model, the
    plan, the precision plan's content, the request and the metric: never the SLA),
    so a search whose SLA changed computes no bound again."""
    serving = outcome.precisions.get(precision)
    if store is None:
        return phase_bound_ms(outcome, dtype, plan, serving, prompt, metric)
    inputs = json.loads(json.dumps({
        "platform": identity["platform"], "model": identity["model"], "dtype": dtype,
        "plan": [plan.chips, plan.tp, plan.pp, plan.ep],
        "precision": serving.identity() if serving else None, "prompt": prompt,
        "metric": metric, "model_version": identity["model_version"]}, default=str))
    key = stored_key(inputs)
    found = store.get_bound(key)
    if found is not None:
        return found["bound_ms"]
    value = phase_bound_ms(outcome, dtype, plan, serving, prompt, metric)
    store.put_bound(key, inputs, {"bound_ms": value})
    return value


@dataclass(frozen=True)
class Group:
    """The points of one platform under one precision plan and the T x P (x EP) plans
    of one T (and EP) width, as one task for an executor (simulator.sweep.executors):
    run in any process, it returns its rows and the runs it simulated, and writes
    nothing. Each plan's points share a serve setup (its iteration-cost table), the
    plans their fusion units' costs (serving.iteration_cost.UnitCosts: a pipeline stage runs the
    unsplit replica's layers). Without sharing (`share`), a task is one plan's."""

    key: str                     # its first point's (executors know a job by its key)
    spec: ServeSpec
    arch: str
    points: tuple[Deployment, ...]
    inputs: tuple[dict, ...]     # each point's inputs, as its key hashes them
    stored: tuple[dict, ...] | None   # each point's runs the store holds (key -> run)
    cost_cache: CostCache | None
    prune: bool
    trace: Trace | None          # the search's trace, read and checked once
    power_budget_w: float | None = None   # --power-budget-w (simulator.sweep.power_budget)
    share: bool = True           # points share their equal runs (SharedRuns)


def _prepared(group: Group, point: Deployment, units: UnitCosts | None):
    """serve's setup of the point's platform and plans, or serve's refusal."""
    try:
        return prepare(group.spec.model_copy(update={
            "arch": group.arch, "chips": point.plan.chips, "tp": point.plan.tp,
            "pp": point.plan.pp, "precision": point.precision}),
            cost_cache=group.cost_cache, trace=group.trace, units=units)
    except AccsimError as exc:
        return exc


def search_group(group: Group) -> dict:
    """serve's max-rate search on each point of a group, with one setup (and cost memo)
    per plan, all prepared first (the runs the store held are read back, not simulated:
    simulator.sweep.deploy_runs): {"rows", "runs" simulated (key, inputs, outcome),
    "runs_read", "runs_shared"}, or {"error": serve's refusal's rule, file and field}.
    Without pruning, a setup serve refuses makes each of its points `refused`."""
    units = UnitCosts() if group.share else None
    setups: dict[SystemPlan, object] = {}
    for point in group.points:
        if point.plan not in setups:
            setups[point.plan] = _prepared(group, point, units)
            refusal = setups[point.plan]
            if group.prune and isinstance(refusal, AccsimError):
                return {"error": [refusal.rule, refusal.file, refusal.field]}
    runs = [StoredRuns(found) for found in group.stored] if group.stored else \
        [None] * len(group.points)
    shared = SharedRuns() if group.share else None
    rows = [{**point.fields(), "status": "refused", "sla_rate_rps": None, "unbounded":
             False, "note": f"refused: {setups[point.plan].rule}"}
            if isinstance(setups[point.plan], AccsimError) else
            search_point(setups[point.plan], point, inputs, found, shared,
                         group.power_budget_w)
            for point, inputs, found in zip(group.points, group.inputs, runs)]
    return {"rows": rows, "runs": [run for found in runs if found
                                   for run in found.simulated],
            "runs_read": sum(found.read for found in runs if found),
            "runs_shared": shared.shared if shared else 0}


def _groups(spec: ServeSpec, arch: str, waiting: dict, store: PointStore | None,
            cost_cache: CostCache | None, prune: bool, trace: Trace | None,
            budget_w: float | None, share: bool) -> list[Group]:
    """The groups of the points to search (`waiting`: (plan, precision plan) -> their
    (index, point, key, inputs))."""
    return [Group(members[0][2], spec, arch, points=tuple(m[1] for m in members),
                  inputs=tuple(m[3] for m in members), stored=tuple(
                      store.runs_of(m[3]) for m in members) if store else None,
                  cost_cache=cost_cache, prune=prune, trace=trace,
                  power_budget_w=budget_w, share=share) for members in waiting.values()]


def _check_found(found: dict) -> None:
    """Raise what a group's task reported: serve's refusal (`error`), or a worker
    that died (an executor's `failed` outcome)."""
    if "rows" in found:
        return
    if found.get("status") == "failed":
        raise AccsimError("a worker process died searching a plan's points (out of "
                          "memory?); with --store, a rerun resumes from the points "
                          "stored", field="--scheduler")
    rule, file, field = found["error"]
    raise AccsimError(rule, file=file, field=field)


class PlatformSearch:
    """One platform's search between its pruning pass and its groups' results: the
    points pruned or read back are finished, the others wait in `groups`."""

    def __init__(self, arch: str, points: list[Deployment], outcome: Outcome,
                 store: PointStore | None, progress: Callable[[str], None] | None):
        self.arch, self.points, self.outcome = arch, points, outcome
        self.store, self.progress = store, progress
        self.rows: dict[int, dict] = {}  # point index -> its row, as this search names it
        self.keys: dict[int, str] = {}
        self.members: dict[str, list] = {}  # a group's key -> its (index, point, key, inputs)
        self.groups: list[Group] = []

    def finish(self, index: int, row: dict) -> None:
        """Keep a point's row, named as this search names it (a row read back may be
        another path's)."""
        point = self.points[index]
        self.rows[index] = {**row, "arch": self.arch,
                            "precision": precision_name(point.precision),
                            "precision_file": point.precision, "key": self.keys[index]}
        if self.progress:
            self.progress(self.arch)

    def take(self, group: Group, found: dict) -> None:
        """A group's task's result: its runs and rows stored, its points finished."""
        _check_found(found)
        if self.store is not None:
            for run in found["runs"]:
                self.store.put_run(*run)
            self.store.runs_read += found["runs_read"]
        self.outcome.runs_shared += found["runs_shared"]
        for (index, _, key, inputs), row in zip(self.members[group.key], found["rows"]):
            if self.store is not None:
                self.store.put(key, inputs, row)
            self.finish(index, row)

    def done(self) -> Outcome:
        for index in sorted(self.rows):
            row = self.rows[index]
            (self.outcome.pruned if row["status"] == "pruned" else
             self.outcome.points).append(row)
        return self.outcome


def _pruning_pass(spec: ServeSpec, arch: str, points: list[Deployment],
                  trace: Trace | None, prune: bool, cost_cache: CostCache | None,
                  store: PointStore | None, progress: Callable[[str], None] | None,
                  budget_w: float | None = None, share: bool = True,
                  searching: Callable[[], None] = lambda: None) -> PlatformSearch:
    """Every point of one platform read back from the store, pruned (`budget_w`: by
    the power budget too), or put in the group of its plan to be searched
    (`searching` called as each such point is found)."""
    platform, source = load_platform(locate(arch, "platform"))
    platform = with_collectives(platform, spec.collectives)
    config, facts = llm_cost.load_model(spec.model, dtype=spec.dtype, hf=hf_frontend)
    request = _smallest_request(spec, trace)
    outcome = Outcome(arch, platform, source.path, config, hf_frontend,
                      *_mean_context(spec, trace), weight_bytes=facts.weight_bytes,
                      searches=SearchCache() if share else None)
    identity = search_identity(spec, platform, config, trace, prune)
    if budget_w is not None:  # a point's outcome depends on it; a run's does not
        identity[BUDGET_KEY] = budget_w
    search = PlatformSearch(arch, points, outcome, store, progress)
    reasons: dict[tuple, str | None] = {}
    waiting: dict[tuple, list] = {}   # a task (Group) -> its points to search
    for index, point in enumerate(points):
        if point.precision is not None and point.precision not in outcome.precisions:
            outcome.precisions[point.precision] = ServingPrecision.load(point.precision,
                                                                        platform)
        search.keys[index], inputs = point_key(identity, point,
                                               outcome.precisions.get(point.precision))
        row = store.get(search.keys[index]) if store is not None else None
        shared = (point.plan, point.precision)
        if row is None and shared not in reasons:
            reasons[shared] = _prune_reason(
                spec, outcome, trace, point.plan, point.precision,
                partial(stored_bound, store, identity, outcome, spec.dtype,
                        point.plan, point.precision, request[0]))
        reason = reasons.get(shared) or static_floor_reason(point.chips, platform, budget_w)
        if row is None and prune and reason is not None:
            row = {**point.fields(), "status": "pruned", "reason": reason}
            if store is not None:
                store.put(search.keys[index], inputs, row)
        if row is None:  # one task per precision plan and T x EP width (Group)
            searching()
            family = (point.plan.tp, point.plan.ep) if share else point.plan
            waiting.setdefault((family, point.precision), []).append(
                (index, point, search.keys[index], inputs))
        else:
            search.finish(index, row)
    search.members = {group[0][2]: group for group in waiting.values()}
    search.groups = _groups(spec, arch, waiting, store, cost_cache, prune, trace,
                            budget_w, share)
    return search


def search_platforms(spec: ServeSpec, archs: list[str], grid: Grid | None, *,
                     progress: Progress | None = None, prune: bool = True,
                     cost_cache: CostCache | None = None, store: PointStore | None = None,
                     points: list[Deployment] | None = None,
                     executor=None, power_budget_w: float | None = None,
                     share: bool = True) -> list[Outcome]:
    """Prune, then search, every point of the grid (or the `points` given, a sweep's) on
    each platform. `prune` False searches every point (a check of the pruning);
    `cost_cache`: where iteration costs are shared (default: the user's cache folder);
    `store`: finished points are read from and written to it by key; `executor`
    (simulator.sweep.executors, default serial): where the groups of points (Group) are
    searched, every platform's in one stream, the largest first (its points' pipeline
    stages summed: each stage is one more step per iteration), so that workers are not
    left idle by one platform's last group; its workers start (loading the compiled
    kernels) while this process prunes, at the first point the store does not answer
    (none when it answers every one). Only this process writes the store; each
    platform's rows are in the grid's order whatever the executor. `share` False: a task
    per plan, each point simulates every run and unit cost of its own and each roofline
    bound searches its own tilings (the unshared search the shared one must equal:
    Group, SharedRuns, Outcome.searches). `progress(arch, points finished, points in
    all)`, over every platform; `power_budget_w`: held as the SLA is
    (simulator.sweep.power_budget)."""
    point_lists = [deployments(arch, grid) if points is None else points
                   for arch in archs]
    trace = load_trace(spec.arrival_trace, need_tokens=True) \
        if spec.arrival == "trace" else None
    finished, total = 0, sum(map(len, point_lists))

    def report(arch: str) -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(arch, finished, total)

    started = False

    def searching() -> None:  # the workers start at the first point left to search
        nonlocal started
        if executor is not None and not started:
            executor.start(ahead.load)
            started = True

    searches = [_pruning_pass(spec, arch, listed, trace, prune, cost_cache, store, report,
                              power_budget_w, share, searching)
                for arch, listed in zip(archs, point_lists)]
    owner = {group.key: search for search in searches for group in search.groups}
    groups = sorted((group for search in searches for group in search.groups),
                    key=lambda group: -sum(point.plan.pp for point in group.points))
    for group, found in executor.outcomes(groups, task=search_group) if executor else \
            ((group, search_group(group)) for group in groups):
        owner[group.key].take(group, found)
    return [search.done() for search in searches]


def search_platform(spec: ServeSpec, arch: str, grid: Grid | None, **options) -> Outcome:
    """search_platforms on one platform."""
    return search_platforms(spec, [arch], grid, **options)[0]
