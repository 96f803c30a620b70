"""`accsim export vidur`: the CSVs read back as Vidur's sklearn execution-time
predictor reads them, and every time is accsim's own simulated operator time.

The columns, filters and operators checked are those of microsoft/vidur,
vidur/execution_time_predictor/sklearn_execution_time_predictor.py (_load_compute_df,
_load_attention_df, _load_all_reduce_df, _train_compute_models,
_train_attention_layer_models); the folder layout is that of its default
compute_input_file / attention_input_file / all_reduce_input_file in vidur/config/config.py
(microsoft/vidur at 7d47513): `data/profiling/compute/{DEVICE}/{MODEL}/` with {MODEL} the
model's Hugging Face id.
"""

from pathlib import Path

import pandas as pd
import pytest

from simulator.cli import main
from simulator.collectives.cost import collective_cost
from simulator.inputs.platform import Platform
from simulator.frontends import hf
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.system.parallelism import SystemPlan
from simulator.system.shard import shard_config
from simulator.inputs.workload import Workload
from tests.export_models import RUN_AGREEMENT, layer_and_head, run_seconds

# What Vidur's predictor trains on: time_stats.<op>.median for these operators.
VIDUR_MLP_OPS = ["attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj",
                 "mlp_act", "input_layernorm", "post_attention_layernorm", "attn_rope",
                 "add"]
VIDUR_COMPUTE_FILTER = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd",
                        "use_gated_mlp", "vocab_size", "num_tensor_parallel_workers"]
VIDUR_ATTENTION_FILTER = ["n_embd", "n_q_head", "n_kv_head", "block_size",
                          "num_tensor_parallel_workers"]
MAX_TOKENS, MAX_BATCH = 32, 2


def platform():
    return load_model(locate("tpu_v5e_like", "platform"), Platform)[0]


def simulated_ms(op) -> float:
    """One layer of `op` simulated on its own, independently of the export's memo."""
    p = platform()
    single = op.model_copy(update={"repeat": 1, "inputs": None})
    total = simulate(Inputs(p, Workload(name="t", operators=[single]), Mapping())
                     ).operators_total
    return total.cycles / (p.clock_ghz * 1e9) * 1e3


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("vidur") / "profile"
    assert main(["export", "vidur", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b",
                 "-o", str(out), "--max-tokens", str(MAX_TOKENS), "--max-batch",
                 str(MAX_BATCH), "--bits", "1", "--attention-bits", "1"]) == 0
    folder = out / "data/profiling/compute/tpu_v5e_like/meta-llama/Llama-3.1-8B"
    return pd.read_csv(folder / "mlp.csv"), pd.read_csv(folder / "attention.csv")


def vidur_compute_rows(df):
    """Vidur's _load_compute_df filter for Llama-3.1-8B at T = 1."""
    cfg = hf.load_model_config("llama_3_1_8b")
    want = {"n_head": cfg.heads, "n_kv_head": cfg.kv_heads, "n_embd": cfg.hidden,
            "n_expanded_embd": cfg.intermediate, "use_gated_mlp": True,
            "vocab_size": cfg.vocab, "num_tensor_parallel_workers": 1}
    mask = pd.Series(True, index=df.index)
    for column, value in want.items():
        mask &= df[column] == value
    return df[mask]


def test_every_operator_vidur_asks_for_is_present_and_positive(exported):
    mlp, attention = exported
    rows = vidur_compute_rows(mlp)
    assert len(rows) == len(mlp) > 5
    for op in VIDUR_MLP_OPS:
        column = f"time_stats.{op}.median"
        assert column in rows, column
        assert (rows[column] >= 0).all(), column  # 0 where fused into a GEMM
    for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj",
               "attn_rope"):
        assert (rows[f"time_stats.{op}.median"] > 0).all(), op
    assert set(VIDUR_COMPUTE_FILTER) <= set(mlp.columns) and "num_tokens" in mlp
    assert sorted(rows["num_tokens"]) == [1, 2, 4, 8, 16, 32]


def test_attention_rows_cover_prefill_and_decode(exported):
    _, attention = exported
    assert set(VIDUR_ATTENTION_FILTER) <= set(attention.columns)
    rows = attention[(attention["n_embd"] == 4096) & (attention["n_q_head"] == 32)
                     & (attention["n_kv_head"] == 8) & (attention["block_size"] == 16)
                     & (attention["num_tensor_parallel_workers"] == 1)]
    assert len(rows) == len(attention)
    prefill = rows[rows["prefill_chunk_size"] != 0]   # Vidur: is_decode = chunk == 0
    decode = rows[rows["prefill_chunk_size"] == 0]
    assert (prefill["batch_size"] == 1).all() and (prefill["kv_cache_size"] > 0).any()
    assert (prefill["time_stats.attn_prefill.median"] > 0).all()
    assert (decode["time_stats.attn_decode.median"] > 0).all()
    assert sorted(set(decode["batch_size"])) == [1, 2]
    assert (prefill["kv_cache_size"] + prefill["prefill_chunk_size"] <= MAX_TOKENS).all()
    # Vidur fills a missing attn_kv_cache_save with 0; accsim writes it as 0 (no such
    # operator: the K/V writes are the QKV projection's output).
    assert (rows["time_stats.attn_kv_cache_save.median"] == 0).all()


