"""The rules an option's value obeys, one home for all of them.

Declared options (classes): each rule is written once and used by both the command
line (argparse reads the text with `read`; the command or the library function it calls
checks the value with `check`) and the Python API (which checks the argument with the
same `check`, so its error carries the same rule in the same words). A broken rule
raises OptionValueError or OptionTypeError: an AccsimError (the command line prints it
on one line, exit 1) that is also a ValueError or TypeError (what a Python caller
expects), its field the flag; the API renames the field to its argument.

One verb's own options (functions, at the end): whole numbers and decimals written in
ASCII only, within their bounds (simulator.numbers reads them); comma-separated lists;
an option that only means something beside another. Each refusal is an AccsimError
(argparse's error for a type) naming the option.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from typing import ClassVar

from simulator.errors import AccsimError
from simulator.numbers import decimal_float, decimal_int


def _reader(read, name: str):
    """argparse's reader of a value's text through `read`; argparse's error names the
    option and `name` ("invalid int value: '1_000'")."""
    def reader(text: str):
        return read(text.strip())
    reader.__name__ = name
    return reader


# ASCII digits only (int() and float() also take '1_000' and other scripts' digits);
# nan and inf reach the rule, which refuses them in its own words.
integer = _reader(decimal_int, "int")
number = _reader(lambda text: decimal_float(text, specials=True), "float")


class OptionValueError(AccsimError, ValueError):
    """A value outside its option's rule."""


class OptionTypeError(AccsimError, TypeError):
    """A value of the wrong kind for its option (a bool or text where a count goes)."""


def _kind(value) -> str:
    return type(value).__name__


@dataclass(frozen=True)
class Rule:
    """Any value: text read as it is. `read`: how a command line's text becomes the
    value (argparse's `type`; None: the text itself)."""

    read: ClassVar[type | None] = None

    def check(self, value, field: str):
        """`value` if it obeys the rule, else OptionValueError/OptionTypeError naming
        `field`."""
        return value


@dataclass(frozen=True)
class Name(Rule):
    """A shipped name or a path: non-empty text (a str or a path object)."""

    def check(self, value, field: str):
        if not isinstance(value, (str, os.PathLike)):
            raise OptionTypeError(f"must be a name or path (str or Path), not "
                                  f"{_kind(value)}", field=field)
        if not str(value).strip():
            raise OptionValueError("must name something: it is empty", field=field)
        return value


@dataclass(frozen=True)
class OneOf(Rule):
    """One of a fixed set of words (argparse's `choices`)."""

    choices: tuple[str, ...]
    what: str = "value"

    def check(self, value, field: str):
        if not isinstance(value, str):
            raise OptionTypeError(f"must be one of {', '.join(self.choices)} (a str), not "
                                  f"{_kind(value)}", field=field)
        if value not in self.choices:
            raise OptionValueError(f"unknown {self.what} {value!r} (choose from "
                                   f"{', '.join(self.choices)})", field=field)
        return value


@dataclass(frozen=True)
class Whole(Rule):
    """A whole number from `low` to `high` (a bool is not a number here)."""

    low: int = 1
    high: int = 2**63 - 1

    read = staticmethod(integer)

    def check(self, value, field: str):
        if isinstance(value, bool) or not isinstance(value, int):
            raise OptionTypeError(f"must be a whole number (int), not {_kind(value)}",
                                  field=field)
        if not self.low <= value <= self.high:
            raise OptionValueError(f"must be a whole number from {self.low:,} to "
                                   f"{self.high:,}, found {value:,}", field=field)
        return value


@dataclass(frozen=True)
class Integer(Rule):
    """A whole number whose range a record checks (serve's spec: simulator.serving.spec
    holds the ranges of the serving options, for its YAML and its flags alike)."""

    read = staticmethod(integer)

    def check(self, value, field: str):
        if isinstance(value, bool) or not isinstance(value, int):
            raise OptionTypeError(f"must be a whole number (int), not {_kind(value)}",
                                  field=field)
        return value


@dataclass(frozen=True)
class Real(Rule):
    """A number whose range a record checks (as Integer)."""

    read = staticmethod(number)

    def check(self, value, field: str):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionTypeError(f"must be a number (int or float), not {_kind(value)}",
                                  field=field)
        return value


@dataclass(frozen=True)
class Number(Rule):
    """A finite number at least `low`; `meaning` says what it is in the error."""

    low: float = 0.0
    meaning: str = ""

    read = staticmethod(number)

    def check(self, value, field: str):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionTypeError(f"must be a number (int or float), not {_kind(value)}",
                                  field=field)
        if not math.isfinite(value) or value < self.low:
            said = f" ({self.meaning})" if self.meaning else ""
            raise OptionValueError(f"must be a finite number >= {self.low:g}{said}, "
                                   f"found {value!r}", field=field)
        return value


@dataclass(frozen=True)
class Switch(Rule):
    """On or off (a flag without a value; True or False in Python)."""

    def check(self, value, field: str):
        if not isinstance(value, bool):
            raise OptionTypeError(f"must be True or False, not {_kind(value)}",
                                  field=field)
        return value


def check_several(rule: Rule, values, field: str) -> list:
    """A repeated option's values (a list or tuple, at least one), each checked."""
    if isinstance(values, (str, bytes, os.PathLike)) or not isinstance(values,
                                                                        (list, tuple)):
        raise OptionTypeError(f"must be a list or tuple of values, not {_kind(values)}",
                              field=field)
    if not values:
        raise OptionValueError("needs at least one value: it is empty", field=field)
    return [rule.check(value, field) for value in values]


# --- One verb's own options: functions a command calls on what argparse read ---------

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
