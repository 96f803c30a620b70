"""Heads padded to a multiple of T (simulator.system.padding): today's split where T
divides, Llama-3.1-70B over 48 chips, more chips than heads, and the refusal of what
one chip's grouped-query attention cannot run."""

from __future__ import annotations

import pytest

from simulator.system.padding import buildable_near, head_layout


@pytest.mark.parametrize("heads, kv_heads", [(64, 8), (32, 8), (32, 32), (48, 8), (96, 8)])
def test_dividing_plans_keep_todays_split(heads, kv_heads):
    for tp in (t for t in range(1, heads + 1) if heads % t == 0
               and (kv_heads % t == 0 or t % kv_heads == 0)):
        layout = head_layout(heads, kv_heads, tp)
        today = kv_heads // tp if kv_heads >= tp else 1
        assert (layout.per_chip, layout.kv_per_chip, layout.waste_heads) == \
            (heads // tp, today, 0)
        assert layout.buildable


def test_70b_over_48_chips_and_48_heads_over_64_chips():
    layout = head_layout(64, 8, 48)
    assert (layout.padded_heads, layout.per_chip, layout.kv_per_chip) == (96, 2, 1)
    assert layout.waste_flops("attention.core", 600) == 600 * 32 // 2
    assert layout.waste_flops("attention.qkv", 600) == 600 * 32 // 4
    assert layout.waste_flops("mlp.down", 600) == 0
    wide = head_layout(48, 8, 64)  # more chips than heads: one head each, 16 padded
    assert (wide.padded_heads, wide.per_chip, wide.kv_per_chip) == (64, 1, 1)
    assert wide.buildable


def test_a_group_straddling_chips_unevenly_cannot_be_built():
    layout = head_layout(64, 8, 24)  # 3 heads a chip; chip 2 holds heads 6-8: 2 groups
    assert (layout.per_chip, layout.kv_per_chip, layout.buildable) == (3, 2, False)
    assert buildable_near(64, 8, 24) == (21, 32)  # 21: 4 heads a chip, whole groups
