"""`accsim map --csv/--plot` and `accsim sensitivity --csv` (issue 29 item 4): the CSV
holds what the JSON holds, one row per operator (map) or field (sensitivity), with
ratios as fractions and gaps percent by name (docs/reference/conventions.md)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from simulator.cli import main


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _number(cell: str) -> float | None:
    return None if cell == "" else float(cell)


@pytest.fixture(scope="module")
def mapped(tmp_path_factory):
    out = tmp_path_factory.mktemp("map")
    assert main(["map", "--arch", "tpu_v1", "--workload", "tpu_v1_mlp_b200", "--quiet",
                 "--workers", "1", "--json", str(out / "m.json"), "--csv",
                 str(out / "m.csv"), "--plot", str(out / "m.png")]) == 0
    return json.loads((out / "m.json").read_text()), _rows(out / "m.csv"), out


def test_map_csv_rows_equal_the_json(mapped):
    data, rows, _ = mapped
    assert any(op["same_as"] for op in data["operators"])
    assert [row["operator"] for row in rows] == [op["name"] for op in data["operators"]]
    for row, op in zip(rows, data["operators"]):
        assert row["layer_type"] == op["layer_type"] and row["kind"] == op["kind"]
        assert int(row["runs"]) == op["runs"]
        assert int(row["cycles"]) == op["best"]["cycles"]
        assert float(row["energy_pj"]) == op["best"]["energy_pj"]
        assert row["same_as"] == (op["same_as"] or "")
        if op["same_as"] is None:  # searched once per shape, as the table counts
            assert int(row["candidates"]) == op["search"]["candidates"]
            assert int(row["simulated"]) == op["search"]["simulated"]
        else:
            assert row["candidates"] == row["simulated"] == ""
        tiling = op["best"]["tiling"]
        assert row["best_tiling"].startswith(f"{tiling['tm']}x{tiling['tn']}x{tiling['tk']}")
        for name in data["heuristics"]:
            found = op["heuristics"][name]
            assert _number(row[f"{name}_gap_percent"]) == found.get("gap_percent")
            assert _number(row[f"{name}_cycles"]) == found.get("cycles")


def test_map_csv_totals_match_the_gap_table(mapped):
    """Summed per heuristic, the rows give the JSON summary's workload cycles."""
    data, rows, _ = mapped
    for summary in data["summary"]:
        if summary["cycles"] is not None:
            name = summary["heuristic"]
            assert sum(int(row[f"{name}_cycles"]) for row in rows) == summary["cycles"]
    assert sum(int(row["cycles"]) for row in rows) == data["best"]["cycles"]


def test_map_plot_is_a_png(mapped):
    _, _, out = mapped
    assert (out / "m.png").read_bytes()[:4] == b"\x89PNG"


def test_map_refuses_a_plot_it_cannot_write_before_searching(tmp_path, capsys):
    assert main(["map", "--arch", "tpu_v1", "--workload", "tpu_v1_mlp_b200",
                 "--plot", str(tmp_path / "m.txt")]) == 1
    err = capsys.readouterr().err
    assert "--plot" in err and ".png" in err and "Traceback" not in err
    assert "searched" not in capsys.readouterr().out


def test_sensitivity_csv_rows_equal_the_json(tmp_path):
    out, table = tmp_path / "s.json", tmp_path / "s.csv"
    assert main(["sensitivity", "--arch", "tpu_v1", "--workload", "gemm_4096",
                 "--field", "offchip.efficiency", "--field", "dma.setup_cycles",
                 "--json", str(out), "--csv", str(table)]) == 0
    data, rows = json.loads(out.read_text()), _rows(table)
    assert [row["field"] for row in rows] == [f["field"] for f in data["fields"]]
    for row, field in zip(rows, data["fields"]):
        assert row["metric"] == data["metric"] and row["unit"] == data["unit"]
        assert float(row["base"]) == data["base"]
        for column, key in (("value", "value"), ("range_low", "low"),
                            ("range_high", "high"), ("metric_low", "metric_low"),
                            ("metric_high", "metric_high"), ("elasticity", "elasticity")):
            assert _number(row[column]) == field[key], column
        # a fraction, the table's swing % over 100
        assert float(row["swing_fraction"]) == pytest.approx(field["spread"] / data["base"],
                                                            rel=1e-15)
        assert 0 < float(row["swing_fraction"]) < 1


def test_sensitivity_refuses_a_csv_it_cannot_write_before_running(tmp_path, capsys):
    assert main(["sensitivity", "--arch", "tpu_v1", "--workload", "gemm_4096",
                 "--csv", str(tmp_path / "s.txt")]) == 1
    err = capsys.readouterr().err
    assert "--csv" in err and ".csv" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s.txt").exists()