def test_rows_are_the_simulated_operator_times(exported):
    mlp, attention = exported
    cfg = hf.load_model_config("llama_3_1_8b")
    row = mlp[mlp["num_tokens"] == 16].iloc[0]
    # Fused as `accsim run` fuses them: the layer's columns and its attention add up
    # to the layer simulated whole.
    layer, _ = layer_and_head(hf.iteration_workload(cfg, prefill=[(16, 0)], decode=[]))
    prefill_16 = attention[(attention["prefill_chunk_size"] == 16)
                           & (attention["kv_cache_size"] == 0)].iloc[0]
    columns = sum(row[f"time_stats.{op}.median"] for op in VIDUR_MLP_OPS)
    assert columns + prefill_16["time_stats.attn_prefill.median"] == pytest.approx(
        run_seconds(layer) * 1e3, rel=RUN_AGREEMENT)
    assert row["time_stats.mlp_up_proj.min"] == row["time_stats.mlp_up_proj.median"]
    assert row["time_stats.mlp_up_proj.std"] == 0
    chunk = attention[(attention["prefill_chunk_size"] == 8)
                      & (attention["kv_cache_size"] == 4)].iloc[0]
    attn = {op.name: op for op in hf.iteration_workload(cfg, prefill=[(8, 4)],
                                                        decode=[]).operators}["attn"]
    assert chunk["time_stats.attn_prefill.median"] == pytest.approx(simulated_ms(attn),
                                                                    rel=1e-12)
    dec = attention[(attention["prefill_chunk_size"] == 0) & (attention["batch_size"] == 2)
                    & (attention["kv_cache_size"] == 16)].iloc[0]
    # Vidur looks decode up at num_processed_tokens, the new token's included: 16 keys.
    attn = {op.name: op for op in hf.iteration_workload(cfg, prefill=[],
                                                        decode=[16, 16]).operators}["attn"]
    assert dec["time_stats.attn_decode.median"] == pytest.approx(simulated_ms(attn),
                                                                 rel=1e-12)
    # Bigger is slower: the GEMM at 32 tokens takes at least its time at 1.
    ordered = mlp.sort_values("num_tokens")["time_stats.mlp_down_proj.median"].tolist()
    assert ordered[-1] >= ordered[0]


def test_tensor_parallel_profile_has_the_all_reduce(tmp_path):
    out = tmp_path / "tp2"
    assert main(["export", "vidur", "--model", "llama_3_1_8b", "--tp", "2", "-o",
                 str(out), "--max-tokens", "4", "--max-batch", "1", "--bits", "1",
                 "--attention-bits", "1"]) == 0
    mlp = pd.read_csv(out / "data/profiling/compute/tpu_v5e_like/meta-llama/"
                      "Llama-3.1-8B/mlp.csv")
    assert (mlp["num_tensor_parallel_workers"] == 2).all()
    assert (mlp["n_head"] == 32).all()  # the model's, as Vidur filters on them
    reduce = pd.read_csv(out / "data/profiling/network/tpu_v5e_like/all_reduce.csv")
    rows = reduce[(reduce["num_workers"] == 2) & (reduce["devices_per_node"] == 2)
                  & (reduce["collective"] == "all_reduce")]
    assert len(rows) == len(reduce) == 3
    # Vidur: num_tokens = size / n_embd / 2
    assert sorted(rows["size"] / 4096 / 2) == [1, 2, 4]
    four = rows[rows["size"] == 4 * 4096 * 2].iloc[0]
    expected = collective_cost("all_reduce", 4 * 4096 * 2, 2, platform()).time_s * 1e3
    assert four["time_stats.all_reduce.median"] == pytest.approx(expected, rel=1e-12)
    assert (rows["time_stats.all_reduce.median"] > 0).all()
    cfg = hf.load_model_config("llama_3_1_8b")
    shard = shard_config(cfg, SystemPlan(chips=2, tp=2))
    assert (shard.heads, shard.kv_heads, shard.intermediate) == (16, 4, 7168)
    shard_qkv = hf.iteration_workload(shard, prefill=[(4, 0)], decode=[]).operators[1]
    assert shard_qkv.name == "qkv"
    # The shard's QKV GEMM, its input norm fused in.
    qkv = mlp[mlp["num_tokens"] == 4]["time_stats.attn_pre_proj.median"].iloc[0]
    shard_ops = hf.iteration_workload(shard, prefill=[(4, 0)], decode=[]).operators
    assert qkv == pytest.approx(run_seconds(shard_ops[:2]) * 1e3, rel=RUN_AGREEMENT)


def test_an_existing_export_is_rewritten_and_a_foreign_folder_refused(tmp_path, capsys):
    out = tmp_path / "again"
    args = ["export", "vidur", "--model", "llama_3_1_8b", "-o", str(out),
            "--max-tokens", "2", "--max-batch", "1"]
    assert main(args) == 0
    assert main(args) == 0   # accsim's own folder: written again
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(args[:5] + [str(foreign)] + args[6:]) == 1
    err = capsys.readouterr().err
    assert err.startswith("accsim: error:") and "Traceback" not in err
    assert (foreign / "notes.txt").read_text() == "mine"
    assert not Path(foreign / "data").exists()
