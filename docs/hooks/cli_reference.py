"""MkDocs hook: the CLI reference page is generated from accsim's own argparse parser
(simulator.cli.build_parser), so it cannot drift from the code. A page holding the
marker `<!-- accsim-cli -->` gets every verb's `--help` in its place."""

from __future__ import annotations

import argparse

from simulator.cli import VERBS, build_parser

MARKER = "<!-- accsim-cli -->"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _help(parser: argparse.ArgumentParser) -> str:
    return parser.format_help().replace("\t", " ").rstrip()


def cli_reference() -> str:
    parser = build_parser()
    parts = ["## accsim", "", "```text", _help(parser), "```", ""]
    for verb, verb_parser in _subparsers(parser).items():
        parts += [f"## accsim {verb}", "", VERBS[verb][1][0].upper() + VERBS[verb][1][1:]
                  + ".", "", "```text", _help(verb_parser), "```", ""]
        nested = [a for a in verb_parser._actions
                  if isinstance(a, argparse._SubParsersAction)]
        for sub, sub_parser in (nested[0].choices.items() if nested else ()):
            parts += [f"### accsim {verb} {sub}", "", "```text", _help(sub_parser), "```",
                      ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, **_) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
