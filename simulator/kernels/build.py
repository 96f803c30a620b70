"""`accsim compile`'s work: the kernel library (simulator.kernels.library) built with
numba.pycc.

ENTRIES are the kernels Python calls on a run's hot path (the mapper's conv windows, the
lowering's loop nest (its tile shape tables, step generator and step-by-step float
sums), the tiling heuristic's off-chip traffic per loop order (order_traffic) and its
busy-cycle tie-break (least_busy_cycles), the fast engine's replay, the attention
lowering's tile timings, and ceil_div, which the mapper calls a few thousand times),
each with the argument types it is called with. pycc compiles each into an export, with
every kernel it calls linked in, and the exports into one extension module; the manifest
beside it names each export's kernel and argument types, and digests the sources the
kernels could read (every package module the entries' modules import, transitively).
Kernels that no entry reaches (the nest and steady engines, attention, serving) keep
the JIT.

pycc needs a C compiler and setuptools. It is deprecated in Numba in favour of a
successor not yet released; the library is an optimisation, so where pycc is gone or
fails, `accsim compile` says why and runs keep the JIT.
"""

from __future__ import annotations

import ast
import json
import os
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from simulator.kernels import library as kernel_library
from simulator.engines.fast import _REPLAY_TYPES, _replay
from simulator.errors import AccsimError
from simulator.kernels.jit import Kernel
from simulator.lowering.nest_steps import (FILL_STEPS_TYPES, FLOAT_SUMS_TYPES,
                                           SHAPE_TABLES_TYPES, fill_steps, float_sums,
                                           shape_tables)
from simulator.mapping.windows import _window_grid
from simulator.model.loop_nest import least_busy_cycles, order_traffic
from simulator.model.timing import (_products_timing, ceil_div, vector_cycles,
                                    vector_cycles_each)
from simulator.program.validity import VALID_TYPES, _arrays_valid

_I, _V, _M = "int64", "int64[::1]", "int64[:, ::1]"
WINDOW_GRID_TYPES = "(" + ", ".join([_I] * 9 + [_V] * 4 + [_M] + [_V] * 4) + ")"
# _replay's `reloaded` (a flag per step, or none) and `evacuation` (per step, or none).
REPLAY_VARIANTS = tuple(_REPLAY_TYPES.replace("none, none", f"{reloaded}, {evacuation}")
                        for reloaded in ("none", "boolean[::1]")
                        for evacuation in ("none", _V))

# _products_timing's (shapes, rows, cols, count, dataflow, fold_model, speed, transposed,
# cycles, split), as the attention lowering calls it (model.timing.tile_products_timing).
TILE_PRODUCTS_TYPES = "(" + ", ".join([_M] + [_I] * 5 + ["float64", "boolean", _V,
                                                         "float64[:, ::1]"]) + ")"

# order_traffic's (counts, slots, fetch_bytes, reused, c_bytes, inside), as min_offchip
# calls it (mapping.footprint.offchip_by_order).
ORDER_TRAFFIC_TYPES = f"({_M}, {_M}, {_V}, boolean[::1], {_V}, boolean[:, :, ::1])"

# least_busy_cycles' (sizes, tiles, least, array, speed), as min_offchip calls it.
LEAST_BUSY_TYPES = f"({_V}, {_M}, boolean[:, ::1], {_V}, float64)"

# (export name, kernel, the argument types of each specialisation exported)
ENTRIES: tuple[tuple[str, Kernel, tuple[str, ...]], ...] = (
    ("ceil_div", ceil_div, ("(int64, int64)",)),
    ("products_timing", _products_timing, (TILE_PRODUCTS_TYPES,)),
    ("vector_cycles", vector_cycles, ("(int64, int64, int64, int64)",)),
    ("vector_cycles_each", vector_cycles_each, (f"({_V}, int64, int64, int64)",)),
    ("window_grid", _window_grid, (WINDOW_GRID_TYPES,)),
    ("shape_tables", shape_tables, (SHAPE_TABLES_TYPES,)),
    ("fill_steps", fill_steps, (FILL_STEPS_TYPES,)),
    ("float_sums", float_sums, (FLOAT_SUMS_TYPES,)),
    ("replay", _replay, REPLAY_VARIANTS),
    ("arrays_valid", _arrays_valid, (VALID_TYPES,)),
    ("order_traffic", order_traffic, (ORDER_TRAFFIC_TYPES,)),
    ("least_busy_cycles", least_busy_cycles, (LEAST_BUSY_TYPES,)),
)


@dataclass(frozen=True)
class Built:
    """What `build` wrote."""
    directory: Path
    file: str
    exports: int
    kernels: int
    bytes: int
    seconds: float


