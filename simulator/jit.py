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
"""

from __future__ import annotations

import functools
from collections.abc import Callable


class Kernel:
    """A function compiled by numba.njit on first use."""

    def __init__(self, function: Callable, signature: tuple[str, ...],
                 options: dict) -> None:
        functools.update_wrapper(self, function)
        self._function = function
        self._signature = signature
        self._options = options
        self._dispatcher = None

    def dispatcher(self):
        """Numba's dispatcher for the function (the function itself with the JIT
        disabled), made on first use."""
        if self._dispatcher is None:
            self._dispatcher = _dispatcher(self._function, self._signature,
                                           self._options)
        return self._dispatcher

    def __call__(self, *args):
        return self.dispatcher()(*args)

    def __getattr__(self, name: str):
        # Only names a Kernel lacks reach here (py_func, targetoptions, signatures...).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)


def njit(*signature: str, **options) -> Callable[[Callable], Kernel]:
    """numba.njit(*signature, **options), made on first use. A signature string makes
    the one specialisation compiled (the call's argument types then never make another)."""
    return lambda function: Kernel(function, signature, options)


def _dispatcher(function: Callable, signature: tuple[str, ...], options: dict):
    # Numba loads here, on the first kernel used, and nowhere at import time.
    import numba
    from numba.core import types
    from numba.extending import typeof_impl

    typeof_impl.register(Kernel)(
        lambda kernel, context: types.Dispatcher(kernel.dispatcher()))
    return numba.njit(*signature, **options)(function)
