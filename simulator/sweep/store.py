"""The sweep result store: one SQLite file, table `results` with one row per
point x workload keyed by content (simulator.sweep.jobs), inputs as JSON and metrics
as typed columns, and table `sweeps` with each spec run into it.

WAL journal, one committed transaction per row, and only the coordinating process
writes: a coordinator killed at any moment leaves every finished row readable and no
half row, and readers (a report, a progress check) never block the sweep.

A store is untrusted input (DESIGN.md section 11): its header, its tables and every
row read back are checked (simulator.sweep.rows), and any SQLite failure (a corrupt,
truncated, foreign, read-only or full file) is one AccsimError naming the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from simulator.errors import AccsimError
from simulator.inputs.loader import check_regular_file, path_exists
from simulator.output.files import check_output_path
from simulator.sweep.rows import ROW_COLUMNS, checked_row, checked_spec
from simulator.sweep.task import LABELS, METRICS

# Bumped when the tables change shape; a store of another layout is refused.
STORE_LAYOUT = 1
TABLES = {"results": set(ROW_COLUMNS), "sweeps": {"name", "spec"}}
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
# Writers wait this long for another process's lock before giving up.
BUSY_TIMEOUT_S = 30
SQLITE_MAGIC = b"SQLite format 3\x00"
# An SQLite message is quoted up to this many characters.
EXCERPT_CHARS = 160
HEADER_BYTES = 100
# The first row of inputs without a whole-number model_version, if any.
BAD_VERSION_ROW = """SELECT rowid FROM results WHERE CASE
    WHEN typeof(inputs) = 'text' AND json_valid(inputs)
    THEN json_type(inputs, '$.model_version') IS NOT 'integer' ELSE 1 END LIMIT 1"""


def sqlite_problem(error: sqlite3.Error, doing: str) -> str:
    """An SQLite failure in words a user can act on."""
    code = getattr(error, "sqlite_errorname", "") or ""
    text = str(error)  # may quote a stored value: an excerpt at most
    detail = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."
    if code.startswith("SQLITE_FULL"):
        return (f"the disk is full or the store reached its size limit ({detail}); every "
                "row stored before is kept: free space and rerun to resume")
    if code.startswith("SQLITE_READONLY"):
        return f"is read-only ({detail}); make it writable, or only report from it"
    if code.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return (f"a corrupt or foreign SQLite file ({detail}), not a sweep store accsim can "
                "read; run the sweep into a new --store")
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return f"locked by another process for over {BUSY_TIMEOUT_S} s ({detail})"
    if code.startswith("SQLITE_IOERR"):
        return f"I/O error on the SQLite store ({detail}): a full disk or a truncated file?"
    return f"cannot {doing} the SQLite store: {detail}"


def check_header(path: str, size: int) -> None:
    """The 100-byte SQLite header says the file is a database and how many pages it
    has: a file without it, or shorter than its pages, is refused before SQLite reads
    it (a truncated store would otherwise fail halfway through a report)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(HEADER_BYTES)
    except OSError as exc:
        raise AccsimError(f"cannot read: {exc.strerror}", file=path) from None
    if header[:len(SQLITE_MAGIC)] != SQLITE_MAGIC:
        raise AccsimError("not an SQLite database (no SQLite header): another kind of "
                          "file, not a sweep store", file=path)
    page_size = int.from_bytes(header[16:18], "big") if len(header) >= 18 else 0
    page_size = 65536 if page_size == 1 else page_size
    if len(header) < HEADER_BYTES or page_size < 512 or page_size & (page_size - 1):
        raise AccsimError(f"a truncated or corrupt SQLite file ({size:,} bytes, page size "
                          f"{page_size}), not a sweep store accsim can read", file=path)
    pages = int.from_bytes(header[28:32], "big")
    counted = header[24:28] == header[92:96]  # the page count is valid
    # While a sweep writes, a checkpoint may copy page 1 before the pages it counts:
    # with a WAL file beside the store, SQLite itself judges the length.
    if Path(f"{path}-wal").exists():
        return
    if size % page_size or counted and size < pages * page_size:
        raise AccsimError(f"a truncated SQLite file: {size:,} bytes where its header "
                          f"promises {pages:,} pages of {page_size:,} bytes", file=path)


def existing_store(path: str, *, writable: bool) -> int:
    """Check an existing store file (a regular file, writable with its folder when it
    will be written, an SQLite header); its size in bytes."""
    try:
        info = check_regular_file(path)
    except FileNotFoundError:
        raise AccsimError("file not found (no such store)", file=path) from None
    except OSError as exc:
        raise AccsimError(f"cannot read: {exc.strerror}", file=path) from None
    folder = Path(path).absolute().parent
    if writable and not (info.st_mode & 0o222 and os.access(path, os.W_OK)):
        raise AccsimError("is read-only (no write permission): make it writable to run "
                          "into it, or only report from it", file=path, field="--store")
    if writable and not os.access(folder, os.W_OK):
        raise AccsimError(f"its folder {folder} cannot be written (SQLite keeps its "
                          "journal beside the store)", file=path, field="--store")
    if info.st_size:
        check_header(path, info.st_size)
    elif not writable:
        raise AccsimError("an empty file (0 bytes), not a sweep store", file=path)
    return info.st_size


