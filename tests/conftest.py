"""Shared test setup: tests/ on sys.path for the helper modules beside the tests; the
kernel library off (the JIT is the reference), unless ACCSIM_KERNEL_LIBRARY=1 asks to
run the suite against the library built under ACCSIM_KERNEL_DIR; and the tests'
subprocesses (`python -m simulator.cli` in a test's own folder, pool workers) run the
package this session imports, first on their PYTHONPATH: with the project installed
(not editable, as the README's test command installs it), they would otherwise run the
installed copy, which need not be the code under test (a checkout edited since), and
compile its kernels into a second Numba cache."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("ACCSIM_KERNEL_LIBRARY", "0")  # before any kernel's first call

import pytest

import simulator

os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(Path(simulator.__file__).resolve().parent.parent),
     *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture(autouse=True, scope="session")
def _private_cost_cache(tmp_path_factory):
    """Serving's default cost cache and review's result cache ($XDG_CACHE_HOME) in a
    folder of this test session, never the user's. pytest-xdist's workers share the one
    folder (their base folders' parent): a cost table or review run another worker
    computed is read back, as within one worker, instead of simulated again. Entries are
    keyed by the code's digest and written by atomic rename (simulator.output.files),
    and a test about the cache itself names its own folder."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's
    folder = root / "xdg-cache"
    folder.mkdir(exist_ok=True)
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(folder))
    yield
    patch.undo()


@pytest.fixture(autouse=True, scope="session")
def _no_terminal_width():
    """Output is a pipe without COLUMNS, as in CI, whoever runs the tests: pytest-xdist
    sets COLUMNS in its workers (and a user's shell may export it), which would fold the
    tables that tests read whole. Tests of the folding set it themselves. GNU readline,
    once imported (pytest's debugger imports it), sets COLUMNS and LINES in the C
    environment, which os.environ does not show but subprocesses inherit: those are
    unset there too."""
    patch = pytest.MonkeyPatch()
    patch.delenv("COLUMNS", raising=False)
    for name in ("COLUMNS", "LINES"):
        if name not in os.environ:
            os.unsetenv(name)
    yield
    patch.undo()
