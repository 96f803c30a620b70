"""`accsim export vidur` against the contract of Vidur's loader, field by field.

microsoft/vidur at 7d47513: vidur/config/config.py (compute_input_file
`./data/profiling/compute/{DEVICE}/{MODEL}/mlp.csv`, attention_input_file `.../attention.csv`,
all_reduce_input_file and send_recv_input_file `./data/profiling/network/{NETWORK_DEVICE}/`),
vidur/execution_time_predictor/sklearn_execution_time_predictor.py (_load_compute_df,
_load_attention_df, _load_all_reduce_df, _load_send_recv_df: the row filters;
_train_compute_models, _train_attention_layer_models: the columns trained on;
_get_batch_decode_attention_params: decode looked up at num_processed_tokens rounded up
to kv_cache_prediction_granularity) and vidur/entities/request.py (on_batch_end counts
the first output token when the prefill completes). The model is a tiny config of the
tests' own; every time is checked against an independent simulation of the operator.
"""

import json
import math

import pandas as pd
import pytest

from simulator.cli import main
from simulator.collectives.cost import collective_cost
from simulator.errors import AccsimError
from simulator.export.naming import model_id
from simulator.export.vidur_device import LAUNCHER_TEXT
from simulator.frontends import hf
from simulator.frontends.hf.config import parse_config
from simulator.system.parallelism import SystemPlan
from simulator.system.serving import ShardedFrontend
from tests.export_models import (RUN_AGREEMENT, TINY, TINY_ID, layer_and_head,
                                 layer_compute_seconds, platform, simulated_seconds,
                                 tiny_config)

MAX_TOKENS, MAX_BATCH = 16, 4
GRID = ["--max-tokens", str(MAX_TOKENS), "--max-batch", str(MAX_BATCH), "--bits", "2",
        "--attention-bits", "1"]
COMPUTE = f"data/profiling/compute/tpu_v5e_like/{TINY_ID}"
NETWORK = "data/profiling/network/tpu_v5e_like"
# What Vidur trains on (time_stats.<op>.median) and filters by.
VIDUR_MLP_OPS = ["attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj",
                 "mlp_act", "input_layernorm", "post_attention_layernorm", "attn_rope",
                 "add"]
STATS = ["min", "max", "mean", "median", "std"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("vidur")
    out = root / "profile"
    assert main(["export", "vidur", "--model", str(tiny_config(root)), "--tp", "1,2",
                 "-o", str(out), *GRID]) == 0
    return out


def table(out, relative) -> pd.DataFrame:
    return pd.read_csv(out / relative)


def iteration_workload(prefill, decode, tp=1):
    """The tiny model's iteration on one chip of T: the shard's operators and, for
    T > 1, its all-reduces in place (simulator.system.serving.ShardedFrontend, as
    `accsim run --tp` and `accsim serve --tp` build it)."""
    cfg = parse_config(dict(TINY), file=None, name="tiny-llama")
    if tp == 1:
        return hf.iteration_workload(cfg, prefill=prefill, decode=decode)
    frontend = ShardedFrontend(hf, SystemPlan(chips=tp, tp=tp), platform())
    return frontend.iteration_workload(cfg, prefill=prefill, decode=decode)


def iteration_ops(prefill, decode, tp=1) -> dict:
    return {op.name: op for op in iteration_workload(prefill, decode, tp).operators}


def test_the_folder_is_laid_out_as_vidur_reads_it(exported):
    files = sorted(str(p.relative_to(exported)) for p in exported.rglob("*")
                   if p.is_file())
    assert files == sorted([
        ".accsim-export", "accsim_vidur.py", f"{COMPUTE}/mlp.csv",
        f"{COMPUTE}/attention.csv", f"{COMPUTE}/accsim_model.json",
        f"{NETWORK}/all_reduce.csv", f"{NETWORK}/send_recv.csv",
        f"{NETWORK}/accsim_device.json"])


def test_columns_and_dtypes(exported):
    mlp = table(exported, f"{COMPUTE}/mlp.csv")
    assert list(mlp.columns) == [f"time_stats.{op}.{s}" for op in VIDUR_MLP_OPS
                                 for s in STATS] + [
        "n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size",
        "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers"]
    assert mlp["use_gated_mlp"].dtype == bool
    for column in ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size",
                   "num_tokens", "num_tensor_parallel_workers"):
        assert mlp[column].dtype == "int64", column
    assert all(mlp[c].dtype == "float64" for c in mlp.columns if c.startswith("time_"))
    attention = table(exported, f"{COMPUTE}/attention.csv")
    assert list(attention.columns) == [f"time_stats.{op}.{s}" for op in (
        "attn_prefill", "attn_decode", "attn_kv_cache_save") for s in STATS] + [
        "n_embd", "n_q_head", "n_kv_head", "block_size", "num_tensor_parallel_workers",
        "max_model_len", "batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill"]
    assert attention["is_prefill"].dtype == bool
    for name in ("all_reduce", "send_recv"):
        network = table(exported, f"{NETWORK}/{name}.csv")
        assert list(network.columns) == [f"time_stats.{name}.{s}" for s in STATS] + [
            "rank", "num_workers", "size", "collective", "devices_per_node",
            "max_devices_per_node"]
        assert set(network["collective"]) == {name}
        assert network["size"].dtype == "int64"


