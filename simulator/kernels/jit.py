"""Compiled kernels that cost nothing until first called.

`njit(**options)` stands in for numba.njit: the decorated function becomes a `Kernel`
that imports Numba and makes the real dispatcher (which compiles, or loads from Numba's
on-disk cache) on its first call or attribute look-up. So importing a module of kernels
does not import Numba (about 0.5 s): `accsim --help`, `check` and `schema` never pay
it. A kernel calling another kernel still compiles the call (inlined where asked):
Numba types a Kernel as the dispatcher it wraps. With NUMBA_DISABLE_JIT=1 the
dispatcher is the plain Python function, as with numba.njit.

Each Kernel keeps its dispatcher once made, as the dispatcher keeps its compiled
specialisations: a cache of the same function, never of results.

Numba keys its on-disk cache by the function's own bytecode and file, not by the
kernels it calls (inlined) from other modules: after a change to a callee, a caller
would load machine code built against the old one. So each cached kernel's key also
holds a digest of every kernel module's source (`kernel_sources_digest`): any change
to any kernel recompiles the kernels instead of reusing stale code.

Compiled ahead of time (simulator.kernels.library, built by `accsim compile`): a call
from Python whose arguments fit one of the kernel's exports runs the export, and Numba
is not imported; any other call goes to the dispatcher.

A caller that calls a kernel many times with arguments of the same types (the serving
loop's driver) asks `Kernel.specialised` once for the specialisation's own callable and
calls that, so Numba does not type the arguments again at each call.

A kernel's first call in a process, and `specialised`, compile (or load) the
specialisation holding a lock file beside the kernel's cache index, so that processes
starting together on a cold cache (a deployment search's pool workers, two searches at
once) compile each kernel once: the others wait (said as a compilation), then load it.

Compiled ahead (`ahead=`: argument types, e.g. "(int64, float64[::1])"): on a machine
whose cache lacks them, simulator.kernels.ahead compiles these specialisations in a second
process while the first one works. It holds the kernel's lock meanwhile, so the
kernel's first use here waits (said as a compilation), then loads it from the cache.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from simulator.kernels import library as kernel_library

try:
    import fcntl
except ImportError:  # not POSIX: nothing is compiled ahead, nothing waits
    fcntl = None

LOCK_SUFFIX = ".accsim-lock"
PACKAGE = Path(__file__).resolve().parents[1]
# What marks a module of kernels (each imports this module's njit).
KERNEL_MODULE_MARK = b"from simulator.kernels.jit import njit"
# The package's modules of kernels (those that hold KERNEL_MODULE_MARK, this one too),
# relative to the package, in path order: what kernel_sources_digest reads, so a run
# reads these dozen files instead of searching all 250 (6 ms of a warm run's CPU).
# tests/test_jit_first_use.py checks the list against the files that hold the mark.
KERNEL_MODULES = ("engines/fast.py", "engines/nest_replay.py", "engines/steady.py",
                  "kernels/jit.py", "lowering/nest_steps.py", "mapping/windows.py",
                  "model/dataflow.py", "model/loop_nest.py", "model/timing.py",
                  "program/validity.py", "serving/loop_batching.py", "serving/loop_kernel.py",
                  "serving/loop_maps.py", "serving/loop_pipeline.py",
                  "serving/loop_prices.py",
                  "serving/loop_state.py")


class Kernel:
    """A function compiled by numba.njit on first use."""

    def __init__(self, function: Callable, signature: tuple[str, ...],
                 options: dict, ahead: tuple[str, ...] = ()) -> None:
        functools.update_wrapper(self, function)
        self._function = function
        self._signature = signature
        self._options = options
        self.ahead = ahead
        # The dispatcher once a call found the library has no export for the kernel:
        # what each later call runs, without looking the exports up again (a kernel
        # such as ceil_div is called from Python some 30,000 times in a cost table).
        self._plain = None
        self._made = None
        self._dispatcher = None
        self._exports = None
        self._specialisations: dict[tuple, Callable] = {}  # by _type_key of the args

    @property
    def name(self) -> str:
        """The qualified name the kernel library knows the kernel by."""
        return f"{self.__module__}.{self.__qualname__}"

    def exports(self) -> tuple:
        """The kernel library's (argument checks, function) pairs for this kernel."""
        if self._exports is None:
            self._exports = kernel_library.load().get(self.name, ())
        return self._exports

    def dispatcher(self):
        """Numba's dispatcher for the function (the function itself with the JIT
        disabled), made on first use, once a compilation ahead of it has ended."""
        if self._dispatcher is None:
            made = self.made()
            _await_ahead(made)
            self._dispatcher = made
        return self._dispatcher

    def made(self):
        """Numba's dispatcher without waiting on a compilation ahead (which uses it)."""
        if self._made is None:
            self._made = _dispatcher(self._function, self._signature, self._options)
        return self._made

    def __call__(self, *args):
        plain = self._plain
        if plain is not None:  # no export: every call goes to the dispatcher
            return plain(*args)
        exports = self.exports()
        for checks, function in exports:
            if kernel_library.fits(args, checks):
                return function(*args)
        dispatcher = self.dispatcher()
        if not exports:  # the first call: every later one goes to the dispatcher
            self._plain = dispatcher
            self._compiled(dispatcher, args)
        return dispatcher(*args)

    def specialised(self, *args) -> Callable:
        """A callable that runs the specialisation a call with `args` would run (the
        library's export, or the JIT's, compiled or loaded as a call would), without
        __call__'s work on each call: the library's checks, and Numba's typing of the
        arguments, which for records (NamedTuples, such as the serving loop's state and
        cost tables) happens in Python at each call (about 0.4 ms for the serving
        loop's arguments when its tables held typed dictionaries, more than many of
        its calls run). For a caller that calls the kernel many times with arguments
        of unchanged types: it must pass exactly the types `args` have (the same
        dtypes, dimensions and layouts, records of the same fields), or ask again, as
        nothing checks them. With the JIT disabled, the function itself; with a
        signature given to njit, the dispatcher (its call converts the arguments to
        that signature). Kept by the arguments' types where _type_key tells them (the
        serving loop's driver asks once a run, hundreds of runs a search: the lookup
        takes a tenth of the typing's time); one entry per distinct argument types,
        as few as the specialisations Numba keeps, so the cache stays small."""
        key = _type_key(args)
        found = self._specialisations.get(key) if key is not None else None
        if found is None:
            found = self._specialise(args)
            if key is not None:
                self._specialisations[key] = found
        return found

    def _specialise(self, args: tuple) -> Callable:
        """What `specialised` returns for these arguments, found anew."""
        for checks, function in self.exports():
            if kernel_library.fits(args, checks):
                return function
        dispatcher = self.dispatcher()
        return self._compiled(dispatcher, args)

    def _compiled(self, dispatcher, args: tuple) -> Callable:
        """The dispatcher's specialisation for `args`, compiled (or loaded from the
        cache) holding the kernel's lock: processes starting together on a cold cache
        compile it once. The dispatcher itself when it compiles nothing per call (the
        JIT disabled, or a signature given to njit: its call converts the arguments)."""
        if self._signature or not hasattr(dispatcher, "typeof_pyval"):
            return dispatcher
        from numba.core.types import Omitted
        left_out = list(inspect.signature(self._function).parameters.values())[len(args):]
        types = (*map(dispatcher.typeof_pyval, args),  # and the defaults, as a call's
                 *(Omitted(parameter.default) for parameter in left_out))
        with _compiling(dispatcher):
            return dispatcher.compile(types)

    def __getattr__(self, name: str):
        # Only names a Kernel lacks reach here (py_func, targetoptions, signatures...).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)


