"""The kernel library (simulator.kernels.library, built by `accsim compile`): a run with
it prints what the JIT's run prints and never imports Numba; it is set aside when a
source it was built from changes; a call whose arguments do not fit an export exactly
goes to the JIT."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simulator.kernels import library as kernel_library
from simulator.kernels.build import ENTRIES, source_closure
from simulator.kernels.jit import Kernel
from simulator.model.timing import ceil_div

SCALESIM = Path(__file__).parent / "data" / "scalesim"
ALEXNET = ["run", "--arch", str(SCALESIM / "scale.cfg"),
           "--workload", str(SCALESIM / "alexnet.csv")]
needs_compiler = pytest.mark.skipif(
    not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler here")

# Runs the command line in this fresh interpreter, then says whether Numba was loaded.
_RUN = """
import contextlib, io, json, sys
from simulator import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = cli.main(json.loads(sys.argv[1]))
print(json.dumps({"code": code, "numba": "numba" in sys.modules,
                  "out": [line for line in out.getvalue().splitlines()
                          if " s wall" not in line]}))
"""


SYSTEM_TMP = "system-tmp"


def _env(directory: Path, on: bool) -> dict[str, str]:
    return {**os.environ, "ACCSIM_KERNEL_DIR": str(directory),
            "ACCSIM_KERNEL_LIBRARY": "1" if on else "0"}


def _run(argv: list[str], directory: Path, on: bool, cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _RUN, json.dumps(argv)], cwd=cwd,
                          env=_env(directory, on), capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """A library built by `accsim compile`, run from an empty folder (the README's next
    step; tests/test_readme_next_steps.py leaves it to this build), into a folder of
    this module's own."""
    base = tmp_path_factory.mktemp("kernel-library")
    (base / SYSTEM_TMP).mkdir()  # the system's temporary folder, as the build sees it
    (base / "empty").mkdir()
    subprocess.run([sys.executable, "-m", "simulator.cli", "compile"], check=True,
                   cwd=base / "empty",
                   env={**_env(base, True), "TMPDIR": str(base / SYSTEM_TMP)},
                   capture_output=True, text=True)
    return base / kernel_library.library_dir().name


@needs_compiler
def test_compile_leaves_nothing_in_the_temporary_folder(library) -> None:
    """pycc's compiler probe made two folders there per build and never removed them
    (numba.pycc.platform._gentmpfile); the build makes them in its own scratch."""
    assert sorted(p.name for p in (library.parent / SYSTEM_TMP).iterdir()) == []


@pytest.fixture
def library_on(library, monkeypatch):
    """The library turned on in this process (the suite runs with it off)."""
    monkeypatch.setenv("ACCSIM_KERNEL_DIR", str(library.parent))
    monkeypatch.setenv("ACCSIM_KERNEL_LIBRARY", "1")
    kernel_library.load.cache_clear()
    yield library
    kernel_library.load.cache_clear()


