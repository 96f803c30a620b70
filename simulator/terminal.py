"""Text from input files on its way to the terminal (DESIGN.md section 7): control
characters shown as escapes, never sent, and rich markup shown, never interpreted.

Every command's tables and messages pass input-derived text through `plain` (for print)
or print on a `console()` (rich with markup off), so a name like `[/]` or one holding an
escape sequence is displayed as written.
"""

from __future__ import annotations

import unicodedata

from rich.console import Console
from rich.markup import escape


def plain(text: str) -> str:
    """`text` with every control or format character (ESC, BEL, CR, bidi overrides, ...)
    written as a Python escape, newlines and tabs included."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cf") else c
                   for c in str(text))


def markup_safe(text: str) -> str:
    """`plain(text)` escaped for a rich markup string (progress descriptions, titles
    written with markup)."""
    return escape(plain(text))


def console(*, stderr: bool = False, min_width: int | None = None) -> Console:
    """A rich console for reports: markup and highlighting off, so table cells and
    titles built from input text are printed as they are; at least `min_width` wide
    when given (wide tables do not wrap in a narrow terminal or a pipe)."""
    width = None if min_width is None else max(Console().width, min_width)
    return Console(stderr=stderr, width=width, markup=False, highlight=False)
