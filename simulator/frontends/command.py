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
import hashlib
import importlib
from pathlib import Path

from simulator.errors import AccsimError
from simulator.frontends.writer import workload_to_yaml
from simulator.inputs.loader import Source, read_bytes
from simulator.output.files import check_output_path, write_file
from simulator.inputs.workload import Workload

# Format name -> the module that reads it.
FORMATS: dict[str, str] = {
    "hf": "simulator.frontends.hf.command",
    "onnx": "simulator.frontends.onnx",
    "kineto": "simulator.frontends.kineto",
}


# `accsim run --FORMAT FILE`: formats a run imports directly, with their default
# options (the metavar names the file).
RUN_SHORTCUTS = {"onnx": "MODEL.onnx", "kineto": "TRACE.json"}
# The largest file a frontend reads (an ONNX model at protobuf's limit).
MAX_IMPORTED_BYTES = 2 * 2**30


def format_module(name: str):
    """The reader module of a format in FORMATS."""
    return importlib.import_module(FORMATS[name])


def add_arguments(verb: argparse.ArgumentParser) -> None:
    """The arguments of `accsim import`."""
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
    if args.output is not None:
        check_output_path(args.output, "output")
    imported = format_module(args.format).load(args)
    text = workload_to_yaml(imported.workload, made_by=f"accsim import {args.format} "
                            f"{Path(args.file).name}", notes=imported.notes)
    if args.output is None:
        print(text, end="")
        return 0
    write_file(args.output, text, field="--output")
    for note in imported.notes:
        print(f"import: {note}")
    print(f"wrote {args.output}: {len(imported.workload.operators)} operators")
    return 0


def add_run_options(run: argparse.ArgumentParser) -> None:
    """`--onnx MODEL.onnx`, `--kineto TRACE.json` on `accsim run`: import and run."""
    group = run.add_mutually_exclusive_group()
    for name, metavar in RUN_SHORTCUTS.items():
        group.add_argument(f"--{name}", metavar=metavar,
                           help=f"import {metavar} as the workload (`accsim import "
                           f"{name}` with its defaults) and run it")


def run_shortcut(args: argparse.Namespace) -> str | None:
    """The format whose run shortcut (`--onnx`, `--kineto`) was given, if any."""
    return next((n for n in RUN_SHORTCUTS if getattr(args, n, None)), None)


def run_workload(args: argparse.Namespace) -> tuple[Workload, Source] | None:
    """The workload a run shortcut names, imported with its notes printed, and its
    source (the file's sha256, for the result's manifest); None without a shortcut."""
    name = run_shortcut(args)
    if name is None:
        return None
    path = getattr(args, name)
    for clash in ("workload", "format"):
        if getattr(args, clash, None) is not None:
            raise AccsimError(f"--{name} is the workload: drop --{clash}",
                              file=path, field=f"--{name}")
    module = format_module(name)
    options = argparse.ArgumentParser(add_help=False)
    module.add_arguments(options)
    imported = module.load(argparse.Namespace(**vars(options.parse_args([])), file=path))
    for note in imported.notes:
        print(f"import: {note}")
    data = read_bytes(path, max_bytes=MAX_IMPORTED_BYTES)
    return imported.workload, Source(path, hashlib.sha256(data).hexdigest(), "")
