"""Arrival processes: when requests come and, for LLMs, how many tokens each carries.

Each process is registered by name and turns the spec and a seeded generator into the
arrival times (seconds, non-decreasing) and token counts of every request. Traces are
read by simulator.serving.arrival_trace. Whatever the process, at most MAX_REQUESTS requests
arrive, all within MAX_HORIZON_S (beyond it float64 seconds lose the microseconds a
latency is made of): a spec that asks for more is refused, not drawn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simulator.errors import AccsimError
from simulator.inputs.loader import Source
from simulator.serving.prefix_cache import check_prefix_options
from simulator.serving.registry import Registry
from simulator.serving.spec import MAX_HORIZON_S, MAX_REQUESTS
from simulator.serving.arrival_trace import Trace, load_trace


@dataclass(frozen=True)
class Arrivals:
    """Every request's arrival time and token counts, in arrival order."""

    times_s: np.ndarray        # float64, non-decreasing
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    source: Source | None = None   # the trace file, for the manifest
    prefix_tokens: np.ndarray | None = None  # int64: each prompt's cached prefix
    prefix_ids: np.ndarray | None = None   # int64: the trace's shared prefixes, with
    prefix_lens: np.ndarray | None = None  # their lengths (simulator.serving.prefix_cache)

    def __len__(self) -> int:
        return len(self.times_s)


def _limit(times: np.ndarray, requests: int | None, duration_s: float | None) -> int:
    """How many of the (sorted) times fall within the request count and duration."""
    count = len(times) if requests is None else min(requests, len(times))
    if duration_s is not None:
        count = min(count, int(np.searchsorted(times, duration_s, side="right")))
    return count


ARRIVALS: Registry = Registry("arrival process")


def _renewal(gaps, spec, rng: np.random.Generator) -> Arrivals:
    """Arrivals with independent gaps drawn by `gaps(rng, n)`: the first request comes
    after one gap. Token counts are the spec's fixed prompt and output lengths."""
    requests = spec.requests
    if requests is None:  # duration only: draw in chunks until past it
        drawn = []
        total, count = 0.0, 0
        chunk_size = int(max(16.0, min(MAX_REQUESTS, spec.rate * spec.duration_s / 4)))
        while total <= spec.duration_s:
            if count > MAX_REQUESTS:
                raise AccsimError(f"more than {MAX_REQUESTS:,} requests arrive within "
                                  f"{spec.duration_s:g} s at this rate; shorten it",
                                  field="duration_s")
            chunk = gaps(rng, chunk_size)
            drawn.append(chunk)
            total += float(chunk.sum())
            count += chunk_size
        times = np.cumsum(np.concatenate(drawn))
    else:
        times = np.cumsum(gaps(rng, requests))
    count = _limit(times, requests, spec.duration_s)
    times = times[:count]
    return Arrivals(times, np.full(count, spec.prompt_tokens, dtype=np.int64),
                    np.full(count, spec.output_tokens, dtype=np.int64))


@ARRIVALS.register("poisson")
def poisson(spec, rng: np.random.Generator, *, need_tokens: bool,
            read: Trace | None = None) -> Arrivals:
    """Exponential gaps of mean 1/rate."""
    return _renewal(lambda g, n: g.exponential(1.0 / spec.rate, n), spec, rng)


@ARRIVALS.register("gamma")
def gamma(spec, rng: np.random.Generator, *, need_tokens: bool,
          read: Trace | None = None) -> Arrivals:
    """Gamma gaps of mean 1/rate and coefficient of variation cv (shape 1/cv^2);
    cv = 1 is Poisson, cv < 1 smoother, cv > 1 burstier."""
    shape = 1.0 / spec.cv ** 2
    return _renewal(lambda g, n: g.gamma(shape, 1.0 / (spec.rate * shape), n), spec, rng)


@ARRIVALS.register("trace")
def trace(spec, rng: np.random.Generator, *, need_tokens: bool,
          read: Trace | None = None) -> Arrivals:
    """The trace's arrivals (`read`, else the file the spec names), scaled to mean
    `rate` if one is given, and repeated end to end (one mean gap apart) when more
    requests are asked for than it holds."""
    read = read or load_trace(spec.arrival_trace, need_tokens=need_tokens)
    times = read.times_s
    n = len(times)
    span = float(times[-1])
    if spec.rate is not None:
        if n < 2 or span <= 0:
            raise AccsimError("a trace needs two distinct arrival times to be scaled to "
                              "a rate", file=read.source.path, field="rate")
        scale = (n - 1) / span / spec.rate
        if not scale * span <= MAX_HORIZON_S:  # checked before the arrays are made
            raise AccsimError(f"scaled to {spec.rate:g} requests/s the trace would span "
                              f"{scale * span:.4g} s, beyond the {MAX_HORIZON_S:g} s a "
                              "run may simulate", file=read.source.path, field="rate")
        times = times * scale
        span = float(times[-1])
    wanted = spec.requests if spec.requests is not None else n
    copies = 1
    if spec.requests is not None and wanted > n:
        copies = -(-wanted // n)
    period = span + (span / (n - 1) if n > 1 else 1.0)
    tiled = (times[None, :] + period * np.arange(copies)[:, None]).ravel()
    count = _limit(tiled, wanted, spec.duration_s)

    def tokens(column, fixed):
        if column is None:
            return None if fixed is None else np.full(count, fixed, dtype=np.int64)
        return np.tile(column, copies)[:count]

    return Arrivals(tiled[:count], tokens(read.prompt_tokens, spec.prompt_tokens),
                    tokens(read.output_tokens, spec.output_tokens), read.source,
                    prefix_ids=tokens(read.prefix_ids, None),
                    prefix_lens=tokens(read.prefix_lens, None))


def prefix_hits(prompt_tokens: np.ndarray, hit_rate: float) -> np.ndarray:
    """Each prompt's tokens found in the prefix cache at a hit rate (the share of
    prompt tokens served from the cache, as vLLM counts it): the first
    floor(rate x prompt), at most all but the last token, whose logits give the first
    output token (a full hit recomputes it, as vLLM does)."""
    hits = np.floor(hit_rate * prompt_tokens.astype(np.float64)).astype(np.int64)
    return np.minimum(hits, prompt_tokens - 1)


def arrivals(spec, *, need_tokens: bool, read: Trace | None = None) -> Arrivals:
    """The arrivals the spec asks for, drawn from a generator seeded by spec.seed (a
    trace already read may be passed as `read`, which trace arrivals use and the
    others ignore); refused if they end after MAX_HORIZON_S."""
    rng = np.random.default_rng(spec.seed)
    process = ARRIVALS.get(spec.arrival, field="arrival")
    came = process(spec, rng, need_tokens=need_tokens, read=read)
    check_prefix_options(spec, came.prefix_ids is not None,
                         came.source.path if came.source else None)
    if getattr(spec, "prefix_hit_rate", None):
        came = replace(came, prefix_tokens=prefix_hits(came.prompt_tokens,
                                                       spec.prefix_hit_rate))
    if not len(came):
        raise AccsimError(f"no request arrives within duration_s {spec.duration_s:g} s "
                          f"at {spec.rate:g} requests/s", field="duration_s")
    last = float(came.times_s[-1])
    if not last <= MAX_HORIZON_S:  # NaN fails too
        raise AccsimError(f"the arrivals span {last:.4g} s, beyond the {MAX_HORIZON_S:g} s "
                          "a run may simulate: raise the rate or ask for fewer requests",
                          file=came.source.path if came.source else None, field="rate")
    return came
