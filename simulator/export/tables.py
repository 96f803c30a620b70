"""CSV text of an export's tables, and the merge of a new export into the tables an
earlier export wrote in the same folder: rows of the tensor-parallel degrees exported
again are replaced, every other row is kept (a second degree is added, never written
over the first)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from simulator.errors import AccsimError

# The largest earlier table read back for a merge (a full export is a few MB).
MAX_TABLE_BYTES = 1 << 30


def csv_text(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def earlier_rows(data: bytes | None, header: Sequence[str], shown: str) -> list[list[str]]:
    """The rows of a table an earlier export wrote (none when it wrote none), its
    header checked: a table of another layout is refused, not mixed in, and one the
    csv module cannot read (a field past its limit) named, not a traceback."""
    if data is None:
        return []
    try:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8", errors="replace"))))
    except csv.Error as exc:
        raise AccsimError(f"an earlier export's table is no CSV accsim wrote ({exc}); "
                          "export into a new folder", file=shown,
                          field="--output") from None
    if not rows or rows[0] != list(header):
        raise AccsimError("an earlier export wrote this table with other columns; "
                          "export into a new folder", file=shown, field="--output")
    return rows[1:]


def merged(header: Sequence[str], new_rows: list[list], data: bytes | None,
           key: str, replaced: set[int], shown: str) -> str:
    """The table of `new_rows` and the earlier rows whose `key` column (a TP degree)
    is not in `replaced`, ordered by that column (stable within it)."""
    column = list(header).index(key)
    kept: list[list] = []
    for row in earlier_rows(data, header, shown):
        try:
            degree = int(row[column])
        except (ValueError, IndexError):
            raise AccsimError(f"an earlier row's {key} is not a whole number",
                              file=shown, field="--output") from None
        if degree not in replaced:
            kept.append(row)
    rows = kept + [list(row) for row in new_rows]
    rows.sort(key=lambda row: int(row[column]))
    return csv_text(header, rows)


@dataclass(frozen=True)
class Earlier:
    """The files an earlier export wrote in the output folder, read back by their path
    inside it (`read`: None where it wrote none; the default: a new folder, none), and
    `shown`, the path a user can open (the folder as given, joined), for errors."""

    read: Callable[[str], "bytes | None"] = lambda _relative: None
    folder: str = ""

    def __call__(self, relative: str) -> bytes | None:
        return self.read(relative)

    def shown(self, relative: str) -> str:
        return os.path.join(self.folder, relative)
