"""SCALE-Sim files read unchanged: topology CSVs (conv, GEMM, messy), `.cfg` configs
(complete and missing sections), errors naming file, line and column, and the CLI's
auto-detection, --format and --validate scalesim. Runs without SCALE-Sim installed;
the test data are copies in tests/data/scalesim (MIT, see its README)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.errors import AccsimError
from simulator.mapping.plan import Mapping
from simulator.frontends.scalesim import (load_config, load_topology, scalesim_rows,
                                validate_mapping, validate_platform)
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Conv2d, Gemm, Workload

DATA = Path(__file__).parent / "data" / "scalesim"
CONV_HEADER = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
               "Channels, Num Filter, Strides,\n")


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def gemms(workload: Workload) -> list[tuple[int, int, int]]:
    return [(g.m, g.n, g.k) for g in (op.gemm() for op in workload.operators)]


def test_alexnet_gemm_dims_follow_scalesim_ceil_lowering():
    workload, source, parsed = load_topology(str(DATA / "alexnet.csv"))
    assert parsed.kind == "conv" and workload.name == "alexnet"
    # Conv1: ceil((224 - 11 + 4) / 4) = 55 (floor would give 54); K = 11*11*3.
    assert gemms(workload) == [(3025, 96, 363), (529, 256, 2400), (121, 384, 2304),
                               (121, 384, 3456), (121, 256, 3456)]
    conv1 = workload.operators[0]
    assert isinstance(conv1, Conv2d) and (conv1.h, conv1.w, conv1.padding) == (227, 227, 0)
    assert any("Conv1 224x224->227x227" in note for note in parsed.notes)
    assert len(source.sha256) == 64


def test_shipped_resnet50_is_read_as_it_is():
    """A row of empty cells and extra columns (Eh, Ew, e2) that SCALE-Sim's own loader
    fails on: accepted, and listed."""
    workload, _, parsed = load_topology(str(DATA / "Resnet50.csv"))
    assert len(workload.operators) == 54
    assert workload.operators[0].gemm().m == 110 * 110
    # 1x1 stride 2 on 56x56: SCALE-Sim's ceil gives 29x29, the partial window included.
    cb3a_1 = next(op for op in workload.operators if op.name == "CB3a_1")
    assert cb3a_1.gemm().m == 29 * 29
    notes = " ".join(parsed.notes)
    assert "line 2" in notes and "Eh" in notes and "e2" in notes


def test_gemm_topologies_without_trailing_newline_or_with_spaces():
    workload, _, parsed = load_topology(str(DATA / "test_mnk_input.csv"))
    assert parsed.kind == "gemm" and gemms(workload) == [(256, 128, 256)]
    assert isinstance(workload.operators[0], Gemm)
    assert workload.operators[0].name == "Test 1"
    workload, _, _ = load_topology(str(DATA / "gpt2.csv"))
    assert gemms(workload)[2] == (1024, 4800, 1600)


def test_depthwise_layers_expand_into_one_channel_layers(tmp_path):
    path = write(tmp_path, "dp.csv", CONV_HEADER + "Conv2DP, 8, 8, 3, 3, 16, 4, 1,\n"
                 "\n  \nConv3, 8, 8, 3, 3, 16, 4, 2\n")
    workload, _, parsed = load_topology(path)
    dp, plain = workload.operators
    assert (dp.cin, dp.cout, dp.repeat, dp.layer_type) == (1, 4, 16, "conv.depthwise")
    assert dp.gemm().k == 9 and dp.gemm().n == 4
    assert plain.repeat == 1 and plain.gemm().m == 4 * 4  # ceil((8 - 3 + 2) / 2) = 4


def test_gemm_row_equals_scalesim_one_wide_conv():
    """SCALE-Sim runs a GEMM row as the conv [H=M, W=K, Fh=1, Fw=K, C=1, N, S=1]: same
    compute cycles and SRAM reads as accsim's gemm, in every dataflow."""
    platform, _, _ = load_config(str(DATA / "scale.cfg"))
    m, n, k = 70, 45, 33
    for dataflow in ("os", "ws", "is"):
        rows = []
        for op in (Gemm(name="g", layer_type="gemm", kind="gemm", m=m, n=n, k=k),
                   Conv2d(name="g", layer_type="conv", kind="conv2d", h=m, w=k, cin=1,
                          cout=n, kh=1, kw=k)):
            workload = Workload(name="w", operators=[op])
            vp = validate_platform(platform, workload)
            result = simulate(Inputs(vp, workload, validate_mapping(workload, vp, dataflow)))
            (row,) = scalesim_rows(result)
            rows.append({key: row[key] for key in ("compute_cycles", "ifmap_sram_reads",
                                                   "filter_sram_reads")})
        assert rows[0] == rows[1]


