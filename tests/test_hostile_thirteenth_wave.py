"""Hostile input, thirteenth wave: what the twelfth left, and valid inputs refused.
A --baseline whose name the system refuses (too long) exited 1, which CI reads as a
regression, where every other refused baseline exits 2; XDG_CACHE_HOME followed three
rules (the kernel library and review's runs read a relative value relative to the
working folder, serving's costs ignored it), where the XDG spec calls a relative value
invalid, to be ignored; simulate()'s save_json left out the `precision` and `system`
blocks `accsim run --json` writes (and sized an LLM's weights at the model's formats,
not the precision plan's), `accsim compare --json` left out the same blocks, and
compare() took no multi-chip or precision plan; a JSON input with a byte order mark
(a Windows editor's config.json, a trace saved as UTF-8 with BOM) was "not JSON:
Unexpected UTF-8 BOM (decode using utf-8-sig)", which RFC 8259 lets a parser ignore
and the YAML and CSV readers did; `accsim export chakra` of an fp8 or mxfp4 model on a
chip without those formats was "operators.op0.weight_dtype: ... is not an input
dtype", a refusal naming neither file nor option, where run and serve fall back to a
format the chip has; a rate search stopped by the spec's bound on the rate said
"no bracket found within 40 doublings ... (last tried 1.34218e+09)", a rate past that
bound that it never ran, after 26 doublings (plan-deployment's `unbounded` note too).

Rows run in-process under the shared timed runner's bound (tests/timed_cli.py).
ACCEPTED rows: (id, argv, {file name: content}); each exits 0 within SECONDS.
BASELINES rows: (id, baseline path); regress exits 2 with one error line naming it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tiny_llama import TINY_LLAMA

import simulator.api as accsim
from platforms import BASE as PLATFORM
from simulator.errors import AccsimError
from simulator.inputs.loader import parse_json
from simulator.kernels.library import library_dir
from simulator.review.runs import default_cache_dir
from simulator.serving.cost_cache import user_folder
from simulator.serving.curves import find_max_rate
from simulator.serving.sla import sla_report
from simulator.serving.spec import ServeSpec
from test_bad_inputs import WORKLOAD_FILE, dump
from test_hostile_sweep import make
from timed_cli import assert_one_clear_error, cpu_bound, run_main

SECONDS = 20
ROOT = Path(__file__).resolve().parent.parent
BOM = "\ufeff"
TRACE = (ROOT / "workloads" / "examples" / "decoder_trace.json").read_text()
BASE = {"p.yaml": dump(PLATFORM), "w.yaml": WORKLOAD_FILE}
ACCEPTED: list[tuple[str, list[str], dict]] = []


def accepted(name: str, argv: list[str], files: dict | None = None) -> None:
    ACCEPTED.append((name, argv, {**BASE, **(files or {})}))


# --- a JSON input with a byte order mark (RFC 8259: a parser may ignore it) ----------
accepted("import hf of a config.json with a BOM",
         ["import", "hf", "c.json", "--phase", "decode", "--context", "4", "-o", "c.yaml"],
         {"c.json": BOM + json.dumps(TINY_LLAMA)})
accepted("import kineto of a trace with a BOM", ["import", "kineto", "t.json", "-o",
                                                 "t.yaml"], {"t.json": BOM + TRACE})
accepted("run --model of a config.json with a BOM",
         ["run", "--arch", "tpu_v5e_like", "--model", "c.json", "--phase", "decode",
          "--context", "4"], {"c.json": BOM + json.dumps(TINY_LLAMA)})

# --- export of a model whose weight formats the chip lacks: run and serve fall back
# to one it has (quantization.fit_formats); the export refused the model -------------
# Neither fits one v5e's 16 GiB at the formats it falls back to, which the export's
# capacity rule refuses (test_export_errors.py): the format is what is tested here.
for model in ("gpt_oss_20b", "deepseek_r1"):  # mxfp4 experts; fp8 weights
    accepted(f"export chakra of {model} on tpu_v5e_like",
             ["export", "chakra", "--model", model, "--tp", "1", "--ignore-capacity",
              "-o", "out"])


@pytest.mark.parametrize("name, argv, files", ACCEPTED,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in ACCEPTED])
def test_odd_but_valid_input_is_accepted(name, argv, files, tmp_path, monkeypatch,
                                         capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        make(tmp_path / file, content)
    code, out, err, _ = run_main(argv, capsys, SECONDS)
    assert code == 0, err
    assert "wrote" in out or "simulated" in out


def test_a_bom_changes_nothing_read():
    """A BOM'd text is read as the text without it."""
    assert parse_json(BOM + TRACE, file="t.json") == parse_json(TRACE, file="t.json")


