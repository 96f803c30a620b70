"""Hardening beyond the bad-input table (DESIGN.md section 7): the engines' own limits,
the memory budget's suggested tiling, forged results, terminal-safe names, strict JSON
out, and the YAML 1.2 reading rules."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import yaml

from platforms import BASE, make_platform
from simulator.cli import main
from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.errors import AccsimError
from simulator.limits import MemoryBudget, parse_size
from simulator.inputs.loader import locate, parse_json, parse_yaml
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.program.tile_program import MemoryParams, make_program
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload
from timed_cli import HANG_S

PROGRAM = make_program([64, 64], [10, 10], store_bytes=[0, 64], depth=1, slots=1)


@pytest.mark.parametrize("engine", [run_fast, run_des])
@pytest.mark.parametrize("memory, named", [
    (MemoryParams(1e-300, 0, 0), "bytes per cycle"),           # service time wraps
    (MemoryParams(1.0, 2**62, 0), "latency + DMA setup"),       # latency + setup
    (MemoryParams(1.0, 2**61, 2**61), "latency + DMA setup"),
    (MemoryParams(1.0, 2**60, 0), "cycles of latency"),         # times the steps
])
def test_engines_refuse_what_would_wrap_int64(engine, memory, named):
    with pytest.raises(AccsimError, match=re.escape(named)):
        engine(PROGRAM, memory)


@pytest.mark.parametrize("engine", [run_fast, run_des])
def test_engines_refuse_huge_compute(engine):
    program = make_program([0, 0], [2**62, 2**62], depth=1, slots=1)
    with pytest.raises(AccsimError, match="compute cycles"):
        engine(program, MemoryParams(1.0, 0, 0))


def test_the_bound_admits_the_largest_runs_that_fit():
    # Just inside the bound the fast kernel runs and counts exactly.
    program = make_program([0], [2**61], depth=1, slots=1)
    assert run_fast(program, MemoryParams(1.0, 0, 0)).breakdown.total_cycles == 2**61


def test_memory_budget_suggests_a_tiling_that_fits():
    platform = make_platform(buffers={"ifmap_bytes": 2**20, "weight_bytes": 2**20,
                                      "output_bytes": 2**20})
    workload = Workload.model_validate({"name": "w", "operators": [
        {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 512, "n": 512, "k": 512}]})
    # The heuristic named, so that the fields left open are filled without a search.
    tiny = Mapping(operators={"g": TilingSpec(tm=1, tn=1, tk=1, heuristic="array_aligned")})
    budget = MemoryBudget(8 * 2**20)
    with pytest.raises(AccsimError) as info:
        simulate(Inputs(platform, workload, tiny), budget=budget)
    message = info.value.message()
    assert "134,217,728 steps" in message and "8.0 MiB" in message
    suggested = message.split("a tiling within it: ")[1].split()
    tiles = dict(zip(suggested[::2], map(int, suggested[1::2])))
    plan = Mapping(operators={"g": TilingSpec(**tiles, heuristic="array_aligned")})
    result = simulate(Inputs(platform, workload, plan), budget=budget)
    assert result.operators[0].lowered.program.steps * budget.bytes_per_step \
        <= budget.max_bytes


@pytest.mark.parametrize("text, size", [("512M", 2**29), ("8G", 2**33), ("1.5K", 1536),
                                        ("1000", 1000), ("2GiB", 2**31)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.fixture()
def recorded(tmp_path):
    workload = tmp_path / "w.yaml"
    shutil.copy(locate("tpu_v1_mlp_b200", "workload"), workload)
    path = tmp_path / "result.json"
    # Every operator on its own (no fusion), so the result has enough to differ in.
    assert main(["run", "--workload", str(workload), "--fusion", "none", "--json",
                 str(path)]) == 0
    return path, workload


def test_a_forged_result_fails_verify(recorded, capsys):
    # The embedded workload is edited, the recorded sha256 kept, and every number
    # recomputed so a rerun agrees: only the check against the unchanged file catches it.
    path, workload = recorded
    data = json.loads(path.read_text())
    canonical = data["manifest"]["inputs"]["workload"]["canonical"]
    canonical["operators"][0]["m"] = 100
    forged = tmp = path.with_name("forged.json")
    edited = path.with_name("edited.yaml")
    edited.write_text(yaml.safe_dump(canonical, sort_keys=False))
    assert main(["run", "--workload", str(edited), "--json", str(tmp)]) == 0
    rerun = json.loads(tmp.read_text())
    rerun["manifest"]["inputs"]["workload"]["path"] = str(workload)
    rerun["manifest"]["inputs"]["workload"]["sha256"] = \
        data["manifest"]["inputs"]["workload"]["sha256"]
    forged.write_text(json.dumps(rerun))
    capsys.readouterr()
    assert main(["verify", str(forged)]) == 1
    out = capsys.readouterr().out
    assert f"workload: {workload} (the embedded input differs from this file" in out
    assert "differs on rerun" not in out


def test_verify_counts_the_differences_it_does_not_show(recorded, capsys):
    path, _ = recorded
    data = json.loads(path.read_text())
    for op in data["operators"]:
        op["totals"]["cycles"] += 1
        op["per_run"]["total_cycles"] += 1
        op["steps"] += 1
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    shown = [line for line in out.splitlines() if line.startswith("differs on rerun")]
    assert len(shown) == 20
    assert f"more differences (accsim verify --all {path} lists them)" in out
    assert main(["verify", "--all", str(path)]) == 1
    every = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("differs on rerun")]
    assert len(every) > 20 and ".operators[0](fc1).steps: " in "\n".join(every)


@pytest.mark.parametrize("name", ["[/]", "[bold]x[/bold]", "[link=http://x]y", "a:fire:b"])
def test_markup_and_emoji_codes_in_names_are_printed_as_written(tmp_path, capsys, name):
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump({"name": name, "operators": [
        {"name": name, "layer_type": name, "kind": "gemm", "m": 8, "n": 8, "k": 8}]}))
    platform, copy = tmp_path / "p.yaml", tmp_path / "q.yaml"
    for path in (platform, copy):  # one file twice is refused: a copy, of the same name
        path.write_text(yaml.safe_dump({**BASE, "name": name}))
    assert main(["run", "--arch", str(platform), "--workload", str(workload)]) == 0
    assert main(["compare", "--arch", str(platform), "--arch", str(copy),
                 "--workload", str(workload)]) == 0
    out = capsys.readouterr().out
    assert out.count(name) >= 4 and "\x1b" not in out


def test_control_characters_never_reach_the_terminal(tmp_path, capsys):
    plan = tmp_path / "m.yaml"
    plan.write_text('operators: {"x\\e[2J": {tm: 4}}\n')
    assert main(["run", "--workload", "gemm_4096", "--mapping", str(plan)]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b" in err


def test_copied_platform_keeps_a_distinct_label(tmp_path, capsys):
    copy = tmp_path / "tpu_v1_copy.yaml"
    shutil.copy(locate("tpu_v1", "platform"), copy)
    assert main(["compare", "--arch", "tpu_v1", "--arch", str(copy), "--workload",
                 "gemm_4096"]) == 0
    captured = capsys.readouterr()
    assert "tpu_v1 (tpu_v1)" in captured.out and "tpu_v1 (tpu_v1_copy)" in captured.out
    assert "several platforms are named 'tpu_v1'" in captured.err


def test_written_json_is_strict(tmp_path):
    path = tmp_path / "r.json"
    assert main(["run", "--workload", "gemm_4096", "--json", str(path)]) == 0
    parse_json(path.read_text(), file=str(path))  # no NaN or Infinity tokens


@pytest.mark.parametrize("text, value", [
    ("a: yes", "yes"), ("a: off", "off"), ("a: 1e3", 1000.0), ("a: 0x10", 16),
    ("a: 0o17", 15), ("a: 1_000", "1_000"), ("a: true", True), ("a: -7", -7),
    ("a: .5", 0.5), ("a: ~", None), ("a: '0100'", "0100")])
def test_yaml_1_2_scalars(text, value):
    assert parse_yaml(text, file="f.yaml") == {"a": value}


def test_check_accepts_what_run_accepts(capsys):
    scalesim = "/work/shared/reference/scalesim-data"
    for target in ("tpu_v1", "resnet50_b1", "bert_base_fuse_gelu"):
        assert main(["check", target]) == 0
    if not shutil.os.path.isdir(scalesim):
        pytest.skip("no SCALE-Sim reference data here")
    assert main(["check", f"{scalesim}/configs/scale.cfg"]) == 0
    assert main(["check", f"{scalesim}/topologies/alexnet.csv"]) == 0
    out = capsys.readouterr().out
    assert "valid platform (SCALE-Sim config)" in out
    assert "valid workload (SCALE-Sim conv topology)" in out


def test_bool_is_not_a_number():
    with pytest.raises(AccsimError, match="systolic_array.rows"):
        from simulator.inputs.loader import validate_model
        from simulator.inputs.platform import Platform
        raw = json.loads(json.dumps(BASE))
        raw["systolic_array"]["rows"] = True
        validate_model(raw, Platform, file="p.yaml")
    assert np.int64(2**62) > 0  # the bound itself fits int64


def test_verify_never_imports_what_a_result_names(recorded, capsys, monkeypatch):
    path, _ = recorded
    folder = path.parent
    (folder / "evil.py").write_text("import pathlib; pathlib.Path('ran').touch()\n"
                                    "def tile(*a): pass\n")
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    data = json.loads(path.read_text())
    for name in ("evil:tile", "evil.py:tile", "os:system"):
        data["manifest"]["inputs"]["mapping"]["canonical"]["default"]["heuristic"] = name
        path.write_text(json.dumps(data))
        assert main(["verify", str(path)]) == 1
        assert f"unknown heuristic {name!r}" in capsys.readouterr().err
    assert not (folder / "ran").exists()


def test_a_closed_pipe_ends_quietly():
    # `accsim schema platform | head -c 10`: no BrokenPipeError traceback.
    import subprocess
    import sys
    process = subprocess.Popen([sys.executable, "-m", "simulator.cli", "schema",
                                "platform"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.read(10)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=HANG_S) in (0, 141)  # 141: it hit the closed pipe
    assert "Traceback" not in err


def test_a_platform_without_energy_figures_compares(tmp_path, capsys):
    # Zero is a valid physical value; the ratios against it are "-", not a division.
    raw = json.loads(json.dumps(BASE))
    raw["energy"] = {"mac_pj": {"int8": 0.0}, "sram_read_pj_per_byte": 0.0,
                     "sram_write_pj_per_byte": 0.0, "offchip_pj_per_byte": 0.0,
                     "vector_op_pj": 0.0, "static_power": dict.fromkeys(
                         ["array_w", "sram_w", "offchip_w", "vector_w", "other_w"], 0.0)}
    path = tmp_path / "p0.yaml"
    path.write_text(yaml.safe_dump(raw))
    workload = tmp_path / "w.yaml"  # one small GEMM: its energy is as much zero
    workload.write_text(yaml.safe_dump({"name": "w", "operators": [
        {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 64, "n": 64, "k": 64}]}))
    assert main(["compare", "--arch", str(path), "--arch", "tpu_v1", "--workload",
                 str(workload)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("tpu_v1"))
    assert " - " in row