@pytest.mark.parametrize("text, fragments", [
    (CONV_HEADER + "Conv1, 224, 224, 11, x, 3, 96, 4,\n",
     ["bad.csv", "line 2, column 5 (Filter Width)", "'x' is not a whole number"]),
    (CONV_HEADER + "Conv1, 224, 224, 11, 11, 3,\n",
     ["bad.csv", "line 2, column 7", "missing value for Num Filter"]),
    (CONV_HEADER + "Conv1, 224, 224, 11, 11, 3, 96, 4,\nConv2, 5, 5, 7, 3, 3, 3, 1,\n",
     ["line 3, column 4 (Filter Height)", "larger than IFMAP Height 5"]),
    (CONV_HEADER + "Conv1, 224, 224, 11, 11, 0, 96, 4,\n",
     ["line 2, column 6 (Channels)", "must be positive"]),
    (CONV_HEADER + ", 224, 224, 11, 11, 3, 96, 4,\n", ["line 2, column 1", "empty layer"]),
    (CONV_HEADER, ["bad.csv", "no layer rows"]),
    ("Layer, M, N, K,\nfc, 128, -4, 64,\n", ["line 2, column 3 (N)", "must be positive"]),
    ("name, a, b,\nx, 1, 2,\n", ["bad.csv", "line 1", "--format scalesim-conv"]),
])
def test_malformed_topologies_name_file_line_and_column(tmp_path, text, fragments):
    with pytest.raises(AccsimError) as error:
        load_topology(write(tmp_path, "bad.csv", text))
    for fragment in fragments:
        assert fragment in error.value.message()


def test_format_overrides_the_header(tmp_path):
    path = write(tmp_path, "mnk.txt", "anything\nfc, 128, 64, 32,\n")
    workload, _, parsed = load_topology(path, "scalesim-gemm")
    assert parsed.kind == "gemm" and gemms(workload) == [(128, 64, 32)]


def test_configs_map_every_field_and_list_what_is_not_honoured():
    platform, _, imp = load_config(str(DATA / "google.cfg"))
    array = platform.systolic_array
    assert (array.rows, array.cols, array.dataflows[0]) == (256, 256, "os")
    assert platform.buffers.ifmap_bytes == 6144 * 1024
    assert platform.buffers.output_bytes == 2048 * 1024
    assert platform.offchip.bandwidth_gbps == 10.0 and platform.clock_ghz == 1.0
    assert platform.name == "GoogleTPU_v1_os"
    notes = "\n".join(imp.notes)
    for field in ("IfmapOffset", "ReadRequestBuffer", "IfmapSRAMBankBandwidth",
                  "SparseRep", "InterfaceBandwidth = USER", "UseRamulatorTrace"):
        assert field in notes and field.split(" ")[0] in platform.description


@pytest.mark.parametrize("name, absent", [("eyeriss.cfg", "[layout] section absent"),
                                          ("tpuv5e_downscale.cfg",
                                           "[sparsity] section absent")])
def test_configs_missing_sections_are_accepted_with_defaults_reported(name, absent):
    """Both fail to parse in SCALE-Sim 3.0.0 itself."""
    platform, _, imp = load_config(str(DATA / name))
    assert absent in "\n".join(imp.notes)
    if name == "eyeriss.cfg":
        assert (platform.systolic_array.rows, platform.systolic_array.cols) == (12, 14)
        assert "OnChipMemoryBanks" in "\n".join(imp.notes)


def test_empty_config_takes_scalesim_defaults(tmp_path):
    platform, _, imp = load_config(write(tmp_path, "min.cfg", "[general]\n"))
    assert (platform.systolic_array.rows, platform.systolic_array.cols) == (4, 4)
    assert platform.systolic_array.dataflows[0] == "ws" and platform.name == "min"
    defaults = "\n".join(imp.notes)
    assert "ArrayHeight = 4" in defaults and "Bandwidth = 10" in defaults


@pytest.mark.parametrize("text, fragments", [
    ("ArrayHeight: 4\n", ["bad.cfg", "line 1", "malformed SCALE-Sim config"]),
    ("[architecture_presets]\nArrayHeight: four\n",
     ["architecture_presets.ArrayHeight", "'four' is not a whole number"]),
    ("[architecture_presets]\nDataflow: rs\n",
     ["architecture_presets.Dataflow", "'rs' is not one of os, ws, is"]),
    ("[architecture_presets]\nBandwidth: 0\n", ["architecture_presets.Bandwidth",
                                                "must be positive"]),
])
def test_bad_configs_name_file_and_field(tmp_path, text, fragments):
    with pytest.raises(AccsimError) as error:
        load_config(write(tmp_path, "bad.cfg", text))
    for fragment in fragments:
        assert fragment in error.value.message()


