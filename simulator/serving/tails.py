"""Where the tail's time went (DESIGN.md section 20, memory tails): each finished
request's latency and time to first token split by cause, and each cause's share of
the requests at or above a percentile.

Causes, per request (they add up to the figure they split):
- kv_wait: its first wait in the queue while the head of the queue could not get KV
  blocks (the cache full: admission stopped on memory, not on the batch limit);
- queue: the rest of that first wait (batch full, token budget spent, batch filling);
- preemption: from each preemption until its lost prefill was recomputed (the wait to
  be admitted again and the recompute), before the first token for TTFT;
- service: the rest: iterations it ran in (its own prefill and decode, sharing each
  iteration with the batch).

The share of a cause at percentile p is its seconds summed over the requests whose
figure is at or above the figure's p-th percentile, over their figure summed: what the
slow requests' time was made of, so a p99 dominated by preemptions says so.
"""

from __future__ import annotations

import numpy as np

from simulator.serving.metrics import PERCENTILES
from simulator.serving.requests import Request

CAUSES = ("kv_wait", "queue", "preemption", "service")


def request_causes(done: list[Request], *, first_token: bool) -> np.ndarray:
    """Seconds per cause (columns in CAUSES order), one row per request, splitting its
    latency (or, with `first_token`, its time to first token)."""
    causes = np.zeros((len(done), len(CAUSES)))
    for row, r in enumerate(done):
        end = r.first_token_s if first_token and r.first_token_s is not None \
            else r.finish_s
        admitted = r.admitted_s if r.admitted_s is not None else end
        waited = admitted - r.arrival_s
        preempted = r.preemption_before_first_s if first_token else r.preemption_s
        causes[row, :3] = r.kv_wait_s, waited - r.kv_wait_s, preempted
        causes[row, 3] = (end - r.arrival_s) - causes[row, :3].sum()
    return causes


def tail_shares(figure_s: np.ndarray, causes: np.ndarray) -> dict[str, dict[str, float]]:
    """{"p50": {cause: share}, ...}: each cause's share of the requests at or above
    each percentile of `figure_s` (one row of `causes` per request)."""
    if figure_s.size == 0:
        return {}
    shares = {}
    for p, bound in zip(PERCENTILES, np.percentile(figure_s, PERCENTILES)):
        tail = figure_s >= bound
        total = float(figure_s[tail].sum())
        spent = causes[tail].sum(axis=0)
        shares[f"p{p}"] = {cause: float(max(0.0, s) / total) if total > 0 else 0.0
                           for cause, s in zip(CAUSES, spent)}
    return shares


def latency_causes(finished: list[Request], *, tokens: bool) -> dict[str, dict]:
    """The result's `latency_causes` block: per figure (latency, and TTFT for LLMs),
    each percentile's shares by cause."""
    done = sorted(finished, key=lambda r: r.id)
    arrival = np.array([r.arrival_s for r in done])
    out = {"latency": tail_shares(np.array([r.finish_s for r in done]) - arrival,
                                  request_causes(done, first_token=False))}
    if tokens:
        out["ttft"] = tail_shares(np.array([r.first_token_s for r in done]) - arrival,
                                  request_causes(done, first_token=True))
    return out
