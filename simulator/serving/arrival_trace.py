"""Arrival traces: CSV files (a shipped name or a path) with an arrival-time column in
seconds and, for LLMs, prompt and output token columns, and optionally `prefix_id` and
`prefix_len` (requests of one prefix_id share their first prefix_len prompt tokens:
simulator.serving.prefix_cache; both or neither, the prompt column with them).

A trace is untrusted input, so every bound is checked while it is read and before any
request is served: at most MAX_REQUESTS rows (counted before parsing), fields of at
most MAX_FIELD_CHARS characters, times finite, >= 0, non-decreasing, within
MAX_HORIZON_S and either equal or at least MIN_GAP_S apart, token counts integers in
[1, MAX_TOKENS], prefix ids integers in [0, MAX_PREFIX_ID], prefix lengths integers
in [0, the row's prompt tokens]. Any line ending (LF, CR LF, CR) and a leading
byte-order mark are accepted. A fault is one AccsimError naming the file, the line and the column, with at
most a short excerpt of the offending text.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import AccsimError
from simulator.inputs.loader import (Source, path_exists, read_source, refuse_empty_name,
                                     shipped_folder)
from simulator.numbers import decimal_float, decimal_int
from simulator.serving.spec import MAX_HORIZON_S, MAX_REQUESTS, MAX_TOKENS

# Accepted column names, first the ones used by the shipped trace (Vidur's spelling).
ARRIVAL_COLUMNS = ("arrived_at", "arrival_s")
PROMPT_COLUMNS = ("num_prefill_tokens", "prompt_tokens")
OUTPUT_COLUMNS = ("num_decode_tokens", "output_tokens")
PREFIX_COLUMNS = {"prefix_id": ("prefix_id",), "prefix_len": ("prefix_len",)}
COLUMNS = {"arrival": ARRIVAL_COLUMNS, "prompt": PROMPT_COLUMNS, "output": OUTPUT_COLUMNS,
           **PREFIX_COLUMNS}
MAX_PREFIX_ID = 2**63 - 1  # an int64
# A time or token count written in more characters than this is not one.
MAX_FIELD_CHARS = 64
# Distinct arrival times closer than a nanosecond are below any trace's resolution (and
# subnormal gaps overflow when a trace is scaled to a rate).
MIN_GAP_S = 1e-9
EXCERPT_CHARS = 40      # of a bad field, quoted in the message
HEADER_NAMES_SHOWN = 8  # of a header without the columns wanted


@dataclass(frozen=True)
class Trace:
    """A trace file as read: times relative to its first arrival, tokens if present,
    and the line each request is on (for messages)."""

    times_s: np.ndarray
    prompt_tokens: np.ndarray | None
    output_tokens: np.ndarray | None
    source: Source
    lines: np.ndarray
    prefix_ids: np.ndarray | None = None   # int64, with prefix_lens: the shared prefixes
    prefix_lens: np.ndarray | None = None  # int64, each <= its prompt tokens


def shipped_traces() -> list[str]:
    """Names of the traces shipped with the package."""
    folder = shipped_folder("workload") / "traces"
    return sorted(p.name.removesuffix(".csv") for p in folder.iterdir()
                  if p.name.endswith(".csv"))


def trace_path(name_or_path: str) -> Path:
    """A path as given if it exists or looks like one, else the shipped trace."""
    refuse_empty_name(name_or_path, "trace", "arrival_trace")
    path = Path(name_or_path)
    if path_exists(path, "arrival_trace") or path.suffix == ".csv" or "/" in name_or_path:
        return path
    if name_or_path in shipped_traces():
        return Path(str(shipped_folder("workload") / "traces" / f"{name_or_path}.csv"))
    raise AccsimError(f"no such file, and no shipped trace of that name (shipped: "
                      f"{', '.join(shipped_traces())})", file=name_or_path,
                      field="arrival_trace")


def excerpt(text: str) -> str:
    """A bad field as quoted in a message: its first EXCERPT_CHARS characters."""
    return repr(text[:EXCERPT_CHARS]) + ("..." if len(text) > EXCERPT_CHARS else "")


def _lines(text: str) -> int:
    """Line endings in the text (LF, CR LF or CR): at least its rows less one."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def _columns(header: list[str], need_tokens: bool, file: str) -> dict[str, int]:
    """Role -> index of the column that holds it; each role's column found once."""
    found = {}
    for role, names in COLUMNS.items():
        indices = [i for i, name in enumerate(header) if name in names]
        if len(indices) > 1:
            spelled = ", ".join(header[i] for i in indices)
            raise AccsimError(f"more than one column gives the {role} ({spelled}): "
                              "keep one", file=file, field="header")
        if indices:
            found[role] = indices[0]
        elif role == "arrival" or (need_tokens and role not in PREFIX_COLUMNS):
            shown = ", ".join(excerpt(h) for h in header[:HEADER_NAMES_SHOWN])
            more = f" and {len(header) - HEADER_NAMES_SHOWN:,} more" \
                if len(header) > HEADER_NAMES_SHOWN else ""
            raise AccsimError(f"missing column: one of {', '.join(names)} (header has "
                              f"{shown + more or 'nothing'})", file=file, field=role)
    prefix = [role for role in PREFIX_COLUMNS if role in found]
    if len(prefix) == 1:
        other = next(role for role in PREFIX_COLUMNS if role not in found)
        raise AccsimError(f"column {prefix[0]} without {other}: a shared prefix needs "
                          "both (or neither)", file=file, field=other)
    if prefix and "prompt" not in found:
        raise AccsimError(f"prefix_len counts prompt tokens: give a prompt column ("
                          f"{', '.join(PROMPT_COLUMNS)}) with it", file=file,
                          field="prompt")
    return found


