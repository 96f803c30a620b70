"""The search compares candidates by metrics.operator_objectives, which must equal the
cycles and energy of operator_totals to the bit (the same sums in the same order)."""

from __future__ import annotations

from simulator.inputs.named_inputs import load_inputs
from simulator.metrics.totals import operator_objectives
from simulator.simulate import simulate


def test_objectives_equal_the_totals_of_every_kind_of_operator():
    inputs = load_inputs("tpu_v5e_like", "bert_base_s128", None)
    result = simulate(inputs)
    assert {op.lowered.unit for op in result.operators} >= {"array", "vector"}
    for op in result.operators:
        cycles, energy_pj = operator_objectives(op.lowered, op.run, inputs.platform)
        assert (cycles, energy_pj) == (op.totals.cycles, op.totals.energy_pj), \
            op.lowered.name
        assert type(cycles) is type(op.totals.cycles)
