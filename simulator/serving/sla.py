"""Service-level targets: `<metric>_<statistic>_ms` ceilings such as ttft_p99_ms=500.

A run meets the SLA when every named statistic is at or under its ceiling. Goodput
counts the requests that individually meet every ceiling (their own latency, TTFT and
TPOT at or under each target of that metric), per second.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.errors import AccsimError
from simulator.numbers import decimal_float
from simulator.serving.metrics import PERCENTILES, RequestTimes

METRICS = ("latency", "ttft", "tpot")
STATISTICS = tuple(f"p{p}" for p in PERCENTILES) + ("mean", "max")
SLA_KEYS = tuple(f"{m}_{s}_ms" for m in METRICS for s in STATISTICS)


def check_sla(targets: dict[str, float], *, field: str = "sla") -> dict[str, float]:
    """The targets if every key is known and every ceiling finite and > 0."""
    for key, value in targets.items():
        if key not in SLA_KEYS:
            raise AccsimError(f"unknown SLA key {key!r} (known: <metric>_<statistic>_ms "
                              f"with metric one of {', '.join(METRICS)} and statistic one "
                              f"of {', '.join(STATISTICS)}, e.g. ttft_p99_ms)", field=field)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value <= 0:
            raise AccsimError(f"SLA target {key} must be a finite number > 0, got "
                              f"{value!r}", field=field)
    return {key: float(value) for key, value in targets.items()}


def parse_sla(text: str) -> dict[str, float]:
    """'ttft_p99_ms=500,tpot_p99_ms=50' -> targets (checked)."""
    targets: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise AccsimError(f"expected KEY=VALUE, got {part!r}", field="--sla")
        if key.strip() in targets:
            raise AccsimError(f"{key.strip()} is given twice", field="--sla")
        text = value.strip()
        # Only ASCII decimals (float() also takes '1_000' and other scripts' digits);
        # inf and nan are read as numbers for check_sla to refuse as ceilings.
        try:
            targets[key.strip()] = decimal_float(text, specials=True)
        except ValueError:
            raise AccsimError(f"{key.strip()}: not a number: {value.strip()!r} (ASCII "
                              "digits, point and exponent only)", field="--sla") from None
    return check_sla(targets, field="--sla")


def split_key(key: str) -> tuple[str, str]:
    metric, statistic, _ = key.rsplit("_", 2)
    return metric, statistic


def sla_report(targets: dict[str, float], summary: dict) -> dict | None:
    """Each target with the run's value and whether it is met; None without targets.
    A statistic the run does not have (TPOT of a plain workload) is not met."""
    if not targets:
        return None
    checks = {}
    for key, ceiling in targets.items():
        metric, statistic = split_key(key)
        stats = summary.get(f"{metric}_ms")
        value = None if stats is None else stats[statistic]
        checks[key] = {"target": ceiling, "value": value,
                       "met": value is not None and value <= ceiling}
    return {"met": all(c["met"] for c in checks.values()), "targets": checks}


def goodput_columns(times: RequestTimes) -> dict[str, np.ndarray]:
    """Per completed request, what goodput judges: its latency, TTFT and TPOT (0 for a
    request with one output token: it has no TPOT, and passes every target, all > 0)."""
    tpot = np.zeros(times.latency_s.size)
    tpot[times.tpot_index] = times.tpot_s
    return {"latency": times.latency_s, "ttft": times.ttft_s, "tpot": tpot}


def good_requests(targets: dict[str, float], columns: dict[str, np.ndarray]) -> int:
    """Completed requests (goodput_columns) whose own latency, TTFT and TPOT meet every
    target."""
    good = np.ones(columns["latency"].size, dtype=bool)
    for key, ceiling in targets.items():
        metric, _ = split_key(key)
        good &= columns[metric] <= ceiling / 1e3
    return int(good.sum())


def goodput_rps(targets: dict[str, float], columns: dict[str, np.ndarray],
                horizon_s: float) -> float:
    """Good requests per second of a run lasting horizon_s."""
    return good_requests(targets, columns) / horizon_s if horizon_s > 0 else 0.0
