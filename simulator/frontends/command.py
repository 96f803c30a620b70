"""`accsim import FORMAT FILE [-o out.yaml]`: one verb for every frontend, so a user
learns one spelling (DESIGN.md section 9). Each format is a module named in FORMATS
that offers:

- `HELP`: one line for `accsim import --help`;
- `add_arguments(parser)`: its own options beside FILE;
- `load(args) -> Imported`: the Workload read from `args.file`, with notes.

The table is code, not configuration: nothing named in an input file is imported.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass, field
from pathlib import Path

from simulator.errors import AccsimError
from simulator.frontends.writer import workload_to_yaml
from simulator.workload import Workload

# Format name -> the module that reads it.
FORMATS: dict[str, str] = {"hf": "simulator.frontends.hf.command"}


@dataclass(frozen=True)
class Imported:
    """What a frontend read: the workload, and what the user should know about it."""

    workload: Workload
    notes: list[str] = field(default_factory=list)


def format_module(name: str):
    """The reader module of a format in FORMATS."""
    return importlib.import_module(FORMATS[name])


def add_parser(commands) -> None:
    """Register `accsim import` with one sub-command per format."""
    verb = commands.add_parser(
        "import", help="read a model or trace in another format and write accsim "
        "workload YAML")
    formats = verb.add_subparsers(dest="format", required=True, metavar="FORMAT")
    for name in FORMATS:
        module = format_module(name)
        reader = formats.add_parser(name, help=module.HELP)
        reader.add_argument("file", help="the file to import")
        reader.add_argument("-o", "--output", metavar="PATH",
                            help="write the workload YAML here (default: standard output)")
        module.add_arguments(reader)
        reader.set_defaults(handler=_import)


def _import(args: argparse.Namespace) -> int:
    imported = format_module(args.format).load(args)
    text = workload_to_yaml(imported.workload, made_by=f"accsim import {args.format} "
                            f"{Path(args.file).name}", notes=imported.notes)
    if args.output is None:
        print(text, end="")
        return 0
    try:
        Path(args.output).write_text(text)
    except OSError as exc:
        raise AccsimError(f"cannot write: {exc.strerror}", file=args.output) from None
    for note in imported.notes:
        print(f"import: {note}")
    print(f"wrote {args.output}: {len(imported.workload.operators)} operators")
    return 0
