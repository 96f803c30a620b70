"""The fusion planner (DESIGN.md section 15): groups, bytes kept on chip, never slower
than unfused, every capacity fallback listed, --fusion none unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from simulator.inputs.named_inputs import load_inputs
from simulator.errors import AccsimError
from simulator.present.sheet import markdown, sheet_rows
from simulator.frontends.hf.config import load_model_config as load_config
from simulator.frontends.hf.workloads import prefill_workload
from simulator.inputs.run_inputs import Inputs
from simulator.mapping.plan import with_fusion
from simulator.simulate import simulate
from simulator.inputs.workload import Workload, is_compute


def _run(arch: str, workload, mode: str):
    base = load_inputs(arch, "bert_base_s128", None)
    if isinstance(workload, str):
        base = load_inputs(arch, workload, None)
        workload = base.workload
    inputs = Inputs(base.platform, workload, with_fusion(base.mapping, mode),
                    base.platform_source, base.workload_source)
    return simulate(inputs, engine="fast")


def _kept_on_chip(result) -> int:
    """Bytes of the intermediates the groups keep on chip, counted from the tensors:
    each intermediate is written once by its producer and read once by its consumer
    (a prologue norm's output: written once and read once, however many GEMMs
    recompute it, since each of them reads the norm's input instead)."""
    ops = {op.name: op for op in result.inputs.workload.operators}
    platform = result.platform
    from_dtype = {"bf16": 2, "fp16": 2, "fp32": 4, "int8": 1, "int32": 4}
    total = 0
    for norm in {name for group in result.fusion for name in group.prologue}:
        e = from_dtype[ops[norm].dtype or platform.systolic_array.input_dtypes[0]]
        total += 2 * ops[norm].vector().output_elements * e * ops[norm].repeat
    for group in result.fusion:
        producer = ops[group.producer]
        if is_compute(producer):   # an epilogue: the array's output dtype
            g = producer.gemm()
            e_out = from_dtype[platform.systolic_array.output_dtype]
            produced = g.m * g.n * g.instances
        else:                      # a vector run: the first operator's own dtype
            e_out = from_dtype[producer.dtype or platform.systolic_array.input_dtypes[0]]
            produced = producer.vector().output_elements
        chain = [producer] + [ops[name] for name in group.members]
        for before, after in zip(chain, chain[1:]):
            e_after = from_dtype[after.dtype or platform.systolic_array.input_dtypes[0]]
            if before is producer:
                elements = produced
                total += elements * e_out * producer.repeat
            else:
                e_before = from_dtype[before.dtype or platform.systolic_array.input_dtypes[0]]
                elements = before.vector().output_elements
                total += elements * e_before * before.repeat
            total += elements * e_after * after.repeat
    return total


def _vector_runs() -> Workload:
    """Two vector runs (a norm led run, an elementwise one) by adjacency, each
    intermediate read once, the binary members streaming their second operand."""
    rows, cols = 256, 1024
    elements = rows * cols
    ops = [{"name": "n0", "kind": "norm", "rows": rows, "cols": cols},
           {"name": "a0", "kind": "elementwise", "elements": elements, "op": "add"},
           {"name": "g0", "kind": "elementwise", "elements": elements, "op": "gelu"},
           {"name": "p", "kind": "pool", "h": 8, "w": 8, "channels": 4, "kh": 2, "kw": 2},
           {"name": "s1", "kind": "elementwise", "elements": elements, "op": "silu"},
           {"name": "m1", "kind": "elementwise", "elements": elements, "op": "mul"}]
    return Workload.model_validate({"name": "runs", "operators": [
        {"layer_type": "v", **op} for op in ops]})


@pytest.mark.parametrize("workload", ["bert_base_s128", "llama", "vector_runs"])
def test_auto_saves_exactly_the_intermediates(workload):
    if workload == "llama":
        workload = prefill_workload(load_config("llama_3_1_8b"), batch=1, seq=512)
    if workload == "vector_runs":
        workload = _vector_runs()
    none = _run("tpu_v5e_like", workload, "none")
    auto = _run("tpu_v5e_like", workload, "auto")
    assert auto.fusion and not none.fusion
    saved = none.total.offchip_bytes - auto.total.offchip_bytes
    assert saved == _kept_on_chip(auto) > 0
    assert saved == sum(g.offchip_bytes_saved for g in auto.fusion)
    assert all(g.cycles_saved >= 0 for g in auto.fusion)


def test_llama_follows_edges_and_fuses_the_gated_mlp():
    workload = prefill_workload(load_config("llama_3_1_8b"), batch=1, seq=512)
    auto = _run("tpu_v5e_like", workload, "auto")
    assert not auto.fusion_adjacency
    groups = {g.producer: g.members for g in auto.fusion}
    assert groups["mlp_gate_up"] == ("mlp_act", "mlp_gate_mul")
    assert "rope" not in groups.get("qkv", ())   # V is read by attention from qkv


def test_every_capacity_fallback_is_listed():
    auto = _run("tpu_v5e_like", "bert_base_s128", "auto")
    dropped = {name: reason for g in auto.fusion for name, reason in g.dropped}
    assert set(dropped) == {"layer0_attn_norm", "layer0_mlp_norm"}
    assert all("C tile" in reason for reason in dropped.values())
    fused = {m for g in auto.fusion for m in g.members}
    ran = {op.lowered.name for op in auto.operators}
    # A norm an epilogue gives back runs alone or as the next GEMM's prologue.
    prologue = {m for g in auto.fusion for m in g.prologue}
    assert prologue == {"layer0_attn_norm"}
    assert set(dropped) <= ran | prologue and not (fused | prologue) & ran


def test_epilogue_mode_fuses_only_what_the_plan_asks():
    assert not _run("tpu_v5e_like", "bert_base_s128", "epilogue").fusion


def _chain(ops: list[str], m: int, n: int, k: int) -> Workload:
    operators = [{"name": "g", "layer_type": "fc", "kind": "gemm", "m": m, "n": n, "k": k}]
    for index, op in enumerate(ops):
        operators.append({"name": f"v{index}", "layer_type": "act", "kind": "elementwise",
                          "elements": m * n, "op": op})
    return Workload.model_validate({"name": "chain", "operators": operators})


@settings(max_examples=12, deadline=None)
@given(ops=st.lists(st.sampled_from(["add", "mul", "relu", "gelu", "silu"]), min_size=1,
                    max_size=4),
       m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 300),
       arch=st.sampled_from(["tpu_v5e_like", "tpu_v1"]))