def module_file(name: str) -> Path | None:
    """The source file of a package module (None outside the package)."""
    parts = name.split(".")
    if parts[0] != "simulator":
        return None
    base = kernel_library.PACKAGE.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path) -> set[str]:
    """Package modules a source file imports (a `from m import x` may name a module x)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.startswith("simulator")}


def source_closure(modules: list[str]) -> list[str]:
    """Every package source file the modules import, transitively, with the packages
    holding them (their __init__ runs too); paths relative to the package, sorted."""
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            path = module_file(".".join(parts[:depth]))
            if path is not None and path not in seen:
                seen.add(path)
                todo.extend(_imported(path))
    return sorted(str(path.relative_to(kernel_library.PACKAGE)) for path in seen)


def _arg_text(numba_type) -> str:
    """The manifest's text for one argument type (kernel_library.arg_check reads it)."""
    from numba.core import types
    if isinstance(numba_type, types.NoneType):
        return "none"
    if isinstance(numba_type, types.Array):
        dims = ":, " * (numba_type.ndim - 1) + "::1"
        return f"{_arg_text(numba_type.dtype)}[{dims}]"
    return {"int64": "int64", "float64": "float64", "bool": "boolean"}[str(numba_type)]


@contextmanager
def _temporary_folders_in(folder: str):
    """Python's temporary folders made under `folder` (the build's scratch, removed
    after it) while pycc works: its compiler probe (numba.pycc.platform._gentmpfile)
    never removes the two folders it makes (its cleanup calls os.remove on a file
    object), and a compile that fails leaves its build folder; nothing is left in the
    system's temporary folder."""
    saved = tempfile.tempdir
    tempfile.tempdir = folder
    try:
        yield
    finally:
        tempfile.tempdir = saved


def build(directory: Path, report=lambda text: None) -> Built:
    """Compile ENTRIES into the library under `directory` and write its manifest last
    (a reader sees the old library or the new one, never half of one)."""
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():  # pycc's deprecation notice; see the docstring
            warnings.simplefilter("ignore")
            import numba
            from numba.core import sigutils
            from numba.pycc import CC
    except ImportError as exc:
        raise AccsimError(f"accsim compile: Numba's ahead-of-time compiler is not "
                          f"available ({exc}); it needs setuptools (pip install "
                          f"'accsim[compile]'); runs keep using the JIT") from exc
    modules = sorted({kernel.__module__ for _, kernel, _ in ENTRIES})
    sources = {path: kernel_library.source_digest(path) for path in source_closure(modules)}
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AccsimError(f"cannot make the library's folder: {exc.strerror}",
                          file=str(directory)) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise AccsimError("cannot write the library's folder (permission denied)",
                          file=str(directory))
    exports = []
    with tempfile.TemporaryDirectory(dir=directory) as scratch, \
            _temporary_folders_in(scratch):
        try:
            compiler = CC(kernel_library.MODULE)
        except RuntimeError as exc:  # pycc found no C compiler
            raise AccsimError("accsim compile needs a C compiler (gcc or clang on the "
                              "PATH); runs keep using the JIT") from exc
        compiler.output_dir = scratch
        for name, kernel, signatures in ENTRIES:
            dispatcher = kernel.dispatcher()
            for number, text in enumerate(signatures):
                report(f"typing {name} ({number + 1}/{len(signatures)})")
                args = tuple(sigutils.normalize_signature(text)[0])
                dispatcher.compile(args)  # from Numba's cache when warm: the return type
                signature = dispatcher.overloads[args].signature
                symbol = f"{name}_{number}"
                compiler.export(symbol, signature)(kernel.py_func)
                exports.append({"kernel": kernel.name, "symbol": symbol,
                                "args": [_arg_text(arg) for arg in args]})
        report(f"compiling {len(exports)} exports into one extension module")
        try:
            compiler.compile()
        except Exception as exc:  # distutils' CompileError, LinkError, a missing gcc...
            raise AccsimError(f"accsim compile: building the kernel library failed "
                              f"({type(exc).__name__}: {exc}); it needs a C compiler and "
                              f"setuptools; runs keep using the JIT") from exc
        built, = [path for path in Path(scratch).iterdir() if path.suffix == ".so"
                  or path.suffix == ".pyd"]
        # A new name each build: a process that loaded the old file keeps using it.
        stamp = f"{int(time.time() * 1e6):x}"
        file = f"{kernel_library.MODULE}-{stamp}{''.join(built.suffixes)}"
        os.replace(built, directory / file)
    manifest = {"format": kernel_library.FORMAT, "file": file, "exports": exports,
                "numba": numba.__version__,  # for the record: the library needs none
                "sources": sources}
    staged = directory / f"{kernel_library.MANIFEST}.tmp"
    staged.write_text(json.dumps(manifest, indent=1))
    os.replace(staged, directory / kernel_library.MANIFEST)
    for old in directory.glob(f"{kernel_library.MODULE}-*"):
        if old.name != file:
            old.unlink(missing_ok=True)  # a process that loaded it keeps its mapping
    return Built(directory, file, len(exports), len(ENTRIES),
                 (directory / file).stat().st_size, time.perf_counter() - started)
