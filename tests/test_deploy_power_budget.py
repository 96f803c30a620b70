"""Deployment search under a power budget (DESIGN.md section 20, `plan-deployment
--power-budget-w`): the whole deployment's power at its SLA capacity is held under the
budget as the SLA is, points whose static power alone passes it are pruned, the
binding constraint names power where it binds, and a budget no point meets is one
clear error. The tiny Llama on v5e: one chip draws 45 W static (tpu_v5e_like's
static_power) and about 56 W at its unbudgeted SLA capacity, so 47 W binds one chip
and prunes two. 64 requests: a burst of 48 meets the TTFT target on the pipelined
point at every rate (a decode batch's attention as one launch), leaving it no
bracket."""

from __future__ import annotations

import csv
import json

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.metrics.energy import static_power_w
from simulator.sweep.power_budget import least_static_w, static_floor_reason

SLA = "ttft_p99_ms=0.5,tpot_p99_ms=0.2"
WORKLOAD = ["--prompt-tokens", "64", "--output-tokens", "8", "--requests", "64"]
GRID = ["--budget-chips", "2", "--replicas", "1", "--max-batch", "16",
        "--scheduler", "serial"]
BINDING_W = 47.0


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("power") / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    return str(path)


def search(model, folder, *extra) -> tuple[dict, list[dict], str]:
    out, table = folder / "plan.json", folder / "plan.csv"
    for path in (out, table):
        path.unlink(missing_ok=True)
    assert main(["plan-deployment", "--arch", "tpu_v5e_like", "--model", model, *WORKLOAD,
                 "--sla", SLA, *GRID, "--json", str(out), "--csv", str(table),
                 *extra]) == 0
    with open(table, newline="") as handle:
        return json.loads(out.read_text()), list(csv.DictReader(handle)), str(table)


def one_chip(result: dict) -> dict:
    return next(row for row in result["points"] if row["chips"] == 1)


def test_power_binds_and_is_named(model, tmp_path, capsys):
    free, free_rows, _ = search(model, tmp_path)
    capsys.readouterr()
    capped, rows, _ = search(model, tmp_path, "--power-budget-w", str(BINDING_W))
    shown = capsys.readouterr().out
    static = static_power_w(load_inputs("tpu_v5e_like", "gemm_4096", None).platform)
    assert static < BINDING_W < one_chip(free)["power_w"]  # the case is what it says
    point = one_chip(capped)
    # The SLA capacity within the budget: the run there fits it, the next one up draws
    # more; the SLA alone would allow a higher rate.
    assert point["power_w"] <= BINDING_W < point["above"]["power"]["value"]
    assert point["above"]["missed"] == ["power_w"]
    assert point["sla_rate_rps"] < one_chip(free)["sla_rate_rps"]
    best = capped["best"]["tpu_v5e_like"]
    assert best["binding"]["metric"] == "power"
    assert best["binding"]["resource"].startswith("power: the deployment draws ")
    assert capped["power_budget_w"] == BINDING_W and "power_budget_w" not in free
    # Named in the best line, the table's `limited by` column and the CSV.
    assert "limited by power at rate" in shown and " power " in shown
    assert [row["limited_by"] for row in rows if row["status"] == "searched"] == ["power"]
    assert "limited_by" not in free_rows[0] and "power_w" not in free_rows[0]
    # Two chips draw 90 W static alone: pruned before simulation, saying so.
    pruned = [row for row in capped["points"] if row["status"] == "pruned"]
    assert len(pruned) == 2 and all(row["reason"].startswith(
        "power: 2 chips draw 90 W static alone, over the budget of 47 W") for row in pruned)


def test_a_budget_that_does_not_bind_changes_no_figure(model, tmp_path, capsys):
    free, _, _ = search(model, tmp_path)
    loose, _, _ = search(model, tmp_path, "--power-budget-w", "1000")
    capsys.readouterr()
    for row, same in zip(free["points"], loose["points"]):
        assert {k: v for k, v in row.items() if k not in ("key", "above")} == \
            {k: v for k, v in same.items() if k not in ("key", "above", "limited_by")}
        assert same["above"]["power"]["met"] and "power_w" not in same["above"]["missed"]


@pytest.mark.parametrize("budget, message", [
    ("10", "--power-budget-w: no deployment fits the power budget of 10 W: the least any "
     "searched point draws is 45 W, the static power alone of 1 chips of tpu_v5e_like"),
    ("-5", "--power-budget-w: -5.0 is outside"),
    ("nan", "'nan' is not a decimal number"),
])
def test_a_budget_nothing_meets_is_one_clear_error(model, capsys, budget, message):
    args = ["plan-deployment", "--arch", "tpu_v5e_like", "--model", model, *WORKLOAD,
            "--sla", SLA, *GRID, "--power-budget-w", budget]
    code = main(args) if budget != "nan" else pytest.raises(SystemExit, main, args).value.code
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()  # argparse's refusal follows its usage lines
    assert message in lines[-1] and (code == 2 or len(lines) == 1)


def test_the_static_floor_of_a_chip_with_a_dvfs_table_is_its_lowest_points():
    """A power cap may run a chip at its lowest DVFS point, where its on-chip static
    power is V/V0 of the nominal: whatif/tpu_v5e_capped's 35 W on chip x 0.60/0.75 +
    10 W off chip = 38 W, the floor a budget prunes by."""
    capped = load_inputs("whatif/tpu_v5e_capped", "gemm_4096", None).platform
    assert least_static_w(capped) == pytest.approx(38.0)
    assert static_floor_reason(2, capped, 76.5) is None
    assert static_floor_reason(2, capped, 75.0) == (
        "power: 2 chips draw 76 W static alone at their lowest DVFS point, over the "
        "budget of 75 W")
    assert static_floor_reason(2, capped, None) is None


def test_runs_are_shared_across_budgets_and_points_are_not(model, tmp_path, capsys):
    """A point's key names the budget (its outcome depends on it); a run's does not (the
    budget judges its figures), so a search under another budget reads its runs back."""
    store = str(tmp_path / "deploy.sqlite")
    search(model, tmp_path, "--store", store, "--power-budget-w", str(BINDING_W))
    first = capsys.readouterr().out
    again, _, _ = search(model, tmp_path, "--store", store, "--power-budget-w", "1000")
    second = capsys.readouterr().out
    assert "0 already stored" in first and "0 already stored" in second
    assert "serving runs: 0 read back" in first
    read_back = int(second.split("serving runs: ")[1].split(" read back")[0])
    assert read_back > 0
    free, _, _ = search(model, tmp_path)
    capsys.readouterr()
    assert [row["sla_rate_rps"] for row in again["points"]] == \
        [row["sla_rate_rps"] for row in free["points"]]
