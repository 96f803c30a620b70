"""The `accsim` command: builds the parser from each verb's command module and
dispatches to its handler. Bad input ends in one line naming file, field and rule, and
exit status 1; results already computed are printed before any output file is written.
"""

from __future__ import annotations

import argparse
import os
import sys

from simulator.commands import check, compare, regress, run, schema, verify
from simulator.commands import map as map_command
from simulator.errors import AccsimError
from simulator.frontends import command as import_command
from simulator.mapping.heuristics import load_plugin
from simulator.review import command as review_command
from simulator.serving import command as serve_command
from simulator.sweep import command as sweep_command
from simulator.terminal import plain

# The verbs in the order `accsim --help` lists them.
VERBS = (run, compare, check, map_command, regress, verify, review_command, serve_command,
         sweep_command, schema, import_command)


def build_parser() -> argparse.ArgumentParser:
    """The accsim command line: one subcommand per task."""
    parser = argparse.ArgumentParser(
        prog="accsim", description="Cycle-approximate simulator of systolic-array ML "
        "accelerators.")
    commands = parser.add_subparsers(dest="command", required=True)
    for verb in VERBS:
        verb.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; AccsimError becomes one line on stderr and exit 1."""
    args = build_parser().parse_args(argv)
    try:
        for path in getattr(args, "plugin", []):
            load_plugin(path)
        return args.handler(args)
    except AccsimError as exc:
        print(f"accsim: error: {plain(exc.message())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("accsim: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # a last resort: the limits should refuse such a run up front
        print("accsim: error: out of memory (lower --max-memory so the run is refused up "
              "front with a tiling that fits, or use larger tiles)", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `accsim ... | head`: the reader left; end quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
