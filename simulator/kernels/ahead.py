"""The first run on a machine compiles its late kernels in other processes.

A cold `accsim run` (an empty Numba cache) compiles, one after another, the mapper's
conv windows, lowering's step generator and the fast engine's replay: about 5 s of CPU on
one core. `compiled_ahead()` starts a child per KERNEL whose `ahead` specialisations
the cache lacks and the kernel library (simulator.kernels.library) does not hold, so
they compile on the other cores while this process imports, maps and compiles the
windows; a kernel's first use here waits on its child's lock (simulator.kernels.jit) and then
loads it from the cache. A warm cache starts nothing. Results cannot differ: both
processes compile the same functions, and Numba keys its cache by argument types and
bytecode.

A child collects no garbage: Numba's compilation makes many objects and little garbage,
so collecting cost 5-9% of the CPU of compiling the lowering's kernel and _replay
(0.14 of 3.1 s, 0.19 of 2.1 s, measured on the step-by-step kernel it had then);
without it a child peaks 15-30 MB higher, and it ends once they are compiled.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from simulator.engines.fast import _replay
from simulator.kernels.library import switch
from simulator.kernels.jit import (Kernel, ahead_types, fcntl, lacks_ahead, load_registries,
                           open_lock)
from simulator.lowering.nest_steps import fill_steps, float_sums, shape_tables

if TYPE_CHECKING:
    from subprocess import Popen

# In the order a run first calls them.
KERNELS: dict[str, Kernel] = {"shape_tables": shape_tables, "float_sums": float_sums,
                              "fill_steps": fill_steps, "replay": _replay}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _worth_it() -> bool:
    """A second process helps only with a second core, a JIT and POSIX file locks; and
    ACCSIM_AHEAD=0 turns it off (to measure the difference, or on a machine whose
    second core is better left alone)."""
    return (fcntl is not None and _cores() >= 2
            and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")
            and switch("ACCSIM_AHEAD", True))


def _locked(kernel: Kernel) -> int | None:
    """A descriptor holding the kernel's lock, None if another process holds it (or
    its cache folder takes no file, or its file system no lock)."""
    fd = open_lock(kernel.made())
    if fd is None:  # this process then compiles the kernel itself, as it goes
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another run compiles it (its first use here waits), or no locks
        os.close(fd)
        return None
    return fd


class _Forked:
    """A forked child compiling the kernels, with Popen's wait() and kill()."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def wait(self) -> None:
        os.waitpid(self.pid, 0)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)


def start(kernels: dict[str, Kernel] = KERNELS) -> list[_Forked | Popen]:
    """Compile the KERNELS the cache lacks in child processes holding their locks; none
    when nothing needs it (a warm cache) or it would not help. On Linux, from a process
    of one thread, each kernel has its own child, a fork, which has Numba and the
    kernels' modules loaded already (about 0.5 s of CPU a fresh interpreter spends);
    otherwise one `python -m simulator.kernels.ahead` compiles them all."""
    if not _worth_it():
        return []
    held = {name: fd for name, kernel in kernels.items()
            if not kernel.exports() and lacks_ahead(kernel)  # the library has it, or
            for fd in [_locked(kernel)] if fd is not None}   # the cache has it
    try:
        if sys.platform == "linux" and threading.active_count() == 1:  # a safe fork
            if held:
                load_registries(next(iter(kernels.values())))
            return [_fork(f"{name}:{fd}", held.values(), kernels)
                    for name, fd in held.items()]
        if not held or any(KERNELS.get(name) is not kernel  # a fresh interpreter
                           for name, kernel in kernels.items()):  # knows KERNELS only
            return []
        import subprocess  # here: only this path starts one (2 ms of every start-up)
        return [subprocess.Popen(
            [sys.executable, "-m", "simulator.kernels.ahead",
             *(f"{name}:{fd}" for name, fd in held.items())],
            pass_fds=tuple(held.values()), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    except OSError:  # no child: this process compiles as it goes
        return []
    finally:
        for fd in held.values():
            os.close(fd)  # the children's copies keep the locks


def _fork(item: str, held, kernels: dict[str, Kernel]) -> _Forked:
    """A forked child compiling one kernel (item "name:fd"), holding only its lock."""
    pid = os.fork()
    if pid == 0:  # the child: compile, then leave without running the parent's code
        gc.disable()  # see the module docstring
        code = 1
        try:
            mine = int(item.split(":")[1])
            for fd in held:
                if fd != mine:
                    os.close(fd)
            compile_locked([item], kernels)
            code = 0
        finally:
            os._exit(code)
    return _Forked(pid)


def load(kernels: dict[str, Kernel] = KERNELS) -> None:
    """Load Numba's registries and every kernel's `ahead` specialisations now (from the
    cache, compiling what it lacks; none with the JIT disabled or where the kernel
    library holds the kernel), as their first use would: what a pool worker does
    before its first task (simulator.sweep.executors.Processes.start)."""
    load_registries(next(iter(kernels.values())))
    for kernel in kernels.values():
        made = kernel.made()
        if kernel.exports() or not hasattr(made, "compile"):
            continue
        for types in ahead_types(kernel):
            made.compile(types)


@contextmanager
def compiled_ahead() -> Iterator[None]:
    """Within: the KERNELS a cold cache lacks compile in other processes. On leaving,
    the children are waited for (they fill the cache for the next run), or ended if
    the body failed."""
    children = start()
    try:
        yield
    except BaseException:
        for child in children:
            child.kill()
            child.wait()
        raise
    for child in children:
        child.wait()


def compile_locked(names_and_fds: list[str],
                   kernels: dict[str, Kernel] = KERNELS) -> None:
    """The child: compile each named kernel's `ahead` specialisations into the cache,
    then drop its lock. The lock file is kept: a process waiting on it, or about to
    open it, then locks the same file rather than one made anew beside it."""
    for item in names_and_fds:
        name, fd = item.split(":")
        kernel = kernels[name]
        made = kernel.made()
        try:
            for types in ahead_types(kernel):
                made.compile(types)
        finally:
            os.close(int(fd))  # the lock file stays: every first use takes the lock


if __name__ == "__main__":
    gc.disable()  # see the module docstring
    compile_locked(sys.argv[1:])
