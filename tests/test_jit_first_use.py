"""Kernels made on first use (simulator.kernels.jit) behave as numba.njit's, and a compilation
is said on the terminal (simulator.output.progress.compiling)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba.core import event

from simulator.model import timing
from simulator.kernels.jit import Kernel, njit
from simulator.output.progress import COMPILING, compile_note


@njit(cache=False, inline="always")
def _twice(x):
    return 2 * x


@njit(cache=False)
def _sum_twice(values):
    total = 0
    for v in values:
        total += _twice(v)  # a kernel calling a kernel, inlined
    return total


@njit("int64(int64)", cache=False)
def _plus_one(x):
    return x + 1


class _Console:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def print(self, text: str, **_) -> None:
        self.lines.append(text)


class _Bar:
    def __init__(self) -> None:
        self.description = "lowering"
        self.seen: list[str] = []

    def describe(self, text: str) -> str:
        shown, self.description = self.description, text
        self.seen.append(text)
        return shown


def test_kernels_are_lazy_and_compile_like_njit() -> None:
    assert isinstance(timing.ceil_div, Kernel) and timing.ceil_div.__name__ == "ceil_div"
    assert timing.ceil_div(7, 2) == 4
    assert _sum_twice(np.arange(5, dtype=np.int64)) == 20
    assert _twice.targetoptions["inline"] == "always"  # the dispatcher's, looked up


def test_a_signature_gives_one_specialisation() -> None:
    assert _plus_one(np.int32(4)) == 5 and _plus_one(4) == 5
    assert len(_plus_one.signatures) == 1


def test_a_kernel_without_exports_keeps_its_dispatcher_for_later_calls() -> None:
    """With no export in the library (the suite runs without it), the first call finds
    the dispatcher and each later one calls it directly, whatever the arguments."""
    fresh = Kernel(timing.ceil_div.py_func, (), {"cache": False})
    assert fresh._plain is None
    assert fresh(7, 2) == 4 and fresh._plain is fresh.dispatcher()
    assert fresh(7.5, 2) == 4.0 and fresh(np.int64(9), 3) == 3
    assert len(fresh.signatures) == 2  # (int64, int64) and (float64, int64)


class _Pair(NamedTuple):
    ints: np.ndarray
    table: object  # a typed dictionary: Numba types a record holding one in Python


@njit(cache=False)
def _pair_sum(pair, scale):
    pair.ints[0] += 1  # (arrays in the record are the caller's: written through)
    return pair.ints.sum() * scale + pair.table[0]


def test_a_specialisation_runs_as_the_kernel_without_typing_again(monkeypatch) -> None:
    """Kernel.specialised: the callable the call would run, which then runs without
    Numba typing its arguments (a record's, in Python) at each call."""
    from numba import typed as numba_typed
    table = numba_typed.Dict()
    table[0] = 0.75
    pair = _Pair(np.arange(4, dtype=np.int64), table)
    expected = _pair_sum(pair, 2.0)
    compiled = _pair_sum.specialised(pair, 2.0)
    assert compiled is not _pair_sum.dispatcher() and len(_pair_sum.signatures) == 1
    typed = []
    dispatcher = _pair_sum.dispatcher()
    monkeypatch.setattr(dispatcher, "typeof_pyval",
                        lambda value: typed.append(value) or type(dispatcher).typeof_pyval(
                            dispatcher, value))
    assert compiled(pair, 2.0) == expected + 2.0 and pair.ints[0] == 2
    assert not typed and len(_pair_sum.signatures) == 1
    assert dispatcher(pair, 2.0) == expected + 4.0
    assert typed  # where a call through the dispatcher types the record again
    assert _plus_one.specialised(4) is _plus_one.dispatcher()  # a signature: converted


class _Arrays(NamedTuple):
    ints: np.ndarray
    floats: np.ndarray


@njit(cache=False)
def _arrays_sum(arrays):
    return arrays.ints.sum() + arrays.floats.sum()


def test_a_specialisation_is_kept_by_its_argument_types(monkeypatch) -> None:
    """Kernel.specialised types a record of arrays once: a record of arrays of the same
    types gets the same callable without typing again; other dtypes, dimensions or
    layouts, another."""
    arrays = _Arrays(np.arange(4, dtype=np.int64), np.ones(3))
    compiled = _arrays_sum.specialised(arrays)
    assert compiled(arrays) == 9.0
    typed = []
    dispatcher = _arrays_sum.dispatcher()
    monkeypatch.setattr(dispatcher, "typeof_pyval",
                        lambda value: typed.append(value) or type(dispatcher).typeof_pyval(
                            dispatcher, value))
    alike = _Arrays(np.zeros(9, dtype=np.int64), np.full(2, 0.5))
    assert _arrays_sum.specialised(alike) is compiled and not typed
    for other in (_Arrays(np.arange(4, dtype=np.int32), np.ones(3)),
                  _Arrays(np.arange(4, dtype=np.int64), np.ones((3, 2))),
                  _Arrays(np.arange(8, dtype=np.int64)[::2], np.ones(3))):
        found = _arrays_sum.specialised(other)
        assert found is not compiled and found(other) == _arrays_sum.py_func(other)
    assert len(typed) == 3


def test_a_compilation_is_said_once_and_the_bar_restored() -> None:
    console, bar = _Console(), _Bar()

    @njit(cache=False)
    def fresh(x):
        return x * 3

    with event.install_listener("numba:compile", compile_note(console, bar)):
        assert fresh(2) == 6
        assert fresh(2.5) == 7.5  # a second specialisation: the bar says it again
    assert console.lines == [COMPILING]
    assert bar.seen == [COMPILING, "lowering", COMPILING, "lowering"]
    assert bar.description == "lowering"


def test_a_cached_kernels_key_holds_every_kernel_modules_source(tmp_path, monkeypatch):
    """Numba keys its cache by a function's own bytecode; a caller inlining a changed
    callee from another module would load stale machine code. The key also holds the
    digest of every kernel module, which changes with any of them."""
    from numba.core import types

    from simulator.kernels import jit

    made = timing.ceil_div.made()
    codegen = made.targetctx.codegen()
    key = made._cache._index_key((types.int64, types.int64), codegen)
    assert key[1] == jit.kernel_sources_digest()
    assert "model/timing.py" in {str(p.relative_to(jit.PACKAGE))
                                 for p in jit.PACKAGE.rglob("*.py")
                                 if jit.KERNEL_MODULE_MARK in p.read_bytes()}
    # Another source tree: another digest (the file set and their text both count).
    copy = tmp_path / "simulator"
    (copy / "model").mkdir(parents=True)
    (copy / "model" / "timing.py").write_bytes(
        (jit.PACKAGE / "model" / "timing.py").read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(jit, "PACKAGE", copy)
    jit.kernel_sources_digest.cache_clear()
    try:
        assert jit.kernel_sources_digest() != key[1]
    finally:
        monkeypatch.undo()
        jit.kernel_sources_digest.cache_clear()
    assert jit.kernel_sources_digest() == key[1]


def test_kernel_modules_lists_every_module_of_kernels():
    """kernel_sources_digest reads KERNEL_MODULES instead of searching the package: the
    list must name exactly the modules that import njit, or a changed kernel module
    left off it would let a caller load machine code built against its old text."""
    from simulator.kernels import jit

    marked = tuple(str(p.relative_to(jit.PACKAGE).as_posix())
                   for p in sorted(jit.PACKAGE.rglob("*.py"))
                   if jit.KERNEL_MODULE_MARK in p.read_bytes())
    assert jit.KERNEL_MODULES == marked
