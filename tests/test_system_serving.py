"""Serving on T x P replicas (DESIGN.md section 14): Llama-3.1-70B on 16 v5e chips over
the shipped trace, KV capacity per chip, and the flags' errors."""

from __future__ import annotations

import json

from simulator.cli import main

SERVE_70B = ["serve", "--arch", "tpu_v5e_like", "--model", "llama_3_1_70b", "--chips",
             "16", "--tp", "16", "--arrival", "trace", "--arrival-trace",
             "splitwise_conv"]


def test_70b_on_16_chips_serves_the_shipped_trace(tmp_path, capsys):
    path = tmp_path / "serve.json"
    assert main([*SERVE_70B, "--requests", "12", "--json", str(path)]) == 0
    capsys.readouterr()
    result = json.loads(path.read_text())
    assert result["completed"] + result["dropped"] == result["requests"] == 12
    assert result["ttft_ms"]["p99"] > 0 and result["tpot_ms"]["p99"] > 0
    system = result["system"]
    assert (system["chips"], system["tp"], system["chips_per_replica"]) == (16, 16, 16)
    assert system["tokens_per_s_per_chip"] == result["tokens_per_s"] / 16
    # KV per chip: 16 GiB less the 8.99 GB weight shard, over one KV head of 80 layers
    # (2 x 80 x 128 x 2 bytes per token), in blocks of 16 tokens.
    blocks = result["manifest"]["serving"]["kv_blocks_per_replica"]
    assert blocks == (16 * 2**30 - 8_989_458_432) // (2 * 80 * 128 * 2 * 16)


def test_serving_flags_are_checked(capsys):
    assert main([*SERVE_70B[:5], "--tp", "3", "--rate", "1", "--requests", "4"]) == 1
    assert "--tp: tensor parallelism 3 cannot be built: the 64 query heads padded to 66" in \
        capsys.readouterr().err
    assert main(["serve", "--arch", "tpu_v5e_like", "--workload", "gemm_4096", "--tp",
                 "2", "--rate", "1", "--requests", "4"]) == 1
    assert "--chips: multi-chip replicas serve LLMs (--model)" in capsys.readouterr().err
