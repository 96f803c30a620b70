"""Norm prologues (DESIGN.md section 15 c): a norm read only by GEMMs as their A rows is
applied to their A tiles as they load; off-chip bytes fall by exactly its round trip,
a group is never slower than its members alone, a norm read by several GEMMs is
recomputed in each, and every fallback is listed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from platforms import make_platform
from test_fusion_planner import _kept_on_chip, _run

from simulator.frontends.hf.config import load_model_config as load_config
from simulator.frontends.hf.workloads import prefill_workload
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.run_inputs import Inputs
from simulator.mapping.plan import Mapping, with_fusion
from simulator.present.results import FusionGroupRecord
from simulator.search.resolve import fusion_units
from simulator.present.sheet import markdown
from simulator.simulate import simulate
from simulator.inputs.workload import Workload


def _workload(ops: list[dict]) -> Workload:
    return Workload.model_validate({"name": "w", "operators": [
        {"layer_type": op["kind"], **op} for op in ops]})


def _norm_then(rows: int, cols: int, consumers: list[dict], edges: bool = True,
               after: list[dict] = ()) -> Workload:
    """A norm over rows x cols, then GEMMs reading it (by edges or adjacency)."""
    ops = [{"name": "norm", "kind": "norm", "rows": rows, "cols": cols}]
    for consumer in consumers:
        ops.append({"kind": "gemm", "m": rows, "k": cols, **consumer,
                    **({"inputs": ["norm"]} if edges else {})})
    return _workload(ops + list(after))


def _simulate(platform, workload: Workload, mode: str, mapping: Mapping | None = None):
    plan = with_fusion(mapping or Mapping(), mode)
    return simulate(Inputs(platform, workload, plan), engine="fast")


def _norm_alone_bytes(none) -> int:
    return next(op.lowered.counters.offchip_bytes * op.lowered.runs
                for op in none.operators if op.lowered.name == "norm")


def test_llama_prefill_runs_every_norm_as_its_gemms_prologue():
    workload = prefill_workload(load_config("llama_3_1_8b"), batch=1, seq=512)
    none = _run("tpu_v5e_like", workload, "none")
    auto = _run("tpu_v5e_like", workload, "auto")
    prologues = {g.producer: g.prologue for g in auto.fusion if g.prologue}
    assert prologues == {"qkv": ("input_norm",), "mlp_gate_up": ("post_attention_norm",),
                         "lm_head": ("final_norm",)}
    ran = {op.lowered.name for op in auto.operators}
    assert not {"input_norm", "post_attention_norm", "final_norm"} & ran
    # Each norm's round trip (its read and its write, 2 bytes an element) stays on chip.
    norms = {op.name: op for op in workload.operators if op.kind == "norm"}
    alone = {op.lowered.name: op.lowered.counters.offchip_bytes * op.lowered.runs
             for op in none.operators if op.lowered.name in norms}
    for name, op in norms.items():
        assert alone[name] == 2 * op.rows * op.cols * 2 * op.repeat
    saved = none.total.offchip_bytes - auto.total.offchip_bytes
    assert saved == _kept_on_chip(auto) == sum(g.offchip_bytes_saved for g in auto.fusion)
    # qkv and lm_head have no epilogue: their groups save exactly their norm's bytes.
    assert alone["input_norm"] + alone["final_norm"] == sum(
        g.offchip_bytes_saved for g in auto.fusion if g.producer in ("qkv", "lm_head"))
    assert auto.total.cycles < none.total.cycles


def test_bert_runs_its_given_back_norm_as_the_next_gemms_prologue():
    auto = _run("tpu_v5e_like", "bert_base_s128", "auto")
    group = next(g for g in auto.fusion if g.prologue)
    assert (group.producer, group.prologue) == ("layer0_mlp_up", ("layer0_attn_norm",))
    up = next(op.lowered for op in auto.operators if op.lowered.name == "layer0_mlp_up")
    assert up.tiling.tk == 768 and up.fused == "layer0_attn_norm+layer0_mlp_gelu"
    assert "layer0_attn_norm (prologue), layer0_mlp_gelu" in markdown(auto)
    record = FusionGroupRecord.model_validate(group.as_dict())
    assert record.prologue == ["layer0_attn_norm"]
    # A group without a prologue writes the record it wrote before.
    assert "prologue" not in next(g for g in auto.fusion if not g.prologue).as_dict()


def test_a_norm_read_by_several_gemms_is_recomputed_in_each():
    platform = make_platform(buffers={"ifmap_bytes": 1 << 16, "weight_bytes": 1 << 16,
                                      "output_bytes": 1 << 16})
    workload = _norm_then(64, 96, [{"name": "gate", "n": 80}, {"name": "up", "n": 80}])
    none, auto = (_simulate(platform, workload, mode) for mode in ("none", "auto"))
    assert {g.producer: g.prologue for g in auto.fusion} == {"gate": ("norm",),
                                                           "up": ("norm",)}
    lowered = {op.lowered.name: op.lowered for op in auto.operators}
    assert set(lowered) == {"gate", "up"}
    norm = workload.operators[0]
    for name in ("gate", "up"):   # each A tile is loaded once here: the norm, once each
        assert lowered[name].counters.vector_elements == \
            norm.rows * norm.cols * norm.vector().passes
    saved = none.total.offchip_bytes - auto.total.offchip_bytes
    assert saved == _norm_alone_bytes(none) == 2 * norm.rows * norm.cols > 0
    assert saved == sum(g.offchip_bytes_saved for g in auto.fusion)
    assert auto.total.cycles <= none.total.cycles


@pytest.mark.parametrize("weight_bytes, why", [
    (2048, "weight buffer 2048 bytes holds 0 B tiles of g with whole rows (tk 4096"),
    (4096, "the prologue group takes")])
def test_a_norm_runs_alone_where_rows_do_not_fit_or_the_group_is_slower(weight_bytes,
                                                                        why):
    # B tiles of K = 4096 rows (int8): none fits 2 KiB; in 4 KiB only at depth 1, where
    # the GEMM runs slower than the norm alone and the GEMM at its own tiling.
    platform = make_platform(buffers={"ifmap_bytes": 1 << 16, "weight_bytes": weight_bytes,
                                      "output_bytes": 1 << 16})
    workload = _norm_then(16, 4096, [{"name": "g", "n": 8}])
    auto = _simulate(platform, workload, "auto")
    assert [op.lowered.name for op in auto.operators] == ["norm", "g"]
    (group,) = auto.fusion
    assert group.producer == "g" and not group.prologue
    ((name, reason),) = group.dropped
    assert name == "norm" and why in reason
    assert auto.total.cycles == _simulate(platform, workload, "none").total.cycles


def test_no_prologue_where_another_operator_reads_the_norm_or_the_plan_forbids_it():
    platform = make_platform(buffers={"ifmap_bytes": 1 << 16})
    shared = _norm_then(32, 64, [{"name": "g", "n": 32}], after=[
        {"name": "res", "kind": "elementwise", "op": "add", "elements": 32 * 64,
         "inputs": ["norm"]}])
    assert not _simulate(platform, shared, "auto").fusion
    alone = _norm_then(32, 64, [{"name": "g", "n": 32}])
    assert _simulate(platform, alone, "auto").fusion[0].prologue == ("norm",)
    for mapping in (Mapping.model_validate({"operators": {"g": {"fuse": "none"}}}),
                    Mapping.model_validate({"operators": {"g": {"tk": 32}}})):
        assert not _simulate(platform, alone, "auto", mapping).fusion
    assert not _simulate(platform, alone, "epilogue").fusion
    assert not _simulate(platform, alone, "none").fusion


def test_a_prologue_joins_its_gemms_serving_unit():
    workload = prefill_workload(load_config("llama_3_1_8b"), batch=1, seq=64)
    names = [op.name for op in workload.operators]
    units = fusion_units(workload, with_fusion(Mapping(), "auto"))
    unit_of = {names[i]: unit for unit in units for i in unit}
    assert unit_of["input_norm"] == unit_of["qkv"]
    assert unit_of["post_attention_norm"] == unit_of["mlp_gate_up"] == unit_of["mlp_act"]
    assert sorted(i for unit in units for i in unit) == list(range(len(names)))
    none = fusion_units(workload, with_fusion(Mapping(), "none"))
    assert all(len(unit) == 1 for unit in none)


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 600), n=st.integers(1, 300),
       epilogue=st.lists(st.sampled_from(["relu", "gelu", "silu"]), max_size=2),
       edges=st.booleans(), arch=st.sampled_from(["tpu_v5e_like", "tpu_v1"]))
def test_a_prologue_group_never_takes_more_cycles_than_unfused(rows, cols, n, epilogue,
                                                               edges, arch):
    after, last = [], "g"
    for index, op in enumerate(epilogue):
        after.append({"name": f"e{index}", "kind": "elementwise", "op": op,
                      "elements": rows * n, **({"inputs": [last]} if edges else {})})
        last = f"e{index}"
    workload = _norm_then(rows, cols, [{"name": "g", "n": n}], edges, after)
    # GEMMs fixed normal: the epilogue planner keeps a group by capacity alone, and a
    # transposed tiling's narrow C tiles can make its epilogue slower than the
    # operator alone (each tile's lane pass rounds up); issue 41's report says so.
    platform = load_inputs(arch, "bert_base_s128", None).platform
    normal = Mapping(orientation="normal")
    none = _simulate(platform, workload, "none", normal)
    auto = _simulate(platform, workload, "auto", normal)
    assert auto.total.cycles <= none.total.cycles
    assert all(group.cycles_saved >= 0 for group in auto.fusion)
    saved = none.total.offchip_bytes - auto.total.offchip_bytes
    assert saved == sum(g.offchip_bytes_saved for g in auto.fusion)
    # tpu_v1 keeps small tensors in its activation memory: nothing to save there.
    assert saved == _kept_on_chip(auto) if arch == "tpu_v5e_like" else \
        saved <= _kept_on_chip(auto)
    ran = {op.lowered.name for op in auto.operators}
    assert ("norm" in ran) != any(g.prologue for g in auto.fusion)
