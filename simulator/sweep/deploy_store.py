"""Deployment points in the sweep store (simulator.sweep.store): table `deployments`,
one row per point keyed by the sha256 of its inputs (simulator.sweep.deploy.point_key),
written in its own transaction as the point finishes. A search killed at any moment
resumes with every finished point read back and none computed twice; the iteration
costs its points simulated are kept in a cost cache folder beside the store
(simulator.serving.cost_cache), so a search that differs only in its SLA recomputes
no iteration shape.

The table sits beside the sweep tables of the same file (their layout is unchanged; a
sweep report ignores it). A row read back is untrusted: one whose key is not the hash
of its inputs or whose outcome is not an object of a known status is an error naming
the row."""

from __future__ import annotations

import json
from pathlib import Path

from simulator.errors import AccsimError
from simulator.loader import parse_json
from simulator.sweep.coordinator import uninterrupted
from simulator.sweep.deploy import STATUSES
from simulator.sweep.rows import stored_key
from simulator.sweep.store import Store

TABLE = """CREATE TABLE IF NOT EXISTS deployments (
    key TEXT PRIMARY KEY,
    inputs TEXT NOT NULL,
    outcome TEXT NOT NULL
)"""


def cost_folder(store_path: str | Path) -> Path:
    """The cost cache folder kept beside a store: `deploy.sqlite` -> `deploy-costs/`."""
    path = Path(store_path)
    return path.parent / f"{path.stem}-costs"


def _checked(rowid: int, key, inputs, outcome, file: str) -> tuple[str, dict]:
    def refuse(column: str, rule: str) -> AccsimError:
        return AccsimError(f"{rule} (a forged or corrupt row)", file=file,
                           field=f"deployments[{rowid}].{column}")

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
    if decoded["outcome"].get("status") not in STATUSES:
        raise refuse("outcome", f"status not one of {', '.join(STATUSES)}")
    return key, decoded["outcome"]


class PointStore:
    """The deployment points of one open store: read once, then written point by point."""

    def __init__(self, store: Store):
        self.store = store
        with store.guard("write"), store.db:
            store.db.execute(TABLE)
        with store.guard("read"):
            fetched = store.db.execute(
                "SELECT rowid, key, inputs, outcome FROM deployments").fetchall()
        self.rows = dict(_checked(*values, file=store.path) for values in fetched)
        self.found = 0      # points read back by this search
        self.computed = 0   # points this search stored

    def get(self, key: str) -> dict | None:
        row = self.rows.get(key)
        if row is not None:
            self.found += 1
        return row

    def put(self, key: str, inputs: dict, row: dict) -> None:
        text = json.dumps(row)  # in its own order: read back, it is written as computed
        with uninterrupted(), self.store.guard("write"), self.store.db:
            self.store.db.execute("INSERT OR REPLACE INTO deployments (key, inputs, "
                                  "outcome) VALUES (?, ?, ?)",
                                  (key, json.dumps(inputs, sort_keys=True,
                                                   separators=(",", ":")), text))
        self.rows[key] = json.loads(text)
        self.computed += 1
