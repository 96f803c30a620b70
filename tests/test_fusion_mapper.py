"""The mapper under the fusion planner (DESIGN.md section 15): a producer's reported
best is the group a run makes of it, members its tiling gives back are searched on their
own, and the written plan (carrying the fusion mode) reproduces the mapper's figures in
a whole run."""

from __future__ import annotations

import pytest

from platforms import make_platform
from simulator.cli import main
from simulator.errors import AccsimError
from simulator.frontends.hf.config import load_model_config as load_config
from simulator.frontends.hf.workloads import prefill_workload
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


def _map_and_run(arch: str, workload: str):
    """The mapper's result by cycles, the default run and a run of the mapper's plan
    (`hf/MODEL`: the model's prefill of 128 tokens)."""
    inputs = load_inputs(arch, "bert_base_s128", None)
    if workload.startswith("hf/"):
        steps = prefill_workload(load_config(workload[3:]), batch=1, seq=128)
        inputs = Inputs(inputs.platform, steps, Mapping())
    else:
        inputs = load_inputs(arch, workload, None)
    result = map_workload(inputs, workers=1)
    planned = simulate(Inputs(inputs.platform, inputs.workload, result.plan()),
                       engine="fast")
    return result, simulate(inputs, engine="fast"), planned


def test_the_mapper_runs_berts_norm_as_the_prologue_the_default_forms():
    # The default run forms layer0_attn_norm as layer0_mlp_up's prologue (80,600
    # cycles); the mapper's plan fixed every tk, so a run of it kept the norm alone
    # (81,534 cycles).
    result, default, planned = _map_and_run("tpu_v5e_like", "bert_base_s128")
    up = result.operator("layer0_mlp_up")
    assert up.prologue == ("layer0_attn_norm",) and result.operator("layer0_attn_norm") \
        is None
    assert result.plan().operators["layer0_mlp_up"].prologue is True
    assert [g.prologue for g in planned.fusion if g.producer == "layer0_mlp_up"] == \
        [("layer0_attn_norm",)]
    assert [op.totals.cycles for op in planned.operators] == \
        [op.best.cycles for op in result.operators]
    assert planned.operators_total.cycles == result.best_totals()[0] \
        <= default.operators_total.cycles
    assert read_back(result).operator("layer0_mlp_up").prologue == up.prologue


def read_back(result):
    """A mapper result through its JSON form (`accsim map --json`)."""
    return type(result).from_dict(result.as_dict())


@pytest.mark.parametrize("arch", ["edge_32x32", "tpu_v1", "tpu_v5e_like"])
@pytest.mark.parametrize("workload", ["bert_base_s128", "bert_base_s512", "hf/gpt2"])
def test_the_mappers_plan_is_never_slower_than_the_default_run(arch, workload):
    result, default, planned = _map_and_run(arch, workload)
    assert planned.operators_total.cycles == result.best_totals()[0]
    assert planned.operators_total.cycles <= default.operators_total.cycles


NORM_GEMM = Workload.model_validate({"name": "ng", "operators": [
    {"name": "norm", "layer_type": "norm", "kind": "norm", "rows": 64, "cols": 96},
    {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 64, "n": 80, "k": 96,
     "inputs": ["norm"]},
    {"name": "h", "layer_type": "fc", "kind": "gemm", "m": 64, "n": 80, "k": 80,
     "inputs": ["g"]},
]})


def test_a_plans_prologue_field_asks_for_the_group_or_the_norm_alone():
    platform = make_platform(buffers={"ifmap_bytes": 1 << 16, "weight_bytes": 1 << 16,
                                      "output_bytes": 1 << 16})

    def run(entry: dict):
        plan = Mapping.model_validate({"operators": {"g": entry}})
        return simulate(Inputs(platform, NORM_GEMM, plan), engine="fast")

    whole = {"tm": 64, "tn": 80, "tk": 96, "loop_order": "mnk", "dataflow": "ws",
             "depth": 1}
    assert [g.prologue for g in run({**whole, "prologue": True}).fusion] == [("norm",)]
    assert not run(whole).fusion   # a fixed tk keeps the norm alone, as it did
    assert not run({"prologue": False}).fusion
    with pytest.raises(AccsimError, match="prologue: true asks for a norm run as h's"):
        simulate(Inputs(platform, NORM_GEMM, Mapping.model_validate(
            {"operators": {"h": {"prologue": True}}})), engine="fast")
    with pytest.raises(AccsimError, match="prologue do not apply to a norm"):
        simulate(Inputs(platform, NORM_GEMM, Mapping.model_validate(
            {"operators": {"norm": {"prologue": True}}})), engine="fast")
