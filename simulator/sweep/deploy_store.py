"""Deployment points in the sweep store (simulator.sweep.store): table `deployments`,
one row per point keyed by the sha256 of its inputs (simulator.sweep.deploy_identity.point_key),
written in its own transaction as the task searching it (the points of one plan)
returns; table `serving_runs`, one row per (point, offered rate) run of its SLA
search keyed likewise (simulator.sweep.deploy_runs), so a search whose SLA changed
simulates only the rates it lacks; table `iteration_bounds`, the roofline bound of a
plan's batch-1 decode step or prefill (simulator.sweep.deploy.stored_bound), which
pruning compares with the SLA. A search killed at any moment resumes with every
finished point read back and none computed twice; the iteration costs its points
simulated are kept in a cost cache folder beside the store
(simulator.serving.cost_cache), so a search that differs only in its SLA recomputes
no iteration shape. Only the process that opened the store reads and writes it: a
task searching points in another process takes their stored runs with it as data
and hands the runs it simulates back to be stored.

The table sits beside the sweep tables of the same file (their layout is unchanged; a
sweep report ignores it). A row read back is untrusted: one whose key is not the hash
of its inputs or whose outcome is not an object of a known status is an error naming
the row."""

from __future__ import annotations

import json
import math
from pathlib import Path

from simulator.errors import AccsimError
from simulator.inputs.loader import excerpt, parse_json
from simulator.sweep.coordinator import uninterrupted
from simulator.sweep.deploy_runs import run_inputs, runs_key, unpacked_requests
from simulator.sweep.rows import stored_key
from simulator.sweep.store import Store

TABLE = """CREATE TABLE IF NOT EXISTS {name} (
    key TEXT PRIMARY KEY,
    inputs TEXT NOT NULL,
    outcome TEXT NOT NULL
)"""
POINTS, RUNS, BOUNDS = "deployments", "serving_runs", "iteration_bounds"
# What a point's outcome is: pruned before simulation, given an SLA capacity, met at
# every rate tried, met at none, or refused by serve (a search without pruning only).
STATUSES = ("pruned", "searched", "unbounded", "no rate meets the SLA", "refused")


def cost_folder(store_path: str | Path) -> Path:
    """The cost cache folder kept beside a store: `deploy.sqlite` -> `deploy-costs/`."""
    path = Path(store_path)
    return path.parent / f"{path.stem}-costs"


def _run_outcome(outcome: dict) -> str | None:
    """Why a stored run's outcome is not one (None when it is)."""
    if not isinstance(outcome.get("figures"), dict) or \
            not isinstance(outcome.get("goodput"), dict):
        return "not a run's figures and goodput"
    if "requests" in outcome:
        if not isinstance(outcome["requests"], dict):
            return "requests: not an object"
        try:
            unpacked_requests(outcome["requests"])
        except ValueError as exc:
            return f"requests: {exc}"
    return None


def _count(value, low: int = 1) -> bool:
    return type(value) is int and value >= low