def _type_key(value) -> tuple | None:
    """A key equal only for values Numba types alike, as far as `specialised` and
    the library's `fits` read them: NumPy arrays (dtype, dimensions, layout flags,
    writeable, aligned) and tuples of them (their class: a NamedTuple's record); None
    for anything else (a Python scalar's type depends on its value)."""
    if type(value) is np.ndarray:
        flags = value.flags
        return (value.dtype, value.ndim, flags.c_contiguous, flags.f_contiguous,
                flags.writeable, flags.aligned)
    if isinstance(value, tuple):
        keys = tuple(map(_type_key, value))
        return None if None in keys else (type(value), keys)
    return None


def njit(*signature: str, ahead: tuple[str, ...] = (), **options) -> Callable[[Callable],
                                                                             Kernel]:
    """numba.njit(*signature, **options), made on first use. A signature string makes
    the one specialisation compiled (the call's argument types then never make another).
    ahead: argument types of specialisations a first run compiles in a second process."""
    return lambda function: Kernel(function, signature, options, ahead)


def _dispatcher(function: Callable, signature: tuple[str, ...], options: dict):
    # Numba loads here, on the first kernel used, and nowhere at import time.
    import numba
    from numba.core import types
    from numba.extending import typeof_impl

    typeof_impl.register(Kernel)(
        lambda kernel, context: types.Dispatcher(kernel.dispatcher()))
    dispatcher = numba.njit(*signature, **options)(function)
    cache = getattr(dispatcher, "_cache", None)
    own_key = getattr(cache, "_index_key", None)
    if own_key is not None:   # cached (and the JIT enabled): key it by every kernel too
        cache._index_key = lambda sig, codegen: (own_key(sig, codegen),
                                                 kernel_sources_digest())
    return dispatcher


