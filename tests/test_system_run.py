"""Multi-chip runs (DESIGN.md section 14): --chips 1 unchanged to the byte, Megatron
shards of Llama-3.1-70B on 16 v5e chips, the TP trends of Llama-3.1-8B decode, the
all-to-all of Mixtral under EP, pipeline stages, plain workloads and bad flags."""

from __future__ import annotations

import itertools
import json

import pytest

from in_turn import slow_unless_in_turn
from simulator.cli import build_parser, main

from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.frontends.hf import model_stats
from simulator.frontends.hf.llm_command import run_step
from simulator.inputs.loader import load_model, locate, shipped_names
from simulator.mapping.plan import Mapping
from simulator.present.run_report import result_dict
from simulator.simulate import Inputs
from simulator.system.plan_run import run_plan
from simulator.system.parallelism import SystemPlan
from simulator.system.sharded_run import system_dict

SYSTEM_KEYS = {"chips", "tp", "pp", "ep", "weight_bytes_per_chip", "kv_bytes_per_chip",
               "capacity_bytes_per_chip", "collective_s", "communication_fraction",
               "mfu", "energy_j", "tokens_per_s_per_chip", "time_s"}


def llm_run(model: str, phase: str, length: int, **plan):
    length_flag = "--seq" if phase == "prefill" else "--context"
    args = build_parser().parse_args(["run", "--arch", "tpu_v5e_like", "--model", model,
                                      "--phase", phase, length_flag, str(length)])
    step, _ = run_step(args)
    platform, source = load_model(locate("tpu_v5e_like", "platform"), Platform)
    return run_plan(Inputs(platform, step.workload(), Mapping(), source),
                    SystemPlan(**plan), step)


# Every shipped platform x workload; one chip is one code path whatever the pair, so the
# default run takes the walk of tests/in_turn.py (each platform and each workload once).
ONE_CHIP_PAIRS = list(itertools.product(shipped_names("platform"), shipped_names("workload")))


@pytest.mark.parametrize("arch,workload", slow_unless_in_turn(
    ONE_CHIP_PAIRS, ids=[f"{arch}-{workload}" for arch, workload in ONE_CHIP_PAIRS]))
def test_one_chip_is_todays_result_to_the_byte(arch, workload, tmp_path, capsys):
    """`--chips 1` and no system flag write the same JSON."""
    plain, flagged = tmp_path / "plain.json", tmp_path / "flagged.json"
    assert main(["run", "--arch", arch, "--workload", workload, "--json",
                 str(plain)]) == 0
    assert main(["run", "--arch", arch, "--workload", workload, "--chips", "1",
                 "--tp", "1", "--pp", "1", "--ep", "1", "--json", str(flagged)]) == 0
    assert plain.read_bytes() == flagged.read_bytes()
    assert "system" not in json.loads(plain.read_text())
    capsys.readouterr()


@pytest.fixture(scope="module")
def llama70_tp16():
    return llm_run("llama_3_1_70b", "decode", 2048, chips=16, tp=16)


def test_70b_tp16_weights_are_the_megatron_shard(llama70_tp16):
    """The total over 16 plus each chip's replicated KV-head projections: the k and v
    projections (2 x hidden x kv_heads x head_dim per layer) are split 8 ways, not 16."""
    from simulator.frontends.hf import load_model_config
    cfg = load_model_config("llama_3_1_70b")
    total = model_stats(cfg, dtype="bf16").weight_bytes
    kv_projections = cfg.layers * 2 * cfg.hidden * cfg.kv_heads * cfg.head_dim * 2
    megatron = (total - kv_projections) / 16 + kv_projections / cfg.kv_heads
    figures = llama70_tp16.figures()
    assert figures["weight_bytes_per_chip"] == pytest.approx(megatron, rel=0.01)
    assert figures["weight_bytes_per_chip"] == pytest.approx(9.0e9, rel=0.01)


def test_70b_tp16_time_respects_the_hbm_roofline_and_reports_collectives(llama70_tp16,
                                                                          tmp_path):
    figures = llama70_tp16.figures()
    platform = llama70_tp16.result.platform
    hbm_floor = (figures["weight_bytes_per_chip"] + figures["kv_bytes_per_chip"]) \
        / (platform.offchip.bandwidth_gbps * 1e9)
    result = system_dict(llama70_tp16)
    assert result["workload"]["time_s"] == figures["time_s"] >= hbm_floor
    assert 0 < figures["collective_s"] < figures["time_s"]
    assert figures["communication_fraction"] == pytest.approx(
        figures["collective_s"] / figures["time_s"])
    assert SYSTEM_KEYS <= set(result["system"])
    assert figures["capacity_bytes_per_chip"] == 16 * 2**30
    # Two all-reduces per layer, of 1 token x 8192 hidden x 2 bytes, over 16 chips.
    reduces = [op for op in llama70_tp16.result.operators
               if op.lowered.collective and op.lowered.collective.kind == "all_reduce"]
    assert [op.lowered.runs for op in reduces] == [80, 80]
    assert {op.lowered.collective.payload_bytes for op in reduces} == {8192 * 2}


