"""Rules an option's value must keep, one small function each, so that a command's
options are checked by the same rule wherever they are read (and the rules can later be
named in the options' declarations): whole numbers and decimals written in ASCII only,
within their bounds (simulator.numbers reads them); an option that only means
something beside another. Each refusal
is an AccsimError (argparse's error for a type) naming the option."""

from __future__ import annotations

import argparse
import math

from simulator.errors import AccsimError
from simulator.numbers import decimal_float, decimal_int

INT64_MAX = 2**63 - 1
# Values one list option may hold (each a search axis: more is no search one runs).
MAX_LIST_VALUES = 64


def whole_number(text: str, field: str, *, low: int = 1, high: int = INT64_MAX,
                 file: str | None = None) -> int:
    """`text` as a whole number in [low, high], written in ASCII digits."""
    try:
        value = decimal_int(text.strip())
    except ValueError:
        raise AccsimError(f"{text!r} is not a whole number (ASCII digits only)",
                          file=file, field=field) from None
    if not low <= value <= high:
        raise AccsimError(f"{value} is outside [{low:,}, {high:,}]", file=file, field=field)
    return value


def whole_numbers(text: str, field: str, *, low: int = 1, high: int = INT64_MAX) -> tuple[int, ...]:
    """'1,2,4' as distinct whole numbers in [low, high], ascending; at least one, at
    most MAX_LIST_VALUES; an empty item ('1,,2') is refused."""
    parts = text.split(",")
    if any(not part.strip() for part in parts):
        raise AccsimError(f"expected whole numbers separated by commas, got {text!r} "
                          "(an empty item)", field=field)
    values = tuple(sorted({whole_number(part, field, low=low, high=high) for part in parts}))
    if len(values) > MAX_LIST_VALUES:
        raise AccsimError(f"{len(values)} values, at most {MAX_LIST_VALUES}", field=field)
    return values


def names(parts: list[str] | None, field: str) -> list[str]:
    """Comma-separated names from a repeatable option, in order, each once; an empty
    name ('a,,b', ',') is refused."""
    found: list[str] = []
    for part in parts or ():
        for name in part.split(","):
            if not name.strip():
                raise AccsimError(f"an empty name in {part!r}", field=field)
            found.append(name.strip())
    return list(dict.fromkeys(found))


def in_range(value: int | float, field: str, *, low, high) -> None:
    """A number an option took (argparse's int or float) within [low, high]."""
    if isinstance(value, float) and not math.isfinite(value) or not low <= value <= high:
        raise AccsimError(f"{value} is outside [{low:,}, {high:,}]", field=field)


def requires(args: argparse.Namespace, option: str, needed: str,
             value: str | None = None) -> None:
    """`option` means something only beside `needed` (set to `value` when one is
    named): refused when given without it."""
    given = getattr(args, option.lstrip("-").replace("-", "_"), None)
    other = getattr(args, needed.lstrip("-").replace("-", "_"), None)
    if given in (None, False, []):
        return
    if value is None and not other:
        raise AccsimError(f"is used only with {needed}, which is not given", field=option)
    if value is not None and other != value:
        raise AccsimError(f"is used only with {needed} {value}", field=option)


def whole(text: str) -> int:
    """argparse type: a whole number in ASCII digits (int() also takes '1_0' and '٣')."""
    try:
        return decimal_int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (ASCII digits "
                                         "only)") from None


def real(text: str) -> float:
    """argparse type: a finite decimal in ASCII (float() also takes '1_0', '٣', 'nan'
    and 'inf')."""
    try:
        value = decimal_float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a decimal number (ASCII "
                                         "digits, point and exponent only)") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not finite")
    return value
