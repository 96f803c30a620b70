"""Overlapped collectives (DESIGN.md section 14, `system.overlap`): `none` keeps the
figures of the commit before overlap existed, the schedules on hand-worked chains, and
the ordering exposed(decomposed) <= exposed(independent) <= exposed(none) on generated
GEMM + collective chains."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import build_parser, main
from simulator.collectives.cost import with_collectives
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.platform import Platform
from simulator.frontends.hf.llm_command import run_step
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.simulate import Inputs
from simulator.system.plan_run import run_plan
from simulator.system.overlap import Step, decomposed_exposed, overlap
from simulator.system.parallelism import SystemPlan

# Figures written by the commit before padding and overlap (f973c9b), one chip's
# shard simulated per plan; `--overlap none` must give every one of them again, on the
# flat ring they were priced on (`--collectives ring`, DESIGN.md section 22).
BASE = Path(__file__).parent / "data" / "system_base_figures.json"


# The mapping space of the base commit: operator at a time (before the fusion planner),
# every GEMM normal and attention's products on the array in the old lowering (before
# operand orientation and attention kernels, DESIGN.md section 19).
BASE_MAPPING = Mapping(fusion="none", orientation="normal", layer_types={
    "attention.core": TilingSpec(orientation="normal", unit="array", groups=1)})


def system_run(name: str, phase: str | None, length: int | None, **plan):
    """One plan's run in the base commit's mapping space (BASE_MAPPING)."""
    if phase is None:
        inputs = replace(load_inputs("tpu_v5e_like", name, None), mapping=BASE_MAPPING)
        return run_plan(replace(inputs, platform=with_collectives(inputs.platform, "ring")),
                        SystemPlan(**plan))
    flag = "--seq" if phase == "prefill" else "--context"
    args = build_parser().parse_args(["run", "--arch", "tpu_v5e_like", "--model", name,
                                      "--phase", phase, flag, str(length)])
    step, _ = run_step(args)
    platform, source = load_model(locate("tpu_v5e_like", "platform"), Platform)
    platform = with_collectives(platform, "ring")
    return run_plan(Inputs(platform, step.workload(), BASE_MAPPING, source),
                    SystemPlan(**plan), step)


@pytest.mark.parametrize("case", json.loads(BASE.read_text()),
                         ids=lambda case: f"{case['name']}-{case['plan']}")
def test_overlap_none_keeps_the_base_commit_figures(case):
    run = system_run(case["name"], case["phase"], case["length"], **case["plan"])
    figures = run.figures()
    assert run.result.total.cycles == case["cycles"]
    assert {key: figures[key] for key in case["figures"]} == case["figures"]
    assert run.summary_lines() == case["summary"]
    assert figures["collective_exposed_s"] == figures["collective_s"]
    assert figures["collective_hidden_s"] == 0.0


@pytest.fixture(scope="module")
def llama70_tp48():
    return {mode: system_run("llama_3_1_70b", "decode", 2048, chips=48, tp=48,
                             overlap=mode)
            for mode in ("none", "independent", "decomposed")}


def test_70b_tp48_pads_64_heads_to_96_and_reports_the_waste(llama70_tp48):
    run = llama70_tp48["none"]
    padding = run.figures()["padding"]
    assert (padding["heads"], padding["padded_heads"], padding["heads_per_chip"]) == \
        (64, 96, 2)
    assert (padding["kv_heads"], padding["kv_heads_per_chip"]) == (8, 1)  # replicated
    attention = [op for op in run.result.inputs.workload.operators if op.name == "attn"]
    assert (attention[0].heads, attention[0].kv_heads) == (2, 1)
    # a third of the query heads are padding: a third of attention's and o_proj's work
    by_type = {op.lowered.layer_type: op.totals.model_flops for op in run.result.operators
               if op.lowered.layer_type in ("attention.core", "attention.o")}
    qkv = next(op.totals.model_flops for op in run.result.operators
               if op.lowered.layer_type == "attention.qkv")
    assert padding["waste_flops"] == sum(f * 32 // 2 for f in by_type.values()) \
        + qkv * 32 // 4
    computed = 48 * run.result.total.model_flops
    assert run.figures()["flops"] == computed - padding["waste_flops"]
    assert any(line.startswith("padding: 64 query heads padded to 96")
               for line in run.summary_lines())


def test_70b_tp48_decomposed_hides_collective_time(llama70_tp48):
    splits = {mode: run.overlap() for mode, run in llama70_tp48.items()}
    total = splits["none"].total_cycles
    assert total > 0 and splits["none"].exposed_cycles == total
    for split in splits.values():
        assert split.total_cycles == total
        assert 0 <= split.exposed_cycles <= total
        assert split.exposed_cycles + split.hidden_cycles == total
    assert splits["decomposed"].exposed_cycles < splits["none"].exposed_cycles
    assert splits["decomposed"].exposed_cycles <= splits["independent"].exposed_cycles
    none, decomposed = (llama70_tp48[m].figures() for m in ("none", "decomposed"))
    assert decomposed["time_s"] < none["time_s"]
    assert decomposed["collective_exposed_s"] < none["collective_exposed_s"]
    assert decomposed["collectives_overlap_compute"] and \
        not none["collectives_overlap_compute"]


def test_overlap_flag_json_and_verify(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--phase",
                 "decode", "--context", "256", "--tp", "3", "--chips", "3", "--overlap",
                 "decomposed", "--json", str(path)]) == 1  # 32 heads / 8 KV: unbuildable
    assert "T buildable near it: 2 or 4" in capsys.readouterr().err
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--phase",
                 "decode", "--context", "256", "--tp", "4", "--overlap", "decomposed",
                 "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "hidden behind compute by overlap decomposed" in out
    system = json.loads(path.read_text())["system"]
    assert system["overlap"] == "decomposed" and system["collective_hidden_s"] > 0
    assert main(["verify", str(path)]) == 0


def gemm(name: str, cycles: int) -> Step:
    return Step(name, "gemm", Fraction(cycles), 1)


def link(name: str, kind: str, cycles: int, chips: int = 4) -> Step:
    return Step(name, "collective", Fraction(cycles), 1, kind, chips)


def test_decomposed_all_gather_and_reduce_scatter_by_hand():
    # 3 ring steps of 100 under a GEMM of 4 chunks of 200: one step exposed
    assert decomposed_exposed(Fraction(300), 3, 4, Fraction(800)) == 100
    # steps of 100 over chunks of 50: one step, then 50 for each of the other two
    assert decomposed_exposed(Fraction(300), 3, 4, Fraction(200)) == 200
    chain = [gemm("a", 50), link("ag", "all_gather", 300), gemm("b", 800),
             link("rs", "reduce_scatter", 300), gemm("c", 10)]
    assert overlap(chain, "none").exposed_cycles == 600
    assert overlap(chain, "independent").exposed_cycles == 600  # each read at once
    # the gather spans b (100 exposed) and holds the links while b runs, so the
    # scatter cannot hide under b's chunks: it follows b whole (300)
    assert overlap(chain, "decomposed").exposed_cycles == 400
    # alone, the scatter after b hides under b's chunks: one step, then 50 twice
    alone = [gemm("b", 200), link("rs", "reduce_scatter", 300), gemm("c", 10)]
    assert overlap(alone, "decomposed").exposed_cycles == 200


def test_independent_runs_the_combine_under_the_shared_experts():
    chain = [gemm("experts_down", 100), link("ep_combine", "all_to_all", 60),
             gemm("shared_down", 80), Step("mlp_residual", "elementwise", Fraction(5), 1)]
    consumers = {"ep_combine": "mlp_residual"}
    assert overlap(chain, "none", consumers).exposed_cycles == 60
    assert overlap(chain, "independent", consumers).exposed_cycles == 0
    assert overlap(chain, "independent").exposed_cycles == 60  # read by shared_down


def test_repeated_bodies_multiply_and_unknown_mode_is_refused():
    body = [Step("g", "gemm", Fraction(10), 80), Step("ar", "collective", Fraction(40),
                                                       80, "all_reduce", 8)]
    split = overlap(body, "decomposed")
    # per layer: the reduce-scatter half (20 cycles, 7 steps of 20/7) under g's chunks
    # of 10/8: 20/7 + 6 x (20/7 - 5/4) = 12.5, then the all-gather half whole (20)
    assert split.total_cycles == 3200 and split.exposed_cycles == 80 * Fraction(65, 2)
    with pytest.raises(ValueError):
        overlap(body, "sometimes")


STEP = st.one_of(
    st.builds(lambda c: gemm("g", c), st.integers(0, 5000)),
    st.builds(lambda c: Step("v", "elementwise", Fraction(c), 1), st.integers(0, 500)),
    st.builds(lambda k, c, p: link("x", k, c, p),
              st.sampled_from(["all_reduce", "all_gather", "reduce_scatter",
                               "all_to_all", "point_to_point"]),
              st.integers(0, 5000), st.integers(2, 64)))


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=12))
def test_generated_chains_order_the_modes(chain):
    splits = {mode: overlap(chain, mode) for mode in ("none", "independent", "decomposed")}
    total = splits["none"].total_cycles
    for split in splits.values():
        assert 0 <= split.exposed_cycles <= total
        assert split.exposed_cycles + split.hidden_cycles == total
    assert splits["decomposed"].exposed_cycles <= splits["independent"].exposed_cycles \
        <= splits["none"].exposed_cycles