def _amount(value, *, positive: bool = False) -> bool:
    """A finite number >= 0 (> 0 when `positive`), never a bool."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) \
        and math.isfinite(value) and (value > 0 if positive else value >= 0)


def _optional(value) -> bool:
    return value is None or _amount(value)


def _text(value) -> bool:
    return isinstance(value, str) and bool(value)


# What every point's outcome holds (a Deployment's fields), and what each status adds:
# field -> the check its value passes.
POINT_FIELDS = {"arch": _text, "chips": _count, "chips_per_replica": _count,
                "tp": _count, "pp": _count, "replicas": _count,
                "batching": lambda v: v in ("static", "dynamic", "continuous"),
                "max_batch": _count, "precision": _text,
                "precision_file": lambda v: v is None or _text(v)}
STATUS_FIELDS = {
    "pruned": {"reason": _text},
    "searched": {"sla_rate_rps": lambda v: _amount(v, positive=True),
                 "goodput_rps": _optional, "throughput_rps": _optional,
                 "tokens_per_s": _amount, "tokens_per_s_per_chip": _amount,
                 "tokens_per_s_per_watt": _optional, "energy_per_token_j": _optional,
                 "power_w": _amount, "cost_per_mtok": _optional,
                 **{f"{metric}_{stat}_ms": _optional for metric in ("ttft", "tpot", "latency")
                    for stat in ("p50", "p99")},
                 "above": lambda v: _above(v) is None, "evaluations": _count,
                 # under a power cap: the clock it left the chips (simulator.metrics.power_cap)
                 "power_cap": lambda v: v is None or isinstance(v, dict) and _amount(
                     v.get("clock_mhz"), positive=True)},
    "unbounded": {"sla_rate_rps": lambda v: v is None, "note": _text},
    "no rate meets the SLA": {"sla_rate_rps": lambda v: v is None, "note": _text},
    "refused": {"sla_rate_rps": lambda v: v is None, "note": _text},
}
# The run just above a searched point's SLA capacity, as the binding constraint reads it.
ABOVE_FIELDS = {"rate_rps": lambda v: _amount(v, positive=True),
                "missed": lambda v: isinstance(v, list) and all(map(_text, v)),
                "preempted": lambda v: _count(v, 0), "dropped": lambda v: _count(v, 0),
                "requests": lambda v: _count(v, 0), "throughput_rps": _amount,
                "utilization": _optional,
                # --power-budget-w: what the deployment drew there, against the budget
                "power": lambda v: v is None or isinstance(v, dict) and _amount(
                    v.get("target"), positive=True) and _optional(v.get("value"))
                and isinstance(v.get("met"), bool),
                **{f"{metric}_ms": lambda v: v is None or isinstance(v, dict) and all(
                    _amount(x) for x in v.values()) for metric in ("latency", "ttft", "tpot")}}


def _above(value) -> str | None:
    if not isinstance(value, dict):
        return "not an object"
    wrong = [name for name, check in ABOVE_FIELDS.items() if not check(value.get(name))]
    return f"{wrong[0]} missing or out of range" if wrong else None


def _point_outcome(outcome: dict) -> str | None:
    """Why a stored point is not one a search writes (None when it is): its status, its
    deployment's fields, and the figures of its status, each of its type and range (a
    forged negative SLA rate would otherwise be reported as a result)."""
    status = outcome.get("status")
    if status not in STATUSES:
        return f"status not one of {', '.join(STATUSES)}"
    for name, check in (POINT_FIELDS | STATUS_FIELDS[status]).items():
        if name == "above" and status == "searched" and _above(outcome.get(name)):
            return f"above: {_above(outcome.get(name))}"
        if not check(outcome.get(name)):
            shown = excerpt(outcome.get(name), 40) if name in outcome else "missing"
            return f"{name} of a {status} point is {shown}, out of its type or range"
    if outcome["tp"] * outcome["pp"] != outcome["chips_per_replica"] or \
            outcome["chips"] != outcome["chips_per_replica"] * outcome["replicas"]:
        return "chips do not match tp x pp x replicas"
    return None


def _bound_outcome(outcome: dict) -> str | None:
    value = outcome.get("bound_ms")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        return "not a bound in ms"
    return None


# How each table's outcome is checked as it is read back.
OUTCOME_CHECKS = {POINTS: _point_outcome, RUNS: _run_outcome, BOUNDS: _bound_outcome}


def _checked(rowid: int, key, inputs, outcome, file: str,
             table: str = POINTS) -> tuple[str, dict]:
    def refuse(column: str, rule: str) -> AccsimError:
        named = "" if not isinstance(key, str) else \
            f", key {key}" if len(key) <= 64 and key.isalnum() else f", key {excerpt(key)}"
        return AccsimError(f"{rule} (a forged or corrupt row{named})", file=file,
                           field=f"{table}[{rowid}].{column}")

    decoded = {}
    for column, text in (("inputs", inputs), ("outcome", outcome)):
        if not isinstance(text, str):
            raise refuse(column, "not JSON text")
        try:
            decoded[column] = parse_json(text, file=file)
        except AccsimError as exc:
            raise refuse(column, exc.rule) from None
        if not isinstance(decoded[column], dict):
            raise refuse(column, "not a JSON object")
    if not isinstance(key, str) or stored_key(decoded["inputs"]) != key:
        raise refuse("key", "not the sha256 of the row's inputs")
    wrong = OUTCOME_CHECKS[table](decoded["outcome"])
    if wrong is not None:
        raise refuse("outcome", wrong)
    return key, decoded["outcome"]


def stored_points(store: Store) -> int:
    """Deployment points a store holds (0 where it has no such table)."""
    with store.guard("read"):
        if store.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                            "name = ?", (POINTS,)).fetchone() is None:
            return 0
        return store.db.execute(f"SELECT count(*) FROM {POINTS}").fetchone()[0]


class PointStore:
    """The deployment points of one open store: read once, then written point by point."""

    def __init__(self, store: Store):
        self.store = store
        with store.guard("write"), store.db:
            for name in OUTCOME_CHECKS:
                store.db.execute(TABLE.format(name=name))
        with store.guard("read"):
            fetched = store.db.execute(
                "SELECT rowid, key, inputs, outcome FROM deployments").fetchall()
        self.rows = dict(_checked(*values, file=store.path) for values in fetched)
        self.found = 0      # points read back by this search
        self.computed = 0   # points this search stored
        self.runs: dict[str, dict[str, dict]] | None = None  # by point, when read
        self.runs_read = 0      # serving runs read back
        self.runs_stored = 0    # serving runs simulated and stored

    def runs_of(self, point_inputs: dict) -> dict[str, dict]:
        """The runs stored for a point (key -> outcome, checked as read), all read
        once, so a task searching the point takes them to its process as data."""
        if self.runs is None:
            with self.store.guard("read"):
                fetched = self.store.db.execute(
                    f"SELECT rowid, key, inputs, outcome FROM {RUNS}").fetchall()
            self.runs = {}
            for rowid, key, inputs, outcome in fetched:
                key, found = _checked(rowid, key, inputs, outcome, self.store.path, RUNS)
                self.runs.setdefault(runs_key(json.loads(inputs)), {})[key] = found
        return dict(self.runs.get(runs_key(run_inputs(point_inputs, 0.0)), {}))

    def get(self, key: str) -> dict | None:
        row = self.rows.get(key)
        if row is not None:
            self.found += 1
        return row

    def put(self, key: str, inputs: dict, row: dict) -> None:
        text = self._write(POINTS, key, inputs, row)
        self.rows[key] = json.loads(text)
        self.computed += 1

    def put_run(self, key: str, inputs: dict, outcome: dict) -> None:
        self._write(RUNS, key, inputs, outcome)
        self.runs_stored += 1
        if self.runs is not None:
            self.runs.setdefault(runs_key(inputs), {})[key] = outcome

    def get_bound(self, key: str) -> dict | None:
        return self._read(BOUNDS, key)

    def put_bound(self, key: str, inputs: dict, outcome: dict) -> None:
        self._write(BOUNDS, key, inputs, outcome)

    def _read(self, table: str, key: str) -> dict | None:
        """A table's outcome stored by key, checked as it is read."""
        with self.store.guard("read"):
            found = self.store.db.execute(f"SELECT rowid, key, inputs, outcome FROM "
                                          f"{table} WHERE key = ?", (key,)).fetchone()
        return None if found is None else \
            _checked(*found, file=self.store.path, table=table)[1]

    def _write(self, table: str, key: str, inputs: dict, outcome: dict) -> str:
        text = json.dumps(outcome)  # in its own order: read back, written as computed
        with uninterrupted(), self.store.guard("write"), self.store.db:
            self.store.db.execute(f"INSERT OR REPLACE INTO {table} (key, inputs, outcome) "
                                  "VALUES (?, ?, ?)",
                                  (key, json.dumps(inputs, sort_keys=True,
                                                   separators=(",", ":")), text))
        return text
