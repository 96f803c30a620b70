"""The accsim command: the default run, user files, outputs, and bad input ending in
one line naming file, field and rule, exit status 1 and no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import simulator
from simulator.cli import main

GEMM_WORKLOAD = """\
name: one_gemm
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 256, n: 256, k: 512}
"""


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_default_run_prints_operator_and_layer_type_tables(tmp_path):
    done = run_cli("run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for text in ("Operators", "By layer_type", "conv3x3", "res5c_branch2b", "MFU",
                 "stall%", "refetch", "bottleneck", "memory-bandwidth",
                 "resnet50_b1 on tpu_v1", "pJ per MAC"):
        assert text in out


def test_user_files_and_json_and_csv(tmp_path, capsys):
    workload = tmp_path / "w.yaml"
    workload.write_text(GEMM_WORKLOAD)
    mapping = tmp_path / "m.yaml"
    mapping.write_text("operators:\n  g: {tm: 128, tn: 256, tk: 256, loop_order: nmk}\n")
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    assert main(["run", "--arch", "tpu_v5e_like", "--workload", str(workload),
                 "--mapping", str(mapping), "--json", str(out_json),
                 "--csv", str(out_csv)]) == 0
    data = json.loads(out_json.read_text())
    (record,) = data["operators"]
    assert record["tiling"]["tm"] == 128 and record["tiling"]["loop_order"] == "nmk"
    assert record["steps"] == 2 * 1 * 2
    assert data["manifest"]["inputs"]["mapping"]["path"] == str(mapping)
    assert data["workload"]["cycles"] == record["totals"]["cycles"]
    rows = out_csv.read_text().splitlines()
    assert rows[0].startswith("name,layer_type,kind,runs,cycles") and len(rows) == 2


def test_same_command_twice_gives_identical_json(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for path in (first, second):
        assert main(["run", "--workload", "gemm_4096", "--json", str(path)]) == 0
    assert first.read_bytes() == second.read_bytes()


def test_simpy_and_fast_engines_agree_end_to_end(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(GEMM_WORKLOAD)
    results = {}
    for engine in ("simpy", "fast"):
        path = tmp_path / f"{engine}.json"
        assert main(["run", "--arch", "edge_32x32", "--workload", str(workload),
                     "--engine", engine, "--json", str(path)]) == 0
        results[engine] = json.loads(path.read_text())
    assert results["simpy"]["operators"] == results["fast"]["operators"]
    assert results["simpy"]["manifest"]["engine"] == "simpy"


BAD_INPUTS = [
    # (file name, content, CLI flag, expected fragments of the message)
    ("w.yaml", "name: w\noperators:\n  - {name: g, layer_type: fc, kind: gemm, m: 0, "
     "n: 4, k: 4}\n", "--workload", ["w.yaml", "operators[0](g).m", "greater than 0"]),
    ("w.yaml", "name: w\noperators:\n  - {name: g, layer_type: fc, kind: conv3d}\n",
     "--workload", ["w.yaml", "operators[0](g)", "conv3d"]),
    ("w.yaml", "name: w\noperators: [\n", "--workload", ["w.yaml", "line", "malformed"]),
    ("m.yaml", "operators:\n  fc1000: {tm: 4}\n", "--mapping",
     ["m.yaml", "operators.fc1000", "tm 4 is larger than the operator's M 1"]),
    ("m.yaml", "default: {tm: 100000000, tn: 256, tk: 256}\n", "--mapping",
     ["m.yaml", "operators.conv1", "is larger than the operator's M"]),
    ("m.yaml", "operators:\n  res5a_branch2b: {tm: 49, tn: 256, tk: 4608, "
     "orientation: normal}\n", "--mapping",
     ["m.yaml", "operators.res5a_branch2b", "tk 4608", "weight buffer of 262144 bytes",
      "overflow"]),
    ("m.yaml", "operators:\n  ghost: {tm: 4}\n", "--mapping",
     ["m.yaml", "operators.ghost", "no operator named 'ghost'"]),
    ("m.yaml", "default: {heuristic: best_ever}\n", "--mapping",
     ["heuristic", "unknown heuristic 'best_ever'", "array_aligned"]),
    ("m.yaml", "default: {loop_order: mkm}\n", "--mapping",
     ["m.yaml", "default.loop_order", "not a permutation"]),
    ("m.yaml", "default: {depth: 5}\n", "--mapping", ["m.yaml", "default.depth", "4"]),
    ("a.yaml", "name: x\n", "--arch", ["a.yaml", "clock_ghz", "required field"]),
]


@pytest.mark.parametrize("name, content, flag, fragments", BAD_INPUTS,
                         ids=[f"{b[2]}-{b[3][-1][:24]}" for b in BAD_INPUTS])
def test_bad_input_gives_one_clear_line(tmp_path, capsys, name, content, flag, fragments):
    path = tmp_path / name
    path.write_text(content)
    assert main(["run", flag, str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("accsim: error: ") and "\n" not in err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("argv, fragment", [
    (["run", "--phase", "x"], "argument --phase: invalid choice: 'x'"),
    (["run", "--batch"], "argument --batch: expected one argument"),
    (["sweep", "run"], "the following arguments are required: spec, --store"),
    (["no-such-verb"], "argument command: invalid choice: 'no-such-verb'"),
])
def test_usage_error_is_one_line_naming_the_argument(capsys, argv, fragment):
    """A command-line mistake is one line, not argparse's usage block (twenty lines for
    run) with the error under it; exit status 2 as argparse's."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and fragment in err and "--help lists the options" in err, err


