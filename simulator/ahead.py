"""The first run on a machine compiles its late kernels in a second process.

A cold `accsim run` (an empty Numba cache) compiles, one after another, the mapper's
conv windows, lowering's gemm_block and the fast engine's replay: about 5 s of CPU on
one core. `compiled_ahead()` starts `python -m simulator.ahead` for the KERNELS whose
`ahead` specialisations the cache lacks, so they compile on the second core while this
process imports, maps and compiles the windows; a kernel's first use here waits on the
child's lock (simulator.jit) and then loads it from the cache. A warm cache starts
nothing. Results cannot differ: both processes compile the same functions, and Numba
keys its cache by argument types and bytecode.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from simulator.engines.fast import _replay
from simulator.jit import Kernel, ahead_types, fcntl, lacks_ahead, lock_path
from simulator.lowering.steps import gemm_block

# In the order a run first calls them.
KERNELS: dict[str, Kernel] = {"gemm_block": gemm_block, "replay": _replay}


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
            and os.environ.get("ACCSIM_AHEAD", "1") != "0")


def _locked(name: str, kernel: Kernel) -> int | None:
    """A descriptor holding the kernel's lock, None if another process holds it."""
    path = lock_path(kernel.made())
    if path is None:
        return None
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another run compiles it: its first use here waits
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


def start(kernels: dict[str, Kernel] = KERNELS) -> _Forked | subprocess.Popen | None:
    """Compile the KERNELS the cache lacks in a child process holding their locks; None
    when nothing needs it (a warm cache) or it would not help. On Linux the child is a
    fork, which has Numba and the kernels' modules loaded already (about 0.5 s of CPU
    a fresh interpreter spends); elsewhere `python -m simulator.ahead`."""
    if not _worth_it():
        return None
    held = {name: fd for name, kernel in kernels.items() if lacks_ahead(kernel)
            for fd in [_locked(name, kernel)] if fd is not None}
    if not held:
        return None
    items = [f"{name}:{fd}" for name, fd in held.items()]
    try:
        if sys.platform == "linux":
            pid = os.fork()
            if pid == 0:  # the child: compile, then leave without running the parent's code
                code = 1
                try:
                    compile_locked(items, kernels)
                    code = 0
                finally:
                    os._exit(code)
            return _Forked(pid)
        if kernels is not KERNELS:  # a fresh interpreter knows only KERNELS by name
            return None
        return subprocess.Popen([sys.executable, "-m", "simulator.ahead", *items],
                                pass_fds=tuple(held.values()), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:  # no child: this process compiles as it goes
        return None
    finally:
        for fd in held.values():
            os.close(fd)  # the child's copies keep the locks


@contextmanager
def compiled_ahead() -> Iterator[None]:
    """Within: the KERNELS a cold cache lacks compile in a second process. On leaving,
    the child is waited for (it fills the cache for the next run), or ended if the body
    failed."""
    child = start()
    try:
        yield
    except BaseException:
        if child is not None:
            child.kill()
            child.wait()
        raise
    if child is not None:
        child.wait()


def compile_locked(names_and_fds: list[str],
                   kernels: dict[str, Kernel] = KERNELS) -> None:
    """The child: compile each named kernel's `ahead` specialisations into the cache,
    then drop its lock, removing the lock file first."""
    for item in names_and_fds:
        name, fd = item.split(":")
        kernel = kernels[name]
        made = kernel.made()
        try:
            for types in ahead_types(kernel):
                made.compile(types)
        finally:
            path = lock_path(made)
            if path is not None and os.path.exists(path):
                os.unlink(path)
            os.close(int(fd))


if __name__ == "__main__":
    compile_locked(sys.argv[1:])
