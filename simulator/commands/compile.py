"""`accsim compile`: build the kernel library (simulator.kernels.library), so that later
runs call compiled kernels without loading Numba; `--check` says whether the library
there is current, without building."""

from __future__ import annotations

import argparse

from simulator.kernels import library as kernel_library
from simulator.output import progress
from simulator.kernels.build import build
from simulator.output.terminal import echo


def handle(args: argparse.Namespace) -> int:
    directory = kernel_library.library_dir()
    if args.check:
        return _check(directory)
    with progress.status("compiling the kernel library (10-20 s)") as spinner:
        built = build(directory, lambda text: spinner and spinner.update(
            f"kernel library: {text}"))
    echo(f"kernel library: {built.directory / built.file}\n"
         f"  {built.kernels} kernels, {built.exports} exports, "
         f"{built.bytes / 1e3:,.0f} KB, built in {built.seconds:.1f} s")
    if not kernel_library.enabled():
        echo("  not used while ACCSIM_KERNEL_LIBRARY=0 or NUMBA_DISABLE_JIT=1")
    return 0


def _check(directory) -> int:
    """0 when the library is present and current (and will be used), 1 otherwise."""
    exports, why = kernel_library.attempt(directory)
    if exports:
        echo(f"kernel library: current, {len(exports)} kernels, "
             f"{sum(map(len, exports.values()))} exports ({directory})")
        return 0
    echo(f"kernel library: {why} ({directory}); runs use the JIT; "
         f"`accsim compile` builds it")
    return 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="only say whether the library is current (exit 1 if not)")
    parser.set_defaults(handler=handle)
