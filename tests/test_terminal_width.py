"""Terminal tables fit the terminal (issue 29 item 4): every table-printing command, run
on shipped inputs at 80 and 120 columns, prints no table line wider than that and no
cut cell, and every figure of its one-table `--wide` output appears, whole, in the
grouped one (lines of text are not wrapped: the terminal folds them)."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter

import pytest
from rich.table import Table

from simulator.cli import main
from simulator.output.terminal import Grouped, table_parts

RULES = re.compile("[\u2500-\u257f]")  # what a table's lines hold, a text line not
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
SWEEP = """\
name: width
platform: edge_32x32
workloads: [tpu_v1_mlp_b200]
axes:
  systolic_array.rows: [16, 32]
  systolic_array.cols: [16, 32]
  offchip.bandwidth_gbps: [10.0, 20.0]
objectives: {time_s: min, memory_stall_fraction: min}
"""
COMMANDS = {
    "run": ["run", "--arch", "tpu_v1", "--workload", "tpu_v1_mlp_b200"],
    "compare": ["compare", "--arch", "tpu_v1", "--arch", "tpu_v5e_like", "--arch",
                "edge_32x32", "--workload", "tpu_v1_mlp_b200"],
    "map": ["map", "--arch", "tpu_v1", "--workload", "tpu_v1_mlp_b200"],
    "check": ["check", "bert_base_fuse_gelu", "--arch", "tpu_v5e_like", "--workload",
              "bert_base_s128"],
    "serve": ["serve", "--arch", "tpu_v1", "--workload", "tpu_v1_mlp_b200", "--requests",
              "200", "--sweep-rate", "200:400:2"],
    "sensitivity": ["sensitivity", "--arch", "tpu_v5e_like", "--workload", "gemm_4096"],
    "sweep report": ["sweep", "report", "{store}", "--best-by", "time_s", "--failed"],
}


def printed(capsys, monkeypatch, argv: list[str], columns: int | None) -> list[str]:
    """What a command prints on stdout, at `columns` (None: --wide, 400 columns)."""
    monkeypatch.setenv("COLUMNS", str(columns or 400))
    capsys.readouterr()
    assert main(argv + ([] if columns else ["--wide"])) == 0
    return capsys.readouterr().out.splitlines()


def figures(lines: list[str]) -> Counter:
    """Every number printed, wall-clock lines left out (no two runs share them)."""
    return Counter(n for line in lines if "wall" not in line
                   for n in NUMBER.findall(line))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("width")
    (folder / "spec.yaml").write_text(SWEEP)
    path = str(folder / "s.sqlite")
    assert main(["sweep", "run", str(folder / "spec.yaml"), "--store", path,
                 "--scheduler", "serial", "--heuristic", "array_aligned"]) == 0
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_tables_fit_80_and_120_columns_and_keep_every_figure(command, capsys, monkeypatch,
                                                             request):
    argv = [request.getfixturevalue("store") if word == "{store}" else word
            for word in COMMANDS[command]]
    wide = printed(capsys, monkeypatch, argv, None)
    assert max(map(len, wide)) > 80, "the command prints nothing wider than 80 columns"
    for columns in (80, 120):
        lines = printed(capsys, monkeypatch, argv, columns)
        too_wide = [line for line in lines if len(line.rstrip()) > columns and
                    RULES.search(line)]
        assert not too_wide, f"{command} at {columns} columns: {too_wide[:3]}"
        assert not any("\u2026" in line for line in lines), "an ellipsised cell"
        missing = figures(wide) - figures(lines)
        assert not missing, f"{command} at {columns} columns lost {dict(missing)}"


def test_a_split_table_repeats_its_key_and_keeps_groups_whole():
    table = Table(title="t")
    for header in ("name", "a", "b", "c", "d", "e"):
        table.add_column(header)
    table.add_row("x" * 10, *("1" * 8 for _ in range(5)))

    def measured(t: Table) -> int:  # natural width: cells of 10 and 8, 3 between
        return sum(10 if str(c.header) == "name" else 8 for c in t.columns) + \
            3 * (len(t.columns) - 1)
    # name + a fits 45 columns, name + b..d (43) too, but not with a or e beside them
    parts = table_parts(Grouped(table, key=1, groups=(("b", "c", "d"),)), 45, measured)
    assert [[str(c.header) for c in p.columns] for p in parts] == \
        [["name", "a"], ["name", "b", "c", "d"], ["name", "e"]]
    assert [p.title for p in parts] == ["t", None, None]
    assert table_parts(Grouped(table), 45, measured, wide=True) == [table]


def column(lines: list[str], header: str, first: str) -> dict[str, str]:
    """The `header` column of the one-table (--wide) table whose header row holds it,
    by each row's first cell; the table starts at the first header row with `first`."""
    start = next(k for k, line in enumerate(lines) if line.startswith(first) and
                 header in [cell.strip() for cell in line.split("\u2503")])
    headers = [h.strip() for h in lines[start].split("\u2503")]
    at = headers.index(header)
    cells = {}
    for line in lines[start + 2:]:
        if "\u2502" not in line and "\u253c" in line:
            continue  # a section's rule
        if "\u2502" not in line:
            break
        row = [c.strip() for c in line.split("\u2502")]
        cells[row[0]] = row[at]
    return cells


def percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}"


def test_mfu_and_other_ratios_print_alike_in_run_compare_sweep_report_and_serve(
        store, capsys, monkeypatch, tmp_path):
    """Each command's table shows a ratio as percent to one decimal under a `%` header,
    from the fraction its JSON or CSV holds."""
    run_json = tmp_path / "run.json"
    lines = printed(capsys, monkeypatch, COMMANDS["run"] + ["--json", str(run_json)], None)
    workload = json.loads(run_json.read_text())["workload"]
    by_type = column(lines, "MFU%", "layer_type")
    assert by_type["workload"] == percent(workload["mfu"])
    assert column(lines, "stall%", "layer_type")["workload"] == \
        percent(workload["memory_stall_fraction"])
    assert f"MFU {percent(workload['mfu'])}% of" in "\n".join(lines)

    compare_csv = tmp_path / "compare.csv"
    lines = printed(capsys, monkeypatch, COMMANDS["compare"] + ["--csv", str(compare_csv)],
                    None)
    rows = list(csv.DictReader(compare_csv.open()))
    shown = column(lines, "MFU%", "platform")
    assert shown == {row["platform"]: percent(float(row["mfu"])) for row in rows}
    assert rows[0]["platform"] == "tpu_v1" and rows[0]["workload"] == "tpu_v1_mlp_b200"
    run_mfu = percent(workload["mfu"])
    assert shown["tpu_v1"] == run_mfu  # the same run, the same figure

    sweep_csv = tmp_path / "sweep.csv"
    lines = printed(capsys, monkeypatch, ["sweep", "report", store, "--csv",
                                          str(sweep_csv)], None)
    point = ("systolic_array.rows", "systolic_array.cols", "offchip.bandwidth_gbps")
    rows = {tuple(float(r[axis]) for axis in point): r
            for r in csv.DictReader(sweep_csv.open())}
    table = [line for line in lines if "\u2502" in line and "tpu_v1_mlp_b200" in line]
    header = next(line for line in lines if "MFU%" in line and "stall%" in line)
    headers = [h.strip() for h in re.split("[\u2503\u2502]", header)]
    for line in table:
        cells = dict(zip(headers, (c.strip() for c in re.split("[\u2503\u2502]", line))))
        row = rows[tuple(float(cells[axis.rsplit(".", 1)[1]]) for axis in point)]
        assert cells["MFU%"] == percent(float(row["mfu"]))
        assert cells["stall%"] == percent(float(row["memory_stall_fraction"]))
    assert table

    serve_csv, serve_json = tmp_path / "curve.csv", tmp_path / "serve.json"
    lines = printed(capsys, monkeypatch, COMMANDS["serve"] + ["--csv", str(serve_csv)],
                    None)
    curve = list(csv.DictReader(serve_csv.open()))
    shown = column(lines, "utilization%", "offered_rps")
    assert sorted(shown.values()) == sorted(percent(float(r["utilization"]))
                                            for r in curve)
    single = [w for w in COMMANDS["serve"] if w not in ("--sweep-rate", "200:400:2")]
    lines = printed(capsys, monkeypatch, single + ["--rate", "300", "--json",
                                                   str(serve_json)], None)
    utilization = json.loads(serve_json.read_text())["utilization"]
    assert f"utilization {percent(utilization)}%" in "\n".join(lines)


def test_a_pipe_without_columns_gets_whole_tables(capsys, monkeypatch):
    """Output that is not a terminal has no width of its own: without COLUMNS every
    table is printed whole, one line per row, as --wide prints it."""
    wide = printed(capsys, monkeypatch, COMMANDS["compare"], None)
    monkeypatch.delenv("COLUMNS")
    assert main(COMMANDS["compare"]) == 0
    assert capsys.readouterr().out.splitlines() == wide
    assert max(map(len, wide)) > 80
