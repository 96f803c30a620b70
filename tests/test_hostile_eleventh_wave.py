"""Hostile input, eleventh wave: what the earlier suites left open. An output option
naming an input file (or another output's file) replaced it; an ONNX dimension past
int64 on the command line, an earlier export's table or device file the csv or json
module could not read, and a calibration of a platform with nothing assumed were
tracebacks; a measurement CSV with a column or a shape key given twice was read from
one copy, silently; a whole-model measurement file of thousands of runs worked for
minutes; a precision sample tensor of no values passed any guardrail; `accsim check`
said valid a platform every run refuses (an array side past 2**16, a value past 2**48);
`run --json -` wrote a file named `-`.
Table-driven like tests/test_hostile_ninth_wave.py and run by the shared timed runner
(tests/timed_cli.py): each case ends in a non-zero exit with one error line naming the
option, field or file, within SECONDS, with no traceback, and changes no file (an
export's marker and its folder aside: claiming the folder rewrites it).

Each row: (id, argv, {file name: content}, fragments the error line holds).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from tiny_llama import TINY_LLAMA

from platforms import BASE as PLATFORM
from test_bad_inputs import WORKLOAD_FILE, dump
from test_hostile_frontends import onnx_model
from test_hostile_ninth_wave import PD
from simulator.cli import main
from test_hostile_sweep import make, refused_in
from timed_cli import run_main

SECONDS = 20
MODEL = json.dumps(TINY_LLAMA)
PLATFORM_FILE = dump(PLATFORM)
# The 8x8 test platform with one value assumed: something for calibrate to fit.
ASSUMED = dump({**PLATFORM, "provenance": {"dma.setup_cycles": {
    "kind": "assumed", "range": [0, 100]}}})
MEASURED_HEAD = "operator,shape,dtype,measured_s\n"
MEASURED = MEASURED_HEAD + "gemm,m=8 n=32 k=8,,1e-6\ngemm,m=16 n=32 k=8,,2e-6\n"
CAL = ["calibrate", "--arch", "a.yaml", "--measured", "m.csv", "--folds", "2",
       "-o", "out.yaml"]
BASE = {"p.yaml": PLATFORM_FILE, "w.yaml": WORKLOAD_FILE, "a.yaml": ASSUMED,
        "config.json": MODEL, "m.csv": MEASURED}
CASES: list[tuple[str, list[str], dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict | None = None, *fragments: str) -> None:
    CASES.append((name, argv, {**BASE, **(files or {})}, list(fragments)))


# --- an output option naming an input, or another output's file: the input (or the
# first output) was replaced, the command exiting 0 --------------------------------
RUN = ["run", "--arch", "p.yaml", "--workload", "w.yaml"]
STEP = ["--model", "config.json", "--phase", "decode", "--context", "16"]
case("import hf -o its own input", ["import", "hf", "config.json", *STEP[2:], "-o",
                                    "config.json"], None, "config.json", "--output")
case("run --json over the model config", ["run", "--arch", "p.yaml", *STEP, "--json",
                                          "config.json"], None, "--json", "model")
case("run --csv over the workload", [*RUN, "--csv", "w.yaml"], None, "--csv",
     "workload")
case("run --csv over the workload spelt ./", [*RUN, "--csv", "./w.yaml"], None, "--csv",
     "workload")
case("run --json and --csv one file", [*RUN, "--json", "r.out", "--csv", "r.out"], None,
     "r.out", "--json", "csv")
case("run --trace over the platform", [*RUN, "--trace", "p.yaml"], None, "--trace",
     "arch")
case("map --write-plan over the platform", ["map", "--arch", "p.yaml", "--workload",
                                            "w.yaml", "--write-plan", "p.yaml"], None,
     "--write-plan", "arch")
case("map --write-plan over its --mapping", ["map", "--arch", "p.yaml", "--workload",
                                             "w.yaml", "--mapping", "m.yaml",
                                             "--write-plan", "m.yaml"],
     {"m.yaml": dump({"default": {"depth": 2}})}, "--write-plan", "mapping")
case("calibrate -o over --arch", [*CAL[:-1], "a.yaml"], None, "a.yaml", "--output",
     "arch")
case("calibrate --json over the measured trace",
     ["calibrate", "--arch", "a.yaml", "--measured", "t.json", "--json", "t.json",
      "-o", "out.yaml"], {"t.json": '{"traceEvents": []}'}, "--json", "measured")
case("sensitivity --csv over a topology workload",
     ["sensitivity", "--arch", "a.yaml", "--workload", "t.csv", "--csv", "t.csv"],
     {"t.csv": "Layer, M, N, K,\ng, 8, 8, 8,\n"}, "--csv", "workload")
case("compare --csv over the second platform",
     ["compare", "--arch", "p.yaml", "--arch", "q.yaml", "--workload", "w.yaml",
      "--csv", "q.yaml"], {"q.yaml": PLATFORM_FILE}, "--csv", "arch")
def baseline(path: Path) -> None:
    """A result of the run regressed against (p.yaml and w.yaml are made first)."""
    folder = path.parent
    assert main(["run", "--arch", str(folder / "p.yaml"), "--workload",
                 str(folder / "w.yaml"), "--json", str(path)]) == 0


case("regress --json over its baseline",
     ["regress", "--arch", "p.yaml", "--workload", "w.yaml", "--baseline", "b.json",
      "--json", "b.json"], {"b.json": baseline}, "--json", "baseline")
case("serve --json over the arrival trace",
     ["serve", "--arch", "tpu_v5e_like", "--model", "config.json", "--arrival-trace",
      "t.csv", "--json", "t.csv"],
     {"t.csv": "arrival_s,prompt_tokens,output_tokens\n0,8,2\n0.5,8,2\n"}, "--json",
     "arrival-trace")
case("plan-deployment --json over the model config", [*PD, "--json", "config.json"],
     None, "--json", "model")

# --- import onnx: a dimension past int64 was a ValueError traceback where onnx wrote
# it into the model ------------------------------------------------------------------
ONNX = {"m.onnx": onnx_model(),
        "s.onnx": onnx_model(dims=("batch", 8))}
case("import onnx --input-shape past int64",
     ["import", "onnx", "m.onnx", "--input-shape", f"x={10**23}x8"], ONNX,
     "--input-shape", "2**63-1")
case("import onnx --batch past int64", ["import", "onnx", "s.onnx", "--batch",
                                        str(10**23)], ONNX, "--batch", "2**63-1")

# --- export into a folder an earlier export wrote: what it reads back to merge was
# a traceback when the csv or json module could not read it, and a device count past
# any TP degree was written on ----------------------------------------------------------
MARKER = ".accsim-export"
VIDUR = ["export", "vidur", "--model", "config.json", "--model-id", "org/tiny", "-o",
         "ex", "--max-tokens", "16", "--max-batch", "2", "--bits", "1",
         "--attention-bits", "1"]
LLMSS = ["export", "llmservingsim", *VIDUR[2:]]
MLP = "data/profiling/compute/tpu_v5e_like/org/tiny/mlp.csv"
DEVICE = "data/profiling/network/tpu_v5e_like/accsim_device.json"
META = "profiler/perf/tpu_v5e_like/org/tiny/bf16/meta.yaml"


def earlier_export(relative: str, content: str) -> dict:
    """An export folder whose marker lists one file, holding `content`."""
    return {f"ex/{MARKER}": f"a folder accsim writes; the files it wrote here:\n"
                            f"{relative}\n", f"ex/{relative}": content}


case("export vidur over a table with a field past the csv limit", VIDUR,
     earlier_export(MLP, "a\n\"" + "x" * 200_000 + "\"\n"), "mlp.csv", "--output",
     "field limit")
case("export vidur over a device file nested 100,000 deep", VIDUR,
     earlier_export(DEVICE, "[" * 100_000 + "]" * 100_000), "accsim_device.json",
     "--output")
case("export vidur over a device file of 1e400 devices", VIDUR,
     earlier_export(DEVICE, '{"num_devices_per_node": 1e400}'), "accsim_device.json",
     "--output")
case("export vidur over a device file of 10**23 devices", VIDUR,
     earlier_export(DEVICE, f'{{"num_devices_per_node": {10**23}}}'),
     "accsim_device.json", "--output")
case("export llmservingsim over a meta.yaml nested 100,000 deep", LLMSS,
     earlier_export(META, "tp_degrees: " + "[" * 100_000 + "]" * 100_000),
     "meta.yaml", "--output")

# --- calibrate ------------------------------------------------------------------------
case("calibrate a platform with nothing assumed", [*CAL[:2], "p.yaml", *CAL[3:]], None,
     "p.yaml", "provenance", "nothing to fit")
RUNS = dump({"measurements": [{"name": "a", "run": "--arch p.yaml --workload w.yaml",
                               "value": 1, "unit": "ms", "source": "x"}]})
case("calibrate runs on a platform with nothing assumed",
     ["calibrate", "--arch", "p.yaml", "--measured", "r.yaml", "-o", "out.yaml"],
     {"r.yaml": RUNS}, "p.yaml", "provenance", "nothing to fit")
case("calibrate a CSV naming measured_s twice", CAL,
     {"m.csv": "operator,shape,dtype,measured_s,measured_s\n"
               "gemm,m=8 n=32 k=8,,1e-6,3\ngemm,m=16 n=32 k=8,,2e-6,4\n"},
     "m.csv", "header", "measured_s", "2 times")
case("calibrate a shape giving m twice", CAL,
     {"m.csv": MEASURED_HEAD + "gemm,m=8 m=16 n=32 k=8,,1e-6\n"
               "gemm,m=16 n=32 k=8,,2e-6\n"}, "m.csv", "line 2", "'m'", "twice")
case("calibrate a shape giving the kind", CAL,
     {"m.csv": MEASURED_HEAD + "gemm,kind=softmax rows=8 cols=8,,1e-6\n"
               "gemm,m=16 n=32 k=8,,2e-6\n"}, "m.csv", "line 2", "'kind'")


def measurements(count: int, parts: int = 0) -> str:
    run = "--arch p.yaml --workload w.yaml"
    one = {"value": 1, "unit": "ms", "source": "x"}
    if parts:
        return dump({"measurements": [{"name": "m", **one, "runs": [
            {"run": run, "times": 1} for _ in range(parts)]}]})
    return dump({"measurements": [{"name": f"m{i}", "run": run, **one}
                                  for i in range(count)]})


case("calibrate 1,001 whole-model measurements",
     ["calibrate", "--arch", "a.yaml", "--measured", "r.yaml", "-o", "out.yaml"],
     {"r.yaml": measurements(1_001)}, "r.yaml", "measurements", "1000")
case("calibrate a measurement of 101 parts",
     ["calibrate", "--arch", "a.yaml", "--measured", "r.yaml", "-o", "out.yaml"],
     {"r.yaml": measurements(1, parts=101)}, "r.yaml", "runs", "100")


# --- numbers in ASCII digits only (simulator.numbers): int() read a SCALE-Sim
# topology's 4_0 as 40 and other scripts' digits as numbers, and so did the export's
# and sweep report's own whole-number options ---------------------------------------------
TOPOLOGY = "Layer, M, N, K,\ng, {}, 8, 8,\n"
CONFIG = ("[general]\nrun_name = t\n[architecture_presets]\nArrayHeight: {}\n"
          "ArrayWidth: 8\nIfmapSramSzkB: 64\nFilterSramSzkB: 64\nOfmapSramSzkB: 64\n"
          "Dataflow: os\nBandwidth: {}\n")
DIGITS = (("underscores", "4_0"), ("full-width digits", "\uff14"),
          ("Arabic-Indic digits", "\u0664"))
for label, text in DIGITS:
    case(f"topology M in {label}", ["check", "t.csv"], {"t.csv": TOPOLOGY.format(text)},
         "t.csv", "line 2, column 2 (M)", "whole number")
    case(f"config ArrayHeight in {label}", ["check", "c.cfg"],
         {"c.cfg": CONFIG.format(text, 10)}, "c.cfg", "ArrayHeight")
    case(f"config Bandwidth in {label}", ["check", "c.cfg"],
         {"c.cfg": CONFIG.format(8, text)}, "c.cfg", "Bandwidth")
for flag in ("--bits", "--attention-bits", "--block-size"):
    case(f"export vidur {flag} in Arabic-Indic digits", [*VIDUR, flag, "\u0663"], None,
         flag, "ASCII")
case("export vidur --tp in Arabic-Indic digits", [*VIDUR, "--tp", "\u0662"], None, "--tp")
case("export chakra --tokens with underscores",
     ["export", "chakra", "--model", "config.json", "-o", "ex", "--tokens", "1_6"], None,
     "--tokens", "ASCII")
case("sweep report --top in full-width digits",
     ["sweep", "report", "s.sqlite", "--top", "\uff13"], None, "--top", "ASCII")


# --- a precision plan's sample tensor of no values: the emulation compared nothing and
# reported the format exact, passing any guardrail -------------------------------------
def empty_npy(shape: tuple[int, int]):
    def write(path: Path) -> None:
        np.save(path, np.zeros(shape, np.float32))
    return write


PLAN = dump({"default": {"weight": ["int8"], "activation": ["int8"],
                         "guardrail": {"min_sqnr_db": 10}},
             "operators": {"g": {"tensors": {"a": "a.npy"}}}})
for shape in ((0, 64), (8, 0)):
    case(f"precision sample of shape {shape}",
         ["run", "--arch", "tpu_v1", "--workload", "w.yaml", "--precision", "plan.yaml"],
         {"plan.yaml": PLAN, "a.npy": empty_npy(shape)}, "a.npy",
         "operators.g.tensors.a", "no values")


# --- a platform every run refuses (simulator.limits.check_platform) that `check` said
# was valid -----------------------------------------------------------------------
for field, value, fragment in (("rows", 2**17, "65,536"), ("cols", 10**9, "65,536")):
    case(f"check an array {field} of {value:,}", ["check", "big.yaml"],
         {"big.yaml": dump({**PLATFORM, "systolic_array": {
             **PLATFORM["systolic_array"], field: value}})},
         "big.yaml", f"systolic_array.{field}", fragment)
case("check a buffer of 10**23 bytes", ["check", "big.yaml"],
     {"big.yaml": dump({**PLATFORM, "buffers": {**PLATFORM["buffers"],
                                                "weight_bytes": 10**23}})},
     "big.yaml", "buffers.weight_bytes", "2**48")


# --- `-` given to an option that writes a file: a file named `-` was written, where
# sensitivity's and calibrate's --json print to the terminal -------------------------
for argv, flag in ((RUN + ["--json", "-"], "--json"), (RUN + ["--csv", "-"], "--csv"),
                   (["serve", "--arch", "p.yaml", "--workload", "w.yaml", "--rate", "5",
                     "--json", "-"], "--json")):
    case(f"{argv[0]} {flag} -", argv, None, flag, "standard output")


def test_there_are_enough_cases():
    assert len(CASES) >= 25
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, files, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_input_is_one_clear_error(name, argv, files, fragments, tmp_path,
                                         monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _, touched = refused_in(tmp_path, files, argv, capsys, SECONDS, fragments)
    assert touched - {"ex", f"ex/{MARKER}"} == set()


def test_outputs_written_again_are_no_clash(tmp_path, monkeypatch, capsys):
    """A run writing the files its previous run wrote, and a --json named like a
    shipped input no file stands for, are accepted."""
    monkeypatch.chdir(tmp_path)
    for name in ("p.yaml", "w.yaml"):
        make(tmp_path / name, BASE[name])
    for _ in range(2):
        code, out, err, _ = run_main([*RUN, "--json", "r.json", "--csv", "r.csv"], capsys,
                                     SECONDS)
        assert code == 0, err
    code, out, err, _ = run_main(["run", "--arch", "tpu_v5e_like", "--workload", "w.yaml",
                                  "--json", "tpu_v5e_like"], capsys, SECONDS)
    assert code == 0, err
    assert json.loads(Path("tpu_v5e_like").read_text())["manifest"]


def test_a_measurement_csv_with_a_byte_order_mark_is_read(tmp_path, monkeypatch, capsys):
    """A spreadsheet's UTF-8 CSV starts with a byte-order mark: its first column is
    `operator`, not a missing column."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "a.yaml", ASSUMED)
    make(tmp_path / "m.csv", "\ufeff" + MEASURED)
    code, out, err, _ = run_main(CAL, capsys, SECONDS)
    assert code == 0, err
    assert "fitted: dma.setup_cycles" in Path("out.yaml").read_text()