@needs_compiler
def test_library_runs_alike_without_numba(library, tmp_path) -> None:
    check = subprocess.run([sys.executable, "-m", "simulator.cli", "compile", "--check"],
                           env=_env(library.parent, True), capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    for argv in (ALEXNET, ["run"]):  # SCALE-Sim's alexnet; the shipped defaults
        compiled = _run(argv, library.parent, True, tmp_path)
        jit = _run(argv, library.parent, False, tmp_path)
        assert compiled["code"] == jit["code"] == 0
        assert compiled["out"] == jit["out"]
        assert jit["numba"]
        assert not compiled["numba"], f"{argv}: a kernel call fell back to the JIT"


@needs_compiler
def test_every_export_loads_with_its_checks(library_on) -> None:
    exports = kernel_library.load(library_on)
    assert set(exports) == {kernel.name for _, kernel, _ in ENTRIES}
    assert sum(map(len, exports.values())) == sum(len(types) for _, _, types in ENTRIES)
    (checks, function), = exports[ceil_div.name]
    assert kernel_library.fits((7, 2), checks) and function(7, 2) == 4


@needs_compiler
def test_a_stale_or_damaged_library_is_set_aside(library_on, tmp_path) -> None:
    copy = tmp_path / "lib"
    shutil.copytree(library_on, copy)
    assert kernel_library.load(copy)
    manifest = json.loads((copy / kernel_library.MANIFEST).read_text())
    assert kernel_library.current(manifest)
    source = next(iter(manifest["sources"]))
    manifest["sources"][source] = "0:00000000"  # as if that file had been edited
    (copy / kernel_library.MANIFEST).write_text(json.dumps(manifest))
    kernel_library.load.cache_clear()  # as a new process would
    assert kernel_library.load(copy) == {}
    assert kernel_library.attempt(copy)[1].startswith("stale")  # compile --check's why
    (copy / kernel_library.MANIFEST).write_text("{not json")
    kernel_library.load.cache_clear()
    assert kernel_library.load(copy) == {}
    assert kernel_library.attempt(copy)[1].startswith("unreadable")
    assert kernel_library.load(tmp_path / "absent") == {}
    assert kernel_library.attempt(tmp_path / "absent")[1].startswith("absent")


@needs_compiler
def test_a_call_that_does_not_fit_goes_to_the_jit(library_on) -> None:
    fresh = Kernel(ceil_div.py_func, (), {"cache": False})  # ceil_div's name
    assert fresh.exports()
    assert fresh(7, 2) == 4 and fresh._made is None  # the export: no dispatcher
    assert fresh(7.5, 2) == 4.0 and fresh._made is not None  # the JIT, for floats
    assert fresh._plain is None  # so each call still checks the exports first


def test_fits_wants_exact_types() -> None:
    check = kernel_library.checks(["int64", "float64", "boolean", "none", "int64[::1]",
                                   "int64[:, ::1]", "boolean[::1]"])
    vector, matrix = np.zeros(4, dtype=np.int64), np.zeros((2, 3), dtype=np.int64)
    good = (3, 1.5, True, None, vector, matrix, np.zeros(2, dtype=np.bool_))
    assert kernel_library.fits(good, check)
    assert kernel_library.fits((np.int64(3), np.float64(1.5), np.bool_(True))
                               + good[3:], check)
    readonly = vector.copy()
    readonly.setflags(write=False)
    # C-contiguous and writeable but not aligned: the exports' arrays are typed aligned.
    unaligned = np.frombuffer(bytearray(8 * 4 + 1), dtype=np.int64, offset=1)
    assert unaligned.flags.c_contiguous and unaligned.flags.writeable
    assert not unaligned.flags.aligned
    for position, bad in ((0, 3.0), (0, True), (1, 2), (2, 1), (3, vector),
                          (4, vector.astype(np.int32)), (4, np.zeros(8, np.int64)[::2]),
                          (4, readonly), (4, unaligned), (4, [0, 0]), (5, matrix.T),
                          (5, vector), (6, np.zeros(2, dtype=np.int64))):
        args = list(good)
        args[position] = bad
        assert not kernel_library.fits(tuple(args), check), (position, bad)
    assert not kernel_library.fits(good[:-1], check)
    with pytest.raises(ValueError):
        kernel_library.arg_check("int32[::1]")
    with pytest.raises(ValueError):
        kernel_library.arg_check("int64[:, :]")  # not C-contiguous


def test_the_digests_cover_every_kernel_the_entries_reach() -> None:
    """Every module holding a kernel that an entry calls (directly or not) is among the
    sources the manifest digests, so editing any of them sets the library aside."""
    sources = set(source_closure(sorted({k.__module__ for _, k, _ in ENTRIES})))
    reached, todo = set(), [kernel for _, kernel, _ in ENTRIES]
    while todo:
        kernel = todo.pop()
        if kernel.name in reached:
            continue
        reached.add(kernel.name)
        code = kernel.py_func.__code__
        names = set(code.co_names)
        for const in code.co_consts:
            if hasattr(const, "co_names"):
                names.update(const.co_names)
        for name in names:
            value = kernel.py_func.__globals__.get(name)
            if isinstance(value, Kernel):
                todo.append(value)
    assert len(reached) > len(ENTRIES)  # the entries call other kernels
    for name in reached:
        module = name.rsplit(".", 1)[0]
        path = module.removeprefix("simulator.").replace(".", "/") + ".py"
        assert path in sources or path.replace(".py", "/__init__.py") in sources, name


def test_without_a_c_compiler_compile_says_so(tmp_path) -> None:
    bare = tmp_path / "bin"  # a PATH with nothing on it
    bare.mkdir()
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "compile"],
                          env={**_env(tmp_path / "lib", True), "PATH": str(bare)},
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.startswith("accsim: error: accsim compile needs a C compiler")
    assert "Traceback" not in done.stderr
