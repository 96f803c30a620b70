"""The `accsim` command: builds the parser from the command module of the verb run (and
only that one, so start-up imports no more than the verb needs) and dispatches to its
handler. Bad input ends in one line naming file, field and rule, and
exit status 1; results already computed are printed before any output file is written.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import importlib
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import NoReturn

from simulator import MODEL_VERSION, __version__
from simulator.errors import AccsimError
from simulator.output.terminal import plain

# Each verb, in the order `accsim --help` lists them: the module that adds its arguments
# (add_arguments(parser), which also sets its handler) and its one-line help. A module
# is imported only when its verb is the one run, so `accsim --help` imports none of
# them and `accsim schema` only its own.
VERBS = {
    "run": ("simulator.commands.run", "simulate a workload on a platform and print "
            "per-operator and per-layer_type tables"),
    "compare": ("simulator.commands.compare", "one workload on several platforms side "
                "by side"),
    "check": ("simulator.commands.check", "validate a platform, workload or mapping file"),
    "map": ("simulator.commands.map", "search the best tiling of every operator and "
            "report each heuristic's gap to it"),
    "regress": ("simulator.commands.regress", "compare per-operator cycles and energy with "
                "a baseline result (exit 1 on a regression, 2 on a refused baseline)"),
    "verify": ("simulator.commands.verify", "check a result JSON: changed inputs, and a "
               "rerun from its embedded inputs (a review packet's packet.json: result by "
               "result, then its study reviewed again and compared)"),
    "review": ("simulator.review.review_command", "write a review packet (index.html, packet.md, "
               "packet.json, figures, result files) for a study spec"),
    "serve": ("simulator.serving.serve_command", "request-level serving: arrivals, batching, KV "
              "cache, replicas; latency/TTFT/TPOT percentiles, throughput, goodput, "
              "energy per request"),
    "sweep": ("simulator.sweep.sweep_command", "design-space sweeps: run a spec into a resumable "
              "SQLite store, report Pareto fronts"),
    "plan-deployment": ("simulator.sweep.deploy_command", "deployment search: per "
                        "platform, the best deployment meeting a serving SLA (SLA "
                        "capacity, tokens/s per chip and per watt, cost), what binds "
                        "it, and the Pareto front"),
    "sensitivity": ("simulator.calibrate.sensitivity_command", "perturb each assumed platform value "
                    "to the ends of its range: a tornado of time, energy or EDP"),
    "calibrate": ("simulator.calibrate.calibrate_command", "fit assumed platform values "
                  "to measured operator times (bounded least squares, k-fold "
                  "cross-validated); write the calibrated platform"),
    "compile": ("simulator.commands.compile", "compile the hot kernels ahead of time "
                "into a library that later runs load without Numba (about 10-20 s, "
                "once; needs a C compiler)"),
    "schema": ("simulator.commands.schema", "print the JSON Schema of an input kind"),
    "export": ("simulator.export.export_command", "pre-silicon profiles for other tools: Vidur "
               "profiling CSVs, a Chakra execution trace (ASTRA-sim), LLMServingSim "
               "performance tables"),
    "import": ("simulator.frontends.import_command", "read a model or trace in another format and "
               "write accsim workload YAML"),
}


class _OneLineErrors(argparse.ArgumentParser):
    """argparse's parser with its usage errors on one line: the usage block it prints
    first (some twenty lines for `run`) buries the one line that says what is wrong.
    An option the verb does not take is refused by the verb's parser, naming the verb
    and the nearest option it does take (argparse leaves it to `accsim`, whose --help
    lists no verb's options)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the "
                  "options)\n")

    def parse_args(self, args=None, namespace=None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            verb = _chosen(self, parsed)
            verb.error(f"unrecognized arguments: {' '.join(extras)}"
                       + _nearest(extras, verb))
        return parsed


def _chosen(parser: argparse.ArgumentParser, parsed: argparse.Namespace
            ) -> argparse.ArgumentParser:
    """The innermost parser the arguments chose (`accsim import onnx`'s, say)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None))
            if chosen is not None:
                return _chosen(chosen, parsed)
    return parser


def _nearest(extras: list[str], parser: argparse.ArgumentParser) -> str:
    """'; did you mean --arch?' for the first unknown option that is close to one the
    parser takes ('' if none is)."""
    taken = [option for option in parser._option_string_actions if option.startswith("--")]
    for word in extras:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], taken, n=1)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


def build_parser(verbs: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The accsim command line: one subcommand per task, each listed with its help; the
    arguments of `verbs` (default: every verb) are added by their command modules."""
    parser = _OneLineErrors(
        prog="accsim", description="Cycle-approximate simulator of systolic-array ML "
        "accelerators.")
    parser.add_argument("--version", action="version", help="print the version of "
                        "accsim and of its timing model (results record both) and exit",
                        version=f"accsim {__version__}, MODEL_VERSION "
                        f"{MODEL_VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = set(VERBS) if verbs is None else set(verbs)
    for verb, (module, help_text) in VERBS.items():
        verb_parser = commands.add_parser(verb, help=help_text)
        if verb in chosen:
            importlib.import_module(module).add_arguments(verb_parser)
    return parser


@contextmanager
def _start_up() -> Iterator[None]:
    """Within: no garbage collection, and what it made is then frozen (gc.freeze). A
    verb's imports make some 10^5 objects that live as long as the process (modules,
    classes, pydantic schemas) and little garbage: collecting meanwhile finds nothing,
    and every later full collection would walk them again (together ~10% of a warm
    `accsim run`). Only for the command line's own process (main called without
    arguments): a caller in Python (tests, notebooks) keeps its collector as it was."""
    first = gc.get_freeze_count() == 0 and gc.isenabled()
    if first:
        gc.disable()
    try:
        yield
    finally:
        if first:
            gc.freeze()
            gc.enable()


def named_verb(argv: list[str]) -> list[str]:
    """The verb an argument list runs (its first word not an option: accsim itself takes
    no option but --help and --version), as a list of none or one."""
    return [word for word in argv if not word.startswith("-")][:1]


def _memory_advice(exc: MemoryError) -> str:
    """What to do when memory ran out: --max-memory only where tile programs took it
    (limits.tile_programs), the one case that option refuses up front."""
    from simulator.limits import TileMemoryError
    if isinstance(exc, TileMemoryError):
        return ("lower --max-memory so the run is refused up front with a tiling that "
                "fits, or use larger tiles")
    return ("the inputs, or the work they ask for, need more memory than this machine "
            "has: give smaller ones")


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; AccsimError becomes one line on stderr and exit 1."""
    start_up = _start_up() if argv is None else nullcontext()
    argv = sys.argv[1:] if argv is None else argv
    with start_up:
        parser = build_parser(named_verb(argv))
    if not argv:  # `accsim` alone: the verbs, not a one-line error about a missing one
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        for path in getattr(args, "plugin", []):
            args.load_plugin(path)
        return args.handler(args)
    except AccsimError as exc:
        print(f"accsim: error: {plain(exc.message())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("accsim: interrupted", file=sys.stderr)
        return 130
    except MemoryError as exc:  # a last resort: the limits should refuse such a run
        print(f"accsim: error: out of memory ({_memory_advice(exc)})", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `accsim ... | head`: the reader left; end quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a last resort: a path the system refused where no reader
        # of the file named it (a name longer than the system allows, a folder it may
        # not search, a full disk): the path and the system's reason on one line
        error = AccsimError(exc.strerror or str(exc),
                            file=None if exc.filename is None else str(exc.filename))
        print(f"accsim: error: {plain(error.message())}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
