"""Commands alike (issue 29 item 4): the simulating verbs take the same input and output
flags, as docs/reference/conventions.md tables them."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from simulator.cli import build_parser

INPUTS = ("--arch", "--workload", "--model", "--onnx", "--kineto", "--mapping",
          "--heuristic", "--fusion", "--precision")
# Verb: the input flags it takes and the output flags, per the conventions page.
TAKES = {
    "run": (INPUTS, ("--json", "--csv", "--plot", "--wide")),
    "compare": (INPUTS, ("--json", "--csv", "--plot", "--wide")),
    "map": (INPUTS, ("--json", "--csv", "--plot", "--wide")),
    "sensitivity": (INPUTS, ("--json", "--csv", "--plot", "--wide")),
    "regress": (INPUTS, ("--json", "--csv", "--plot")),
    "serve": (("--arch", "--workload", "--model", "--mapping", "--heuristic", "--fusion",
               "--precision"), ("--json", "--csv", "--plot", "--wide")),
    "plan-deployment": (("--arch", "--model", "--heuristic", "--fusion", "--precision"),
                        ("--json", "--csv", "--wide")),
    "check": (("--arch", "--workload"), ("--wide",)),
    "calibrate": (("--arch",), ("--json", "--wide")),
}


def options(verb: str) -> set[str]:
    parser = build_parser([verb])
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {flag for action in verbs.choices[verb]._actions
            for flag in action.option_strings}


CONVENTIONS = Path(__file__).resolve().parents[1] / "docs" / "reference" / "conventions.md"


def flag_table() -> dict[tuple[str, str], bool]:
    """The conventions page's flag table: (verb, flag) -> whether it says the verb
    takes the flag (a cell starting "yes"); the sweep column names a spec, left out."""
    rows = [line for line in CONVENTIONS.read_text().splitlines()
            if line.startswith("| ") and "`--" in line.split("|")[1]]
    head = next(line for line in CONVENTIONS.read_text().splitlines()
                if line.startswith("| flag |"))
    verbs = [cell.strip() for cell in head.strip("|").split("|")][1:]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        for flag in re.findall(r"`(--[a-z-]+)`", cells[0]):
            for verb, cell in zip(verbs, cells[1:]):
                if verb != "sweep run":
                    table[verb, flag] = cell.startswith("yes")
    return table


def test_the_conventions_table_says_what_each_parser_takes():
    table = flag_table()
    assert ("serve", "--precision") in table and len(table) > 50
    wrong = [f"{verb} {flag}: table says {'yes' if says else '-'}"
             for (verb, flag), says in sorted(table.items())
             if says != (flag in options(verb))]
    assert not wrong, wrong


@pytest.mark.parametrize("verb", sorted(TAKES))
def test_each_simulating_verb_takes_the_shared_flags(verb):
    inputs, outputs = TAKES[verb]
    missing = set(inputs + outputs) - options(verb)
    assert not missing, f"accsim {verb} lacks {sorted(missing)}"


def test_one_workload_source_at_a_time():
    """--onnx and --kineto exclude each other wherever they are taken."""
    for verb in ("run", "compare", "map", "sensitivity", "regress"):
        with pytest.raises(SystemExit):
            build_parser([verb]).parse_args([verb, "--onnx", "m.onnx", "--kineto", "t.json"])
