"""Serving walks each of its grid points' workloads once per walk key
(search.resolve.walk_key): the fusion walk reads no attention sizes, so workloads that
differ in them alone share fusion units; and a fusion unit's cost is keyed by its
canonical operators' fields, one simulation per distinct unit."""

from __future__ import annotations

import pytest

from simulator.frontends.hf.config import load_model_config
from simulator.frontends.hf.workloads import iteration_workload
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.workload import Attention, Workload
from simulator.mapping.plan import Mapping
from simulator.search.resolve import fusion_units, walk_key
from simulator.serving.iteration_cost import OperatorCosts

# Another valid value for every field of an attention operator the walk key leaves out.
OTHER = {"dtype": "int8", "repeat": 3, "measured_s": 0.5, "batch": 7, "heads": 12,
         "kv_heads": 4, "q_len": 9, "kv_len": 333, "head_dim": 80, "causal": True,
         "kv_dtype": "int8", "kv_cache": False, "kv_latent": 96}


@pytest.fixture(scope="module")
def llama():
    return load_model_config("llama_3_1_8b")


def _changed(workload: Workload, field: str, value) -> Workload:
    return workload.model_copy(update={"operators": [
        op.model_copy(update={field: value}) if isinstance(op, Attention) else op
        for op in workload.operators]})


def test_every_attention_field_the_key_leaves_out_is_one_the_walk_does_not_read(llama):
    left_out = set(Attention.model_fields) - {"name", "layer_type", "inputs", "kind"}
    assert left_out == set(OTHER)
    for prefill, decode in [([(64, 0)], []), ([(17, 300), (5, 0)], [40, 41]), ([], [9])]:
        workload = iteration_workload(llama, prefill=prefill, decode=decode)
        assert any(isinstance(op, Attention) for op in workload.operators)
        for mode in ("auto", "none"):
            mapping = Mapping(fusion=mode)
            units = fusion_units(workload, mapping)
            for field, value in OTHER.items():
                changed = _changed(workload, field, value)
                assert walk_key(changed) == walk_key(workload)
                assert fusion_units(changed, mapping) == units


def test_the_key_tells_apart_workloads_whose_other_operators_differ(llama):
    a = iteration_workload(llama, prefill=[(64, 0)], decode=[])
    assert walk_key(iteration_workload(llama, prefill=[(64, 500)], decode=[])) == \
        walk_key(a)
    assert walk_key(iteration_workload(llama, prefill=[(65, 0)], decode=[])) != \
        walk_key(a)
    renamed = a.model_copy(update={"operators": [
        op.model_copy(update={"name": "head"}) if op.name == "lm_head" else op
        for op in a.operators]})
    assert walk_key(renamed) != walk_key(a)


def test_a_cost_model_walks_once_per_key_and_keys_units_by_their_fields(llama):
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    costs = OperatorCosts(platform, Mapping())
    short, long = (iteration_workload(llama, prefill=[(32, cached)], decode=[])
                   for cached in (0, 900))
    assert costs.units(short) is costs.units(long)
    assert costs.units(long) == fusion_units(long, Mapping())
    attention = next(op for op in short.operators if isinstance(op, Attention))
    costs.unit([attention])
    costs.unit([attention.model_copy(update={"name": "elsewhere", "inputs": None})])
    assert costs.distinct_operators == 1  # names and outside edges aside: one unit
    costs.unit([attention.model_copy(update={"kv_len": attention.kv_len + 1})])
    costs.unit([attention.model_copy(update={"measured_s": 1.0})])
    assert costs.distinct_operators == 3