# --- regress: a baseline the system refuses is a refused baseline (2), never a
# regression (1) --------------------------------------------------------------------
LONG = "n" * 300  # one name past the 255 bytes a Linux file system allows
BASELINES = [("a name too long", f"{LONG}.json"),
             ("a path too long", "d/" * 2100 + "b.json")]  # past PATH_MAX's 4096


@pytest.mark.parametrize("update", [[], ["--update-baseline"]], ids=["compare", "update"])
@pytest.mark.parametrize("name, path", BASELINES, ids=[b[0] for b in BASELINES])
def test_a_baseline_the_system_refuses_exits_2(name, path, update, tmp_path, monkeypatch,
                                               capsys):
    """Compared or about to be written (--update-baseline exited 1)."""
    monkeypatch.chdir(tmp_path)
    for file, content in BASE.items():
        make(tmp_path / file, content)
    code, out, err, elapsed = run_main(
        ["regress", "--arch", "p.yaml", "--workload", "w.yaml", "--baseline", path,
         "--junit", "j.xml", *update], capsys, SECONDS)
    assert code == 2, err
    line = assert_one_clear_error(code, out, err, elapsed, SECONDS, [path[:40]])
    assert "too long" in line
    assert "refused" in (tmp_path / "j.xml").read_text()  # as every refusal's JUnit


# --- XDG_CACHE_HOME: one rule for every cache ------------------------------------
CACHES = {"kernels": lambda: library_dir().parent, "results": default_cache_dir,
          "serving-costs": user_folder}


@pytest.mark.parametrize("value", ["cache", "./cache", "~/cache"])
def test_a_relative_xdg_cache_home_is_ignored_by_every_cache(value, tmp_path,
                                                             monkeypatch):
    """The XDG spec: a relative value is invalid and ignored (~/.cache is used). The
    kernel library and review's runs went to ./cache/accsim under whatever folder a
    command ran in; serving's costs to ~/.cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    monkeypatch.delenv("ACCSIM_KERNEL_DIR", raising=False)
    for leaf, folder in CACHES.items():
        assert folder() == tmp_path / "home" / ".cache" / "accsim" / leaf


def test_review_names_xdg_cache_home_when_it_chose_a_file(tmp_path, monkeypatch,
                                                          capsys):
    """review's run cache under an XDG_CACHE_HOME that is a file was refused naming
    --cache, which nobody typed; serve and compile named the variable."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "afile", "x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "afile"))
    study = str(ROOT / "experiments" / "studies" / "gemm_assumptions.yaml")
    code, out, err, elapsed = run_main(["review", study, "--out", "pk"], capsys, SECONDS)
    line = assert_one_clear_error(code, out, err, elapsed, SECONDS,
                                  ["XDG_CACHE_HOME", "is a file, not a folder"])
    assert "--cache" not in line


# --- the API's documents are the commands' documents -------------------------------
PRECISION = str(ROOT / "experiments" / "studies" / "precision" / "int8_weights.yaml")
DECODE = ["--model", "gpt2", "--phase", "decode", "--context", "64"]
TWO_CHIPS = ["--chips", "2", "--tp", "2"]