def test_a_fused_group_never_takes_more_cycles_than_unfused(ops, m, n, k, arch):
    workload = _chain(ops, m, n, k)
    none = _run(arch, workload, "none")
    auto = _run(arch, workload, "auto")
    assert auto.total.cycles <= none.total.cycles
    assert auto.total.offchip_bytes <= none.total.offchip_bytes
    for group in auto.fusion:
        assert group.cycles_saved >= 0


def test_vector_runs_form_one_kernel_each_and_list_their_fallbacks():
    auto = _run("tpu_v5e_like", _vector_runs(), "auto")
    groups = {g.producer: g.members for g in auto.fusion}
    assert groups == {"n0": ("a0", "g0"), "s1": ("m1",)}
    assert [op.lowered.name for op in auto.operators] == ["n0", "p", "s1"]
    # A norm inside a run needs whole rows in each of the first operator's tiles.
    tight = Workload.model_validate({"name": "t", "operators": [
        {"name": "a", "layer_type": "v", "kind": "elementwise", "elements": 3 * 1000,
         "op": "relu"},
        {"name": "n", "layer_type": "v", "kind": "norm", "rows": 3, "cols": 1000}]})
    result = _run("tpu_v1", tight, "auto")
    dropped = {n: r for g in result.fusion for n, r in g.dropped}
    assert "whole in one tile" in dropped["n"]
    assert [op.lowered.name for op in result.operators] == ["a", "n"]


@settings(max_examples=12, deadline=None)
@given(ops=st.lists(st.sampled_from(["add", "mul", "relu", "gelu", "silu", "norm"]),
                    min_size=2, max_size=5),
       rows=st.integers(1, 200), cols=st.integers(1, 300),
       arch=st.sampled_from(["tpu_v5e_like", "tpu_v1"]))
def test_a_vector_run_never_takes_more_cycles_than_its_members_alone(ops, rows, cols,
                                                                       arch):
    operators = []
    for index, op in enumerate(ops):
        operators.append({"name": f"v{index}", "layer_type": "v", "kind": "norm",
                          "rows": rows, "cols": cols} if op == "norm" else
                         {"name": f"v{index}", "layer_type": "v", "kind": "elementwise",
                          "elements": rows * cols, "op": op})
    workload = Workload.model_validate({"name": "run", "operators": operators})
    none = _run(arch, workload, "none")
    auto = _run(arch, workload, "auto")
    assert auto.total.cycles <= none.total.cycles
    assert auto.total.offchip_bytes <= none.total.offchip_bytes
    assert all(group.cycles_saved >= 0 for group in auto.fusion)


def test_inputs_must_name_earlier_operators():
    with pytest.raises(Exception, match="not an earlier operator"):
        Workload.model_validate({"name": "w", "operators": [
            {"name": "a", "layer_type": "x", "kind": "elementwise", "elements": 4,
             "op": "relu", "inputs": ["b"]},
            {"name": "b", "layer_type": "x", "kind": "elementwise", "elements": 4,
             "op": "relu"}]})


def test_scalesim_validation_keeps_fusion_off():
    validated = load_inputs("tpu_v5e_like", "bert_base_s128", None, validate="scalesim")
    assert validated.mapping.fusion == "none"
    assert not simulate(validated, engine="fast").fusion
    with pytest.raises(AccsimError, match="drop --fusion"):
        load_inputs("tpu_v5e_like", "bert_base_s128", None, validate="scalesim",
                    fusion="auto")


def test_auto_is_the_default_now_serving_and_the_mapper_plan_fusion():
    assert _run("tpu_v5e_like", "bert_base_s128", None).fusion
    assert not _run("tpu_v5e_like", "bert_base_s128", "none").fusion


def test_the_mapping_sheet_lists_the_fusion_plan():
    result = _run("tpu_v5e_like", "bert_base_s128", "auto")
    text = markdown(result)
    assert "## Fusion plan (--fusion auto)" in text
    rows = {row["operator"]: row for row in sheet_rows(result)}
    for group in result.fusion:
        assert group.producer in text
        row = rows[group.producer]
        assert row["fusion_members"] == " ".join(group.members)
        assert row["fusion_bytes_saved"] == group.offchip_bytes_saved > 0
    assert "No groups" in markdown(_run("tpu_v5e_like", "bert_base_s128", "none"))