@pytest.mark.parametrize("tp", [1, 2])
def test_each_degree_passes_vidurs_filters(exported, tp):
    mlp = table(exported, f"{COMPUTE}/mlp.csv")
    rows = mlp[(mlp["n_head"] == 4) & (mlp["n_kv_head"] == 2) & (mlp["n_embd"] == 256)
               & (mlp["n_expanded_embd"] == 512) & (mlp["use_gated_mlp"] == True)  # noqa: E712
               & (mlp["vocab_size"] == 1000) & (mlp["num_tensor_parallel_workers"] == tp)]
    # Vidur predicts every num_tokens from 1 to its max from these rows.
    assert list(rows["num_tokens"]) == [1, 2, 3, 4, 6, 8, 12, 16]
    for op in VIDUR_MLP_OPS:  # 0 where accsim fuses it into a GEMM
        assert (rows[f"time_stats.{op}.median"] >= 0).all(), op
    for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"):
        assert (rows[f"time_stats.{op}.median"] > 0).all(), op
    attention = table(exported, f"{COMPUTE}/attention.csv")
    rows = attention[(attention["n_embd"] == 256) & (attention["n_q_head"] == 4)
                     & (attention["n_kv_head"] == 2) & (attention["block_size"] == 16)
                     & (attention["num_tensor_parallel_workers"] == tp)]
    decode = rows[rows["prefill_chunk_size"] == 0]  # Vidur: is_decode = chunk == 0
    prefill = rows[rows["prefill_chunk_size"] > 0]
    assert sorted(set(decode["batch_size"])) == [1, 2, 4]
    assert sorted(set(decode["kv_cache_size"])) == [1, 2, 4, 8, 16]
    assert (prefill["batch_size"] == 1).all() and (prefill["is_prefill"]).all()
    assert (prefill["kv_cache_size"] + prefill["prefill_chunk_size"] <= MAX_TOKENS).all()
    assert (rows["time_stats.attn_kv_cache_save.median"] == 0).all()
    reduce = table(exported, f"{NETWORK}/all_reduce.csv")
    reduce = reduce[(reduce["num_workers"] == tp) & (reduce["devices_per_node"] == tp)
                    & (reduce["collective"] == "all_reduce")]
    assert len(reduce) == (0 if tp == 1 else 8)  # Vidur reads it only for T > 1