def _rows(source: Source):
    """(line, row) of each CSV row of a trace's text (the line the row ends on), any
    line ending, a leading BOM dropped."""
    lines = _lines(source.text)
    if lines > MAX_REQUESTS + 1:
        raise AccsimError(f"{lines:,} lines: a trace may hold at most {MAX_REQUESTS:,} "
                          "requests", file=source.path)
    reader = csv.reader(io.StringIO(source.text.removeprefix("\ufeff"), newline=""))
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise AccsimError(f"malformed CSV ({exc})", file=source.path,
                          field=f"line {reader.line_num}") from None


def load_trace(name_or_path: str, *, need_tokens: bool) -> Trace:
    """Read and check a trace (the bounds of the module docstring); the token columns
    are required when `need_tokens`."""
    source = read_source(trace_path(name_or_path))
    rows = _rows(source)
    _, first = next(rows, (0, None))
    if first is None:
        raise AccsimError("empty trace (expected a header row)", file=source.path)
    header = [h.strip() for h in first]
    columns = _columns(header, need_tokens, source.path)
    parse = {"arrival": _time, "prompt": _tokens, "output": _tokens,
             "prefix_id": _prefix_id, "prefix_len": _prefix_len}
    values: dict[str, list] = {role: [] for role in columns}
    lines = []  # the line of each request
    for line, row in rows:
        if not row:  # a blank line
            continue
        lines.append(line)
        for role, index in columns.items():
            field = f"line {line}, {header[index]}"
            text = row[index].strip() if index < len(row) else ""
            if len(text) > MAX_FIELD_CHARS:
                raise AccsimError(f"{len(text):,} characters, more than the "
                                  f"{MAX_FIELD_CHARS} a number may have: {excerpt(text)}",
                                  file=source.path, field=field)
            values[role].append(parse[role](text, source.path, field))
    if not values["arrival"]:
        raise AccsimError("no requests after the header", file=source.path)
    times = np.asarray(values["arrival"], dtype=np.float64)
    _check_order(times, lines, source.path, header[columns["arrival"]])
    tokens = {role: np.asarray(values[role], dtype=np.int64) if role in values else None
              for role in ("prompt", "output", *PREFIX_COLUMNS)}
    if tokens["prefix_len"] is not None:
        _check_prefixes(tokens["prefix_len"], tokens["prompt"], lines, source.path,
                        header[columns["prefix_len"]])
    return Trace(times - times[0], tokens["prompt"], tokens["output"], source,
                 np.asarray(lines, dtype=np.int64), tokens["prefix_id"],
                 tokens["prefix_len"])