def test_70b_on_4_chips_is_refused_naming_need_capacity_and_smallest_fit(capsys):
    code = main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_70b", "--phase",
                 "decode", "--context", "2048", "--chips", "4", "--tp", "4"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "offchip.capacity_bytes: does not fit 4 chips (T x P = 4 x 1)" in err
    assert "17,179,869,184 bytes" in err and "smallest fitting T x P:" in err
    assert "simulated" not in capsys.readouterr().out  # refused before any work


def test_8b_decode_latency_falls_and_communication_rises_with_tp():
    runs = [llm_run("llama_3_1_8b", "decode", 2048, chips=t, tp=t).figures()
            for t in (1, 2, 4, 8)]
    times = [f["time_s"] for f in runs]
    fractions = [f["communication_fraction"] for f in runs]
    assert times == sorted(times, reverse=True) and len(set(times)) == 4
    assert fractions[0] == 0 and fractions == sorted(fractions) and len(set(fractions)) == 4


def test_mixtral_ep8_shows_the_all_to_all_term():
    run = llm_run("mixtral_8x7b", "decode", 2048, chips=8, tp=8, ep=8)
    a2a = [op for op in run.result.operators
           if op.lowered.collective and op.lowered.collective.kind == "all_to_all"]
    assert [op.lowered.name for op in a2a] == ["ep_dispatch", "ep_combine"]
    assert all(op.totals.collective_cycles > 0 for op in a2a)
    layer_types = result_dict(run.result)["layer_types"]
    assert layer_types["collective.ep"]["collective_cycles"] > 0
    # Each chip holds 8 / 8 experts: at batch 1 a token touches 2, one per chip here.
    experts = next(op for op in run.result.operators if op.lowered.name == "experts_down")
    assert experts.lowered.instances == 1


def test_pipeline_stages_add_transfers_and_split_weights():
    one = llm_run("llama_3_1_8b", "decode", 512, chips=2, tp=2).figures()
    run = llm_run("llama_3_1_8b", "decode", 512, chips=4, tp=2, pp=2)
    p2p = [op for op in run.result.operators if op.lowered.name == "pp_transfer"]
    assert p2p[0].lowered.runs == 1 and p2p[0].lowered.collective.chips == 2
    figures = run.figures()
    assert figures["weight_bytes_per_chip"] < 0.6 * one["weight_bytes_per_chip"]
    assert figures["time_s"] > one["time_s"]  # the same layers in turn, plus a transfer


def test_plain_workload_is_column_parallel_with_stage_transfers():
    inputs = load_inputs("tpu_v5e_like", "gemm_4096", None)
    run = run_plan(inputs, SystemPlan(chips=4, tp=4))
    gemm = run.result.inputs.workload.operators[0]
    assert gemm.n == inputs.workload.operators[0].n // 4
    assert run.result.total.collective_cycles == 0
    staged = run_plan(load_inputs("tpu_v5e_like", "resnet50_b1", None),
                      SystemPlan(chips=2, pp=2))
    names = [op.name for op in staged.result.inputs.workload.operators]
    assert names.count("pp_transfer_1") == 1


@pytest.mark.parametrize("flags, message", [
    (["--chips", "8", "--tp", "2", "--pp", "2"], "--chips: T x P = 2 x 2 = 4 must equal"),
    (["--tp", "3"], "--tp: tensor parallelism 3 cannot be built: the 32 query heads padded "
     "to 33"),
    (["--tp", "0"], "--tp: must be a whole number from 1"),
    (["--tp", "2", "--ep", "2"], "--ep: expert parallelism 2 needs a mixture-of-experts"),
])
def test_bad_flags_one_clear_error(flags, message, capsys):
    code = main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--phase",
                 "decode", "--context", "128", *flags])
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err


def test_mixtral_ep_not_dividing_experts_and_no_interconnect(capsys):
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "mixtral_8x7b", "--phase",
                 "decode", "--context", "128", "--tp", "8", "--ep", "3"]) == 1
    assert "--ep: expert parallelism 3 must divide the experts (8)" in \
        capsys.readouterr().err
    assert main(["run", "--arch", "tpu_v1", "--workload", "gemm_4096", "--tp", "2"]) == 1
    assert "interconnect: 2 chips need links between them: platform tpu_v1 has no " \
        "interconnect table" in capsys.readouterr().err


def test_system_summary_line_and_json(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b", "--phase",
                 "decode", "--context", "512", "--tp", "4", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "fits on 4 chips: weights " in out and " GB per chip of 17.18 GB" in out
    recorded = json.loads(path.read_text())
    system = recorded["system"]
    assert system["chips"] == 4 and system["tokens_per_s_per_chip"] > 0
    # accsim verify reruns the shard and recomputes the system figures from it.
    assert main(["verify", str(path)]) == 0
    recorded["system"]["collective_s"] *= 2
    path.write_text(json.dumps(recorded))
    assert main(["verify", str(path)]) == 1
    assert ".system.collective_s" in capsys.readouterr().out
    with pytest.raises(AccsimError):
        run_plan(load_inputs("tpu_v5e_like", "gemm_4096", None), SystemPlan(chips=2))
