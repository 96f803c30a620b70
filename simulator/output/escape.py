"""Input text made inert in the output formats accsim writes (DESIGN.md section 7):
names, descriptions and study text are data, never markup, links or formulas. HTML is
escaped by Jinja's autoescape; Markdown and CSV by the two functions here."""

from __future__ import annotations

import csv
import io
import re

# Characters that open Markdown (CommonMark and GitHub's) inline syntax anywhere: written
# as character references, which render as the character and never as markup (the
# pipe as \| so a table cell stays one cell).
_INLINE = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "&#91;", "]": "&#93;",
           "*": "&#42;", "`": "&#96;", "~": "&#126;", "\\": "&#92;", "!": "&#33;",
           ":": "&#58;", "|": "\\|", "$": "&#36;"}
_INLINE_PATTERN = re.compile("|".join(re.escape(c) for c in _INLINE)
                             + r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|www\.")
# At the start of a line these open a heading, list, quote or rule.
_LINE_START = re.compile(r"^(\s*)([#=+-]|\d+(?=[.)]))")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# OWASP's list for CSV injection: a cell starting with these is read as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _inline(match: re.Match) -> str:
    found = match.group(0)
    return {"_": "&#95;", "www.": "www&#46;"}.get(found) or _INLINE[found]


def markdown(text) -> str:
    """`text` as literal Markdown inline text on one line: every character that could
    open emphasis, a link, an image, a code span, an autolink or HTML written as a
    character reference; line breaks and control characters as spaces."""
    return _INLINE_PATTERN.sub(_inline, _CONTROL.sub(" ", str(text)))


def markdown_line(text) -> str:
    """markdown() for text that starts a line: a leading #, -, +, = or list number
    made literal too."""
    return _LINE_START.sub(lambda m: m.group(1) + "".join(f"&#{ord(c)};" for c in
                                                          m.group(2)),
                           markdown(text), count=1)


def csv_cell(value):
    """A CSV cell that a spreadsheet shows as text, never runs as a formula: text
    starting with = + - @ tab or CR gets a leading apostrophe (OWASP); numbers (a
    negative one included) stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_text(fields: list[str], rows, *, extrasaction: str = "raise") -> str:
    """CSV text with a header of `fields` and one line per row (a mapping), every
    cell through csv_cell."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=fields, extrasaction=extrasaction)
    writer.writeheader()
    writer.writerows({key: csv_cell(value) for key, value in row.items()} for row in rows)
    return buffer.getvalue()
