"""Arrival processes: when requests come and, for LLMs, how many tokens each carries.

Each process is registered by name and turns the spec and a seeded generator into the
arrival times (seconds, non-decreasing) and token counts of every request. Traces are
CSV files (a shipped name or a path) with an arrival-time column in seconds and, for
LLMs, prompt and output token columns.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import AccsimError
from simulator.loader import Source, read_source, shipped_folder
from simulator.serving.spec import MAX_TOKENS
from simulator.serving.registry import Registry

# Accepted column names, first the ones used by the shipped trace (Vidur's spelling).
ARRIVAL_COLUMNS = ("arrived_at", "arrival_s")
PROMPT_COLUMNS = ("num_prefill_tokens", "prompt_tokens")
OUTPUT_COLUMNS = ("num_decode_tokens", "output_tokens")


@dataclass(frozen=True)
class Arrivals:
    """Every request's arrival time and token counts, in arrival order."""

    times_s: np.ndarray        # float64, non-decreasing
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    source: Source | None = None   # the trace file, for the manifest

    def __len__(self) -> int:
        return len(self.times_s)


@dataclass(frozen=True)
class Trace:
    """A trace file as read: times relative to its first arrival, tokens if present."""

    times_s: np.ndarray
    prompt_tokens: np.ndarray | None
    output_tokens: np.ndarray | None
    source: Source


def shipped_traces() -> list[str]:
    """Names of the traces shipped with the package."""
    folder = shipped_folder("workload") / "traces"
    return sorted(p.name.removesuffix(".csv") for p in folder.iterdir()
                  if p.name.endswith(".csv"))


def trace_path(name_or_path: str) -> Path:
    """A path as given if it exists or looks like one, else the shipped trace."""
    path = Path(name_or_path)
    if path.exists() or path.suffix == ".csv" or "/" in name_or_path:
        return path
    if name_or_path in shipped_traces():
        return Path(str(shipped_folder("workload") / "traces" / f"{name_or_path}.csv"))
    raise AccsimError(f"no such file, and no shipped trace of that name (shipped: "
                      f"{', '.join(shipped_traces())})", file=name_or_path,
                      field="arrival_trace")


def _column(header: list[str], names: tuple[str, ...]) -> int | None:
    return next((header.index(n) for n in names if n in header), None)


def load_trace(name_or_path: str, *, need_tokens: bool) -> Trace:
    """Read and check a trace: times finite, >= 0 and non-decreasing; token counts
    positive integers; the token columns required when `need_tokens`."""
    source = read_source(trace_path(name_or_path))
    rows = list(csv.reader(io.StringIO(source.text)))
    if not rows:
        raise AccsimError("empty trace (expected a header row)", file=source.path)
    header = [h.strip() for h in rows[0]]
    columns = {"arrival": _column(header, ARRIVAL_COLUMNS),
               "prompt": _column(header, PROMPT_COLUMNS),
               "output": _column(header, OUTPUT_COLUMNS)}
    wanted = {"arrival": ARRIVAL_COLUMNS, "prompt": PROMPT_COLUMNS,
              "output": OUTPUT_COLUMNS}
    for role in ("arrival", "prompt", "output") if need_tokens else ("arrival",):
        if columns[role] is None:
            raise AccsimError(f"missing column: one of {', '.join(wanted[role])} "
                              f"(header has {', '.join(header) or 'nothing'})",
                              file=source.path, field=role)
    body = rows[1:]
    if not body:
        raise AccsimError("no requests after the header", file=source.path)
    values: dict[str, list] = {role: [] for role, index in columns.items()
                               if index is not None}
    for line, row in enumerate(body, start=2):
        for role in values:
            text = row[columns[role]].strip() if columns[role] < len(row) else ""
            field = f"line {line}, {header[columns[role]]}"
            if role == "arrival":
                values[role].append(_time(text, source.path, field))
            else:
                values[role].append(_tokens(text, source.path, field))
    times = np.asarray(values["arrival"], dtype=np.float64)
    backwards = np.flatnonzero(np.diff(times) < 0)
    if backwards.size:
        line = int(backwards[0]) + 3
        raise AccsimError(f"arrival times must not decrease ({times[backwards[0] + 1]!r} "
                          f"after {times[backwards[0]]!r})", file=source.path,
                          field=f"line {line}, {header[columns['arrival']]}")
    tokens = {role: np.asarray(values[role], dtype=np.int64) if role in values else None
              for role in ("prompt", "output")}
    return Trace(times - times[0], tokens["prompt"], tokens["output"], source)