class Store:
    """An open result store. Use as a context manager; writes commit row by row.
    `create=False` opens an existing store for reading only (query_only: a report
    never writes)."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = str(path)
        if create and not path_exists(path, "--store"):
            check_output_path(self.path, "store")
        else:
            existing_store(self.path, writable=create)
        with self.guard("open"):
            self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
        try:
            with self.guard("open"):
                if not create:
                    self.db.execute("PRAGMA query_only = 1")
                self._check_tables(create)
        except AccsimError:
            self.db.close()
            raise

    def _check_tables(self, create: bool) -> None:
        """Refuse a foreign database; create the tables of an empty one (the tables and
        the layout version in one transaction, so a racing sweep sees both or none)."""
        tables = {name for (name,) in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(name).startswith("sqlite_")}
        layout = self.db.execute("PRAGMA user_version").fetchone()[0]
        if not tables and (layout or not create):
            raise AccsimError(f"an SQLite file without tables (user_version {layout}), "
                              "not a sweep store", file=self.path)
        if tables:
            columns = {name: {row[1] for row in self.db.execute(
                f"PRAGMA table_info({name})")} for name in tables & set(TABLES)}
            primary = [row[1] for row in self.db.execute("PRAGMA table_info(results)")
                       if row[5]] if "results" in tables else []
            if layout != STORE_LAYOUT or columns != TABLES or primary != ["key"]:
                raise AccsimError(f"not an accsim sweep store of layout {STORE_LAYOUT} "
                                  f"(an SQLite file of user_version {layout}, tables "
                                  f"{sorted(tables)})", file=self.path)
        if create:
            self.db.execute("PRAGMA journal_mode = WAL")
        if not tables:
            self.db.executescript(f"BEGIN IMMEDIATE; {SCHEMA} "
                                  f"PRAGMA user_version = {STORE_LAYOUT}; COMMIT;")

    @contextmanager
    def guard(self, doing: str):
        """Any SQLite failure inside becomes one AccsimError naming the store."""
        try:
            yield
        except sqlite3.Error as exc:
            raise AccsimError(sqlite_problem(exc, doing), file=self.path) from None
        except UnicodeDecodeError:  # sqlite3 decodes TEXT as UTF-8
            raise AccsimError("text that is not UTF-8 in the SQLite store (a corrupt or "
                              "forged file)", file=self.path) from None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def record_sweep(self, name: str, spec: dict) -> None:
        """Keep the spec (its objectives are the report's defaults)."""
        with self.guard("write"), self.db:
            self.db.execute("INSERT OR REPLACE INTO sweeps (name, spec) VALUES (?, ?)",
                            (name, json.dumps(spec)))

    def sweep_specs(self) -> dict[str, dict]:
        """Specs by sweep name, the one run most recently last."""
        with self.guard("read"):
            rows = self.db.execute("SELECT name, spec FROM sweeps ORDER BY rowid").fetchall()
        return {name: checked_spec(name, spec, file=self.path) for name, spec in rows}

    def keys(self, *, status: str | None = None) -> set[str]:
        """Keys stored, optionally only those of one status."""
        with self.guard("read"):
            if status is None:
                return {row[0] for row in self.db.execute("SELECT key FROM results")}
            return {row[0] for row in self.db.execute(
                "SELECT key FROM results WHERE status = ?", (status,))}

    def model_versions(self) -> dict[int, int]:
        """MODEL_VERSION -> the number of rows computed by it (from each row's inputs)."""
        with self.guard("read"):
            bad = self.db.execute(BAD_VERSION_ROW).fetchone()
            if bad is not None:
                raise AccsimError("no whole-number model_version (a forged "
                                  "or corrupt row)", file=self.path,
                                  field=f"results[{bad[0]}].inputs")
            return dict(self.db.execute(
                "SELECT json_extract(inputs, '$.model_version') AS version, count(*) "
                "FROM results GROUP BY version ORDER BY version").fetchall())

    def put(self, row: dict) -> None:
        """Store one row (all of ROW_COLUMNS; a failed row's metrics are None) in its
        own transaction. A key stored before (a failed point retried) is replaced."""
        values = [row.get(name) for name in ROW_COLUMNS]
        with self.guard("write"), self.db:
            self.db.execute(f"INSERT OR REPLACE INTO results ({', '.join(ROW_COLUMNS)}) "
                            f"VALUES ({', '.join('?' * len(ROW_COLUMNS))})", values)

    def rows(self, *, status: str | None = None) -> list[dict]:
        """Stored rows as dicts, point and inputs decoded and every value checked
        (simulator.sweep.rows), ordered by key."""
        query = f"SELECT rowid, {', '.join(ROW_COLUMNS)} FROM results"
        args: Iterable = ()
        if status is not None:
            query, args = query + " WHERE status = ?", (status,)
        with self.guard("read"):
            fetched = self.db.execute(query + " ORDER BY key", tuple(args)).fetchall()
        return [checked_row(values[1:], rowid=values[0], file=self.path)
                for values in fetched]