def _check_prefixes(lengths: np.ndarray, prompts: np.ndarray, lines: list[int],
                    file: str, column: str) -> None:
    """Each prefix_len at most its row's prompt tokens."""
    over = np.flatnonzero(lengths > prompts)
    if over.size:
        at = int(over[0])
        raise AccsimError(f"prefix_len {int(lengths[at]):,} is longer than the prompt's "
                          f"{int(prompts[at]):,} tokens: a prefix is part of its prompt "
                          "(prefix_len <= prompt tokens)", file=file,
                          field=f"line {lines[at]}, {column}")


def _check_order(times: np.ndarray, lines: list[int], file: str, column: str) -> None:
    """Times non-decreasing, and distinct ones at least MIN_GAP_S apart."""
    gaps = np.diff(times)
    backwards = np.flatnonzero(gaps < 0)
    if backwards.size:
        at = int(backwards[0])
        raise AccsimError(f"arrival times must not decrease ({float(times[at + 1])!r} "
                          f"after {float(times[at])!r})", file=file,
                          field=f"line {lines[at + 1]}, {column}")
    close = np.flatnonzero((gaps > 0) & (gaps < MIN_GAP_S))
    if close.size:
        at = int(close[0])
        raise AccsimError(f"arrival times {float(times[at])!r} and "
                          f"{float(times[at + 1])!r} are "
                          f"{gaps[at]:.3g} s apart: distinct times must be at least "
                          f"{MIN_GAP_S:g} s apart (or equal)", file=file,
                          field=f"line {lines[at + 1]}, {column}")


def _time(text: str, file: str, field: str) -> float:
    try:
        value = decimal_float(text)
    except ValueError:
        if text.lower().lstrip("+-") not in ("nan", "inf", "infinity"):
            raise AccsimError(f"not a number (ASCII decimal digits): {excerpt(text)}",
                              file=file, field=field) from None
        value = math.nan  # a word for a non-finite value: the range rule names it
    if not math.isfinite(value) or not 0 <= value <= MAX_HORIZON_S:
        raise AccsimError(f"arrival time must be finite and >= 0 (at most "
                          f"{MAX_HORIZON_S:g} s), got {excerpt(text)}", file=file,
                          field=field)
    return value


def _tokens(text: str, file: str, field: str) -> int:
    value = _integer(text, file, field)
    if not 1 <= value <= MAX_TOKENS:
        raise AccsimError(f"token count must be >= 1 and <= {MAX_TOKENS:,}, got {value:,}",
                          file=file, field=field)
    return value


def _integer(text: str, file: str, field: str) -> int:
    try:
        return decimal_int(text)
    except ValueError:
        raise AccsimError(f"not an integer (ASCII decimal digits): {excerpt(text)}",
                          file=file, field=field) from None


def _prefix_id(text: str, file: str, field: str) -> int:
    value = _integer(text, file, field)
    if not 0 <= value <= MAX_PREFIX_ID:
        raise AccsimError(f"prefix_id must be an integer >= 0 and <= {MAX_PREFIX_ID:,}, "
                          f"got {excerpt(text)}", file=file, field=field)
    return value


def _prefix_len(text: str, file: str, field: str) -> int:
    value = _integer(text, file, field)
    if not 0 <= value <= MAX_TOKENS:
        raise AccsimError(f"prefix_len must be an integer >= 0 and <= {MAX_TOKENS:,} "
                          f"(and at most the prompt), got {excerpt(text)}", file=file,
                          field=field)
    return value
