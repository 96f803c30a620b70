"""The default run's walk through a matrix of cases (tests/in_turn.py) holds every value
of every axis, keeps only cases of the matrix, and keeps few of them: the nets that
take it check each platform, workload and shape in CI."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from in_turn import in_turn, slow_unless_in_turn

axes = st.lists(st.integers(1, 7), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(axes, st.data())
def test_the_walk_holds_every_value_of_every_axis(lengths, data):
    grid = list(itertools.product(*(range(n) for n in lengths)))
    cases = data.draw(st.lists(st.sampled_from(grid), min_size=1, unique=True))
    kept = in_turn(cases)
    assert kept <= set(cases)
    for axis in range(len(lengths)):
        assert {case[axis] for case in kept} == {case[axis] for case in cases}
    # each kept case brought a value no earlier one held: never more than the values
    assert len(kept) <= sum(len({case[axis] for case in cases})
                            for axis in range(len(lengths)))


def test_a_full_matrix_keeps_one_case_per_value_of_its_longest_axis():
    cases = list(itertools.product("abcde", range(13)))
    assert len(in_turn(cases)) == 13
    params = slow_unless_in_turn(cases)
    assert sum(not p.marks for p in params) == 13 and len(params) == 65