def vidur_decode_key(prompt: int, decoded: int, granularity: int) -> int:
    """Vidur's decode lookup: num_processed_tokens (the prompt, then +1 for the first
    output token when the prefill completes, +1 per decode step since) rounded up to
    kv_cache_prediction_granularity."""
    processed = prompt + 1 + decoded
    return math.ceil(processed / granularity) * granularity


def test_decode_is_keyed_by_the_keys_it_reads(exported):
    """The step that decodes the prompt's first output token reads prompt + 1 keys
    (the cache and the token itself); Vidur looks it up at prompt + 1: the row at K is
    the attention over K keys, as `accsim run --phase decode --context K`."""
    attention = table(exported, f"{COMPUTE}/attention.csv")
    decode = attention[(attention["prefill_chunk_size"] == 0)
                       & (attention["num_tensor_parallel_workers"] == 1)]
    assert vidur_decode_key(prompt=7, decoded=0, granularity=1) == 8
    differs = 0
    for _, row in decode.iterrows():
        batch, keys = int(row["batch_size"]), int(row["kv_cache_size"])
        at_k = simulated_seconds(iteration_ops([], [keys] * batch)["attn"]) * 1e3
        at_k1 = simulated_seconds(iteration_ops([], [keys + 1] * batch)["attn"]) * 1e3
        assert row["time_stats.attn_decode.median"] == pytest.approx(at_k, rel=1e-12)
        differs += at_k != at_k1
    assert differs  # the grid has rows where K and K + 1 keys cost differently


def test_a_layers_rows_add_up_to_accsim_run(exported):
    """Every column of a layer (fused as `accsim run` fuses: a norm, activation or
    residual add fused into a GEMM is in the GEMM's column) plus the attention row
    is the layer as `accsim run` simulates it."""
    mlp = table(exported, f"{COMPUTE}/mlp.csv")
    attention = table(exported, f"{COMPUTE}/attention.csv")
    for tp in (1, 2):
        for tokens in (1, 8, 16):
            row = mlp[(mlp["num_tokens"] == tokens)
                      & (mlp["num_tensor_parallel_workers"] == tp)].iloc[0]
            attn = attention[(attention["prefill_chunk_size"] == tokens)
                             & (attention["kv_cache_size"] == 0)
                             & (attention["num_tensor_parallel_workers"] == tp)].iloc[0]
            exported_ms = (sum(row[f"time_stats.{op}.median"] for op in VIDUR_MLP_OPS)
                           + attn["time_stats.attn_prefill.median"])
            layer, _ = layer_and_head(iteration_workload([(tokens, 0)], [], tp))
            assert exported_ms == pytest.approx(layer_compute_seconds(layer) * 1e3,
                                                rel=RUN_AGREEMENT), (tp, tokens)
            assert row["time_stats.add.std"] == 0
    row = attention[(attention["prefill_chunk_size"] == 4) & (attention["kv_cache_size"] == 8)
                    & (attention["num_tensor_parallel_workers"] == 1)].iloc[0]
    # A chunk of 4 after 8 processed tokens (Vidur's kv_cache_size for a prefill).
    assert row["time_stats.attn_prefill.median"] == pytest.approx(
        simulated_seconds(iteration_ops([(4, 8)], [])["attn"]) * 1e3, rel=1e-12)


def test_network_tables_price_the_interconnect(exported):
    act = 2  # bf16 activations
    reduce = table(exported, f"{NETWORK}/all_reduce.csv")
    row = reduce[reduce["size"] == 8 * 256 * 2].iloc[0]  # Vidur: tokens = size / n_embd / 2
    assert row["time_stats.all_reduce.median"] == pytest.approx(
        collective_cost("all_reduce", 8 * 256 * act, 2, platform()).time_s * 1e3, rel=1e-12)
    send = table(exported, f"{NETWORK}/send_recv.csv")
    assert sorted(set(send["devices_per_node"])) == [1, 2]  # across nodes, within one
    assert (send["num_workers"] == 2).all()
    row = send[(send["size"] == 8 * 256 * 2) & (send["devices_per_node"] == 2)].iloc[0]
    assert row["time_stats.send_recv.median"] == pytest.approx(
        collective_cost("point_to_point", 8 * 256 * act, 2, platform()).time_s * 1e3,
        rel=1e-12)


