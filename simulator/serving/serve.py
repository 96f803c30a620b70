"""One serving run end to end: load what the spec names, build the cost model once,
simulate the arrivals, and summarise into the result `accsim serve --json` writes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np

from simulator.system.capacity import Capacity, StoredShare, check, planned_sizing
from simulator.collectives.cost import with_collectives
from simulator.inputs.platform import Platform
from simulator.model.formats import whole_bytes_of
from simulator.frontends.hf.config import ModelConfig
from simulator.metrics.energy import static_power_w
from simulator.metrics.power_cap import cap_in_force, capped
from simulator.errors import AccsimError
from simulator.frontends import hf as hf_frontend
from simulator.inputs.loader import Source, load_model, locate, read_source
from simulator.inputs.platform_file import load_platform
from simulator.serving import llm_cost
from simulator.serving.arrivals import Arrivals, arrivals
from simulator.serving.iteration_cost import PlainBatchCost, UnitCosts
from simulator.serving.cost_cache import CostCache, user_folder
from simulator.serving.disaggregated import KvLink, PoolStore, pooled_summary, \
    run_disaggregated
from simulator.serving.engine import Progress, run_serving
from simulator.serving.kv_cache import KV_ALLOCATORS, HostTier
from simulator.serving.metrics import MetricsStore, RequestTimes, distribution
from simulator.serving.pools import ROLES, pool_plan, pool_spec
from simulator.serving.prefix_cache import PrefixCachingKvCache, PrefixStats, \
    check_prefix_options
from simulator.serving.precision import ServingPrecision
from simulator.serving.sla import goodput_columns, goodput_rps, sla_report
from simulator.serving.spec import ServeSpec
from simulator.serving.tails import memory_tails
from simulator.serving.tiling_plan import check_plan, serving_plan
from simulator.serving.arrival_trace import Trace, load_trace
from simulator.simulate import Inputs, manifest, simulate
from simulator.inputs.workload import Workload
from simulator.system.parallelism import SystemPlan
from simulator.system.serving import ShardedFrontend, serving_system
from simulator.system.shard import (plain_sizing, serving_sizing, stage_layers,
                                   stage_weight_params)


@dataclass
class Setup:
    """What stays the same across the runs of a sweep or a rate search: the platform,
    the cost model (with its memo) and the KV cache size."""

    spec: ServeSpec
    platform: Platform
    platform_source: Source
    cost: object                    # PlainBatchCost or llm_cost.LlmCost
    kv_blocks: int | None           # LLMs: blocks per replica
    reference: Inputs               # the run embedded in the manifest
    model_source: Source | None = None
    trace: Trace | None = None      # trace arrivals: the file, read and checked once
    capacity: Capacity | None = None  # the capacity check of one chip of a replica
    precision: dict | None = None   # --precision: what the plan chose (reference run)
    precision_source: Source | None = None  # --precision: the plan file read
    host_tier: HostTier | None = None  # --kv-host-tier: where preempted KV goes
    pools: dict | None = None       # disaggregated: role -> that pool's Setup
    kv_links: dict = field(default_factory=dict)  # disaggregated: KvLink memo
    power_cap: dict | None = None   # under a power cap: the clock chosen (power_cap.py)

    @property
    def llm(self) -> bool:
        return self.spec.llm


def prepare(spec: ServeSpec, *, hf=None, ignore_capacity: bool = False,
            cost_cache: CostCache | None = None, trace: Trace | None = None,
            units: UnitCosts | None = None) -> Setup:
    """Load and check the platform, the trace and the workload or model named by the
    (resolved) spec, and the capacity of one chip of a replica (simulator.system.capacity),
    before any cost is simulated. LLM grid costs come from and go to `cost_cache`
    (default: the user's cache folder; CostCache(None) for none). `trace`: the spec's
    trace already read (a deployment search reads it once for all its plans); `units`:
    fusion units' costs shared with other setups (a deployment search's splits).

    Under a power cap (the spec's, else the platform's dvfs.power_cap_w), the platform
    is the one at the highest DVFS point whose chip power in a full-load iteration
    (full_load_power_w) fits the cap (simulator.metrics.power_cap), so every serving
    figure follows that clock."""
    spec = spec.resolved()
    if spec.disaggregate is not None:
        return _prepare_pools(spec, hf=hf, ignore_capacity=ignore_capacity,
                              cost_cache=cost_cache, trace=trace, units=units)
    platform, platform_source = load_platform(locate(spec.arch, "platform"))
    platform = with_collectives(platform, spec.collectives)
    if spec.arrival == "trace" and trace is None:  # read once, whatever the cap tries
        trace = load_trace(spec.arrival_trace, need_tokens=spec.llm)
    if spec.arrival == "trace":  # refused before any cost is built
        check_prefix_options(spec, trace.prefix_ids is not None, trace.source.path)
    cap = cap_in_force(platform, spec.power_cap_w)
    if cap is None:
        return _prepare_on(spec, platform, platform_source, hf, ignore_capacity,
                           cost_cache, trace, units)

    def power_of(candidate: Platform) -> tuple[float, Setup]:
        setup = _prepare_on(spec, candidate, platform_source, hf, ignore_capacity,
                            cost_cache, trace, units)
        return full_load_power_w(setup), setup

    _, setup, choice = capped(platform, cap, power_of, file=platform_source.path,
                              from_option=spec.power_cap_w is not None)
    return replace(setup, power_cap=choice.record())


def full_load_power_w(setup: Setup) -> float:
    """One chip's power while its replica works flat out, what a cap must hold: an LLM
    iteration prefilling a chunk of max_tokens tokens (the most one iteration
    prefills: the chip's most compute-bound work), or a plain batch of max_batch."""
    spec = setup.spec
    cost = setup.cost.exact([(spec.max_tokens, 0)], []) if setup.llm else \
        setup.cost.batch(spec.max_batch)
    return cost.energy_j / cost.seconds if cost.seconds else 0.0


def _prepare_on(spec: ServeSpec, platform: Platform, platform_source: Source, hf,
                ignore_capacity: bool, cost_cache: CostCache | None,
                trace: Trace | None, units: UnitCosts | None) -> Setup:
    """prepare on a platform already loaded (the spec resolved, its trace read)."""
    if not spec.llm and not spec.system.single_chip:
        raise AccsimError("multi-chip replicas serve LLMs (--model)", field="--chips")
    precision = ServingPrecision.load(spec.precision, platform) \
        if spec.precision is not None else None
    mapping, mapping_source = serving_plan(spec)
    if spec.arrival != "trace":
        trace = None
    if not spec.llm:
        workload, workload_source = load_model(locate(spec.workload, "workload"), Workload)
        cost = PlainBatchCost(platform, workload, file=workload_source.path,
                              mapping=mapping, precision=precision,
                              plan_file=mapping_source and mapping_source.path)
        reference = Inputs(platform, precision.apply(workload) if precision else workload,
                           mapping, platform_source, workload_source, mapping_source)
        check_plan(reference, [op.name for op in workload.operators],
                   served=workload.name)
        if precision is not None:
            precision.warn_unmatched(workload)
        fit = check(SystemPlan(), plain_sizing(reference.workload, platform), platform,
                    ignore=ignore_capacity, platform_file=platform_source.path)
        return Setup(spec, platform, platform_source, cost, None, reference, trace=trace,
                     capacity=fit,
                     precision=precision.record(workload) if precision else None,
                     precision_source=precision.source if precision else None)
    plan = spec.system
    element_bytes(spec, platform, platform_source.path)  # a packed format refused first
    if not plan.single_chip:  # each replica a T x P group: cost and KV of one chip
        hf = ShardedFrontend(hf or hf_frontend, plan, platform,
                             platform_file=platform_source.path)
    config, facts = llm_cost.load_model(spec.model, dtype=spec.dtype, hf=hf,
                                        platform=platform)
    check_context(config, spec, trace)
    share = stored_share(precision, config, spec, platform, hf)
    fit = replica_capacity(config, spec, trace, platform, platform_source.path,
                           ignore=ignore_capacity, share=share,
                           model_weight_bytes=facts.weight_bytes)
    if share is not None:  # the plan's weight and KV formats size the KV cache
        held = fit.footprint.weight_bytes if fit is not None and spec.system.pp > 1 \
            else share.weight_bytes(facts.weight_bytes)
        facts = replace(facts, weight_bytes=held,
                        kv_bytes_per_token=share.kv_bytes(facts.kv_bytes_per_token))
    tier = host_tier(platform, facts.kv_bytes_per_token, platform_source.path) \
        if spec.kv_host_tier else None
    blocks = llm_cost.kv_blocks(platform, facts, spec.block_tokens,
                                file=platform_source.path,
                                weights_elsewhere=fit is not None and fit.ignored)
    cost = llm_cost.LlmCost(platform, config, dtype=spec.dtype, bits=spec.bucket_bits,
                            hf=hf, cache=cost_cache or CostCache(user_folder()),
                            mapping=mapping, precision=precision,
                            plan_file=mapping_source and mapping_source.path, units=units)
    reference = Inputs(platform, cost.reference_workload(), mapping, platform_source,
                       mapping_source=mapping_source)
    check_plan(reference, cost.shared_names(), served=config.name)
    if precision is not None:
        precision.warn_unmatched(reference.workload)
    return Setup(spec, platform, platform_source, cost, blocks, reference,
                 _model_source(config, spec.model), trace, fit, cost.precision_record(),
                 precision.source if precision else None, tier)


def host_tier(platform: Platform, bytes_per_token: int, file: str) -> HostTier:
    """The host tier behind each chip's KV cache, over the platform's host link."""
    link = platform.runtime.host_link
    if link is None:
        raise AccsimError("the KV host tier moves blocks over runtime.host_link, which "
                          "this platform lacks", file=file, field="runtime.host_link")
    return HostTier(link.latency_us * 1e-6, link.bandwidth_gbps * 1e9, bytes_per_token)


def _prepare_pools(spec: ServeSpec, **options) -> Setup:
    """A disaggregated run's setup: each pool's (its T x P's cost model and KV cache),
    the decode pool's standing for the run, and the KV link checked now."""
    pools = {}
    for role in ROLES:
        pools[role] = prepare(pool_spec(spec, role), **options)
        options["trace"] = pools[role].trace
    setup = replace(pools["decode"], spec=spec, pools=pools)
    kv_link(setup, spec)
    return setup


def pool_setups(setup: Setup, spec: ServeSpec) -> dict[str, Setup]:
    """Each pool's setup: prepared apart (serve), or the setup's own where every pool
    shares its T x P (a deployment search's point)."""
    if setup.pools is not None:
        return setup.pools
    plan = (setup.spec.tp, setup.spec.pp)
    if any(pool_plan(spec, role) != plan for role in ROLES):
        raise AccsimError("the pools' T x P differ from the setup's: prepare the "
                          "disaggregated spec", field="disaggregate")
    return {role: replace(setup, spec=pool_spec(spec, role)) for role in ROLES}


def kv_link(setup: Setup, spec: ServeSpec) -> KvLink:
    """What moving a request's KV from the prefill pool to the decode pool costs: the
    whole model's KV bytes per token at the stored format (a precision plan's KV
    format where it gives one), over spec.disaggregate.kv_link (memoised on the
    setup)."""
    chips = {role: pool_plan(spec, role)[0] * pool_plan(spec, role)[1] for role in ROLES}
    key = (spec.disaggregate.kv_link, chips["prefill"], chips["decode"])
    if key not in setup.kv_links:
        config, facts = llm_cost.load_model(spec.model, dtype=spec.dtype,
                                            platform=setup.platform)
        share = stored_share(getattr(setup.cost, "precision", None), config, spec,
                             setup.platform, None)
        per_token = share.kv_bytes(facts.kv_bytes_per_token) if share is not None \
            else facts.kv_bytes_per_token
        setup.kv_links[key] = KvLink.checked(
            setup.platform, key[0], per_token, key[1], key[2],
            file=setup.platform_source.path)
    return setup.kv_links[key]


def element_bytes(spec: ServeSpec, platform: Platform, file: str | None = None) -> int:
    """Bytes of one weight or activation element: the spec's dtype, else the
    platform's first input dtype (as a sharded replica sizes its chips), a whole-byte
    format (a packed one refused, naming the platform `file` where it came from)."""
    return whole_bytes_of(spec.dtype, platform.systolic_array.input_dtypes, file=file)


def stored_share(precision: ServingPrecision | None, config, spec: ServeSpec,
                 platform: Platform, hf) -> StoredShare | None:
    """How a precision plan scales the weights and KV cache a replica stores (None
    without a plan), from one decode step of the whole model."""
    if precision is None:
        return None
    workload = (hf or hf_frontend).iteration_workload(config, prefill=[], decode=[1],
                                                      dtype=spec.dtype)
    return precision.stored_bytes(workload, element_bytes(spec, platform))


def replica_capacity(config, spec: ServeSpec, trace: Trace | None, platform: Platform,
                     platform_file: str, *, ignore: bool, share: StoredShare | None = None,
                     model_weight_bytes: int = 0) -> Capacity | None:
    """The capacity rule for one chip of a replica serving a Hugging Face model: its
    weight shard, the KV cache of the smallest request (prompt + output: at least one
    request must be servable; larger ones are dropped and counted) and one prefill
    chunk's activations (the prompt, at most max_tokens), the weights and KV at a
    precision plan's formats where `share` gives them (the model's weight bytes
    `model_weight_bytes`). None for a stand-in frontend's config, which serving's KV
    sizing alone checks."""
    if not isinstance(config, ModelConfig):
        return None
    if trace is None:
        prompt, total = spec.prompt_tokens, spec.prompt_tokens + spec.output_tokens
    else:
        sizes = trace.prompt_tokens + trace.output_tokens
        row = int(np.argmin(sizes))
        prompt, total = int(trace.prompt_tokens[row]), int(sizes[row])
    sizing = serving_sizing(config, platform, dtype=spec.dtype,
                            tokens=min(prompt, spec.max_tokens), kv_tokens=total,
                            platform_file=platform_file)
    if share is not None:
        plan = spec.system
        size = element_bytes(spec, platform, platform_file)
        stages = list(zip([params * size for params in stage_weight_params(config, plan)],
                          stage_layers(config.layers, plan.pp))) if plan.pp > 1 else None
        sizing = planned_sizing(sizing, share, model_weight_bytes, plan=plan,
                                stages=stages)
    return check(spec.system, sizing, platform, ignore=ignore, platform_file=platform_file)


def check_context(config, spec: ServeSpec, trace: Trace | None) -> None:
    """Every request's prompt and output fit the model's positions
    (max_position_embeddings), when the config gives them."""
    limit = getattr(config, "max_positions", None)
    if limit is None:
        return
    if trace is None:
        need = spec.prompt_tokens + spec.output_tokens
        if need > limit:
            raise AccsimError(f"a request of prompt_tokens {spec.prompt_tokens:,} + "
                              f"output_tokens {spec.output_tokens:,} = {need:,} tokens "
                              f"needs more positions than the model's "
                              f"max_position_embeddings {limit:,}", file=str(spec.model),
                              field="prompt_tokens")
        return
    need = trace.prompt_tokens + trace.output_tokens
    over = np.flatnonzero(need > limit)
    if over.size:
        row = int(over[0])
        raise AccsimError(f"prompt {trace.prompt_tokens[row]:,} + output "
                          f"{trace.output_tokens[row]:,} = {need[row]:,} tokens needs more "
                          f"positions than the max_position_embeddings {limit:,} of "
                          f"{spec.model} ({over.size:,} requests do)",
                          file=trace.source.path, field=f"line {trace.lines[row]}")


def _model_source(config, name_or_path: str) -> Source | None:
    """The file the model's config came from (the frontend names it, shipped or not)."""
    path = getattr(config, "source", None) or name_or_path
    return read_source(path) if Path(path).is_file() else None


def simulate_serving(setup: Setup, spec: ServeSpec, *,
                     progress: Progress | None = None) -> tuple[MetricsStore, Arrivals]:
    """Run the spec's arrivals through its replicas; the store holds what happened."""
    spec = spec.resolved()
    came = arrivals(spec, need_tokens=setup.llm, read=setup.trace)
    if spec.disaggregate is not None:
        return _simulate_pools(setup, spec, came, progress), came
    store = MetricsStore(spec.replicas, sample_limit=spec.error_samples if setup.llm else 0)
    allocator = KV_ALLOCATORS.get(spec.kv_allocator, field="kv_allocator")
    if setup.llm and came.prefix_ids is not None:  # the trace names shared prefixes
        store.prefix_cache = PrefixStats()
        allocator = partial(PrefixCachingKvCache, stats=store.prefix_cache)

    def make_kv():
        if not setup.llm:
            return None
        if setup.host_tier is not None:
            return allocator(setup.kv_blocks, spec.block_tokens, host=setup.host_tier)
        return allocator(setup.kv_blocks, spec.block_tokens)

    run_serving(spec, came, setup.cost, make_kv, llm=setup.llm, store=store,
                progress=progress)
    if isinstance(setup.cost, llm_cost.LlmCost):  # grid points for the next run
        setup.cost.save()
    return store, came


def _simulate_pools(setup: Setup, spec: ServeSpec, came: Arrivals,
                    progress: Progress | None) -> PoolStore:
    """A disaggregated run (simulator.serving.disaggregated); its iterations are not
    sampled for the bucketing error (two pools, two cost models)."""
    pools = pool_setups(setup, spec)
    store = PoolStore(pools["prefill"].spec.replicas, pools["decode"].spec.replicas)
    run_disaggregated(spec, {role: (pool.spec.resolved(), pool.cost, pool.kv_blocks,
                                    pool.host_tier) for role, pool in pools.items()},
                      came, kv_link(setup, spec), store, progress=progress)
    for pool in pools.values():
        pool.cost.save()
    return store


def summary(setup: Setup, spec: ServeSpec, store: MetricsStore, came: Arrivals) -> dict:
    """The result's figures (keys as `accsim serve --json` documents them)."""
    spec = spec.resolved()
    if spec.disaggregate is not None:
        pools = pool_setups(setup, spec)
        return pooled_summary(spec, {role: (pool.spec.resolved(),) for role, pool
                                     in pools.items()}, store, came,
                              {role: pool.platform for role, pool in pools.items()},
                              kv_link(setup, spec))
    times = RequestTimes.of(store.finished, tokens=setup.llm)
    horizon = store.horizon_s
    completed = len(store.finished)
    tokens = int(times.output_tokens.sum())
    busy = sum(store.busy_s)
    static_w = static_power_w(setup.platform)
    idle = max(0.0, spec.replicas * horizon - busy)
    energy = sum(store.energy_j) + idle * static_w
    per_second = (lambda count: count / horizon) if horizon > 0 else (lambda count: 0.0)
    figures = {
        "latency_ms": distribution(times.latency_s),
        "ttft_ms": distribution(times.ttft_s),
        "tpot_ms": distribution(times.tpot_s) if setup.llm else None,
        "service_ms": None if setup.llm else setup.cost.batch(1).seconds * 1e3,
        "throughput_rps": per_second(completed),
        "tokens_per_s": per_second(tokens) if setup.llm else None,
        "goodput_rps": goodput_rps(spec.sla, goodput_columns(times), horizon)
        if spec.sla else None,
        "utilization": busy / (spec.replicas * horizon) if horizon > 0 else 0.0,
        "energy_per_request_j": energy / completed if completed else None,
        "energy_per_token_j": energy / tokens if setup.llm and tokens else None,
        "requests": len(came),
        "completed": completed,
        "dropped": len(store.dropped),
        "preempted": store.preemptions,
    }
    if spec.kv_host_tier:  # absent without a host tier, as before it existed
        figures["swapped"] = store.swaps
    if store.prefix_cache is not None:  # absent unless the trace names prefixes
        figures["prefix_cache"] = store.prefix_cache.record()
    if spec.memory_tails:  # absent unless asked, as before it existed
        figures["memory_tails"] = memory_tails(store.finished)
    figures["sla"] = sla_report(spec.sla, figures)
    if setup.capacity is not None and setup.capacity.asked:
        figures["capacity"] = setup.capacity.record()
    if setup.power_cap is not None:  # absent uncapped, as before caps existed
        figures["power_cap"] = setup.power_cap
    if not spec.system.single_chip:
        figures["system"] = serving_system(spec.system, spec.replicas, figures,
                                           micro_batches=spec.micro_batches or spec.pp,
                                           bubble=store.pipeline_bubble_fraction(spec.pp))
    return figures


def bucketing(setup: Setup, store: MetricsStore) -> dict:
    """How far the memoised, bucketed iteration costs are from exact simulation."""
    if not setup.llm:
        return {"bits": None, "samples": 0, "mean_abs_error": 0.0, "max_abs_error": 0.0,
                "total_time_error": 0.0, "note": "plain batches are simulated exactly "
                "for each batch size"}
    report = llm_cost.bucketing_error(setup.cost, store.sample.shapes)
    setup.cost.save()  # the exact iterations, for the next run of the same sample
    return report


def serving_manifest(setup: Setup, spec: ServeSpec, came: Arrivals) -> dict:
    """`run`'s manifest for the reference run, plus the serving spec and the trace and
    model files with their sha256."""
    # the cost model's searches: the reference iteration's operators were searched there
    reference = simulate(setup.reference, searches=getattr(setup.cost, "searches", None))
    out = manifest(reference)
    out["serving"] = {
        "spec": spec.resolved().model_dump(mode="json"),
        "trace": {"path": came.source.path, "sha256": came.source.sha256}
        if came.source else None,
        "model": {"path": setup.model_source.path, "sha256": setup.model_source.sha256}
        if setup.model_source else None,
        "kv_blocks_per_replica": setup.kv_blocks,
    }
    if setup.precision_source is not None:  # absent without --precision
        source = setup.precision_source
        out["serving"]["precision"] = {"path": source.path, "sha256": source.sha256}
    source = setup.reference.mapping_source
    if source is not None:  # absent without --mapping
        out["serving"]["mapping"] = {"path": source.path, "sha256": source.sha256}
    return out


def serve(setup: Setup, spec: ServeSpec, *, progress: Progress | None = None
          ) -> tuple[dict, RequestTimes]:
    """The full result of one run (figures, bucketing error and manifest) and the
    per-request times behind it."""
    store, came = simulate_serving(setup, spec, progress=progress)
    result = {**summary(setup, spec, store, came), "bucketing": bucketing(setup, store),
              "manifest": serving_manifest(setup, spec, came)}
    if setup.precision is not None:  # absent without --precision, as before it existed
        result["precision"] = setup.precision
    return result, RequestTimes.of(store.finished, tokens=setup.llm)
