"""The SimPy engine agrees with the naive reference on every per-step time and count.

Programs and memories are drawn by tests/strategies.py: valid by construction, with
small ranges so that same-cycle requests, 0-byte transfers, slot waits and vector
epilogues are common.
"""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import simpy
from hypothesis import given, settings
from naive_timeline import naive_timeline
from strategies import memory_params, tile_programs

from simulator.engines.des import run_des


def assert_same_outcome(got, expected):
    for name, cycles in expected.steps.as_dict().items():
        assert getattr(got.steps, name).dtype == np.int64, name
        np.testing.assert_array_equal(getattr(got.steps, name), cycles, err_msg=name)
    assert got.breakdown == expected.breakdown


@settings(max_examples=300, deadline=None)
@given(program=tile_programs(), memory=memory_params())
def test_des_matches_naive_timeline(program, memory):
    des = run_des(program, memory, keep_steps=True)
    assert_same_outcome(des, naive_timeline(program, memory))

    parts = des.breakdown
    assert (parts.overhead_cycles + parts.busy_cycles + parts.fill_cycles + parts.input_stall_cycles
            + parts.output_stall_cycles + parts.drain_cycles) == parts.total_cycles
    assert parts.vector_tail_cycles + parts.store_tail_cycles == parts.drain_cycles
    assert 0 <= parts.output_stall_vector_cycles <= parts.output_stall_cycles


class LastInFirstOutEnvironment(simpy.Environment):
    """Processes same-cycle events newest first (SimPy's own order is oldest first).

    Relies on SimPy 4's private event counter, the last key of its event heap.
    """

    def __init__(self):
        super().__init__()
        self._eid = itertools.count(0, -1)


@settings(max_examples=100, deadline=None)
@given(program=tile_programs(), memory=memory_params())
def test_des_does_not_lean_on_simpy_tie_order(program, memory):
    usual = run_des(program, memory, keep_steps=True)
    with mock.patch.object(simpy, "Environment", LastInFirstOutEnvironment):
        reversed_ties = run_des(program, memory, keep_steps=True)
    assert_same_outcome(reversed_ties, usual)
