"""Counts in the lines accsim prints read as English: "1 operator", never
"1 operators" (a one-operator workload's run, check and import said so)."""

from __future__ import annotations

from simulator.cli import main
from simulator.output.wording import counted


def test_one_is_singular_and_others_plural():
    assert [counted(n, "operator") for n in (0, 1, 2, 1234)] == [
        "0 operators", "1 operator", "2 operators", "1,234 operators"]
    assert counted(2, "entry", "entries") == "2 entries"


def test_a_one_operator_workload_reads_singular(tmp_path, capsys):
    workload = tmp_path / "w.yaml"
    workload.write_text("name: w\noperators:\n  - {name: g, layer_type: fc, kind: gemm, "
                        "m: 64, n: 64, k: 64}\n")
    assert main(["check", str(workload)]) == 0
    assert main(["run", "--arch", "edge_32x32", "--workload", str(workload)]) == 0
    out = capsys.readouterr().out
    assert "valid workload (1 operator)" in out and "simulated 1 operator in" in out
    assert "1 operators" not in out
