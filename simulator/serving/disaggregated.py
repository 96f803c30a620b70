"""Disaggregated serving (DESIGN.md section 20; Splitwise, DistServe): a prefill pool
computes each prompt's KV cache and first token, the KV moves over a link to a decode
pool, and the decode pool produces the rest. TTFT ends when the KV has arrived (the
first token leaves with it); TPOT is the decode pool's.

The move: a request's KV is the prompt's tokens x the model's KV bytes per token,
sharded over the prefill replica's chips; each of min(prefill chips, decode chips)
chip pairs sends its share at once, priced by the one home of interconnect transfers
(simulator.collectives.cost, point to point), or over the host link (out to host memory
and back in, each latency + bytes / bandwidth). A prefill replica's moves leave one
after another (its links are one server, first come first served, held for each
move's bytes; the fixed latencies overlap); the decode side takes them as they land. A request of one output token has nothing to decode: it
finishes in the prefill pool and moves nothing.

Both pools batch continuously; a decode replica admits a request whose KV has arrived
straight into its decoding set (simulator.serving.schedulers), and preempts and
recomputes there, as a co-located replica, when its KV cache runs out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import simpy

from simulator.collectives.cost import collective_cost
from simulator.errors import AccsimError
from simulator.inputs.platform import Platform
from simulator.metrics.energy import static_power_w
from simulator.serving.arrivals import Arrivals
from simulator.serving.engine import (Progress, arriving, at, check_all_done,
                                      make_replicas, make_router, reporter)
from simulator.serving.kv_cache import KV_ALLOCATORS, blocks_for
from simulator.serving.metrics import MetricsStore, RequestTimes, distribution
from simulator.serving.pools import ROLES
from simulator.serving.requests import Request
from simulator.serving.schedulers import ContinuousBatching
from simulator.serving.sla import goodput_columns, goodput_rps, sla_report
from simulator.serving.tails import memory_tails, on_enqueued


@dataclass(frozen=True)
class KvLink:
    """What moving one request's KV costs: the link, the model's KV bytes per token
    (every layer and KV head, at the stored format) and the chips on each side."""

    platform: Platform
    kind: str                 # "interconnect" or "host"
    kv_bytes_per_token: int
    pairs: int                # chip pairs sending at once: min(prefill, decode chips)
    memo: dict = field(default_factory=dict, compare=False)

    @classmethod
    def checked(cls, platform: Platform, kind: str, kv_bytes_per_token: int,
                prefill_chips: int, decode_chips: int, *, file: str | None = None
                ) -> KvLink:
        """The link, refused with the platform field it needs where the platform
        lacks it."""
        if kind == "interconnect" and platform.interconnect is None:
            raise AccsimError("disaggregated serving moves the KV cache over the "
                              "interconnect, which this platform lacks: give it an "
                              "interconnect table, or --kv-link host with a "
                              "runtime.host_link", file=file, field="interconnect")
        if kind == "host" and platform.runtime.host_link is None:
            raise AccsimError("--kv-link host moves the KV cache through host memory "
                              "over runtime.host_link, which this platform lacks",
                              file=file, field="runtime.host_link")
        return cls(platform, kind, kv_bytes_per_token, min(prefill_chips, decode_chips))

    def move(self, tokens: int) -> tuple[int, float, float, float]:
        """(bytes, seconds, seconds the link is held, joules) of moving `tokens`
        tokens of KV."""
        found = self.memo.get(tokens)
        if found is None:
            found = self.memo[tokens] = self._price(tokens)
        return found

    def _price(self, tokens: int) -> tuple[int, float, float, float]:
        """A move's time, and the part of it the link is held: what its bytes add to
        the time of one byte (the fixed and hop latencies of one move overlap the next
        one's bytes, as DMA transfers in flight do)."""
        total = tokens * self.kv_bytes_per_token
        share = -(-total // self.pairs)  # each chip pair's bytes
        if self.kind == "host":
            link = self.platform.runtime.host_link
            wire = share / (link.bandwidth_gbps * 1e9)
            # out to host memory and back in; the host link has no energy figure
            return total, 2 * (link.latency_us * 1e-6 + wire), 2 * wire, 0.0
        cost = collective_cost("point_to_point", share, 2, self.platform)
        floor = collective_cost("point_to_point", 1, 2, self.platform).time_s
        return total, cost.time_s, max(0.0, cost.time_s - floor), \
            cost.energy_j_per_chip * self.pairs


@dataclass
class Moves:
    """Every KV move of a run: per request (by id) when its prefill ended, when its
    move started (after the moves ahead of it on the link) and ended; the bytes and
    link energy in all."""

    prefilled_s: dict[int, float] = field(default_factory=dict)
    started_s: dict[int, float] = field(default_factory=dict)
    arrived_s: dict[int, float] = field(default_factory=dict)
    bytes: int = 0
    energy_j: float = 0.0


class PoolStore(MetricsStore):
    """A disaggregated run's store: prefill replicas first, then decode replicas,
    and the KV moves."""

    def __init__(self, prefill: int, decode: int, *, sample_limit: int = 0):
        super().__init__(prefill + decode, sample_limit=sample_limit)
        self.pools = {"prefill": range(prefill), "decode": range(prefill, prefill + decode)}
        self.moves = Moves()


class PrefillScheduler(ContinuousBatching):
    """A prefill pool's replica: continuous batching whose requests leave once their
    prompt is prefilled (their KV blocks freed) for `handoff`; a request's KV must fit
    a decode replica's cache (`decode_blocks`) as well as its prompt this one's."""

    handoff: Callable[[Request, float, int], None]
    decode_blocks: int

    def enqueue(self, request: Request, now: float) -> None:
        if blocks_for(request.prompt_tokens, self.kv.block_tokens) > self.kv.total_blocks \
                or blocks_for(request.max_kv_tokens, self.kv.block_tokens) \
                > self.decode_blocks:
            self.store.on_drop(request, now)  # never fits one pool or the other
            return
        request.prefill_target = request.prompt_tokens
        request.prefilled = request.prefix_tokens
        on_enqueued(request, self.kv_clock, now)
        self.waiting.append(request)

    def commit(self, plan, done: int) -> None:
        super().commit(plan, done)
        if self.decoding:  # prefilled this time, output still to come: they leave
            moved, self.decoding = self.decoding, []
            end = plan.end(done - 1)
            for request in moved:
                self.kv.release(request)
                self.handoff(request, end, self.index)


def run_disaggregated(spec, pools: dict, arrivals: Arrivals, link: KvLink,
                      store: PoolStore, *, progress: Progress | None = None) -> None:
    """Serve every arrival: prefill pool, KV move, decode pool. `pools`: role -> (the
    pool's spec, its cost model, its KV blocks per replica, its host tier or None;
    the prefill pool never preempts)."""
    env = simpy.Environment()
    total = len(arrivals)
    report = reporter(store, total, progress)
    prefill_spec, prefill_cost, prefill_blocks, _ = pools["prefill"]
    decode_spec, decode_cost, decode_blocks, decode_tier = pools["decode"]
    moves = store.moves
    link_free = [0.0] * prefill_spec.replicas

    def kv(blocks: int, tier=None) -> Callable[[], object]:
        allocator = KV_ALLOCATORS.get(spec.kv_allocator, field="kv_allocator")
        return lambda: allocator(blocks, spec.block_tokens, host=tier)

    prefill = make_replicas(env, prefill_spec, PrefillScheduler, prefill_cost,
                            make_kv=kv(prefill_blocks), store=store, report=report,
                            llm=True)
    decode = make_replicas(env, decode_spec, ContinuousBatching, decode_cost,
                           make_kv=kv(decode_blocks, decode_tier), store=store,
                           report=report, llm=True, first=prefill_spec.replicas)
    decode_router = make_router(spec.routing, decode)
    shared = getattr(decode_router, "shared", False)

    def deliver(request: Request) -> None:
        target = decode[decode_router.pick(decode)]
        target.scheduler.enqueue(request, env.now)
        for replica in decode if shared else (target,):
            replica.wake()

    def handoff(request: Request, end: float, replica: int) -> None:
        nbytes, seconds, held, energy = link.move(request.kv_tokens)
        start = max(end, link_free[replica])
        link_free[replica] = start + held
        arrive = start + seconds
        moves.prefilled_s[request.id] = end
        moves.started_s[request.id] = start
        moves.arrived_s[request.id] = arrive
        moves.bytes += nbytes
        moves.energy_j += energy
        request.first_token_s = arrive  # the first token leaves with its KV
        landed = at(env, arrive)
        landed.callbacks.append(lambda _: deliver(request))

    for replica in prefill:
        for lane in getattr(replica, "lanes", [replica.scheduler]):
            lane.handoff, lane.decode_blocks = handoff, decode_blocks
    env.process(arriving(env, arrivals, make_router(spec.routing, prefill), prefill,
                          store))
    for each in prefill + decode:
        each.start()
    env.run()
    check_all_done(store, total, "continuous")
    if progress:
        progress(total, total)


def _pool_figures(store: PoolStore, role: str, spec, horizon: float) -> dict:
    indices = store.pools[role]
    busy = sum(store.busy_s[i] for i in indices)
    return {"replicas": spec.replicas, "tp": spec.tp, "pp": spec.pp,
            "chips": spec.replicas * spec.tp * spec.pp, "max_batch": spec.max_batch,
            "max_tokens": spec.max_tokens,
            "utilization": busy / (spec.replicas * horizon) if horizon > 0 else 0.0,
            "iterations": sum(store.iterations[i] for i in indices)}


def pooled_summary(spec, pools: dict, store: PoolStore, came: Arrivals,
                   platforms: dict[str, Platform], link: KvLink) -> dict:
    """The figures of a disaggregated run, keyed as serve's summary, plus
    `disaggregated`: each pool's figures (prefill: TTFT to its prefill's end; decode:
    TPOT) and the KV moves (requests, bytes, time from the prefill's end to the KV's
    arrival, and the part of it spent waiting for the link). Energy is
    the whole system's (every chip of both pools, idle chips at their static power,
    and the link's)."""
    times = RequestTimes.of(store.finished, tokens=True)
    horizon = store.horizon_s
    completed = len(store.finished)
    tokens = int(times.output_tokens.sum())
    energy, busy, replicas = store.moves.energy_j, 0.0, 0
    for role in ROLES:
        pool_spec = pools[role][0]
        chips = pool_spec.tp * pool_spec.pp
        indices = store.pools[role]
        pool_busy = sum(store.busy_s[i] for i in indices)
        idle = max(0.0, pool_spec.replicas * horizon - pool_busy)
        energy += chips * (sum(store.energy_j[i] for i in indices)
                           + idle * static_power_w(platforms[role]))
        busy += pool_busy
        replicas += pool_spec.replicas
    per_second = (lambda count: count / horizon) if horizon > 0 else (lambda count: 0.0)
    moves = store.moves
    moved = sorted(moves.arrived_s)
    arrival = {r.id: r.arrival_s for r in store.finished}
    done = [i for i in moved if i in arrival]
    prefill_ttft = np.array([moves.prefilled_s[i] - arrival[i] for i in done])
    link_s = np.array([moves.arrived_s[i] - moves.prefilled_s[i] for i in done])
    figures = {
        "latency_ms": distribution(times.latency_s),
        "ttft_ms": distribution(times.ttft_s),
        "tpot_ms": distribution(times.tpot_s),
        "service_ms": None,
        "throughput_rps": per_second(completed),
        "tokens_per_s": per_second(tokens),
        "goodput_rps": goodput_rps(spec.sla, goodput_columns(times), horizon)
        if spec.sla else None,
        "utilization": busy / (replicas * horizon) if horizon > 0 else 0.0,
        "energy_per_request_j": energy / completed if completed else None,
        "energy_per_token_j": energy / tokens if tokens else None,
        "requests": len(came),
        "completed": completed,
        "dropped": len(store.dropped),
        "preempted": store.preemptions,
        **({"swapped": store.swaps} if spec.kv_host_tier else {}),
        **({"memory_tails": memory_tails(store.finished)} if spec.memory_tails else {}),
        "disaggregated": {
            "energy_scope": "system",
            "prefill": {**_pool_figures(store, "prefill", pools["prefill"][0], horizon),
                        "ttft_ms": distribution(prefill_ttft)},
            "decode": {**_pool_figures(store, "decode", pools["decode"][0], horizon),
                       "tpot_ms": distribution(times.tpot_s)},
            "kv_transfer": {
                "link": link.kind, "requests": len(moved), "bytes": moves.bytes,
                "kv_bytes_per_token": link.kv_bytes_per_token,
                "chip_pairs": link.pairs, "energy_j": moves.energy_j,
                "ms": distribution(link_s),
                "wait_ms": distribution(np.array(
                    [moves.started_s[i] - moves.prefilled_s[i] for i in done]))}},
    }
    figures["sla"] = sla_report(spec.sla, figures)
    return figures
