"""Every shipped platform x workload runs end to end; the breakdown identity and the
roofline bound hold for every operator, and auto picks the fast kernel. The default run
takes the walk of tests/in_turn.py (each platform and each workload) and marks the other
pairs slow."""

from __future__ import annotations

import itertools

import pytest

from in_turn import slow_unless_in_turn
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.loader import shipped_names
from simulator.engines.outcome import STALL_PARTS
from simulator.simulate import simulate

PAIRS = list(itertools.product(shipped_names("platform"), shipped_names("workload")))


@pytest.fixture(scope="module", params=slow_unless_in_turn(
    PAIRS, arguments=[(pair,) for pair in PAIRS],
    ids=[f"{arch}-{workload}" for arch, workload in PAIRS]))
def result(request):
    arch, workload = request.param
    return simulate(load_inputs(arch, workload, None))


def test_auto_picks_the_fast_kernel(result):
    assert result.engine == "fast"
    assert all(op.engine == "fast" for op in result.operators)


def test_breakdown_adds_up_for_every_operator(result):
    for op in result.operators:
        run = op.run
        assert sum(getattr(run, part) for part in STALL_PARTS) == run.total_cycles, \
            op.lowered.name
        assert run.vector_tail_cycles + run.store_tail_cycles == run.drain_cycles
        assert 0 <= run.output_stall_vector_cycles <= run.output_stall_cycles
        assert run.busy_cycles == int(op.lowered.program.compute_cycles.sum())


def test_time_is_never_below_the_roofline_bound(result):
    for op in result.operators:
        totals = op.totals
        assert totals.cycles >= totals.roofline_bound_cycles, op.lowered.name
        # Each operand moves at least once: the refetch ratio is at least 1.
        assert totals.offchip_bytes >= totals.compulsory_bytes, op.lowered.name


def test_array_busy_splits_into_useful_padding_fill_load_and_skew(result):
    for op in result.operators:
        totals = op.totals
        if op.lowered.unit != "array":
            continue
        split = (totals.useful_array_cycles + totals.padding_array_cycles
                 + totals.fill_array_cycles + totals.stationary_load_array_cycles
                 + totals.skew_array_cycles)
        assert split == pytest.approx(totals.busy_cycles), op.lowered.name
        # Useful cycles count every PE of every array.
        assert totals.useful_array_cycles == pytest.approx(
            totals.model_flops / 2 / result.platform.pes)
