"""`accsim import FORMAT FILE [-o out.yaml]`: one verb for every frontend, so a user
learns one spelling (DESIGN.md section 9). Each format is a module named in FORMATS
that offers `HELP` (one line for `accsim import --help`) and a reader READERS calls with
the parsed options as typed arguments; the options several formats share (-o, --strict,
an LLM step's) are declared in simulator.options.catalog, those of one format alone in
its module's `add_arguments(parser)` (FORMAT_ARGUMENTS).

The tables are code, not configuration: nothing named in an input file is imported.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
from collections.abc import Callable
from pathlib import Path

from simulator.errors import AccsimError
from simulator.frontends.imported import Imported
from simulator.frontends.writer import workload_to_yaml
from simulator.inputs.loader import Source, read_bytes, refuse_empty_name
from simulator.options.catalog import add_options
from simulator.output.files import check_distinct_outputs, check_output_path, write_file
from simulator.inputs.workload import Workload
from simulator.output.terminal import echo
from simulator.output.wording import counted

# Format name -> the module that reads it.
FORMATS: dict[str, str] = {
    "hf": "simulator.frontends.hf.llm_command",
    "onnx": "simulator.frontends.onnx",
    "kineto": "simulator.frontends.kineto",
}


# Format -> its reader, called with the parsed options as typed arguments.
READERS: dict[str, Callable[[argparse.Namespace], Imported]] = {
    "hf": lambda args: format_module("hf").load(args),
    "onnx": lambda args: format_module("onnx").import_onnx(
        args.file, batch=args.batch, input_shapes=dict(args.input_shape),
        strict=args.strict),
    "kineto": lambda args: format_module("kineto").import_kineto(args.file,
                                                                 strict=args.strict),
}
# Formats with options of their own (their module's add_arguments).
FORMAT_ARGUMENTS = ("onnx",)

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
        add_options(reader, f"import {name}", "outputs", "import", "llm")
        if name in FORMAT_ARGUMENTS:
            module.add_arguments(reader)
        reader.set_defaults(handler=_import)


def _import(args: argparse.Namespace) -> int:
    refuse_empty_name(args.file, "file to import", field="FILE")
    if args.output is not None:
        check_output_path(args.output, "output")
        check_distinct_outputs(args, ("output",))
    imported = READERS[args.format](args)
    text = workload_to_yaml(imported.workload, made_by=f"accsim import {args.format} "
                            f"{Path(args.file).name}", notes=imported.notes)
    if args.output is None:
        print(text, end="")
        return 0
    write_file(args.output, text, field="--output")
    for note in imported.notes:
        echo(f"import: {note}")
    echo(f"wrote {args.output}: {counted(len(imported.workload.operators), 'operator')}")
    return 0


def run_shortcut(args: argparse.Namespace) -> str | None:
    """The format whose run shortcut (`--onnx`, `--kineto`) was given, if any."""
    return next((n for n in RUN_SHORTCUTS if getattr(args, n, None) is not None), None)


def run_workload(args: argparse.Namespace) -> tuple[Workload, Source] | None:
    """The workload a run shortcut names, imported with its notes printed, and its
    source (the file's sha256, for the result's manifest); None without a shortcut."""
    name = run_shortcut(args)
    if name is None:
        return None
    path = getattr(args, name)
    refuse_empty_name(path, f"{name} file", f"--{name}")
    for clash in ("workload", "format"):
        if getattr(args, clash, None) is not None:
            raise AccsimError(f"--{name} is the workload: drop --{clash}",
                              file=path, field=f"--{name}")
    imported = getattr(format_module(name), f"import_{name}")(path)  # its defaults
    for note in imported.notes:
        echo(f"import: {note}")
    data = read_bytes(path, max_bytes=MAX_IMPORTED_BYTES)
    return imported.workload, Source(path, hashlib.sha256(data).hexdigest(), "")
