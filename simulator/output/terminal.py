"""Text on its way to the terminal (DESIGN.md section 7): control characters shown as
escapes, never sent; rich markup shown, never interpreted; and tables that fit the
terminal's width without cutting a cell.

Every command's tables and messages pass input-derived text through `plain` (for print)
or print on a `console()` (rich with markup off), so a name like `[/]` or one holding an
escape sequence is displayed as written.

Width (the one place that decides it): the console is as wide as the terminal, or
COLUMNS when set; output that is not a terminal (a pipe, a file) without COLUMNS has
no width, so its tables are printed whole (one line per row for grep and diff), as with
`wide`. A table wider than that is printed as several narrower tables, each
repeating the table's key columns (operator, platform, ...) and carrying whole column
groups where they fit; `wide=True` (`--wide`) prints it in one table. A table never
shrinks below its natural width: a part that cannot fit (long names) is printed wider
than the terminal rather than with a cut or ellipsised cell. Lines of text (a
command's summary, legend and notes, printed with `echo` or on a `console()`) wrap at
their words to the same width (`fold`): a continuation is indented two more than its
line, and a word is never cut, so neither is a number. Without a width (a pipe or a
file without COLUMNS) a line of text stays one line, for grep and diff.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import textwrap
import unicodedata
from dataclasses import dataclass

from rich.console import Console
from rich.measure import Measurement
from rich.markup import escape
from rich.table import Table

# A width no table reaches: where a table is measured or printed whole.
UNBOUNDED = 10 ** 6


def plain(text: str) -> str:
    """`text` with every control or format character (ESC, BEL, CR, bidi overrides, ...)
    written as a Python escape, newlines and tabs included."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cf") else c
                   for c in str(text))


def markup_safe(text: str) -> str:
    """`plain(text)` escaped for a rich markup string (progress descriptions, titles
    written with markup)."""
    return escape(plain(text))


def size_variable(name: str) -> int | None:
    """COLUMNS or LINES when a positive ASCII whole number; None when unset or not one
    ('²' and '0' included, on which int() or rich fail): then ignored."""
    text = os.environ.get(name, "").strip()
    return int(text) if text.isascii() and text.isdigit() and int(text) > 0 else None


def console_size() -> dict[str, int]:
    """The width and height to give a rich Console where COLUMNS or LINES is set but is
    not a positive ASCII whole number (rich would read '²' or '0' and fail; it reads
    neither once given both): each variable's value, else the terminal's, as though
    the bad one were unset (shutil ignores such values). Empty otherwise: rich reads
    the variables itself."""
    if all(name not in os.environ or size_variable(name) is not None
           for name in ("COLUMNS", "LINES")):
        return {}
    terminal = shutil.get_terminal_size()
    return {"width": size_variable("COLUMNS") or terminal.columns,
            "height": size_variable("LINES") or terminal.lines}


def text_width() -> int | None:
    """The width lines of text wrap at (rich's rule for its consoles): COLUMNS when set,
    else the terminal's; None for output that is not a terminal without COLUMNS."""
    columns = size_variable("COLUMNS")
    if columns is not None:
        return columns
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def fold(text: str, width: int | None) -> str:
    """Each line of `text` wrapped at its words to `width` columns (None: as it is), a
    continuation indented two more than its line; a word longer than the width (a
    path) is a line of its own, never cut."""
    if width is None:
        return text
    lines = []
    for line in text.split("\n"):
        if len(line) <= width:
            lines.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        lines += textwrap.wrap(line, width, subsequent_indent=indent,
                               break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines)


def echo(text: str = "") -> None:
    """`print(text)` with its lines wrapped at the terminal's width (`fold`)."""
    print(fold(text, text_width()))


def warn(where: str, text: str) -> None:
    """One warning line on stderr, `accsim: warning: WHERE: TEXT`, both escaped."""
    print(f"accsim: warning: {plain(where)}: {plain(text)}", file=sys.stderr)


@dataclass(frozen=True)
class Grouped:
    """A table with how it splits: its first `key` columns repeat in every part, and
    each tuple of `groups` names a run of adjacent headers that stay together where
    they fit (any other column is a group of its own)."""

    table: Table
    key: int = 1
    groups: tuple[tuple[str, ...], ...] = ()

    def __rich_console__(self, console: Console, options):
        """On any rich console (a notebook's, `rich.print`): the parts that fit its
        width, each at its natural width, so no cell is cut to an ellipsis."""
        def measured(table: Table) -> int:
            natural = copy.copy(table)
            natural.expand = False
            return Measurement.get(console, options.update(width=UNBOUNDED),
                                   natural).maximum

        for number, part in enumerate(table_parts(self, options.max_width, measured)):
            if number:
                yield ""
            yield part