def _saved_alike(argv: list[str], save, tmp_path, capsys) -> dict:
    """`accsim ARGV --json cli.json` and save(api.json) wrote the same bytes; the
    document."""
    code, _, err, _ = run_main([*argv, "--json", "cli.json"], capsys, SECONDS * 2)
    assert code == 0, err
    with cpu_bound(SECONDS * 2):
        save("api.json")
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    return json.loads((tmp_path / "cli.json").read_text())


def test_simulate_saves_the_precision_block_as_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    saved = _saved_alike(
        ["run", "--arch", "tpu_v5e_like", "--workload", "gemm_4096", "--precision",
         PRECISION], accsim.simulate("tpu_v5e_like", "gemm_4096",
                                     precision=PRECISION).save_json, tmp_path, capsys)
    assert saved["precision"]


def test_simulate_saves_the_system_block_as_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    step = accsim.from_hf("gpt2", phase="decode", context=64)
    saved = _saved_alike(["run", "--arch", "tpu_v5e_like", *DECODE, *TWO_CHIPS],
                         accsim.simulate("tpu_v5e_like", step, chips=2, tp=2).save_json,
                         tmp_path, capsys)
    assert saved["system"]["tp"] == 2


def test_compare_takes_a_multi_chip_plan_as_the_command(tmp_path, monkeypatch, capsys):
    """compare(chips=, tp=) writes what `accsim compare --tp --json` writes, and each
    platform's entry carries the `system` block `run --json` writes for it (compare
    --json left it out: nothing said the figures were one chip's of two)."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "v5b.yaml", (ROOT / "arch_configs" / "tpu_v5e_like.yaml").read_text()
         .replace("name: tpu_v5e_like", "name: v5b"))
    step = accsim.from_hf("gpt2", phase="decode", context=64)
    saved = _saved_alike(
        ["compare", "--arch", "tpu_v5e_like", "--arch", "v5b.yaml", *DECODE, *TWO_CHIPS],
        accsim.compare(["tpu_v5e_like", "v5b.yaml"], step, chips=2, tp=2).save_json,
        tmp_path, capsys)
    code, _, err, _ = run_main(["run", "--arch", "tpu_v5e_like", *DECODE, *TWO_CHIPS,
                                "--json", "run.json"], capsys, SECONDS)
    assert code == 0, err
    ran = json.loads((tmp_path / "run.json").read_text())
    assert saved["platforms"][0]["result"]["system"] == ran["system"]


def test_compare_takes_a_precision_plan_as_the_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "v5b.yaml", (ROOT / "arch_configs" / "tpu_v5e_like.yaml").read_text()
         .replace("name: tpu_v5e_like", "name: v5b"))
    saved = _saved_alike(
        ["compare", "--arch", "tpu_v5e_like", "--arch", "v5b.yaml", "--workload",
         "gemm_4096", "--precision", PRECISION],
        accsim.compare(["tpu_v5e_like", "v5b.yaml"], "gemm_4096",
                       precision=PRECISION).save_json, tmp_path, capsys)
    assert all(entry["result"]["precision"] for entry in saved["platforms"])


# --- the rate search names the rates it ran ---------------------------------------
@pytest.mark.parametrize("start, latency_ms", [(10.0, 1.0), (10.0, 1e9), (1e-6, 1e9)])
def test_a_rate_search_without_a_bracket_names_the_last_rate_it_ran(start, latency_ms):
    """Met (or missed) at every rate: the search stops at the spec's bounds on the
    rate, and says how many steps it ran and the last rate it ran."""
    spec = ServeSpec.model_validate({"workload": "resnet50_b1", "arch": "tpu_v1",
                                     "rate": start, "sla": {"latency_p99_ms": 100.0},
                                     "find_max_rate": True})
    ran = []

    def run(rate: float) -> dict:
        ran.append(rate)
        figures = {"latency_ms": {"p99": latency_ms}}
        return {**figures, "sla": sla_report(spec.sla, figures)}

    with pytest.raises(AccsimError) as caught, cpu_bound(SECONDS):
        find_max_rate(None, spec, run=run)
    message = str(caught.value)
    assert f"last tried {ran[-1]:g})" in message
    assert f" in {len(ran) - 1} " in message and "the spec's bounds" in message
