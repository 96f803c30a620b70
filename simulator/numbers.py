"""Numbers written as text in input files and on the command line: ASCII decimal
only. Python's float() and int() also take `1_000`, non-ASCII digits (Arabic-Indic,
full-width), surrounding whitespace and words such as "nan" and "infinity"; an input
file holding any of those is refused as not a number, never read as one (issue 42)."""

from __future__ import annotations

import re

# An optional sign, digits with an optional fraction (or a bare fraction), an optional
# exponent: the JSON / CSV notation of a real number.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WHOLE = re.compile(r"[+-]?[0-9]+")


# The words float() reads that are numbers still: passed on, where asked, for the
# caller's own rule (a finite, positive ceiling, say) to refuse in its own words.
_SPECIAL = ("nan", "inf", "infinity")


def decimal_float(text: str, *, specials: bool = False) -> float:
    """`text` as a float when it is an ASCII decimal number (or, with `specials`, nan
    or inf with an optional sign); ValueError otherwise (a value too large for a float
    is inf: the caller's range check refuses it)."""
    if specials and text.lower().lstrip("+-") in _SPECIAL:
        return float(text)
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"not an ASCII decimal number: {text[:40]!r}")
    return float(text)


def decimal_int(text: str) -> int:
    """`text` as an int when it is ASCII decimal digits with an optional sign;
    ValueError otherwise."""
    if not _WHOLE.fullmatch(text) or len(text) > 4000:  # int()'s own digit limit
        raise ValueError(f"not an ASCII whole number: {text[:40]!r}")
    return int(text)
