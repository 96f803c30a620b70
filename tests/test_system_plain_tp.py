"""Tensor parallelism of plain workloads (simulator.system.shard.tensor_parallel): the
collectives follow the activation's layout over the T chips, as Megatron places them.
A column-parallel GEMM needs its whole input, so a split one is all-gathered first; a
row-parallel GEMM takes it as it lies and all-reduces after; heads and conv groups
split without moving data; vector operators work on their input as it lies."""

from __future__ import annotations

from simulator.cli import main
from simulator.inputs.platform import DTYPE_BYTES, Platform
from simulator.inputs.loader import load_model, locate
from simulator.system.parallelism import SystemPlan
from simulator.system.shard import shard_plain
from simulator.inputs.workload import Workload

BF16 = DTYPE_BYTES["bf16"]


def platform() -> Platform:
    return load_model(locate("tpu_v5e_like", "platform"), Platform)[0]


def shard(workload: Workload, *, tp: int, pp: int = 1, row_parallel=()) -> dict:
    """The shard's operators by name, in order."""
    sharded = shard_plain(workload, SystemPlan(chips=tp * pp, tp=tp, pp=pp), platform(),
                          row_parallel=frozenset(row_parallel))
    return {op.name: op for op in sharded.workload.operators}


def bert_layer() -> Workload:
    return load_model(locate("bert_base_s128", "workload"), Workload)[0]


def gathers(ops: dict) -> list[str]:
    return [name.removesuffix("_all_gather") for name in ops if name.endswith("_all_gather")]


def test_column_parallel_gemms_gather_a_split_input_and_heads_split_in_place():
    ops = shard(bert_layer(), tp=4)
    # qkv reads the replicated input; qk and pv split by their batch of 12 heads and
    # take qkv's split output as it lies; every later column GEMM gathers its input
    assert gathers(ops) == ["layer0_attn_out", "layer0_mlp_up", "layer0_mlp_down"]
    assert (ops["layer0_attn_qk"].batch, ops["layer0_attn_qk"].n) == (3, 128)
    down = ops["layer0_mlp_down_all_gather"]
    assert (down.collective, down.chips) == ("all_gather", 4)
    assert down.payload_bytes == 128 * 3072 * BF16  # the whole A operand of mlp_down
    assert ops["layer0_mlp_down"].n == 768 // 4
    # vector operators on a split input do a quarter of the work
    assert ops["layer0_attn_add"].elements == 98304 // 4


def test_megatron_pairing_moves_no_gathers_and_replicates_after_the_all_reduce():
    ops = shard(bert_layer(), tp=4,
                row_parallel=["layer0_attn_out", "layer0_mlp_down"])
    assert gathers(ops) == []
    names = list(ops)
    for row in ("layer0_attn_out", "layer0_mlp_down"):
        assert names[names.index(row) + 1] == f"{row}_all_reduce"
    # after an all-reduce every chip holds the whole activation: the residual add and
    # the norm run whole on each chip; the gelu between mlp_up and mlp_down is split
    assert ops["layer0_attn_add"].elements == 98304
    assert ops["layer0_attn_norm"].rows == 128
    assert ops["layer0_mlp_gelu"].elements == 393216 // 4


def attention_workload(heads: int, kv_heads: int) -> Workload:
    return Workload(name="att", operators=[
        {"name": "qkv", "layer_type": "attention.qkv", "kind": "gemm", "m": 128,
         "n": (heads + 2 * kv_heads) * 64, "k": 768, "dtype": "bf16"},
        {"name": "core", "layer_type": "attention.core", "kind": "attention",
         "batch": 1, "heads": heads, "kv_heads": kv_heads, "q_len": 128,
         "kv_len": 128, "head_dim": 64, "causal": True, "dtype": "bf16"},
        {"name": "o", "layer_type": "attention.o", "kind": "gemm", "m": 128, "n": 768,
         "k": heads * 64, "dtype": "bf16"}])


def test_attention_splits_by_heads_or_runs_whole_on_a_gathered_input():
    ops = shard(attention_workload(12, 4), tp=4)
    assert (ops["core"].heads, ops["core"].kv_heads) == (3, 1)
    assert gathers(ops) == ["o"]
    ops = shard(attention_workload(12, 2), tp=8)  # 12 heads do not split 8 ways
    assert (ops["core"].heads, ops["core"].kv_heads) == (12, 2)
    assert gathers(ops) == ["core"]  # whole attention on every chip, o then reads it
    assert ops["core_all_gather"].payload_bytes == (12 + 2 * 2) * 128 * 64 * BF16


def test_the_layout_crosses_pipeline_stages_and_user_collectives():
    workload = Workload(name="mlp", operators=[
        {"name": f"fc{i}", "layer_type": "fc", "kind": "gemm", "m": 64, "n": 512,
         "k": 512, "dtype": "bf16"} for i in range(4)])
    ops = shard(workload, tp=2, pp=2)
    # fc1 closes stage 1 split; fc2 opens stage 2 and still gathers its input
    assert gathers(ops) == ["fc1", "fc2", "fc3"]
    data = workload.model_dump(mode="json")
    data["operators"].insert(1, {
        "name": "gather", "layer_type": "collective.user", "kind": "collective",
        "collective": "all_gather", "payload_bytes": 64 * 512 * BF16, "chips": 2})
    ops = shard(Workload.model_validate(data), tp=2)
    assert gathers(ops) == ["fc2", "fc3"]  # the user's all-gather left fc1's output whole


def test_a_plain_workload_with_attention_runs_under_tp(tmp_path, capsys):
    path = tmp_path / "att.yaml"
    path.write_text(attention_workload(12, 12).model_dump_json())
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", str(path),
                 "--tp", "4"]) == 0
    assert "o_all_gather" in capsys.readouterr().out
