"""Every table of every command fits COLUMNS=80 without cutting a number (issue 42):
each verb's examples run at 80 columns; every table line (box-drawing characters) is
at most 80 characters and no cell is ellipsised. A table wider than that is printed as
parts that repeat its key columns (simulator.output.terminal), and long text (the
formulas of `run --model`'s figures table) wraps at its words. Every other line (a
summary, a legend, a note, a table's title) wraps at its words too: each line of the
output is at most 80 columns, and its text lines hold the same words as the output
without a width (one line per line), so no number is cut."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from test_bad_inputs import WORKLOAD_FILE

WIDTH = 80
BOX = set("│┃━┏┓┗┛└┘┌┐╇┡┩┳┻╋─")
TINY = ["--model", "tiny.json", "--prompt-tokens", "32", "--output-tokens", "4"]
SWEEP = {"name": "tiny", "platform": "edge_32x32", "workloads": ["gemm_4096"],
         "axes": {"systolic_array.rows": [16, 32], "offchip.bandwidth_gbps": [5.0, 10.0]},
         "sampling": {"method": "grid"}, "objectives": {"time_s": "min",
                                                        "avg_power_w": "min"}}
EXAMPLES = {
    "run": [["run", "--arch", "edge_32x32", "--workload", "gemm_4096"]],
    "run --model": [["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b",
                     "--phase", "decode", "--context", "128"]],
    "run multi-chip": [["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b",
                        "--phase", "decode", "--context", "128", "--tp", "2"]],
    "compare": [["compare", "--arch", "tpu_v1", "--arch", "edge_32x32", "--arch",
                 "tpu_v5e_like", "--workload", "gemm_4096"]],
    "map": [["map", "--arch", "edge_32x32", "--workload", "w.yaml"]],
    "serve": [["serve", "--arch", "tpu_v5e_like", *TINY, "--rate", "100", "--requests",
               "20"],
              ["serve", "--arch", "tpu_v5e_like", *TINY, "--requests", "20",
               "--sweep-rate", "100:1000:3"]],
    # One small GEMM: the same table (a row per assumed field) as a large workload's,
    # without simulating a 4096-cube GEMM some 50 times at each width.
    "sensitivity": [["sensitivity", "--arch", "edge_32x32", "--workload", "w.yaml"]],
    "plan-deployment": [["plan-deployment", "--arch", "tpu_v5e_like", *TINY, "--requests",
                         "24", "--sla", "ttft_p99_ms=0.5,tpot_p99_ms=0.2",
                         "--budget-chips", "2", "--max-batch", "4", "--show-pruned"]],
    "sweep": [["sweep", "run", "s.yaml", "--store", "s.sqlite", "--scheduler", "serial"],
              ["sweep", "report", "s.sqlite"]],
}


NUMBER = re.compile(r"[-+(]?\d[\d,.]*%?[),;:]?")
# What follows a wall-clock figure: seconds ("in 6.8 s", "0.4 s wall") and the rates
# the search and the sweep report per wall second.
WALL_UNIT = re.compile(r"(s|(points|candidates)/s)[),;:]*")


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if BOX & set(line) and len(line) > WIDTH]


def text_words(text: str) -> list[str]:
    """The words of the lines that are not table rows, wall-clock figures masked (they
    differ from run to run)."""
    words = " ".join(line for line in text.splitlines()
                     if not BOX & set(line)).split()
    return ["#" if NUMBER.fullmatch(word) and WALL_UNIT.fullmatch(following) else word
            for word, following in zip(words, words[1:] + [""])]


def inputs(folder):
    """A folder holding the examples' input files."""
    folder.mkdir()
    (folder / "tiny.json").write_text(json.dumps(TINY_LLAMA))
    (folder / "s.yaml").write_text(yaml.safe_dump(SWEEP))
    (folder / "w.yaml").write_text(WORKLOAD_FILE)
    return folder


def printed(argv: list[str], capsys) -> tuple[str, str]:
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr()


@pytest.mark.parametrize("verb", list(EXAMPLES))
def test_every_line_fits_80_columns(verb, tmp_path, monkeypatch, capsys):
    fitted, whole = inputs(tmp_path / "fitted"), inputs(tmp_path / "whole")
    tables = long_lines = 0
    for argv in EXAMPLES[verb]:
        monkeypatch.chdir(fitted)
        monkeypatch.setenv("COLUMNS", str(WIDTH))
        out, err = printed(argv, capsys)
        tables += sum(BOX & set(line) != set() for line in out.splitlines())
        assert too_wide(out) == [], "\n".join(too_wide(out)[:3])
        assert "…" not in out
        over = [line for line in (out + err).splitlines() if len(line) > WIDTH]
        assert over == [], "\n".join(over[:3])
        monkeypatch.chdir(whole)  # the same run without a width: one line per line
        monkeypatch.delenv("COLUMNS")
        unwrapped, _ = printed(argv, capsys)
        assert text_words(out) == text_words(unwrapped)
        long_lines += sum(len(line) > WIDTH for line in unwrapped.splitlines()
                          if not BOX & set(line))
    assert tables > 0, "no table printed: the example no longer shows what it should"
    assert long_lines > 0, "no line of text to wrap: the example tests no wrapping"


def test_the_figures_table_was_the_widest_and_now_wraps_its_formulas(tmp_path,
                                                                    monkeypatch, capsys):
    """`run --model`'s figure / value / how table (181 characters at 80 columns before)
    keeps every figure's value on one line."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert main(EXAMPLES["run --model"][0]) == 0
    out = capsys.readouterr().out
    assert "│ weight bytes" in out and "14.96 GiB" in out
    assert "┃ figure" in out and "┃ how" in out
