"""An option declared once (flag, rule, help, the verbs that take it and how) and the
argparse arguments built from it. Every verb's parser adds its shared options through
`add_options`, so a flag has one spelling, one rule and one help wherever it is taken;
a verb says more in its Use only where the option means more for it (what its --json
holds, a default of its own)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from simulator.options.rules import Rule, Switch

UNSET = object()  # a Use that keeps the option's default


@dataclass(frozen=True)
class Use:
    """How one verb takes an option. `repeat`: given once per value (a list);
    `note`: what the docs' flag table adds after "yes"; `aliases`: other spellings this
    verb also reads, with the same meaning (not deprecated); `deprecated`: old spellings
    still read, each use printing a one-line note; `dest`: where the value lands when
    the verb's own record names it otherwise (serve's spec field `mapping_plan`); `listed`:
    the text is a comma-separated list of values, read by the verb (plan-deployment's
    search axes); `rule`: where the verb's record accepts a wider set than the option's
    rule (serve's --dtype: every format simulator.inputs.platform.Dtype names)."""

    help: str | Callable[[], str] | None = None
    default: object = UNSET
    required: bool = False
    repeat: bool = False
    note: str = ""
    metavar: str | None = None
    aliases: tuple[str, ...] = ()
    deprecated: tuple[str, ...] = ()
    dest: str | None = None
    listed: bool = False
    rule: Rule | None = None


@dataclass(frozen=True)
class Option:
    """One option. `group`: the set of options a verb adds together (add_options);
    `section`: the titled part of --help it is listed in; `exclusive`: options of the
    same name exclude each other; `short`: its one-letter spelling; `row`/`spec`: its
    row of the docs' flag table and whether a sweep spec names it instead."""

    flag: str
    rule: Rule
    help: str | Callable[[], str]
    group: str
    uses: Mapping[str, Use]
    metavar: str | None = None
    dest: str | None = None
    default: object = None
    short: str | None = None
    section: str | None = None
    exclusive: str | None = None
    row: str | None = None
    spec: bool = False
    parser_defaults: Mapping[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The attribute (and API argument) the value lands in."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    def help_for(self, verb: str) -> str:
        use = self.uses[verb]
        text = use.help or self.help
        text = text() if callable(text) else text
        if use.deprecated:
            text += f" ({', '.join(use.deprecated)}: the old spelling, deprecated)"
        return text.replace("%", "%%")

    def rule_for(self, verb: str) -> Rule:
        return self.uses[verb].rule or self.rule

    def check(self, value, *, field: str | None = None):
        """`value` if it obeys the option's rule; else an error naming `field` (the
        flag by default)."""
        return self.rule.check(value, field or self.flag)


def deprecated(inner: type[argparse.Action], new: str,
               old: tuple[str, ...]) -> type[argparse.Action]:
    """`inner` (argparse's store, append, store_true) that also says on stderr, in one
    line, when an old spelling was the one used."""

    class Deprecated(inner):
        def __call__(self, parser, namespace, values, option_string=None):
            if option_string in old:
                print(f"accsim: note: {option_string} is deprecated; use {new}",
                      file=sys.stderr)
            super().__call__(parser, namespace, values, option_string)

    return Deprecated


def _action(option: Option, use: Use) -> dict:
    rule = use.rule or option.rule
    default = option.default if use.default is UNSET else use.default
    if isinstance(option.rule, Switch):  # a verb's record may take more (use.rule)
        return {"action": argparse._StoreTrueAction, "default": default}
    arguments = {"action": argparse._AppendAction if use.repeat else argparse._StoreAction,
                 "default": default}
    if use.metavar or option.metavar:
        arguments["metavar"] = use.metavar or option.metavar
    choices = getattr(rule, "choices", None)
    if choices is not None and not use.listed:
        arguments["choices"] = choices
    elif rule.read is not None and not use.listed:
        arguments["type"] = rule.read
    return arguments


def add_option(parser, option: Option, verb: str) -> None:
    """One option as `verb` takes it."""
    use = option.uses[verb]
    arguments = _action(option, use)
    if use.deprecated:
        arguments["action"] = deprecated(arguments["action"], option.flag, use.deprecated)
    flags = ((option.short,) if option.short else ()) + (option.flag, *use.aliases,
                                                           *use.deprecated)
    parser.add_argument(*flags, dest=use.dest or option.name,
                        required=use.required, help=option.help_for(verb), **arguments)


def add_options(parser: argparse.ArgumentParser, verb: str, *groups: str,
                options: Mapping[str, Option]) -> None:
    """Every option of `groups` that `verb` takes, in declaration order: those with a
    `section` under its title, those with an `exclusive` name in one mutually
    exclusive group."""
    sections: dict[str, argparse._ArgumentGroup] = {}
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for option in options.values():
        if option.group not in groups or verb not in option.uses:
            continue
        target = parser
        if option.section is not None:
            if option.section not in sections:
                sections[option.section] = parser.add_argument_group(option.section)
            target = sections[option.section]
        if option.exclusive is not None:
            if option.exclusive not in exclusive:
                exclusive[option.exclusive] = target.add_mutually_exclusive_group()
            target = exclusive[option.exclusive]
        add_option(target, option, verb)
        if option.parser_defaults:
            parser.set_defaults(**option.parser_defaults)
