"""The mapper under the fusion planner (DESIGN.md section 15): a producer's reported
best is the group a run makes of it, members its tiling gives back are searched on their
own, and the written plan (carrying the fusion mode) reproduces the mapper's figures in
a whole run."""

from __future__ import annotations

import pytest

from platforms import make_platform
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.run_inputs import Inputs
from simulator.mapping.plan import Mapping
from simulator.search.workload_search import map_workload, read_map_json
from simulator.simulate import simulate
from simulator.inputs.workload import Workload

CHAIN = Workload.model_validate({"name": "chain", "operators": [
    {"name": "x", "layer_type": "in", "kind": "elementwise", "elements": 2048, "op": "add"},
    {"name": "up", "layer_type": "fc", "kind": "gemm", "m": 32, "n": 64, "k": 48,
     "inputs": ["x"]},
    {"name": "act", "layer_type": "act", "kind": "elementwise", "elements": 2048,
     "op": "gelu", "inputs": ["up"]},
    {"name": "res", "layer_type": "res", "kind": "elementwise", "elements": 2048,
     "op": "add", "inputs": ["act", "x"]},
    {"name": "ln", "layer_type": "norm", "kind": "norm", "rows": 32, "cols": 64,
     "inputs": ["res"]},
]})


@pytest.mark.parametrize("mode", ["none", "auto"])
@pytest.mark.parametrize("output_bytes", [1 << 16, 1 << 10])
def test_the_mappers_plan_reproduces_its_figures_in_a_run(mode, output_bytes):
    platform = make_platform(systolic_array={"rows": 8, "cols": 8},
                             buffers={"output_bytes": output_bytes})
    result = map_workload(Inputs(platform, CHAIN, Mapping(fusion=mode)), workers=1)
    run = simulate(Inputs(platform, CHAIN, result.plan()), engine="fast")
    assert [op.lowered.name for op in run.operators] == [op.name for op in result.operators]
    assert [op.totals.cycles for op in run.operators] == \
        [op.best.cycles for op in result.operators]
    assert sum(op.best.cycles for op in result.operators) == run.operators_total.cycles
    up = result.operator("up")
    if mode == "none":
        assert up.fused == () and len(result.operators) == 5
    else:
        kept = {name for group in run.fusion for name in group.members}
        assert set(up.fused) == kept
        assert {op.name for op in result.operators} == \
            {"x", "up"} | ({"act", "res", "ln"} - kept)


def test_auto_fuses_on_a_roomy_buffer_and_reports_the_group():
    platform = make_platform(systolic_array={"rows": 8, "cols": 8},
                             buffers={"output_bytes": 1 << 16})
    result = map_workload(Inputs(platform, CHAIN, Mapping(fusion="auto")), workers=1)
    assert result.operator("up").fused
    assert result.plan().fusion == "auto"
    assert result.as_dict()["fusion"] == "auto"


def test_map_cli_auto_plan_reproduces_bert(tmp_path, capsys):
    out, plan = tmp_path / "map.json", tmp_path / "best.yaml"
    assert main(["map", "--arch", "tpu_v5e_like", "--workload", "bert_base_s128",
                 "--fusion", "auto", "--workers", "1", "--json", str(out),
                 "--write-plan", str(plan), "--quiet"]) == 0
    result = read_map_json(str(out))
    assert result.fusion == "auto" and any(op.fused for op in result.operators)
    run = simulate(load_inputs("tpu_v5e_like", "bert_base_s128", str(plan)))
    assert [op.totals.cycles for op in run.operators] == \
        [op.best.cycles for op in result.operators]


RUN = Workload.model_validate({"name": "run", "operators": [
    {"name": "n", "layer_type": "norm", "kind": "norm", "rows": 64, "cols": 256},
    {"name": "a", "layer_type": "res", "kind": "elementwise", "elements": 64 * 256,
     "op": "add"},
    {"name": "s", "layer_type": "act", "kind": "elementwise", "elements": 64 * 256,
     "op": "silu"},
]})


def test_the_mapper_reports_a_vector_run_as_the_run_makes_it():
    platform = make_platform(systolic_array={"rows": 8, "cols": 8})
    result = map_workload(Inputs(platform, RUN, Mapping(fusion="auto")), workers=1)
    assert result.operator("n").fused == ("a", "s")
    run = simulate(Inputs(platform, RUN, result.plan()), engine="fast")
    assert [op.totals.cycles for op in run.operators] == \
        [op.best.cycles for op in result.operators]
