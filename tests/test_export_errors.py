"""`accsim export` on bad input: one line naming the rule, exit 1, no traceback, and
nothing written over what accsim did not write."""

import sys

import pytest

from simulator.cli import main


def fails(capsys, args) -> str:
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("accsim: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("args, says", [
    (["export", "tensorboard", "--model", "llama_3_1_8b"], "unknown format 'tensorboard'"),
    (["export", "vidur", "--model", "no_such_model"], "no_such_model"),
    (["export", "vidur"], "needs --model"),
    (["export", "vidur", "--model", "mixtral_8x7b"], "mixture of experts"),
    (["export", "llmservingsim", "--model", "qwen3_30b_a3b"], "mixture of experts"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--workload", "gemm_4096"],
     "not --workload"),
    (["export", "chakra"], "exactly one"),
    (["export", "chakra", "--workload", "gemm_4096", "--tp", "2"], "drop --tp"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--max-tokens", "0"], "--max-tokens"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--tp", "3"], "cannot be built"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--arch", "tpu_v1", "--tp", "2"],
     "interconnect"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--bits", "0"], "--bits"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--bits", "12"], "operator shapes"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--model-id", "a/b/c"],
     "not a Hugging Face model id"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--model-id", "../x"],
     "not a Hugging Face model id"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--tp", "1,x"], "whole numbers"),
    (["export", "chakra", "--model", "llama_3_1_8b", "--tp", "1,2"], "one degree"),
    (["export", "llmservingsim", "--model", "llama_3_1_8b", "--hardware", "MY-TPU"],
     "rotary_emb"),
    (["export", "llmservingsim", "--model", "gpt2"], "no architecture catalog"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--attention-bits", "0"],
     "--attention-bits"),
    (["export", "llmservingsim", "--layers-csv", "--model", "llama_3_1_8b",
      "--max-tokens", "100000"], "rows"),
    (["export", "llmservingsim", "--model", "llama_3_1_8b", "--max-batch", "100000",
      "--attention-bits", "16"], "operator shapes"),
    (["export", "llmservingsim", "--model", "llama_3_1_8b", "--hardware", ".."],
     "cannot name a folder"),
    # the iteration traced must fit one chip, as `run` and `serve` require (it was
    # exported whatever it needed)
    (["export", "chakra", "--arch", "tpu_v5e_like", "--model", "llama_3_1_70b", "--phase",
      "decode", "--batch", "64", "--tokens", "8192"],
     "offchip.capacity_bytes: does not fit 1 chip"),
    (["export", "vidur", "--model", "llama_3_1_8b", "--ignore-capacity"],
     "does not read --ignore-capacity"),
])
def test_bad_options(tmp_path, capsys, args, says):
    out = tmp_path / "out"
    err = fails(capsys, args + ["-o", str(out)])
    assert says in err
    assert not out.exists()  # nothing made for a refused run


def test_output_over_a_file_accsim_did_not_write(tmp_path, capsys):
    target = tmp_path / "profile.csv"
    target.write_text("mine\n")
    err = fails(capsys, ["export", "vidur", "--model", "llama_3_1_8b", "-o", str(target)])
    assert "not a folder" in err and str(target) in err
    assert target.read_text() == "mine\n"


def test_chakra_without_protobuf_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    err = fails(capsys, ["export", "chakra", "--workload", "gemm_4096", "-o",
                         str(tmp_path / "t")])
    assert "pip install 'accsim[export]'" in err


def test_chakra_ignoring_capacity_exports_and_says_so(tmp_path, capsys):
    """A deliberate what-if, as `run --ignore-capacity`: Llama-3.1-8B decode of batch 8
    at 2,048 tokens needs 18.2 GB of tpu_v5e_like's 17.2."""
    args = ["export", "chakra", "--arch", "tpu_v5e_like", "--model", "llama_3_1_8b",
            "--phase", "decode", "--batch", "8", "--tokens", "2048"]
    assert "does not fit" in fails(capsys, args + ["-o", str(tmp_path / "refused")])
    assert main(args + ["--ignore-capacity", "-o", str(tmp_path / "t")]) == 0
    assert "capacity IGNORED (--ignore-capacity)" in capsys.readouterr().out
    assert list((tmp_path / "t").glob("llama_3_1_8b_decode_b8_t2048.*.et"))
