"""The kernel library: kernels compiled ahead of time into one extension module, so that
a run calls them without importing Numba.

A short run spends most of its time loading Numba (its import, its typing and target
registries, and SciPy's BLAS probe: about 0.35 s of a 0.7 s SCALE-Sim alexnet run)
before the first kernel call. `accsim compile` (simulator.kernels.build) compiles the
kernels that Python calls on a run's hot path, with their callees, into one extension
module under `library_dir()`. A Kernel (simulator.kernels.jit) then calls its export when the
arguments fit it, and Numba is never imported.

Two checks keep the library from ever changing a result:
- it is loaded only while it matches the package: its manifest holds a digest of
  every source file whose code or constants the kernels could read, checked on load;
  an edit anywhere among them sets the library aside until the next `accsim compile`;
- each call is checked: numba.pycc's exports convert their arguments without checking
  them (a float array for an int one runs on reinterpreted memory), so a call whose
  argument types are not exactly an export's goes to the JIT, which compiles the
  specialisation it needs, as it would without the library.
ACCSIM_KERNEL_LIBRARY=0 or NUMBA_DISABLE_JIT=1 turns the library off.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import json
import os
import platform
import stat
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

from simulator.errors import AccsimError
from simulator.output.cache_home import check_folder, checked_cache_home

MODULE = "accsim_kernels"  # the extension module's name (its PyInit symbol)
MANIFEST = "manifest.json"
FORMAT = 1
MAX_MANIFEST_BYTES = 2**20  # a manifest lists some 20 exports and 60 sources: ~10 KB
PACKAGE = Path(__file__).resolve().parents[1]  # source paths in the manifest are under it
_NONE = frozenset((type(None),))
_ARRAY = frozenset((np.ndarray,))
_SCALARS = {"int64": frozenset((int, np.int64)), "float64": frozenset((float, np.float64)),
            "boolean": frozenset((bool, np.bool_))}
# Each exported kernel's (argument checks, compiled function) pairs, by its name.
Exports = Mapping[str, tuple[tuple[tuple, Callable], ...]]
_EMPTY: Exports = MappingProxyType({})  # no library: no exports
_DTYPES = {"int64": np.dtype(np.int64), "float64": np.dtype(np.float64),
           "boolean": np.dtype(np.bool_)}


def library_dir() -> Path:
    """Where the library lives: $ACCSIM_KERNEL_DIR, else accsim/kernels in the user's
    cache folder (simulator.output.cache_home), one folder per Python version, machine
    and NumPy version (the extension is built against NumPy's C API: another version
    may not load it)."""
    base = os.environ.get("ACCSIM_KERNEL_DIR")
    if base:
        check_folder(base, "ACCSIM_KERNEL_DIR")
    else:
        base = checked_cache_home() / "accsim" / "kernels"
    return Path(base) / (f"{sys.implementation.cache_tag}-{platform.machine()}"
                         f"-numpy{np.__version__}")


def switch(variable: str, default: bool) -> bool:
    """An on/off environment variable: 1 on, 0 off, unset or empty its default; any
    other value is an AccsimError naming the variable."""
    value = os.environ.get(variable, "").strip()
    if value not in ("", "0", "1"):
        raise AccsimError(f"{value!r} is neither 0 nor 1", field=variable)
    return default if not value else value == "1"


def enabled() -> bool:
    """The library is used unless ACCSIM_KERNEL_LIBRARY=0, or the JIT is disabled (the
    kernels then run as Python, as asked)."""
    return (switch("ACCSIM_KERNEL_LIBRARY", True)
            and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0"))


def arg_check(text: str) -> tuple[frozenset, tuple | None]:
    """What an argument must be to fit an export's type `text`: its exact Python types,
    and for a C-contiguous array its (dtype, ndim). ValueError on a type the library
    does not export."""
    if text == "none":
        return _NONE, None
    if text in _SCALARS:
        return _SCALARS[text], None
    name, _, dims = text.partition("[")
    ndim = dims.count(",") + 1
    if name in _DTYPES and dims.replace(" ", "") == ":," * (ndim - 1) + "::1]":
        return _ARRAY, (_DTYPES[name], ndim)
    raise ValueError(f"no export for argument type {text!r}")


def checks(texts: list[str]) -> tuple[tuple[frozenset, ...], tuple[tuple, ...]]:
    """An export's argument checks: each argument's exact Python types, and (position,
    dtype, ndim) of each array argument."""
    parsed = [arg_check(text) for text in texts]
    return (tuple(types for types, _ in parsed),
            tuple((position, *array) for position, (_, array) in enumerate(parsed)
                  if array is not None))


def fits(args: Sequence, check: tuple) -> bool:
    """Whether `args` have exactly the types an export takes, so that the JIT would
    have compiled that same specialisation for them: the same Python types (an int
    stands for int64, as Numba types it), and arrays of the same dtype and
    dimensions, C-contiguous, writeable and aligned (flags.carray: as the exports'
    arrays are typed; the JIT compiles another specialisation for an unaligned one).
    Called on every kernel call from Python (some 4,000 in the default run, most with
    a dozen arrays or more), so each array costs three attribute reads."""
    types, arrays = check
    if len(args) != len(types) or not all(map(frozenset.__contains__, types,
                                               map(type, args))):
        return False
    for position, dtype, ndim in arrays:
        arg = args[position]
        # An array an export returned has an equal dtype that is not NumPy's own.
        if arg.ndim != ndim or not arg.flags.carray or \
                (arg.dtype is not dtype and arg.dtype != dtype):
            return False
    return True


def source_digest(relative: str) -> str:
    """A package source file's length and CRC-32 (its path relative to the package):
    enough to notice an edit, and cheaper to load than hashlib's OpenSSL (3 ms, a
    hundredth of a short run)."""
    text = (PACKAGE / relative).read_bytes()
    return f"{len(text)}:{zlib.crc32(text):08x}"


def current(manifest: dict) -> bool:
    """Whether a manifest describes a library built from the package as it is now."""
    try:
        return (manifest.get("format") == FORMAT
                and all(source_digest(path) == digest
                        for path, digest in manifest["sources"].items()))
    except (OSError, KeyError, AttributeError, TypeError):
        return False


def _regular_bytes(path: Path, limit: int) -> bytes:
    """Up to `limit` bytes of a regular file (OSError for a FIFO, a device, a folder or
    a longer file: none is a library's, and reading one could block or never end)."""
    with open(path, "rb", opener=lambda name, flags: os.open(
            name, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max(limit, 0) and limit:
            raise OSError(f"{path}: not a regular file of at most {limit} bytes")
        return handle.read(limit + 1)[:limit] if limit else b""


@functools.cache
def load(directory: Path | None = None) -> Exports:
    """Each exported kernel's (argument checks, compiled function) pairs, by the
    kernel's qualified name; empty when the library is off, absent, stale or unreadable.

    Loaded once per process and folder, as an import is (the library is an extension
    module, and Python keeps each module it loaded in sys.modules): every Kernel of the
    process reads this one answer, where each reading its own would repeat the load
    (the manifest, a digest of its 40 sources, the extension: about 1 ms) a dozen
    times a run. Immutable by construction: a read-only mapping of tuples, made once
    from the files and never changed, so no caller can alter what another one sees;
    it holds file content, never results. Tests that rebuild or damage a library
    read it again after load.cache_clear(), as a new process would."""
    return attempt(directory)[0]


def attempt(directory: Path | None = None) -> tuple[Exports, str]:
    """load()'s answer, read now (uncached), and why it is empty ('' when it is not):
    `accsim compile --check` says which of off, absent, stale or unreadable."""
    if not enabled():
        return _EMPTY, "turned off (ACCSIM_KERNEL_LIBRARY=0 or NUMBA_DISABLE_JIT=1)"
    folder = library_dir() if directory is None else directory
    try:  # a regular file of bounded size: a FIFO or /dev/zero there is no manifest
        manifest = json.loads(_regular_bytes(folder / MANIFEST, MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        return _EMPTY, f"absent (no {MANIFEST})"
    except (OSError, ValueError) as exc:
        return _EMPTY, f"unreadable ({MANIFEST}: {type(exc).__name__})"
    if not current(manifest):
        return _EMPTY, ("stale (built from other sources than this package's, or in "
                        "another format)")
    try:
        path = folder / manifest["file"]
        _regular_bytes(path, 0)
        loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
        spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        exports: dict[str, list] = {}
        for entry in manifest["exports"]:
            exports.setdefault(entry["kernel"], []).append(
                (checks(entry["args"]), getattr(module, entry["symbol"])))
    except (OSError, ImportError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return _EMPTY, f"unreadable (its extension did not load: {type(exc).__name__})"
    if not exports:
        return _EMPTY, f"unreadable ({MANIFEST} lists no export)"
    return MappingProxyType({name: tuple(pairs) for name, pairs in exports.items()}), ""