def _time(text: str, file: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise AccsimError(f"not a number: {text!r}", file=file, field=field) from None
    if not math.isfinite(value) or value < 0:
        raise AccsimError(f"arrival time must be finite and >= 0, got {text}", file=file,
                          field=field)
    return value


def _tokens(text: str, file: str, field: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise AccsimError(f"not an integer: {text!r}", file=file, field=field) from None
    if not 1 <= value <= MAX_TOKENS:
        raise AccsimError(f"token count must be >= 1 and <= {MAX_TOKENS:,}, got {value:,}",
                          file=file, field=field)
    return value


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
        total = 0.0
        while total <= spec.duration_s:
            chunk = gaps(rng, max(16, int(spec.rate * spec.duration_s / 4)))
            drawn.append(chunk)
            total += float(chunk.sum())
        times = np.cumsum(np.concatenate(drawn))
    else:
        times = np.cumsum(gaps(rng, requests))
    count = _limit(times, requests, spec.duration_s)
    times = times[:count]
    return Arrivals(times, np.full(count, spec.prompt_tokens, dtype=np.int64),
                    np.full(count, spec.output_tokens, dtype=np.int64))


@ARRIVALS.register("poisson")
def poisson(spec, rng: np.random.Generator, *, need_tokens: bool) -> Arrivals:
    """Exponential gaps of mean 1/rate."""
    return _renewal(lambda g, n: g.exponential(1.0 / spec.rate, n), spec, rng)


@ARRIVALS.register("gamma")
def gamma(spec, rng: np.random.Generator, *, need_tokens: bool) -> Arrivals:
    """Gamma gaps of mean 1/rate and coefficient of variation cv (shape 1/cv^2);
    cv = 1 is Poisson, cv < 1 smoother, cv > 1 burstier."""
    shape = 1.0 / spec.cv ** 2
    return _renewal(lambda g, n: g.gamma(shape, 1.0 / (spec.rate * shape), n), spec, rng)


@ARRIVALS.register("trace")
def trace(spec, rng: np.random.Generator, *, need_tokens: bool) -> Arrivals:
    """The trace's arrivals, scaled to mean `rate` if one is given, and repeated end to
    end (one mean gap apart) when more requests are asked for than it holds."""
    read = load_trace(spec.arrival_trace, need_tokens=need_tokens)
    times = read.times_s
    n = len(times)
    span = float(times[-1])
    if spec.rate is not None:
        if n < 2 or span <= 0:
            raise AccsimError("a trace needs two distinct arrival times to be scaled to "
                              "a rate", file=read.source.path, field="rate")
        times = times * ((n - 1) / span / spec.rate)
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
            return np.full(count, fixed, dtype=np.int64)
        return np.tile(column, copies)[:count]

    return Arrivals(tiled[:count], tokens(read.prompt_tokens, spec.prompt_tokens),
                    tokens(read.output_tokens, spec.output_tokens), read.source)


def arrivals(spec, *, need_tokens: bool) -> Arrivals:
    """The arrivals the spec asks for, drawn from a generator seeded by spec.seed."""
    rng = np.random.default_rng(spec.seed)
    return ARRIVALS.get(spec.arrival, field="arrival")(spec, rng, need_tokens=need_tokens)