def test_adding_a_degree_merges_and_never_overwrites(tmp_path):
    config = tiny_config(tmp_path)
    out = tmp_path / "merged"
    small = ["--max-tokens", "4", "--max-batch", "1", "--bits", "1",
             "--attention-bits", "1"]
    assert main(["export", "vidur", "--model", str(config), "--tp", "1", "-o", str(out),
                 *small]) == 0
    first = (out / COMPUTE / "mlp.csv").read_text().splitlines()
    assert main(["export", "vidur", "--model", str(config), "--tp", "2", "-o", str(out),
                 *small]) == 0
    assert main(["export", "vidur", "--model", str(config), "--tp", "2", "-o", str(out),
                 *small]) == 0  # again: its rows replaced, not doubled
    merged = (out / COMPUTE / "mlp.csv").read_text().splitlines()
    assert merged[:len(first)] == first  # TP 1's rows as the first export wrote them
    mlp = table(out, f"{COMPUTE}/mlp.csv")
    assert sorted(mlp["num_tensor_parallel_workers"]) == [1] * 3 + [2] * 3
    attention = table(out, f"{COMPUTE}/attention.csv")
    assert set(attention["num_tensor_parallel_workers"]) == {1, 2}
    assert not attention.duplicated().any()
    device = json.loads((out / NETWORK / "accsim_device.json").read_text())
    assert device["num_devices_per_node"] == 2


def test_the_launcher_registers_chip_and_model(exported):
    compile(LAUNCHER_TEXT, "accsim_vidur.py", "exec")
    assert (exported / "accsim_vidur.py").read_text() == LAUNCHER_TEXT
    device = json.loads((exported / NETWORK / "accsim_device.json").read_text())
    p = platform()
    assert device == {"device": "tpu_v5e_like",
                      "fp16_tflops": round(p.peak_flops_for("bf16") / 1e12),
                      "total_memory_gb": p.offchip.capacity_bytes // 2**30,
                      "num_devices_per_node": 2}
    model = json.loads((exported / COMPUTE / "accsim_model.json").read_text())
    assert model["name"] == TINY_ID
    assert (model["num_layers"], model["num_q_heads"], model["num_kv_heads"],
            model["embedding_dim"], model["mlp_hidden_dim"], model["vocab_size"]) == (
        2, 4, 2, 256, 512, 1000)
    assert (model["activation"], model["norm"], model["use_gated_mlp"]) == (
        "SILU", "RMS_NORM", True)


def test_the_model_folder_is_the_hub_id(tmp_path):
    assert model_id("org/Name-1.5", None, "x") == "org/Name-1.5"
    assert model_id(None, str(tiny_config(tmp_path)), "x") == TINY_ID
    assert model_id(None, None, "llama_3_1_8b") == "meta-llama/Llama-3.1-8B"
    local = tiny_config(tmp_path, _name_or_path="/home/me/checkpoints/run3")
    with pytest.raises(AccsimError, match="give --model-id"):
        model_id(None, str(local), str(local))


def test_a_what_if_platform_exports_under_its_own_name(tmp_path):
    out = tmp_path / "whatif"
    assert main(["export", "vidur", "--arch", "whatif/tpu_v5e_fp8", "--model",
                 str(tiny_config(tmp_path)), "-o", str(out), "--max-tokens", "2",
                 "--max-batch", "1", "--bits", "1", "--attention-bits", "1"]) == 0
    assert (out / f"data/profiling/compute/whatif_tpu_v5e_fp8/{TINY_ID}/mlp.csv").is_file()