class FittingConsole(Console):
    """A rich console whose tables fit its width (module docstring)."""

    def __init__(self, *, wide: bool = False, **options) -> None:
        super().__init__(**options)
        self.wide = wide

    def print(self, *objects, **options) -> None:
        if not any(isinstance(o, (Table, Grouped)) for o in objects):
            if not self.wide:  # lines of text wrap at the width (module docstring)
                objects = tuple(fold(o, self.width) if isinstance(o, str) else o
                                for o in objects)
            super().print(*objects, **options)
            return
        for each in objects:
            shown = each if isinstance(each, Grouped) else \
                Grouped(each) if isinstance(each, Table) else None
            if shown is None:
                super().print(each, **options)
                continue
            for number, part in enumerate(table_parts(shown, self.width, self.measured,
                                                      wide=self.wide)):
                if number:
                    super().print()
                if not self.wide and isinstance(part.title, str):
                    part = copy.copy(part)  # its title wraps as a line of text does
                    part.title = fold(part.title, self.width)
                self._print_whole(part, **options)

    def measured(self, table: Table) -> int:
        """The table's natural width: every cell and heading on one line (an
        expanding table measured as if it did not expand)."""
        natural = copy.copy(table)
        natural.expand = False
        return self.measure(natural, options=self.options.update(width=UNBOUNDED)).maximum

    def _print_whole(self, table: Table, **options) -> None:
        """`table` at its natural width even where that is wider than the console: a
        table that does not expand takes its natural width on a console of any width,
        so only an expanding one is measured (measuring costs as much as printing)."""
        width = self.width
        self.width = max(width, self.measured(table)) if table.expand else UNBOUNDED
        try:
            super().print(table, **options)
        finally:
            self.width = width


def table_parts(shown: Grouped, width: int, measured, *, wide: bool = False) \
        -> list[Table]:
    """The tables `shown` prints as at `width` columns (`measured(table)` its natural
    width): itself where it fits or `wide`, else its column groups packed in order into
    as few parts as fit, each with the key columns first."""
    table = shown.table
    if wide or measured(table) <= width or len(table.columns) <= shown.key:
        return [table]
    key = list(range(shown.key))
    parts, current = [], []
    for group in _groups(shown):
        for chunk in [group] if measured(_part(table, key + group)) <= width else \
                [[index] for index in group]:
            if current and measured(_part(table, key + current + chunk)) > width:
                parts.append(current)
                current = []
            current += chunk
    parts.append(current)
    return [_part(table, key + columns, first=number == 0,
                  last=number == len(parts) - 1) for number, columns in enumerate(parts)]


def _groups(shown: Grouped) -> list[list[int]]:
    """The non-key columns' indices in groups, in column order: a run of columns whose
    headers are one of `shown.groups` is one group, any other column one of its own."""
    headers = [str(column.header) for column in shown.table.columns]
    groups: list[list[int]] = []
    index = shown.key
    while index < len(headers):
        size = next((len(group) for group in shown.groups
                     if tuple(headers[index:index + len(group)]) == tuple(group)), 1)
        groups.append(list(range(index, index + size)))
        index += size
    return groups


def _part(table: Table, columns: list[int], *, first: bool = True,
          last: bool = True) -> Table:
    """A table of some of `table`'s columns, its rows' styles and sections kept; the
    title only on the first part, the caption on the last."""
    part = copy.copy(table)
    part.title = table.title if first else None
    part.caption = table.caption if last else None
    part.columns = []
    part.rows = []
    for index in columns:
        column = table.columns[index].copy()
        column._index = len(part.columns)
        part.columns.append(column)
    cells = [list(table.columns[index].cells) for index in columns]
    for number, row in enumerate(table.rows):
        part.add_row(*(column[number] for column in cells), style=row.style,
                     end_section=row.end_section)
    return part


def console(*, stderr: bool = False, wide: bool = False) -> FittingConsole:
    """A console for reports: markup, emoji codes and highlighting off, so table cells
    and titles built from input text are printed as they are (`a:fire:b` stays text);
    tables fit its width unless `wide`; a line of text is printed whole (soft-wrapped:
    the terminal folds it, a pipe or a file gets it on one line)."""
    shown = FittingConsole(wide=wide, stderr=stderr, markup=False, emoji=False,
                           highlight=False, soft_wrap=True, **console_size())
    shown.wide = wide or not (shown.is_terminal or size_variable("COLUMNS") is not None)
    return shown
