"""The sweep result store: one SQLite file, table `results` with one row per
point x workload keyed by content (simulator.sweep.plan), inputs as JSON and metrics
as typed columns, and table `sweeps` with each spec run into it.

WAL journal, one committed transaction per row, and only the coordinating process
writes: a coordinator killed at any moment leaves every finished row readable and no
half row, and readers (a report, a progress check) never block the sweep.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from simulator.errors import AccsimError
from simulator.loader import check_regular_file, parse_json
from simulator.outputs import check_output_path
from simulator.sweep.task import LABELS, METRICS

# Bumped when the tables change shape; a store of another layout is refused.
STORE_LAYOUT = 1
ROW_COLUMNS = ("key", "status", "error", "sweep", "workload", "point", "inputs",
               *METRICS, *LABELS)
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    sweep TEXT NOT NULL,
    workload TEXT NOT NULL,
    point TEXT NOT NULL,
    inputs TEXT NOT NULL,
    {", ".join(f"{name} {kind}" for name, (kind, _, _) in METRICS.items())},
    {", ".join(f"{name} TEXT" for name in LABELS)}
);
CREATE TABLE IF NOT EXISTS sweeps (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL
);
"""


class Store:
    """An open result store. Use as a context manager; writes commit row by row."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = str(path)
        if create and not Path(path).exists():
            check_output_path(self.path, "store")
        else:
            try:
                check_regular_file(path)
            except OSError:
                raise AccsimError("file not found (no such store)", file=self.path) \
                    from None
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            layout = self.db.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and layout != STORE_LAYOUT:
                raise AccsimError(f"not an accsim sweep store of layout {STORE_LAYOUT} "
                                  f"(user_version {layout}, tables {sorted(tables)})",
                                  file=self.path)
            self.db.execute("PRAGMA journal_mode = WAL")
            if not tables:
                self.db.executescript(SCHEMA)
                self.db.execute(f"PRAGMA user_version = {STORE_LAYOUT}")
        except sqlite3.Error as exc:
            raise AccsimError(f"cannot open as an SQLite store: {exc}", file=self.path) \
                from None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def record_sweep(self, name: str, spec: dict) -> None:
        """Keep the spec (its objectives are the report's defaults)."""
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO sweeps (name, spec) VALUES (?, ?)",
                            (name, json.dumps(spec)))

    def sweep_specs(self) -> dict[str, dict]:
        """Specs by sweep name, the one run most recently last."""
        rows = self.db.execute("SELECT name, spec FROM sweeps ORDER BY rowid")
        return {name: parse_json(str(spec), file=self.path) for name, spec in rows}

    def keys(self, *, status: str | None = None) -> set[str]:
        """Keys stored, optionally only those of one status."""
        if status is None:
            return {row[0] for row in self.db.execute("SELECT key FROM results")}
        return {row[0] for row in self.db.execute(
            "SELECT key FROM results WHERE status = ?", (status,))}

    def put(self, row: dict) -> None:
        """Store one row (all of ROW_COLUMNS; a failed row's metrics are None) in its
        own transaction. A key stored before (a failed point retried) is replaced."""
        values = [row.get(name) for name in ROW_COLUMNS]
        with self.db:
            self.db.execute(f"INSERT OR REPLACE INTO results ({', '.join(ROW_COLUMNS)}) "
                            f"VALUES ({', '.join('?' * len(ROW_COLUMNS))})", values)

    def rows(self, *, status: str | None = None) -> list[dict]:
        """Stored rows as dicts, point and inputs decoded, ordered by key."""
        query = f"SELECT {', '.join(ROW_COLUMNS)} FROM results"
        args: Iterable = ()
        if status is not None:
            query, args = query + " WHERE status = ?", (status,)
        rows = []
        for values in self.db.execute(query + " ORDER BY key", tuple(args)):
            row = dict(zip(ROW_COLUMNS, values))
            row["point"] = parse_json(str(row["point"]), file=self.path)
            row["inputs"] = parse_json(str(row["inputs"]), file=self.path)
            rows.append(row)
        return rows
