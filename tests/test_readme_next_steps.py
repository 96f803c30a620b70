"""The README's "Next steps" commands work from any folder (issue 42): each `accsim`
command of the table runs in an empty folder outside the repository, except those the
table marks "in a clone" and those with a placeholder (MODEL.onnx) to fill in."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from simulator.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"
# Next steps another test already runs from an empty folder: the kernel library's build
# (15 s) once in the suite.
RUN_ELSEWHERE = {"accsim compile": "tests/test_kernel_library.py's `library` fixture"}


def next_steps() -> list[str]:
    section = README.read_text().split("## Next steps", 1)[1].split("\n## ", 1)[0]
    commands = []
    for row in section.splitlines():
        cells = row.split("|")
        if len(cells) < 4 or "in a clone" in cells[3]:
            continue
        commands += [c for c in re.findall(r"`([^`]+)`", cells[3])
                     if c.startswith("accsim ") and not re.search(r"[A-Z]{3,}\.", c)]
    return commands


def test_the_table_lists_commands_to_run():
    assert len(next_steps()) >= 6
    assert set(RUN_ELSEWHERE) <= set(next_steps())


@pytest.mark.parametrize("command", [c for c in next_steps() if c not in RUN_ELSEWHERE])
def test_a_next_step_runs_from_an_empty_folder(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(command)[1:]
    try:
        code = main(argv)
    except SystemExit as exc:  # --help
        code = exc.code
    assert code == 0, capsys.readouterr().err


def test_review_writes_its_packet_beside_the_study_name_without_out(tmp_path,
                                                                    monkeypatch, capsys):
    """`accsim review STUDY` needs no --out: the packet goes to STUDY-packet here."""
    monkeypatch.chdir(tmp_path)
    study = README.parent / "experiments/studies/gemm_assumptions.yaml"
    assert main(["review", str(study), "--no-cache"]) == 0
    assert (tmp_path / "gemm_assumptions-packet" / "packet.json").is_file()
    assert "wrote gemm_assumptions-packet/packet.json" in capsys.readouterr().out