@functools.cache
def kernel_sources_digest() -> str:
    """sha256 over the path and source of every kernel module (KERNEL_MODULES) of the
    installed package, one that is absent counted as empty: a constant of the
    installation, read once per process."""
    digest = hashlib.sha256()
    for relative in KERNEL_MODULES:
        path = PACKAGE / relative
        source = path.read_bytes() if path.is_file() else b""
        digest.update(relative.encode() + b"\0" + source)
    return digest.hexdigest()


def ahead_types(kernel: Kernel) -> list[tuple]:
    """The argument types of each of the kernel's `ahead` specialisations."""
    from numba.core import sigutils
    return [tuple(sigutils.normalize_signature(text)[0]) for text in kernel.ahead]


def lacks_ahead(kernel: Kernel) -> bool:
    """Whether Numba's on-disk cache lacks one of the kernel's `ahead` specialisations
    (False when the JIT is disabled or the cache cannot be read)."""
    made = kernel.made()
    try:
        cache = made._cache  # Numba's FunctionCache: the index and its keys
        index = cache._cache_file._load_index()
        codegen = made.targetctx.codegen()
        return any(cache._index_key(types, codegen) not in index
                   for types in ahead_types(kernel))
    except AttributeError:  # the JIT disabled, or a Numba without these internals
        return False


def load_registries(kernel: Kernel) -> None:
    """Load Numba's typing and target registries now, as its first compilation or cache
    load in a process does anyway (about 0.4 s), so that forked children inherit them."""
    made = kernel.made()
    try:
        made.typingctx.refresh()
        made.targetctx.refresh()
    except AttributeError:  # the JIT disabled: nothing to load
        pass


def lock_path(dispatcher) -> str | None:
    """The lock file beside the dispatcher's cache index (None without a cache)."""
    try:
        index = dispatcher._cache._cache_file._index_path
    except AttributeError:
        return None
    return index + LOCK_SUFFIX


def open_lock(dispatcher) -> int | None:
    """A descriptor of the kernel's lock file, made if absent; None where there is none
    to take (no POSIX locks, no cache, a cache folder that takes no file)."""
    path = lock_path(dispatcher)
    if fcntl is None or path is None:
        return None
    try:
        return os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError:
        return None


def _await_ahead(dispatcher) -> None:
    """Wait while another process compiles this kernel ahead (it holds the lock). No
    lock file: no process ever compiled it holding one, so none is to be waited for."""
    path = lock_path(dispatcher)
    if fcntl is None or path is None or not os.path.exists(path):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # one this process may not read: compile as it goes
        return
    try:
        _lock(fd, dispatcher, fcntl.LOCK_SH)
    finally:
        os.close(fd)


@contextmanager
def _compiling(dispatcher) -> Iterator[None]:
    """Hold the kernel's lock while compiling it (or loading it from the cache), so
    that processes starting together on a cold cache (a search's pool workers, two
    runs at once) compile a kernel once: the others wait, then load what it saved.
    Without a lock file (no POSIX locks, a cache folder that takes no file) each
    compiles as before, as where the file system refuses the lock."""
    fd = open_lock(dispatcher)
    if fd is None:
        yield
        return
    try:
        try:
            _lock(fd, dispatcher, fcntl.LOCK_EX)
        except OSError:  # no locks on this file system (ENOLCK): compile unlocked
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock(fd: int, dispatcher, mode: int) -> None:
    """Take the lock in `mode`; a wait for another process's compilation is said as a
    compilation (Numba's compile event: what progress bars show)."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        from numba.core import event
        with event.trigger_event("numba:compile", data={
                "dispatcher": dispatcher, "args": (), "return_type": None}):
            fcntl.flock(fd, mode)
