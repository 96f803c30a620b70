"""The compiled serving loop's finished or dropped requests as rows of its arrays
(simulator.serving.compiled_loop), read as the SimPy loop's list of Request records.

Why: a deployment search runs hundreds of serving runs and reads from each only the
counts and the per-request times (metrics.RequestTimes); building a Request per row
(millions of them) cost more than the rest of reading a run back (issue 44). So the
records are built on the first read of one of them, and RequestTimes reads its columns
straight from the arrays (`columns`), the same values the records hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from simulator.serving import loop_state as k
from simulator.serving.requests import Request


class RequestRows(Sequence[Request]):
    """The requests of rows `rows` (in that order) of the kernel's per-request arrays
    `ri`, `rf`, arriving at `arrival_s` (all arrivals' times): a read-only sequence of
    Request records, built once on the first read of one."""

    def __init__(self, rows: np.ndarray, ri: np.ndarray, rf: np.ndarray,
                 arrival_s: np.ndarray):
        self._rows, self._ri, self._rf, self._arrival_s = rows, ri, rf, arrival_s
        self._records: list[Request] | None = None
        self._columns: dict[bool, tuple[np.ndarray, ...] | None] = {}  # by `tokens`

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):
        return self.records()[index]

    def __iter__(self) -> Iterator[Request]:
        return iter(self.records())

    def __add__(self, other) -> list[Request]:
        return self.records() + list(other)

    def __radd__(self, other) -> list[Request]:
        return list(other) + self.records()

    def __repr__(self) -> str:
        return f"RequestRows({len(self)} requests)"

    def columns(self, *, tokens: bool) -> tuple[np.ndarray, ...] | None:
        """(arrival, finish, first token or finish without tokens, output tokens or 0)
        per request in order of id, as float64 (int64 outputs): what RequestTimes.of
        reads from the records. None where one of these times is unset (a record's
        None, which the records path turns into an object array). Read once, kept:
        a search reads them twice a run (its summary, its stored request times)."""
        if tokens not in self._columns:
            self._columns[tokens] = self._read_columns(tokens)
        return self._columns[tokens]

    def _read_columns(self, tokens: bool) -> tuple[np.ndarray, ...] | None:
        rows = np.sort(self._rows)  # a request's id is its row
        finish = self._rf[rows, k.Q_FINISH]
        first = self._rf[rows, k.Q_FIRST] if tokens else finish
        if np.isnan(finish).any() or np.isnan(first).any():
            return None
        arrival = np.asarray(self._arrival_s, dtype=np.float64)[rows]
        outputs = self._ri[rows, k.R_OUTPUT] if tokens else np.zeros(len(rows), np.int64)
        return arrival, finish, first, outputs.astype(np.int64)

    def records(self) -> list[Request]:
        """The Request records, as the SimPy loop leaves them (one call each, its fields
        positional in Request's order; NaN: None); built on the first call."""
        if self._records is None:
            self._records = _requests(self._rows, self._ri, self._rf,
                                      self._arrival_s.tolist())
        return self._records


def _requests(rows: np.ndarray, ri: np.ndarray, rf: np.ndarray, times: list) -> list:
    ints = ri[rows].T.tolist()
    floats = rf[rows].T.tolist()

    def maybe(values: list) -> list:
        return [None if v != v else v for v in values]

    count = len(rows)
    zeros, none = [0] * count, [-1] * count
    return list(map(Request, rows.tolist(), [times[r] for r in rows.tolist()],
                    ints[k.R_PROMPT], ints[k.R_OUTPUT], ints[k.R_TARGET],
                    ints[k.R_PREFILLED], ints[k.R_KV_TOKENS], ints[k.R_PRODUCED],
                    ints[k.R_KV_HELD], maybe(floats[k.Q_FIRST]), maybe(floats[k.Q_FINISH]),
                    ints[k.R_PREEMPT], [bool(d) for d in ints[k.R_DROPPED]], zeros, none,
                    zeros, zeros, zeros, maybe(floats[k.Q_ADMITTED]), floats[k.Q_KV_MARK],
                    maybe(floats[k.Q_LOST_SINCE]), floats[k.Q_KV_WAIT],
                    floats[k.Q_KV_WAIT_FIRST], floats[k.Q_PREEMPT_LOST], [0.0] * count))
