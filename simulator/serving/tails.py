"""Memory tails (DESIGN.md section 20): per request, the time lost to the KV cache,
and what share of each latency percentile it makes.

Per request, in disjoint parts of its latency:
- queue: from arrival to its first admission, less the KV wait below;
- KV queue: time in its replica's queue while admission there was stopped for want
  of KV blocks (the head refused them: every request behind it waits on memory too),
  outside a preemption (that time is the preemption's);
- preemption: from a preemption by recompute to the end of the recompute's prefill;
- swap: from a preemption whose KV went to host memory (--kv-host-tier) to its KV
  being back (the move in included).
The schedulers mark the moments (KvBlockedClock.set, on_enqueued, on_admitted,
on_preempted, on_recovered);
`memory_tails` reads them after the run. A latency percentile's shares are those of
the requests in its tail (latency at or above it): each cause's seconds summed over
them, over their latencies summed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.serving.requests import Request

TAIL_PERCENTILES = (50, 95, 99)
CAUSES = ("queue", "kv_queue", "preemption", "swap")
MEMORY_CAUSES = CAUSES[1:]   # the time lost because KV memory ran short


@dataclass
class KvBlockedClock:
    """Seconds a replica's admission has been stopped for want of KV blocks: a waiting
    request's KV queueing is how far this clock ran while it waited."""

    since: float | None = None
    seconds: float = 0.0

    def at(self, now: float) -> float:
        return self.seconds + (now - self.since if self.since is not None else 0.0)

    def set(self, now: float, blocked: bool) -> None:
        """Admission is stopped on KV blocks (True) or not, from `now` on."""
        if blocked and self.since is None:
            self.since = now
        elif not blocked and self.since is not None:
            self.seconds += now - self.since
            self.since = None


def on_enqueued(request: Request, clock: KvBlockedClock, now: float) -> None:
    """The request joins a replica's queue: its KV queueing counts from here."""
    request.kv_mark = clock.at(now)


def on_admitted(request: Request, clock: KvBlockedClock, now: float) -> None:
    """The request got its KV blocks and runs from now."""
    if request.lost_since is None:  # a preempted request's wait is its preemption's
        waited = clock.at(now) - request.kv_mark
        request.kv_wait_s += waited
        if request.admitted_s is None:
            request.kv_wait_first_s = waited
    if request.admitted_s is None:
        request.admitted_s = now


def on_preempted(request: Request, now: float) -> None:
    request.lost_since = now


def on_recovered(request: Request, now: float, *, swapped: bool) -> None:
    """The request is back where it was when preempted (its KV recomputed, or back in
    from host memory) at `now`."""
    if request.lost_since is None:
        return
    lost = now - request.lost_since
    if swapped:
        request.swap_lost_s += lost
    else:
        request.preempt_lost_s += lost
    request.lost_since = None


def cause_seconds(finished: list[Request]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Latency and each cause's seconds per finished request (in id order)."""
    done = sorted(finished, key=lambda r: r.id)
    latency = np.array([r.finish_s - r.arrival_s for r in done])
    admitted = np.array([r.arrival_s if r.admitted_s is None else r.admitted_s
                         for r in done])
    arrival = np.array([r.arrival_s for r in done])
    first_wait = np.array([r.kv_wait_first_s for r in done])
    return latency, {
        "queue": np.maximum(0.0, admitted - arrival - first_wait),
        "kv_queue": np.array([r.kv_wait_s for r in done]),
        "preemption": np.array([r.preempt_lost_s for r in done]),
        "swap": np.array([r.swap_lost_s for r in done])}


def memory_tails(finished: list[Request]) -> dict | None:
    """Per latency percentile (p50, p95, p99): its value (ms) and the share of its
    tail's latency each cause holds; and per cause, the requests it touched and its
    seconds in all. None without finished requests."""
    if not finished:
        return None
    latency, causes = cause_seconds(finished)
    out: dict = {"causes": {name: {"requests": int(np.count_nonzero(seconds)),
                                   "seconds": float(seconds.sum())}
                            for name, seconds in causes.items()}}
    for p in TAIL_PERCENTILES:
        cut = float(np.percentile(latency, p))
        tail = latency >= cut
        total = float(latency[tail].sum())
        out[f"p{p}"] = {"latency_ms": cut * 1e3, "requests": int(tail.sum()),
                        **{name: float(seconds[tail].sum()) / total if total > 0 else 0.0
                           for name, seconds in causes.items()}}
    return out
