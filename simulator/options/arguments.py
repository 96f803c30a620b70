"""The Python API's arguments checked as the command line checks the options they
mirror: the same rule (simulator.options.rules) from the same declaration
(simulator.options.catalog), and every error a ValueError or TypeError that names the
argument, never the flag and never another exception."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from simulator.errors import AccsimError
from simulator.options.catalog import OPTIONS
from simulator.options.rules import (OptionTypeError, OptionValueError, Rule,
                                     check_several)


@dataclass(frozen=True)
class Mirror:
    """An argument as the option `flag` (or a bare rule where no flag exists): `objects`
    are the Python objects it may be instead (checked when used), `several` a list of
    values as the option repeated."""

    flag: str | Rule
    objects: tuple[type, ...] = ()
    several: bool = False

    def check(self, value, name: str) -> None:
        if self.objects and isinstance(value, self.objects):
            return
        rule = self.flag if isinstance(self.flag, Rule) else OPTIONS[self.flag].rule
        if self.several:
            for item in check_several(Rule(), value, name):
                if not (self.objects and isinstance(item, self.objects)):
                    rule.check(item, name)
        else:
            rule.check(value, name)


def as_argument_error(exc: AccsimError, names: dict[str, str]) -> AccsimError:
    """`exc` as a ValueError (or the TypeError it is) whose field is the argument's
    name where it named a flag the function mirrors."""
    field = names.get(exc.field, exc.field)
    kind = OptionTypeError if isinstance(exc, TypeError) else OptionValueError
    return kind(exc.rule, file=exc.file, field=field)


def mirrors(fields_of: str | None = None, /, **arguments: str | Mirror) -> Callable:
    """Check each named argument of the decorated function against the option it
    mirrors (a flag, or a Mirror) before the call; None is let through where it is the
    argument's default. Any AccsimError the call raises comes out as ValueError or
    TypeError, naming the argument instead of the flag; `fields_of`: a verb whose
    options the function takes as keyword fields (serve's), each named so too."""
    table = {name: Mirror(how) if isinstance(how, (str, Rule)) else how
             for name, how in arguments.items()}
    names = {mirror.flag: name for name, mirror in table.items()
             if isinstance(mirror.flag, str)} | (verb_fields(fields_of) if fields_of
                                                 else {})

    def wrap(function: Callable) -> Callable:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def checked(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            for name, mirror in table.items():
                if name not in bound.arguments:
                    continue
                value = bound.arguments[name]
                if value is None and signature.parameters[name].default is None:
                    continue
                mirror.check(value, name)
            try:
                return function(*args, **kwargs)
            except AccsimError as exc:
                raise as_argument_error(exc, names) from None

        return checked

    return wrap


def verb_fields(verb: str) -> dict[str, str]:
    """{flag: field} of the shared options `verb` takes, each field named as the verb's
    record stores it (serve's spec: --mapping is mapping_plan)."""
    return {option.flag: option.uses[verb].dest or option.name
            for option in OPTIONS.values() if verb in option.uses}


def check_fields(verb: str, fields: dict) -> None:
    """Keyword fields named as `verb`'s options store them (serve's spec fields), each
    checked by its option's rule; the ranges are the record's to check."""
    rules = {field: OPTIONS[flag].rule_for(verb)
             for flag, field in verb_fields(verb).items()}
    for name, value in fields.items():
        if name in rules and value is not None:
            rules[name].check(value, name)