def test_accsim_alone_lists_the_verbs(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: accsim") and "plan-deployment" in err and "serve" in err


def test_version_names_accsim_and_its_timing_model(capsys):
    """`accsim --version`: the two versions a result records (accsim_version and the
    model version its figures follow), exit 0."""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"accsim {simulator.__version__}, MODEL_VERSION {simulator.MODEL_VERSION}")


def test_no_traceback_from_the_process(tmp_path):
    done = run_cli("run", "--arch", str(tmp_path / "missing.yaml"))
    assert done.returncode == 1
    assert done.stderr.strip() == f"accsim: error: {tmp_path / 'missing.yaml'}: file not found"
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("argv", [
    ["run", "--arch", "x" * 5000],
    ["run", "--workload", "w" * 300 + ".yaml"],
    ["review", "STUDY"],  # its platform's name is too long
])
def test_a_name_longer_than_the_system_allows_is_one_line(tmp_path, capsys, argv):
    # pathlib's exists() raises on such a name (ENAMETOOLONG), wherever it is asked
    study = tmp_path / "study.yaml"
    study.write_text(json.dumps({"title": "t", "objective": "o", "owners": ["me"],
                                 "scope": {"platforms": ["p" * 400],
                                           "workloads": ["gemm_4096"]},
                                 "baseline": "p" * 400}))
    argv = [str(study) if word == "STUDY" else word for word in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("accsim: error: ") and \
        err.endswith("File name too long"), err[-300:]
    if "review" in argv:  # the study's reader names its file and field
        assert err.startswith(f"accsim: error: {study}: scope.platforms[0]: 'ppp"), err[:200]


def test_unwritable_output_is_refused_before_the_run(tmp_path, capsys):
    target = tmp_path / "no_such_dir" / "r.json"
    assert main(["run", "--workload", "gemm_4096", "--json", str(target)]) == 1
    captured = capsys.readouterr()
    assert "gemm_4096 on tpu_v1" not in captured.out  # nothing simulated, nothing lost
    assert f"{target}: --json: folder {target.parent} does not exist" in captured.err


def test_trace_and_plot_files(tmp_path):
    workload = tmp_path / "w.yaml"
    workload.write_text(GEMM_WORKLOAD)
    trace, plot = tmp_path / "t.json", tmp_path / "p.png"
    assert main(["run", "--arch", "edge_32x32", "--workload", str(workload),
                 "--trace", str(trace), "--plot", str(plot)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    computes = [e for e in slices if e["name"] == "gemm"]
    operators = [e for e in slices if e["tid"] == 0]
    assert len(operators) == 1 and operators[0]["name"] == "g"
    # Every step computes once, inside the operator's span, never overlapping.
    ends = [e["ts"] + e["dur"] for e in computes]
    assert all(a <= b["ts"] + 1e-9 for a, b in zip(ends, computes[1:]))
    assert ends[-1] <= operators[0]["ts"] + operators[0]["dur"] + 1e-9
    assert {e["name"] for e in slices} >= {"load", "store", "gemm", "g"}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
