"""Processes starting together on a cold Numba cache compile a kernel once
(simulator.kernels.jit): `Kernel.specialised` compiles holding the kernel's lock file,
and a process finding it held waits, then loads what the holder saved (the waiting
side: tests/test_ahead.py)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np

from simulator.kernels import jit
from simulator.kernels.jit import lock_path

KERNEL = """\
from simulator.kernels.jit import njit


@njit(cache=True)
def summed(values):
    total = 0.0
    for value in values:
        total += value
    return total
"""
# One of the processes started together: loads Numba, says it is ready, specialises
# the kernel once told to go, and reports Numba's cache counts.
TOGETHER = """\
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from {module} import summed
values = np.arange(4.0)
summed.made()
print("ready", flush=True)
sys.stdin.readline()
compiled = summed.specialised(values)
stats = summed.made().stats
print(json.dumps({{"sum": compiled(values), "hits": sum(stats.cache_hits.values()),
                   "misses": sum(stats.cache_misses.values())}}), flush=True)
"""


def kernel_module(folder, monkeypatch=None) -> str:
    """A module holding one cached kernel, its cache under `folder`; its name."""
    # A name no other test's module holds (a module imported stays in sys.modules).
    module = re.sub(r"\W", "_", f"lock_kernel_{os.getpid()}_{folder.name}")
    (folder / f"{module}.py").write_text(KERNEL)
    if monkeypatch is not None:
        monkeypatch.syspath_prepend(str(folder))
    return module


def test_specialised_compiles_holding_the_kernels_lock(tmp_path, monkeypatch):
    kernel = __import__(kernel_module(tmp_path, monkeypatch)).summed
    made = kernel.made()
    held, compile_alone = [], made.compile

    def compile_seeing_the_lock(types):
        fd = os.open(lock_path(made), os.O_RDWR)  # a second descriptor: flock's own
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return compile_alone(types)

    monkeypatch.setattr(made, "compile", compile_seeing_the_lock)
    values = np.arange(4.0)
    assert kernel.specialised(values)(values) == 6.0
    assert held == [True]


def test_two_processes_starting_together_compile_the_kernel_once(tmp_path):
    module = kernel_module(tmp_path)
    runs = [subprocess.Popen([sys.executable, "-c", TOGETHER.format(module=module),
                              str(tmp_path)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "ACCSIM_KERNEL_LIBRARY": "0",
                                  "NUMBA_DISABLE_JIT": "0"})
            for _ in range(2)]
    for run in runs:
        assert run.stdout.readline().strip() == "ready", run.stderr.read()
    for run in runs:  # both go at once, their Numba loaded
        run.stdin.write("go\n")
        run.stdin.flush()
    reports = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        reports.append(json.loads(out))
    assert [report["sum"] for report in reports] == [6.0, 6.0]
    assert sorted((r["misses"], r["hits"]) for r in reports) == [(0, 1), (1, 0)]


def test_a_file_system_refusing_locks_compiles_unlocked(tmp_path, monkeypatch):
    """flock failing with ENOLCK (some network and FUSE file systems): the kernel
    compiles as it would without a lock file, not an error."""
    def refused(fd, mode):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(jit, "fcntl", SimpleNamespace(
        flock=refused, LOCK_EX=fcntl.LOCK_EX, LOCK_SH=fcntl.LOCK_SH,
        LOCK_NB=fcntl.LOCK_NB))
    kernel = __import__(kernel_module(tmp_path, monkeypatch)).summed
    values = np.arange(4.0)
    assert kernel.specialised(values)(values) == 6.0