def test_cli_runs_scalesim_files_unchanged(capsys):
    assert main(["run", "--arch", str(DATA / "scale.cfg"),
                 "--workload", str(DATA / "alexnet.csv")]) == 0
    out = capsys.readouterr().out
    assert "scalesim:   not honoured (trace addresses only)" in out
    assert "alexnet on scale_example_run_32x32_ws" in out and "Conv5" in out


def test_cli_validate_scalesim_reports_mode_and_matches_demand_rows(tmp_path, capsys):
    out_json = tmp_path / "r.json"
    assert main(["run", "--arch", str(DATA / "google.cfg"), "--workload",
                 str(DATA / "alexnet.csv"), "--validate", "scalesim",
                 "--json", str(out_json)]) == 0
    assert "validate scalesim" in capsys.readouterr().out
    data = json.loads(out_json.read_text())
    inputs = data["manifest"]["inputs"]
    assert inputs["mapping"]["canonical"]["name"] == "validate-scalesim"
    assert "validate scalesim" in inputs["platform"]["canonical"]["name"]
    conv1 = data["operators"][0]
    # os on 256x256: folds ceil(3025/256) * ceil(96/256) = 12, each K + R + C - 2 cycles.
    assert conv1["per_run"]["busy_cycles"] == 12 * (363 + 256 + 256 - 2)
    assert conv1["steps"] == 1
    assert conv1["per_instance_bytes"]["sram_read_elements"] == {
        "ifmap": 3025 * 363 * 1, "weight": 363 * 96 * 12}


def test_cli_format_flag_and_errors(tmp_path, capsys):
    topo = write(tmp_path, "layers.txt", "Layer, M, N, K,\nfc, 64, 32, 16,\n")
    assert main(["run", "--arch", "edge_32x32", "--workload", topo,
                 "--format", "scalesim-gemm"]) == 0
    capsys.readouterr()
    bad = write(tmp_path, "bad.csv", CONV_HEADER + "Conv1, 9, 9, 3, 3, 3, 8, two,\n")
    assert main(["run", "--arch", str(DATA / "scale.cfg"), "--workload", bad]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"accsim: error: {bad}: line 2, column 8 (Strides): 'two' is not a "
                   "whole number")
    mapping = write(tmp_path, "m.yaml", "default: {depth: 2}\n")
    assert main(["run", "--arch", str(DATA / "scale.cfg"), "--workload",
                 str(DATA / "alexnet.csv"), "--validate", "scalesim",
                 "--mapping", mapping]) == 1
    assert "--validate scalesim makes its own plan" in capsys.readouterr().err


def test_default_tiler_runs_on_imported_config():
    """Stalls are compared with SCALE-Sim under accsim's default tiler: it must accept
    every imported config and topology."""
    for cfg in ("scale.cfg", "eyeriss.cfg", "google.cfg", "tpuv5e_downscale.cfg"):
        platform, _, _ = load_config(str(DATA / cfg))
        workload, _, _ = load_topology(str(DATA / "test_mnk_input.csv"))
        result = simulate(Inputs(platform, workload, Mapping()))
        assert result.total.cycles > 0


def test_experiment_writes_a_clean_copy_scalesim_can_load(tmp_path):
    """SCALE-Sim's loader needs the 8 known columns and a trailing comma on each row;
    the copy holds the same layers as the original."""
    spec = importlib.util.spec_from_file_location(
        "validate_scalesim", Path(__file__).parents[1] / "experiments" / "validate_scalesim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    original, _, parsed = load_topology(str(DATA / "Resnet50.csv"))
    clean = module.clean_copy(parsed, tmp_path / "clean.csv")
    lines = clean.read_text().splitlines()
    assert all(line.endswith(",") and line.count(",") == 8 for line in lines)
    copy, _, copy_parsed = load_topology(str(clean))
    assert gemms(copy) == gemms(original)
    assert not any("not honoured" in note or "empty" in note for note in copy_parsed.notes)


def test_validate_run_prints_the_scalesim_view(capsys):
    from pathlib import Path

    from simulator.cli import main
    data = Path(__file__).parent / "data" / "scalesim"
    assert main(["run", "--arch", str(data / "scale.cfg"), "--workload",
                 str(data / "alexnet.csv"), "--validate", "scalesim"]) == 0
    out = capsys.readouterr().out
    view = out.split("SCALE-Sim view", 1)[1]
    conv1 = next(line for line in view.splitlines() if line.startswith("Conv1 "))
    cells = [cell.strip() for cell in conv1.split("│")]
    # alexnet Conv1 on scale.cfg (32x32, ws): ofmap ceil((224 - 11 + 4) / 4) = 55, so
    # M = 3025, K = 11*11*3 = 363, N = 96; folds ceil(363/32) * ceil(96/32) = 12 * 3,
    # each M + 2*32 + 32 - 2 = 3119 cycles: D = 112,284, SCALE-Sim's Total Cycles D - 1.
    assert cells[2:4] == ["112,284", "112,283"]
