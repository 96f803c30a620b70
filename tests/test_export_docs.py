"""The commands docs/howto/export.md shows run on shipped files. The fast test runs
each with small grids (the last of a repeated option wins); the slow one as written."""

import shlex
from pathlib import Path

import pytest

from simulator.cli import main

PAGE = Path(__file__).parent.parent / "docs" / "howto" / "export.md"
SMALL = {"vidur": ["--max-tokens", "4", "--max-batch", "1", "--bits", "1",
                   "--attention-bits", "1"],
         "llmservingsim": ["--max-tokens", "4", "--max-batch", "1", "--bits", "1",
                           "--attention-bits", "1"]}


def documented() -> list[list[str]]:
    lines = [line.strip() for line in PAGE.read_text().splitlines()
             if line.startswith("accsim export ")]
    return [shlex.split(line)[1:] for line in lines]


def test_the_page_shows_every_format():
    assert sorted({args[1] for args in documented()}) == ["chakra", "llmservingsim",
                                                          "vidur"]


@pytest.mark.parametrize("args", documented(), ids=lambda args: " ".join(args[:2]))
def test_documented_command_runs_small(args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(args + SMALL.get(args[1], [])) == 0
    written = capsys.readouterr().out.split()
    assert written and all(Path(word).is_file() for word in written if "/" in word)


@pytest.mark.slow
@pytest.mark.parametrize("args", documented(), ids=lambda args: " ".join(args[:2]))
def test_documented_command_runs_as_written(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 0
