"""experiments/readme_numbers.py on a page of its own (issue 23 item 8): the figures a
marked example quotes are compared with a fresh run of its command; --check exits 1
naming the line that moved, a run without it rewrites that line, wall-clock figures
are not compared, and a marker that is not a plain accsim command is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "readme_numbers.py"
GEMM = """\
name: small_gemm
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 32, n: 32, k: 64}
"""


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The command, and the summary lines it prints (taken from a real run)."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "g.yaml").write_text(GEMM)
    command = (f"accsim run --arch edge_32x32 --workload {folder / 'g.yaml'} "
               "--heuristic array_aligned")
    printed = subprocess.run([sys.executable, "-m", "simulator.cli", *command.split()[1:]],
                             capture_output=True, text=True, timeout=300).stdout
    cycles = next(line for line in printed.splitlines() if " cycles = " in line)
    energy = next(line for line in printed.splitlines() if line.startswith("energy "))
    wall = next(line for line in printed.splitlines() if " s wall" in line)
    return folder, command, cycles, energy, wall


def page(folder: Path, text: str) -> Path:
    path = folder / "page.md"
    path.write_text(text)
    return path


def test_a_page_quoting_what_the_command_prints_passes(example):
    folder, command, cycles, energy, wall = example
    # The wall-clock figure is quoted wrong on purpose: it is never compared.
    path = page(folder, f"Intro.\n\n<!-- accsim-example: {command} -->\n```\n"
                f"$ {command}\n{cycles}\n...\n{energy}\n"
                f"{wall.replace(' s wall', '9 s wall')}\n```\n")
    done = script("--check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 example commands; 0 quoted lines differ" in done.stdout


def test_a_moved_figure_fails_the_check_and_is_regenerated(example):
    folder, command, cycles, energy, _ = example
    wrong = cycles.replace(" cycles", "1 cycles", 1)  # one more digit: a figure moved
    assert wrong != cycles
    text = f"<!-- accsim-example -->\n  ```\n  $ {command}\n  {wrong}\n  {energy}\n  ```\n"
    path = page(folder, text)
    done = script("--check", str(path))
    assert done.returncode == 1
    assert f"{path}:4: quoted: {wrong}" in done.stdout
    assert f"accsim now prints: {cycles}" in done.stdout
    assert path.read_text() == text  # --check changes nothing
    assert script(str(path)).returncode == 0  # regenerate
    assert path.read_text() == text.replace(wrong, cycles)
    assert script("--check", str(path)).returncode == 0


def test_a_line_the_command_never_prints_is_listed(example):
    folder, command, *_ = example
    path = page(folder, f"<!-- accsim-example: {command} -->\n```\n"
                "a line accsim never prints 42\n```\n")
    done = script("--check", str(path))
    assert done.returncode == 1 and "no output line has these words" in done.stdout


@pytest.mark.parametrize("marker, problem", [
    ("<!-- accsim-example: rm -rf / -->\n```\nx\n```\n", "only `accsim ...` commands"),
    ("<!-- accsim-example: accsim run > out.txt -->\n```\nx\n```\n", "shell syntax"),
    ("<!-- accsim-example: accsim run -->\nno block here\n", "followed by a fenced"),
    ("<!-- accsim-example: accsim run -->\n```\nnever closed\n", "never closed"),
])
def test_a_bad_marker_is_one_error_naming_the_line(tmp_path, marker, problem):
    path = page(tmp_path, "# Title\n\n" + marker)
    done = script("--check", str(path))
    assert done.returncode == 2
    assert f"{path}:" in done.stderr and problem in done.stderr
