"""What a stored row and a stored spec may hold. A store is untrusted input (a file
anyone can edit with the sqlite3 shell, or one a crash or a full disk left behind), so
every value read back is checked before a report trusts it: a row whose key is not the
hash of its inputs, whose metrics are not finite numbers >= 0, or whose JSON is not of
the shape the coordinator writes is an error naming the row and the column.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from simulator.errors import AccsimError
from simulator.inputs.loader import parse_json
from simulator.sweep.task import LABELS, METRICS

ROW_COLUMNS = ("key", "status", "error", "sweep", "workload", "point", "inputs",
               *METRICS, *LABELS)
# Metrics an ok row always has (tops_per_w is NULL without energy, area_mm2 without an
# area table).
OPTIONAL_METRICS = ("tops_per_w", "area_mm2")
TEXT_COLUMNS = ("key", "sweep", "workload")


def stored_key(inputs: dict) -> str:
    """The key of a job's inputs: sha256 of their canonical JSON (as simulator.sweep.jobs
    writes it), so a row whose inputs were edited no longer matches its key."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def checked_row(values: tuple, *, rowid: int, file: str) -> dict:
    """One row of `results` (ROW_COLUMNS in order) as a dict, point and inputs decoded,
    or an AccsimError naming `results[rowid].COLUMN` and what is wrong with it."""
    row = dict(zip(ROW_COLUMNS, values))

    def refuse(column: str, rule: str) -> AccsimError:
        return AccsimError(f"{rule} (a forged or corrupt row)", file=file,
                           field=f"results[{rowid}].{column}")

    for column in TEXT_COLUMNS:
        if not isinstance(row[column], str) or not row[column]:
            raise refuse(column, "not a non-empty text")
    if row["status"] not in ("ok", "failed"):
        raise refuse("status", "neither 'ok' nor 'failed'")
    for column in ("error", *LABELS):
        if row[column] is not None and not isinstance(row[column], str):
            raise refuse(column, "neither text nor NULL")
    for column in ("point", "inputs"):
        if not isinstance(row[column], str):
            raise refuse(column, "not JSON text")
        try:
            row[column] = parse_json(row[column], file=file)
        except AccsimError as exc:
            raise refuse(column, exc.rule) from None
        if not isinstance(row[column], dict):
            raise refuse(column, "not a JSON object")
    version = row["inputs"].get("model_version")
    if type(version) is not int:
        raise refuse("inputs", "no whole-number model_version")
    if stored_key(row["inputs"]) != row["key"]:
        raise refuse("key", "not the sha256 of the row's inputs")
    for name, (kind, _, _) in METRICS.items():
        value = row[name]
        if value is None:
            if row["status"] == "ok" and name not in OPTIONAL_METRICS:
                raise refuse(name, "missing from an ok row")
            continue
        whole = kind == "INTEGER"
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float) \
                or not math.isfinite(value) or value < 0:
            raise refuse(name, f"not a finite {'whole ' if whole else ''}number >= 0")
    return row


def checked_spec(name: Any, text: Any, *, file: str) -> dict:
    """One row of `sweeps`: the spec JSON, with objectives a report can use."""
    field = f"sweeps[{name!r}].spec"
    if not isinstance(name, str) or not isinstance(text, str):
        raise AccsimError("not text (a forged or corrupt row)", file=file, field=field)
    try:
        spec = parse_json(text, file=file)
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=file, field=field) from None
    objectives = spec.get("objectives") if isinstance(spec, dict) else None
    if not isinstance(objectives, dict) or not objectives or not all(
            metric in METRICS and sense in ("min", "max")
            for metric, sense in objectives.items()):
        raise AccsimError("objectives are not known metrics, each min or max (a forged "
                          "or corrupt row)", file=file, field=f"{field}.objectives")
    return spec
