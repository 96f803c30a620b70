"""Kernels compiled ahead on a machine's first run (simulator.kernels.ahead, simulator.kernels.jit): the
declared specialisations are the ones a run compiles, a child fills an empty cache that
this process then loads from, and a first use waits (said as a compilation) while
another process holds the kernel's lock. The cache cases run in a fresh interpreter
with an empty NUMBA_CACHE_DIR, as on a new machine."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from simulator.kernels import library as kernel_library
from simulator.kernels.ahead import KERNELS
from simulator.inputs.named_inputs import load_inputs
from simulator.kernels.jit import ahead_types
from simulator.simulate import simulate

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the child is a fork")

# A module of one small cached kernel, written beside the script that uses it.
_TINY = """
from simulator.kernels.jit import njit

@njit(cache=True, ahead=("(int64,)",))
def twice(x):
    return 2 * x
"""

# Prints, one per line, "compile" or "wait", the kernel and "here" or "child" (the
# process) for each outermost numba:compile event.
_LISTENER = """
import os, sys
HERE = os.getpid()
from numba.core import event
import tiny
from simulator.kernels import ahead
from simulator.kernels.jit import lacks_ahead, lock_path

class Seen(event.Listener):
    def __init__(self, on_wait=None):
        self.depth, self.on_wait = 0, on_wait
    def on_start(self, ev):
        self.depth += 1
        if self.depth == 1:
            kind = "wait" if ev.data["args"] == () else "compile"
            where = "here" if os.getpid() == HERE else "child"
            print(kind, ev.data["dispatcher"].py_func.__name__, where, flush=True)
            if kind == "wait" and self.on_wait:
                self.on_wait()
    def on_end(self, ev):
        self.depth -= 1
"""


def _run(tmp_path, body: str) -> list[str]:
    (tmp_path / "tiny.py").write_text(_TINY)
    script = tmp_path / "script.py"
    script.write_text(_LISTENER + textwrap.dedent(body))
    cache = tmp_path / "cache"
    cache.mkdir()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path,
                          env=dict(os.environ, NUMBA_CACHE_DIR=str(cache)))
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.skipif(bool(kernel_library.load()), reason="the kernel library (on for "
                    "this session) serves the run's calls: the JIT compiles none")
def test_the_declared_specialisations_are_the_ones_a_run_compiles() -> None:
    simulate(load_inputs("tpu_v1", "tpu_v1_mlp_b200", None))
    for name, kernel in KERNELS.items():
        assert kernel.ahead, name
        assert set(ahead_types(kernel)) <= set(kernel.signatures), name


@linux_only
def test_a_child_fills_an_empty_cache_and_this_process_loads_it(tmp_path) -> None:
    lines = _run(tmp_path, """
        assert lacks_ahead(tiny.twice)
        with event.install_listener("numba:compile", Seen()):
            children = ahead.start({"twice": tiny.twice})
            assert len(children) == 1
            children[0].wait()
            print("lacks", lacks_ahead(tiny.twice))
            print("result", tiny.twice(21))
            print("again", ahead.start({"twice": tiny.twice}))
        """)
    # Compiled only in the child: here it loads (no compile event), and a warm cache
    # starts no second child.
    assert lines == ["compile twice child", "lacks False", "result 42", "again []"]


@linux_only
def test_a_first_use_waits_while_another_process_holds_the_lock(tmp_path) -> None:
    lines = _run(tmp_path, """
        made = tiny.twice.made()
        path = lock_path(made)
        fd = os.open(path, os.O_CREAT | os.O_RDWR)
        import fcntl
        fcntl.flock(fd, fcntl.LOCK_EX)
        release_r, release_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # holds the lock until this process says it waits
            os.read(release_r, 1)
            os._exit(0)
        os.close(fd)  # the child's copy keeps the lock
        with event.install_listener("numba:compile",
                                    Seen(on_wait=lambda: os.write(release_w, b"x"))):
            print("result", tiny.twice(4))
        os.waitpid(pid, 0)
        """)
    # The wait is said as a compilation; the lock holder compiled nothing here, so the
    # kernel then compiles in this process.
    assert lines == ["wait twice here", "compile twice here", "result 8"]
