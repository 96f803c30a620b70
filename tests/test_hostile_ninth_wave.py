"""Hostile input, ninth wave: what the earlier suites left open on the newer verbs and
options (export's formats, LLM formats on serving and deployment verbs, platforms
whose first input dtype is packed). Table-driven like tests/test_hostile_last_wave.py
and run by the shared timed runner (tests/timed_cli.py): each case ends in a non-zero
exit with one error line naming the option, field or file, within SECONDS, with no
traceback, and writes no file.

Each row: (id, argv, {file name: content}, fragments the error line holds).
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from tiny_llama import TINY_LLAMA

from simulator.frontends.hf.config import locate_config
from simulator.inputs.loader import locate
from test_bad_inputs import dump
from test_hostile_sweep import make, refused_in
from timed_cli import assert_one_clear_error, run_main

SECONDS = 20
MODEL = json.dumps(TINY_LLAMA)
SERVE = ["--model", "config.json", "--prompt-tokens", "64", "--output-tokens", "8",
         "--requests", "4", "--rate", "1"]
PD = ["plan-deployment", "--arch", "tpu_v5e_like", *SERVE[:-2], "--sla",
      "ttft_p99_ms=500", "--budget-chips", "2", "--replicas", "1", "--max-batch", "4",
      "--scheduler", "serial"]
STEP = ["--model", "config.json", "--phase", "decode", "--context", "64"]
EXPORT = ["--model", "config.json", "--model-id", "org/tiny", "-o", "out"]


def export(fmt: str, *more: str) -> list[str]:
    """`accsim export FMT` of the tiny model (its hub id given where the format reads
    one) with `more`."""
    return ["export", fmt, *(EXPORT if fmt != "chakra" else EXPORT[:2] + EXPORT[4:]),
            *more]
PACKED = ("int4", "fp4_e2m1", "mxfp4", "mxfp6", "mxfp8", "mxint8")


def packed_first(base: str = "whatif/tpu_v5e_int4") -> str:
    """A shipped platform listing a packed format (int4) first among its input dtypes:
    legal for plain workloads, not for what is sized in whole bytes per element."""
    raw = yaml.safe_load(locate(base, "platform").read_text())
    raw["name"] = "int4_first"
    dtypes = raw["systolic_array"]["input_dtypes"]
    raw["systolic_array"]["input_dtypes"] = ["int4", *(d for d in dtypes if d != "int4")]
    return dump(raw)


BASE = {"config.json": MODEL, "i4.yaml": packed_first()}
CASES: list[tuple[str, list[str], dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict | None = None, *fragments: str) -> None:
    CASES.append((name, argv, {**BASE, **(files or {})}, list(fragments)))


# --- an LLM sized in whole bytes per element: a packed --dtype, or a platform whose
# first input dtype is packed, was a KeyError traceback on every LLM verb -------------
for dtype in PACKED:
    # LLMServingSim's own dtype names hold int4 alone of these (the others: refused)
    for fmt in ("vidur", "chakra") + (("llmservingsim",) if dtype == "int4" else ()):
        case(f"export {fmt} --dtype {dtype}",
             export(fmt, "--dtype", dtype), None, "--dtype", dtype,
             "whole-byte")
    case(f"serve --dtype {dtype}", ["serve", "--arch", "tpu_v5e_like", *SERVE,
                                    "--dtype", dtype], None, "--dtype", dtype, "whole-byte")
    case(f"pd --dtype {dtype}", [*PD, "--dtype", dtype], None, "--dtype", dtype,
         "whole-byte")
for fmt in ("vidur", "llmservingsim", "chakra"):
    case(f"export {fmt} on a platform of int4 first",
         export(fmt, "--arch", "i4.yaml"),
         None, "i4.yaml", "systolic_array.input_dtypes[0]", "whole-byte")
case("serve on a platform of int4 first", ["serve", "--arch", "i4.yaml", *SERVE], None,
     "i4.yaml", "systolic_array.input_dtypes[0]", "whole-byte")
case("serve --tp 2 on a platform of int4 first",
     ["serve", "--arch", "i4.yaml", *SERVE, "--chips", "2", "--tp", "2"], None,
     "i4.yaml", "systolic_array.input_dtypes[0]", "whole-byte")
case("pd on a platform of int4 first",
     ["plan-deployment", "--arch", "i4.yaml", *PD[3:]], None, "i4.yaml",
     "systolic_array.input_dtypes[0]", "whole-byte")
for verb in ("run", "compare"):
    case(f"{verb} --model on a platform of int4 first", [verb, "--arch", "i4.yaml", *STEP],
         None, "i4.yaml", "systolic_array.input_dtypes[0]", "whole-byte")
case("run --model --tp 2 on a platform of int4 first",
     ["run", "--arch", "i4.yaml", *STEP, "--chips", "2", "--tp", "2"], None, "i4.yaml",
     "systolic_array.input_dtypes[0]", "whole-byte")
case("run a plain workload --tp 2 on a platform of int4 first",
     ["run", "--arch", "i4.yaml", "--workload", "gemm_4096", "--chips", "2", "--tp", "2"],
     None, "i4.yaml", "systolic_array.input_dtypes[0]", "whole-byte")


# --- export: an option the export asked for does not read was ignored, whatever its
# value (--batch -1 exited 0); an empty --hardware or --output meant the default and
# the working folder ---------------------------------------------------------------
CHAKRA_PLAIN = ["export", "chakra", "--workload", "gemm_4096", "-o", "out"]
for flag, value in (("--batch", "-1"), ("--batch", "0"), ("--tokens", "0"),
                    ("--phase", "decode"), ("--dtype", "bf16"), ("--max-tokens", "-5"),
                    ("--bits", "99"), ("--model-id", "a/b"), ("--hardware", "x"),
                    ("--block-size", "0"), ("--kv-granularity", "0")):
    case(f"export chakra --workload {flag} {value}", [*CHAKRA_PLAIN, flag, value], None,
         flag, "does not read")
for fmt, flag, value in (("vidur", "--batch", "0"), ("vidur", "--tokens", "-1"),
                         ("vidur", "--phase", "decode"), ("vidur", "--kv-granularity", "0"),
                         ("vidur", "--layers-csv", None),
                         ("llmservingsim", "--block-size", "0"),
                         ("llmservingsim", "--kv-granularity", "0"),
                         ("chakra", "--block-size", "-3"), ("chakra", "--bits", "0"),
                         ("chakra", "--max-batch", "0"), ("chakra", "--hardware", "..")):
    case(f"export {fmt} --model {flag} {value}",
         export(fmt, flag, *([value] if value else [])), None, flag,
         "does not read")
case("export --layers-csv --attention-bits",
     export("llmservingsim", "--layers-csv", "--attention-bits", "0"), None,
     "--attention-bits", "does not read")
case("export --hardware ''", export("vidur", "--hardware", ""), None,
     "--hardware", "cannot name a folder")


# --- an empty name: an output option given '' read as not given (nothing written, exit
# 0); an input option given '' read as not given (the default workload run) or as the
# working folder ('.: is a directory') --------------------------------------------
RUN = ["--arch", "tpu_v1", "--workload", "gemm_4096"]
SERVE_PLAIN = ["--arch", "tpu_v1", "--workload", "gemm_4096", "--requests", "2",
               "--rate", "1"]
for verb, flags in (("run", ("--json", "--csv", "--trace")),
                    ("map", ("--json", "--csv", "--write-plan")),
                    ("serve", ("--json",)),
                    ("regress", ("--json", "--csv", "--junit"))):
    for flag in flags:
        base = {"serve": SERVE_PLAIN, "regress": [*RUN, "--baseline", "b.json"]}
        case(f"{verb} {flag} ''", [verb, *base.get(verb, RUN), flag, ""], None, flag,
             "empty")
for verb, flag in (("run", "--workload"), ("map", "--workload"),
                   ("sensitivity", "--workload"), ("serve", "--workload"),
                   ("run", "--onnx"), ("run", "--kineto"), ("sensitivity", "--onnx"),
                   ("map", "--kineto")):
    case(f"{verb} {flag} ''", [verb, "--arch", "tpu_v1", flag, ""]
         + (["--requests", "2", "--rate", "1"] if verb == "serve" else []), None,
         "empty name")
for verb in ("run", "serve", "calibrate", "sensitivity"):
    case(f"{verb} --arch ''", [verb, "--arch", ""]
         + {"serve": ["--workload", "gemm_4096", "--requests", "2", "--rate", "1"],
            "calibrate": ["--measured", "m.csv", "-o", "o.yaml"]}.get(
                verb, ["--workload", "gemm_4096"]),
         {"m.csv": "operator,shape,dtype,measured_s\n"}, "empty name", "platform")
case("run --mapping ''", [*(["run"] + RUN), "--mapping", ""], None, "empty name",
     "mapping")
case("run --precision ''", [*(["run"] + RUN), "--precision", ""], None, "--precision",
     "empty")
case("run --model ''", ["run", "--model", "", "--phase", "decode", "--context", "8"],
     None, "empty name", "model config")
case("serve --model ''", ["serve", "--model", "", "--requests", "2", "--rate", "1"],
     None, "empty name", "model config")
case("serve --arrival-trace ''", ["serve", *SERVE_PLAIN, "--arrival", "trace",
                                  "--arrival-trace", ""], None, "arrival_trace",
     "empty name")
case("calibrate --measured ''", ["calibrate", "--arch", "tpu_v5e_like", "--measured", "",
                                 "-o", "o.yaml"], None, "--measured", "empty name")
case("verify ''", ["verify", ""], None, "RESULT", "empty name")
case("import onnx ''", ["import", "onnx", "", "-o", "w.yaml"], None, "FILE", "empty name")
for flag in ("--precision", "--mapping"):  # a serving spec's plan files
    case(f"serve {flag} ''", ["serve", *SERVE_PLAIN, flag, ""], None, flag,
         "at least 1 character")
for fmt, flag in (("chakra", "--workload"), ("chakra", "--model"), ("vidur", "--model")):
    case(f"export {fmt} {flag} ''", ["export", fmt, flag, "", "-o", "out"], None,
         "empty name")
case("serve --spec ''", ["serve", "--spec", "", "--workload", "gemm_4096", "--rate", "1",
                         "--requests", "2"], None, "--spec", "empty name")
case("sweep run --heuristic ''",
     ["sweep", "run", "s.yaml", "--store", "s.sqlite", "--heuristic", ""],
     {"s.yaml": dump({"name": "s", "platform": "tpu_v1", "workloads": ["gemm_4096"],
                      "axes": {"systolic_array.rows": [64, 128]},
                      "objectives": {"time_s": "min"}})}, "--heuristic", "unknown")
case("serve --cost-cache ''", ["serve", "--arch", "tpu_v5e_like", *SERVE, "--cost-cache",
                               ""], None, "--cost-cache", "empty")


# --- calibrate's measured whole-model runs: a power cap the fit never applies was
# accepted (the time fitted at full clock); an abbreviated option (argparse's default)
# escaped the paths read from the measurement file's folder -----------------------
def measured_runs(run: str) -> str:
    return dump({"measurements": [
        {"name": "a", "run": run, "value": 1.0, "unit": "ms", "source": "t"},
        {"name": "b", "run": "--arch tpu_v5e_like --workload gemm_4096", "value": 2.0,
         "unit": "ms", "source": "t"}]})


WHOLE = ["calibrate", "--arch", "tpu_v5e_like", "--measured", "sub/m.yaml", "--fit",
         "runtime.op_overhead_cycles", "-o", "o.yaml"]
for run, fragments in (("--power-cap-w 1", ("--power-cap-w", "no part")),
                       ("--power-cap-w 0", ("--power-cap-w", "no part")),
                       ("--json ''", ("--json", "no part")),
                       ("--workl w.yaml", ("unrecognized", "--workl")),
                       ("--work=w.yaml", ("unrecognized", "--work"))):
    case(f"calibrate measured run {run}", WHOLE,
         {"sub/m.yaml": measured_runs(f"--arch tpu_v5e_like --workload gemm_4096 {run}"
                                      if "--work" not in run else
                                      f"--arch tpu_v5e_like {run}"),
          "sub/w.yaml": dump({"name": "w", "operators": [
              {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 8, "n": 8,
               "k": 8}]})},
         "sub/m.yaml", "measurements[0]", *fragments)


# --- a collective's chips had no ceiling: 2**40 chips searched every split of the
# group over the wiring (a hang); a group the wiring cannot hold named no file -------
def collective(chips: int) -> str:
    return dump({"name": "w", "operators": [
        {"name": "c", "layer_type": "coll", "kind": "collective",
         "collective": "all_reduce", "payload_bytes": 1048576, "chips": chips}]})


for chips in (2**40, 2**16 + 1, 10**30):
    case(f"collective of {chips} chips",
         ["run", "--arch", "tpu_v5e_like", "--workload", "c.yaml", "--ignore-capacity"],
         {"c.yaml": collective(chips)}, "c.yaml", "chips", "65536")
case("collective of more chips than the wiring holds",
     ["run", "--arch", "tpu_v5e_like", "--workload", "c.yaml", "--ignore-capacity"],
     {"c.yaml": collective(2**16)}, "tpu_v5e_like.yaml", "interconnect.dimensions",
     "collective c")


# --- --mesh: '²' passed str.isdigit and failed int() (a traceback); other scripts'
# digits were read as numbers (issue 42 refuses them); a mesh of thousands of
# dimensions was echoed whole in the error ------------------------------------------
MESH_RUN = ["run", "--model", "config.json", "--phase", "decode", "--context", "8",
            "--arch", "tpu_v5e_like", "--chips", "4", "--tp", "4", "--mesh"]
for label, mesh in (("a superscript two", "²x2"), ("Arabic-Indic digits", "٢x٢"),
                    ("nine dimensions", "x".join(["1"] * 7 + ["2", "2"]))):
    case(f"--mesh of {label}", [*MESH_RUN, mesh], None, "--mesh", "1 to 8 sizes")


def test_a_mesh_of_5000_dimensions_is_refused_with_an_excerpt(tmp_path, monkeypatch,
                                                              capsys):
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "config.json", MODEL)
    code, out, err, elapsed = run_main([*MESH_RUN, "x".join(["1"] * 5000)], capsys,
                                       SECONDS)
    line = assert_one_clear_error(code, out, err, elapsed, SECONDS,
                                  ["--mesh", "1 to 8 sizes"])
    assert len(line) < 300


# --- a config.json's quantization_config of the wrong types: a list or an object as
# quant_method (unhashable: a TypeError), a number as modules_to_not_convert (not
# iterable); a string there was read a character at a time -----------------------
def quantised(**config) -> str:
    return json.dumps({**TINY_LLAMA, "quantization_config": config})


for label, config in (("quant_method a list", {"quant_method": ["fp8"]}),
                      ("quant_method an object", {"quant_method": {"a": 1}}),
                      ("modules_to_not_convert a number",
                       {"quant_method": "fp8", "modules_to_not_convert": 5}),
                      ("modules_to_not_convert a string",
                       {"quant_method": "fp8", "modules_to_not_convert": "lm_head"}),
                      ("modules_to_not_convert holding a number",
                       {"quant_method": "mxfp4", "modules_to_not_convert": ["x", 3]})):
    key = next(k for k in config if k != "quant_method" or len(config) == 1)
    for verb in (["import", "hf", "q.json", "--phase", "decode", "--context", "8", "-o",
                  "q.yaml"],
                 ["run", "--model", "q.json", "--phase", "decode", "--context", "8"]):
        case(f"{verb[0]} hf config {label}", verb, {"q.json": quantised(**config)},
             "q.json", f"quantization_config.{key}", "must be")


# --- the layer-placing fields of a family's layout: a string was a TypeError (`%` or
# `-` of an int and a str), a period or step of 0 read as the default, a negative or
# too-large offset placed no layer of its kind ---------------------------------------
def shipped_config(name: str, **changes) -> str:
    raw = json.loads(locate_config(name).read_text())
    (raw.get("text_config") if "text_config" in raw else raw).update(changes)
    return json.dumps(raw)


for model, key, value, fragment in (
        ("gemma_3_27b", "sliding_window_pattern", "x", "whole number"),
        ("gemma_3_27b", "sliding_window_pattern", 0, "from 1"),
        ("llama_4_scout_17b_16e", "interleave_moe_layer_step", "x", "whole number"),
        ("llama_4_scout_17b_16e", "interleave_moe_layer_step", 0, "from 1"),
        ("llama_4_scout_17b_16e", "no_rope_layers", 5, "0 or 1 per layer"),
        ("llama_4_scout_17b_16e", "no_rope_layers", [5], "0 or 1 per layer"),
        ("llama_4_scout_17b_16e", "moe_layers", [1, 100], "layer numbers"),
        ("deepseek_r1", "moe_layer_freq", "x", "whole number"),
        ("deepseek_r1", "moe_layer_freq", 0, "from 1"),
        ("deepseek_r1", "first_k_dense_replace", "x", "whole number"),
        ("deepseek_r1", "first_k_dense_replace", -1, "from 0"),
        ("jamba_v0_1", "expert_layer_period", "x", "whole number"),
        ("jamba_v0_1", "attn_layer_period", 0, "from 1"),
        ("jamba_v0_1", "attn_layer_offset", -1, "from 0"),
        ("jamba_v0_1", "attn_layer_offset", 8, "not below attn_layer_period")):
    case(f"import hf {model} {key} {value!r}",
         ["import", "hf", "q.json", "--phase", "decode", "--context", "8", "-o", "q.yaml"],
         {"q.json": shipped_config(model, **{key: value})}, "q.json", key, fragment)


# --- review: an empty --out or --cache named the default (not given) ---
STUDY = dump({"title": "t", "objective": "o", "owners": ["a"], "baseline": "tpu_v1",
              "scope": {"platforms": ["tpu_v1"], "workloads": ["gemm_4096"]},
              "risks": [{"risk": "r", "owner": "a"}]})
case("review --out ''", ["review", "s.yaml", "--out", "", "--no-cache"],
     {"s.yaml": STUDY}, "--out", "empty")
case("review --cache ''", ["review", "s.yaml", "--out", "p", "--cache", ""],
     {"s.yaml": STUDY}, "--cache", "empty")
case("verify --cache ''", ["verify", "r.json", "--cache", ""], {"r.json": "{}"},
     "--cache", "empty")


def test_there_are_enough_cases():
    assert len(CASES) >= 30
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, files, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_input_is_one_clear_error(name, argv, files, fragments, tmp_path,
                                         monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _, changed = refused_in(tmp_path, files, argv, capsys, SECONDS, fragments)
    assert changed == set()


def test_a_plain_workload_runs_on_one_chip_of_a_platform_of_int4_first(tmp_path,
                                                                       monkeypatch,
                                                                       capsys):
    """The capacity check of a plain workload sizes the packed default format at whole
    bytes (an upper bound) instead of failing: the run answers."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "i4.yaml", BASE["i4.yaml"])
    code, out, err, _ = run_main(["run", "--arch", "i4.yaml", "--workload", "gemm_4096"],
                                 capsys, SECONDS)
    assert code == 0, err
    assert "Traceback" not in out + err


