"""The one capacity rule (simulator.system.capacity) on every path: run and compare with
--model, an imported workload YAML with repeats and KV on several chips, serve, and
--ignore-capacity stamped on the result; LLM figures in the result JSON."""

from __future__ import annotations

import json
import re

import pytest

from simulator.system.capacity import operators_footprint
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.frontends.hf.config import load_model_config
from simulator.inputs.workload import Workload

V5E = "tpu_v5e_like"
DECODE = ["--model", "llama_3_1_70b", "--phase", "decode", "--context", "2048"]


def refusal(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def needed(message: str) -> int:
    return int(re.search(r"each chip needs ([\d,]+) bytes", message)[1].replace(",", ""))


def test_llama_70b_on_one_v5e_is_refused_by_run_and_compare(capsys):
    for argv in (["run", "--arch", V5E, *DECODE],
                 ["compare", "--arch", V5E, "--arch", "tpu_v1", *DECODE]):
        message = refusal(capsys, argv)
        assert "offchip.capacity_bytes: does not fit 1 chip" in message
        assert needed(message) > 141 * 10**9          # 70.6 B parameters in bf16
        assert "of 17,179,869,184 bytes" in message
        assert "smallest fitting T x P: 2 x 5 (--chips 10 --tp 2 --pp 5" in message


def test_an_imported_70b_workload_is_refused_on_4_chips_with_the_model_paths_bytes(
        tmp_path, capsys):
    yaml_path = tmp_path / "llama70.yaml"
    assert main(["import", "hf", "llama_3_1_70b", "--phase", "decode", "--context",
                 "2048", "-o", str(yaml_path)]) == 0
    capsys.readouterr()
    plan = ["--chips", "4", "--tp", "4"]
    imported = refusal(capsys, ["run", "--arch", V5E, "--workload", str(yaml_path),
                                *plan])
    model = refusal(capsys, ["run", "--arch", V5E, *DECODE, *plan])
    assert "does not fit 4 chips (T x P = 4 x 1)" in imported
    # The model path also holds the embedding table and the norms, which the workload's
    # operators do not show; everything else (weights with repeats, KV) is the same.
    cfg = load_model_config("llama_3_1_70b")
    extra = (cfg.vocab // 4 * cfg.hidden + cfg.hidden * (2 * cfg.layers + 1)) * 2
    weights = {m: float(re.search(r"weights ([\d.]+) GB", m)[1]) for m in (imported, model)}
    kv = {m: re.search(r"KV ([\d.]+) GB", m)[1] for m in (imported, model)}
    assert kv[imported] == kv[model] == "0.17"          # 80 layers x 2 KV heads x 2048
    assert weights[model] - weights[imported] == pytest.approx(extra / 1e9, abs=0.011)
    assert needed(imported) > 34 * 10**9                 # not 0.95 GB: repeats counted


def test_operators_footprint_counts_every_repeat_and_the_kv_cache():
    workload = Workload.model_validate({"name": "w", "operators": [
        {"name": "proj", "layer_type": "l", "kind": "gemm", "m": 1, "n": 64, "k": 32,
         "repeat": 10},
        {"name": "attn", "layer_type": "l", "kind": "attention", "heads": 4,
         "kv_heads": 2, "q_len": 1, "kv_len": 100, "head_dim": 8, "repeat": 10,
         "kv_dtype": "int8"}]})
    need = operators_footprint(workload.operators, 2)
    assert need.weight_bytes == 10 * 64 * 32 * 2
    assert need.kv_bytes == 10 * 2 * 2 * 100 * 8 * 1


def test_serving_70b_on_one_v5e_is_refused_with_the_smallest_split(capsys):
    message = refusal(capsys, ["serve", "--arch", V5E, "--model", "llama_3_1_70b",
                               "--rate", "1", "--requests", "2"])
    assert "does not fit 1 chip" in message and "smallest fitting T x P" in message


def test_ignore_capacity_runs_and_is_stamped_on_the_result(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--arch", V5E, "--model", "llama_3_1_8b", "--phase", "decode",
                 "--context", "4096", "--batch", "16", "--ignore-capacity", "--json",
                 str(out)]) == 0
    assert "capacity IGNORED (--ignore-capacity)" in capsys.readouterr().out
    result = json.loads(out.read_text())
    stamp = result["capacity"]
    assert stamp["ignored"] is True and stamp["fits"] is False
    assert stamp["needed_bytes_per_chip"] > stamp["capacity_bytes_per_chip"] == 2**34
    # the LLM figures are numbers in the JSON
    llm = result["llm"]
    assert llm["model"] == "llama_3_1_8b" and llm["params_total"] > 8 * 10**9
    assert llm["kv_bytes_per_token"] == 131072
    assert llm["kv_bytes_per_request"] == 4096 * 131072
    assert llm["tokens"] == 16 and llm["tokens_per_s"] > 0
    assert llm["roofline_s"] <= llm["simulated_s"]
    assert main(["verify", str(out)]) == 0


def test_a_plain_run_writes_neither_block(tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", "--workload", "gemm_4096", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert "capacity" not in result and "llm" not in result


def test_a_platform_without_capacity_says_the_check_was_not_made(tmp_path, capsys):
    raw = load_inputs(V5E, "gemm_4096", None).platform.model_dump(mode="json")
    raw["offchip"]["capacity_bytes"] = None
    arch = tmp_path / "nohbm.yaml"
    arch.write_text(json.dumps(raw))
    assert main(["run", "--arch", str(arch), "--workload", "gemm_4096"]) == 0
    assert "capacity not checked" in capsys.readouterr().out


def test_a_config_is_named_after_its_model_not_its_file(tmp_path):
    raw = json.loads(open(load_model_config("llama_3_1_8b").source).read())
    for declared, expected in ((None, "llama"), ("meta-llama/Llama-3.1-8B",
                                                 "Llama-3.1-8B")):
        folder = tmp_path / str(expected)
        folder.mkdir()
        body = dict(raw, **({"_name_or_path": declared} if declared else {}))
        (folder / "config.json").write_text(json.dumps(body))
        assert load_model_config(folder / "config.json").name == expected
