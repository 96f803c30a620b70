"""Heads padded to a multiple of T (simulator.system.padding): today's split where T
divides, Llama-3.1-70B over 48 chips, more chips than heads, KV heads replicated to T
where a group would straddle chips unevenly (NxD's REPLICATE_TO_TP_DEGREE: a 70B model
over 24 NeuronCores), and the refusal of what one chip's grouped-query attention
cannot run."""

from __future__ import annotations

import pytest

from simulator.cli import build_parser
from simulator.frontends.hf import load_model_config, model_stats
from simulator.frontends.hf.llm_command import run_step
from simulator.inputs.loader import load_model, locate
from simulator.inputs.platform import Platform
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs
from simulator.system.padding import buildable_near, head_layout
from simulator.system.parallelism import SystemPlan
from simulator.system.plan_run import run_plan


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


def test_a_group_straddling_chips_unevenly_replicates_kv_heads_to_t():
    """64 heads, 8 KV heads, T = 24: contiguously, chip 2 would hold heads 6-8 of two
    groups (3 heads reading 2 KV heads); T is a multiple of the KV heads, so each KV
    head is replicated on 3 chips, each group's 8 heads padded to 9, 3 a chip."""
    layout = head_layout(64, 8, 24)
    assert (layout.padded_heads, layout.per_chip, layout.kv_per_chip) == (72, 3, 1)
    assert layout.buildable and layout.waste_heads == 8
    assert head_layout(64, 8, 40).kv_per_chip == 1  # 2 a chip, 80 padded: 10 a group


def test_a_group_straddling_chips_unevenly_cannot_be_built_off_multiples():
    layout = head_layout(64, 8, 23)  # 3 heads a chip, 23 not a multiple of 8 KV heads
    assert (layout.per_chip, layout.kv_per_chip, layout.buildable) == (3, 2, False)
    assert buildable_near(64, 8, 23) == (21, 24)  # 21: 4 heads a chip, whole groups


def test_70b_over_24_chips_prices_one_kv_head_replica_a_chip():
    """Llama-3.1-70B (Llama-2-70B's heads: 64 query, 8 KV) decode over 24 chips: each
    chip's attention reads one KV head for its 3 query heads, and holds an eighth of
    the model's KV cache (its replica), not a quarter (two KV heads)."""
    args = build_parser().parse_args(["run", "--arch", "tpu_v5e_like", "--model",
                                      "llama_3_1_70b", "--phase", "decode", "--context",
                                      "2048"])
    step, _ = run_step(args)
    platform, source = load_model(locate("tpu_v5e_like", "platform"), Platform)
    run = run_plan(Inputs(platform, step.workload(), Mapping(), source),
                   SystemPlan(chips=24, tp=24), step)
    figures = run.figures()
    padding = figures["padding"]
    assert (padding["padded_heads"], padding["heads_per_chip"],
            padding["kv_heads_per_chip"]) == (72, 3, 1)
    attention = [op for op in run.result.inputs.workload.operators if op.name == "attn"]
    assert (attention[0].heads, attention[0].kv_heads) == (3, 1)
    cfg = load_model_config("llama_3_1_70b")
    kv_per_token = model_stats(cfg, dtype="bf16").kv_bytes_per_token
    assert figures["kv_bytes_per_chip"] == pytest.approx(
        kv_per_token * 2049 / cfg.kv_heads, rel=0.01)
