"""The on-disk cache of LLM iteration costs at grid points (DESIGN.md section 10), so
a second run, a sweep or a review of the same model on the same platform simulates
nothing again.

An entry is one JSON file named by the SHA-256 of a canonical JSON of what the costs
depend on (the platform's canonical dump, the model config, dtype, the frontend and
its probe workloads, MODEL_VERSION, FORMAT and the code's own digest,
simulator.code_version, so grid points costed by other code are not reused). Beside the grid points it keeps the whole
iterations simulated exactly for the bucketing error (`exact`, optional: entries
written before it existed stay valid), so a warm run simulates nothing. The folder is the user's cache folder
(accsim/serving-costs in simulator.output.cache_home's folder) or one named by
--cost-cache, written only through simulator.output.files. An entry is untrusted: one of
another key, a wrong shape or type, or unreadable, is ignored and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, is_dataclass
from pathlib import Path

import simulator
from simulator.code_version import code_version
from simulator.errors import AccsimError
from simulator.output.cache_home import checked_cache_home
from simulator.output.files import OutputFolder

# 2: decode attention priced as one launch per decode batch (decode_pair points; exact
# iterations under that rule): format-1 entries are ignored and rewritten.
FORMAT = 2
MAX_ENTRY_BYTES = 64 * 2**20
# Part -> how many integer coordinates each point has before its seconds and joules.
PARTS = {"dense": 1, "prefill": 2, "decode": 1, "decode_pair": 1}
# Exact iterations: rows [[new, cached, new, cached, ...], [context, ...], s, J] keyed
# by their shape ((new, cached) per chunk, contexts).
EXACT = "exact"


def user_folder() -> Path:
    """accsim/serving-costs in the user's cache folder (simulator.output.cache_home),
    refused naming XDG_CACHE_HOME where that cannot be a folder."""
    return checked_cache_home() / "accsim" / "serving-costs"


def model_identity(config) -> object:
    """A model config by its content, for keys: the file it was read from (`source`)
    is left out, so one model read from two checkouts, or from a renamed copy, keys
    the same."""
    fields = asdict(config) if is_dataclass(config) else \
        config.model_dump(mode="json") if hasattr(config, "model_dump") else repr(config)
    return {k: v for k, v in fields.items() if k != "source"} \
        if isinstance(fields, dict) else fields


def cache_key(identity: dict, code: str | None) -> str:
    """SHA-256 of the canonical JSON of `identity`, MODEL_VERSION, the entry FORMAT (a
    format's costs follow its own pricing rules) and `code` (the simulator.code_version
    of the cache it is read from and written to)."""
    text = json.dumps({"model_version": simulator.MODEL_VERSION, "format": FORMAT,
                       "code": code, **identity},
                      sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _count(value) -> bool:
    return type(value) is int and value >= 0


def _amount(value) -> bool:
    return type(value) is float and math.isfinite(value) and value >= 0.0


def _points(rows, width: int) -> dict | None:
    """{coordinates: (seconds, joules)} of a part's rows, or None if any is malformed."""
    if not isinstance(rows, list):
        return None
    points = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == width + 2
                and all(_count(v) for v in row[:width])
                and _amount(row[width]) and _amount(row[width + 1])):
            return None
        points[row[0] if width == 1 else tuple(row[:width])] = (row[width], row[width + 1])
    return points


def _exact(rows) -> dict | None:
    """{shape: (seconds, joules)} of the exact rows, or None if any is malformed."""
    if not isinstance(rows, list):
        return None
    points = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], list)
                and isinstance(row[1], list) and len(row[0]) % 2 == 0
                and all(_count(v) for v in row[0] + row[1])
                and _amount(row[2]) and _amount(row[3])):
            return None
        chunks = tuple(zip(row[0][0::2], row[0][1::2]))
        points[chunks, tuple(row[1])] = (row[2], row[3])
    return points


def parse_entry(data: bytes, key: str) -> dict[str, dict] | None:
    """The parts of an entry if it is well formed and of this key, else None."""
    try:
        content = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not (isinstance(content, dict) and content.get("format") == FORMAT
            and content.get("key") == key):
        return None
    parts = {name: _points(content.get(name), width) for name, width in PARTS.items()}
    parts[EXACT] = _exact(content.get(EXACT, []))
    return None if any(p is None for p in parts.values()) else parts


def _rows(points: dict) -> list[list]:
    return [[*(k if isinstance(k, tuple) else (k,)), s, e]
            for k, (s, e) in sorted(points.items())]


def _exact_rows(points: dict) -> list[list]:
    return [[[v for chunk in chunks for v in chunk], list(contexts), s, e]
            for (chunks, contexts), (s, e) in sorted(points.items())]


class CostCache:
    """One folder of entries; `folder` None disables it. `strict` (a folder the user
    named) makes an unusable folder an error; the default folder is then skipped."""

    def __init__(self, folder: str | Path | None, *, strict: bool = False):
        self.folder = folder  # as named: an empty name is refused when first opened
        self.strict = strict
        # What its keys are keyed by, read once per cache (every source file: ~40 ms).
        self.code = None if folder is None else code_version()
        # Per key, the bytes this cache last wrote and the parts they hold: an entry
        # still as written is not parsed again (a search stores after each run).
        self._written: dict[str, tuple[bytes, dict[str, dict]]] = {}

    def _open(self) -> OutputFolder | None:
        if self.folder is None:
            return None
        try:
            return OutputFolder.plain(self.folder, field="--cost-cache")
        except AccsimError:
            if self.strict:
                raise
            return None

    def load(self, key: str) -> dict[str, dict]:
        """The entry's parts ({} each when absent or unusable)."""
        folder = self._open()
        if folder is not None:
            with folder:
                data = folder.read(f"{key}.json", MAX_ENTRY_BYTES)
            written = self._written.get(key)
            if data is not None and written is not None and data == written[0]:
                return {name: dict(points) for name, points in written[1].items()}
            parts = parse_entry(data, key) if data is not None else None
            if parts is not None:
                return parts
        return {name: {} for name in (*PARTS, EXACT)}

    def store(self, key: str, parts: dict[str, dict]) -> None:
        """Write the entry: what is on disk now (another run's points) and `parts`."""
        folder = self._open()
        if folder is None:
            return
        merged = self.load(key)
        for name in (*PARTS, EXACT):
            merged[name].update(parts.get(name, {}))
        content = {"format": FORMAT, "key": key,
                   **{name: _rows(merged[name]) for name in PARTS},
                   EXACT: _exact_rows(merged[EXACT])}
        with folder:
            try:
                data = folder.write(f"{key}.json", json.dumps(content) + "\n")
            except AccsimError:
                if self.strict:
                    raise
                return
        self._written[key] = (data, merged)
