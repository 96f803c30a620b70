"""Row-parallel GEMMs of plain workloads where a mapping plan says (DESIGN.md section
14): `row_parallel` names GEMMs whose K splits T ways under --tp, each followed by an
all-reduce of its output; every other operator stays column-parallel (its input gathered
when it arrives split: tests/test_system_plain_tp.py)."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main

from simulator.inputs.named_inputs import load_inputs
from simulator.system.plan_run import run_plan
from simulator.system.parallelism import SystemPlan

DOWN = "layer0_mlp_down"  # bert_base_s128: 128 x 768 x 3072


def plan_file(tmp_path, text: str) -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return str(path)


def test_a_row_parallel_gemm_shards_k_and_adds_its_all_reduce(tmp_path):
    column = run_plan(load_inputs("tpu_v5e_like", "bert_base_s128", None),
                      SystemPlan(chips=4, tp=4))
    inputs = load_inputs("tpu_v5e_like", "bert_base_s128",
                         plan_file(tmp_path, f"row_parallel: [{DOWN}]\n"))
    row = run_plan(inputs, SystemPlan(chips=4, tp=4))
    ops = {op.name: op for op in row.result.inputs.workload.operators}
    assert (ops[DOWN].m, ops[DOWN].n, ops[DOWN].k) == (128, 768, 3072 // 4)
    reduce = ops[f"{DOWN}_all_reduce"]
    assert (reduce.collective, reduce.chips) == ("all_reduce", 4)
    assert reduce.payload_bytes == 128 * 768 * 2  # the full bf16 output, partial sums
    names = [op.name for op in row.result.inputs.workload.operators]
    assert names.index(f"{DOWN}_all_reduce") == names.index(DOWN) + 1
    # the others are column-parallel as before, and K or N, the weights split 4 ways
    assert ops["layer0_mlp_up"].n == 3072 // 4
    # the row-parallel GEMM takes the gelu's split output as it lies: no all-gather
    # before it, where the all column-parallel shard needs one
    column_names = [op.name for op in column.result.inputs.workload.operators]
    assert f"{DOWN}_all_gather" in column_names and f"{DOWN}_all_gather" not in names
    assert row.figures()["weight_bytes_per_chip"] == column.figures()["weight_bytes_per_chip"]


def test_row_parallel_changes_nothing_on_one_chip(tmp_path, capsys):
    plain, planned = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--json", str(plain)]) == 0
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--mapping", plan_file(tmp_path, f"row_parallel: [{DOWN}]\n"),
                 "--json", str(planned)]) == 0
    capsys.readouterr()
    a, b = (json.loads(p.read_text()) for p in (plain, planned))
    assert a["workload"] == b["workload"] and a["operators"] == b["operators"]
    assert "system" not in b


@pytest.mark.parametrize("text, message", [
    ("row_parallel: [nope]\n",
     "row_parallel: no operator named 'nope' in workload 'bert_base_s128'"),
    ("row_parallel: [layer0_mlp_norm]\n", "row_parallel: 'layer0_mlp_norm' is a norm "
     "operator; "
     "only a gemm splits by rows"),
    (f"row_parallel: [{DOWN}, {DOWN}]\n", f"names {DOWN} more than once"),
])
def test_bad_row_parallel_one_clear_error(tmp_path, capsys, text, message):
    code = main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--tp", "2", "--mapping", plan_file(tmp_path, text)])
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err and "plan.yaml" in err


def test_row_parallel_is_in_the_schema_export(capsys):
    assert main(["schema", "mapping"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "GEMMs split by rows" in schema["properties"]["row_parallel"]["description"]


def test_a_row_parallel_result_verifies_and_an_edited_shard_does_not(tmp_path, capsys):
    """verify shards the workload file again under the recorded plan and mapping."""
    path = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128", "--tp",
                 "4", "--mapping", plan_file(tmp_path, f"row_parallel: [{DOWN}]\n"),
                 "--json", str(path)]) == 0
    assert main(["verify", str(path)]) == 0
    edited = json.loads(path.read_text())
    for op in edited["manifest"]["inputs"]["workload"]["canonical"]["operators"]:
        if op["name"] == DOWN:
            op["k"] = 3072  # as if unsharded
    path.write_text(json.dumps(edited))
    capsys.readouterr()
    assert main(["verify", str(path)]) == 1
    assert "workload: " in capsys.readouterr().out