def test_export_into_an_empty_output_name_is_refused(tmp_path, monkeypatch, capsys):
    """`-o ''` named the working folder (Path('') is '.'): an export into an empty one
    wrote its files there. Refused before anything is simulated."""
    monkeypatch.chdir(tmp_path)
    code, out, err, elapsed = run_main([*CHAKRA_PLAIN[:-1], ""], capsys, SECONDS)
    assert_one_clear_error(code, out, err, elapsed, SECONDS, ["--output", "empty"])
    assert list(tmp_path.iterdir()) == []


def test_a_measured_run_spelt_with_equals_signs_reads_its_folder(tmp_path, monkeypatch,
                                                                  capsys):
    """`--arch=NAME --workload=FILE` is an `accsim run` command line as the spaced form
    is: its --arch found (it was refused: 'each run names its platform with --arch')
    and its workload read from the measurement file's folder."""
    monkeypatch.chdir(tmp_path)
    gemm = dump({"name": "w", "operators": [
        {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 8, "n": 8, "k": 8}]})
    make(tmp_path / "sub" / "w.yaml", gemm)
    make(tmp_path / "sub" / "m.yaml",
         measured_runs("--arch=tpu_v5e_like --workload=w.yaml"))
    code, out, err, _ = run_main(WHOLE, capsys, 60)
    assert code == 0, err
    assert (tmp_path / "o.yaml").is_file()


@pytest.mark.parametrize("variable, value", [("COLUMNS", "²"), ("COLUMNS", "0"),
                                             ("LINES", "²")])
def test_a_bad_terminal_size_variable_is_ignored(variable, value, tmp_path, monkeypatch,
                                                 capsys):
    """COLUMNS or LINES of '²' (a digit to str.isdigit, not to int()) or 0 failed
    printing the report after the simulation (a ValueError traceback, the figures
    lost): such a value is ignored, as an unset one is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    code, out, err, _ = run_main(["run", "--arch", "tpu_v1", "--workload", "gemm_4096"],
                                 capsys, SECONDS)
    assert code == 0, err
    assert "Traceback" not in out + err
    assert "cycles" in out
    make(tmp_path / "s.yaml", STUDY)  # review's summary lines, printed after its runs
    code, out, err, _ = run_main(["review", "s.yaml", "--out", "p", "--no-cache"],
                                 capsys, SECONDS)
    assert code == 0, err
    assert "wrote p/packet.json" in out
