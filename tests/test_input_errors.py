"""Bad input gives one AccsimError naming the file, the field and the rule broken
(DESIGN.md section 7), at the schema level: loading platforms and workloads."""

from __future__ import annotations

import copy

import pytest
import yaml

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import load_model, locate, shipped_names
from simulator.inputs.workload import Workload

GEMM = {"name": "g", "layer_type": "gemm", "kind": "gemm", "m": 4, "n": 4, "k": 4}
CONV = {"name": "c", "layer_type": "conv", "kind": "conv2d", "h": 8, "w": 8, "cin": 4,
        "cout": 4, "kh": 3, "kw": 3}


@pytest.fixture(scope="module")
def platform_raw() -> dict:
    """A valid platform as a dict, to break one field at a time."""
    with open(locate("edge_32x32", "platform")) as f:
        return yaml.safe_load(f)


def load_error(tmp_path, text: str, model) -> tuple[str, str]:
    """Write `text` to a file, load it, and return (path, the one-line message)."""
    path = tmp_path / "input.yaml"
    path.write_text(text)
    with pytest.raises(AccsimError) as info:
        load_model(path, model)
    message = str(info.value)
    assert "\n" not in message  # the CLI prints it on one line
    assert message.startswith(f"{path}: ")  # names the file first
    return str(path), message


def workload_error(tmp_path, *operators: dict) -> str:
    text = yaml.safe_dump({"name": "w", "operators": list(operators)}, sort_keys=False)
    return load_error(tmp_path, text, Workload)[1]


def platform_error(tmp_path, raw: dict) -> str:
    return load_error(tmp_path, yaml.safe_dump(raw, sort_keys=False), Platform)[1]


def test_valid_inputs_load(tmp_path, platform_raw):
    """The baselines the other tests break are themselves valid."""
    (tmp_path / "w.yaml").write_text(
        yaml.safe_dump({"name": "w", "operators": [GEMM, CONV]}))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(platform_raw))
    assert len(load_model(tmp_path / "w.yaml", Workload)[0].operators) == 2
    assert load_model(tmp_path / "p.yaml", Platform)[0].systolic_array.rows == 32


def test_zero_size(tmp_path):
    message = workload_error(tmp_path, {**GEMM, "m": 0})
    assert "operators[0](g).m: " in message
    assert "greater than 0" in message


def test_negative_stride(tmp_path):
    message = workload_error(tmp_path, GEMM, {**CONV, "stride": -1})
    assert "operators[1](c).stride: " in message
    assert "greater than 0" in message


def test_negative_platform_size(tmp_path, platform_raw):
    raw = copy.deepcopy(platform_raw)
    raw["buffers"]["weight_bytes"] = -65536
    message = platform_error(tmp_path, raw)
    assert "buffers.weight_bytes: " in message and "greater than 0" in message


def test_unknown_operator_kind(tmp_path):
    message = workload_error(tmp_path, {**GEMM, "kind": "matmul"})
    assert "operators[0](g)" in message
    assert "'matmul'" in message
    # the rule: the closed list of kinds
    for kind in ("gemm", "conv2d", "elementwise", "pool"):
        assert f"'{kind}'" in message


def test_missing_operator_kind(tmp_path):
    operator = {key: value for key, value in GEMM.items() if key != "kind"}
    message = workload_error(tmp_path, operator)
    assert "operators[0](g)" in message and "'kind'" in message


def test_misspelt_platform_key(tmp_path, platform_raw):
    raw = copy.deepcopy(platform_raw)
    raw["offchip"]["bandwith_gbps"] = raw["offchip"]["bandwidth_gbps"]
    message = platform_error(tmp_path, raw)
    assert "offchip.bandwith_gbps: " in message
    assert "unknown field" in message


def test_misspelt_platform_key_is_reported_before_the_key_it_replaced(tmp_path,
                                                                      platform_raw):
    raw = copy.deepcopy(platform_raw)
    raw["systolic_array"]["colums"] = raw["systolic_array"].pop("cols")
    message = platform_error(tmp_path, raw)
    assert "systolic_array.colums: " in message
    assert "unknown field" in message and "(missing too: systolic_array.cols)" in message
    assert "more error" not in message


def test_a_platform_written_from_scratch_names_the_fields_it_lacks(tmp_path,
                                                                   platform_raw):
    """Every missing field is named at once (up to MISSING_NAMED, then a count), so a
    platform written from scratch is not completed one rerun per field."""
    raw = {"name": "mine", "clock_ghz": 1.0, "systolic_array": {"rows": 8, "cols": 8}}
    message = platform_error(tmp_path, raw)
    required = [key for key in platform_raw if key not in raw and key in message]
    assert "systolic_array.dataflows: required field is missing (missing too: " in message
    assert len(required) >= 3 and " more)" in message and "more error" not in message


def test_misspelt_operator_key(tmp_path):
    operator = {key: value for key, value in CONV.items()}
    operator["strides"] = 2
    message = workload_error(tmp_path, operator)
    assert "operators[0](c).strides: " in message and "unknown field" in message


def test_malformed_yaml_names_the_line(tmp_path):
    text = "name: w\noperators:\n  - {name: g, kind: gemm, m: [4, n: 4\n"
    _, message = load_error(tmp_path, text, Workload)
    assert "malformed YAML" in message
    assert "line " in message


def test_malformed_yaml_line_is_where_the_parser_stopped(tmp_path):
    text = "name: w\noperators:\n  - {name: g\n  - bad: [\n"
    _, message = load_error(tmp_path, text, Workload)
    line = int(message.split("line ")[1].split(",")[0])
    assert 3 <= line <= 5


def test_top_level_list(tmp_path):
    _, message = load_error(tmp_path, yaml.safe_dump([GEMM]), Workload)
    assert "expected a mapping" in message and "found list" in message


def test_empty_file(tmp_path):
    _, message = load_error(tmp_path, "", Platform)
    assert "expected a mapping" in message


def test_kernel_larger_than_padded_input(tmp_path):
    # 8 + 2*1 = 10 < 11
    message = workload_error(tmp_path, {**CONV, "kh": 11, "kw": 11, "padding": 1})
    assert "operators[0](c)" in message
    assert "kernel does not fit the padded input" in message


def test_kernel_that_fits_only_with_padding_is_accepted(tmp_path):
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(
        {"name": "w", "operators": [{**CONV, "kh": 10, "kw": 10, "padding": 1}]}))
    op = load_model(tmp_path / "w.yaml", Workload)[0].operators[0]
    assert (op.ho, op.wo) == (1, 1)


def test_groups_not_dividing_cin(tmp_path):
    message = workload_error(tmp_path, {**CONV, "cin": 6, "cout": 6, "groups": 4})
    assert "operators[0](c)" in message
    assert "groups 4 must divide cin 6" in message


def test_work_that_would_overflow_int64(tmp_path):
    message = workload_error(tmp_path, {**GEMM, "m": 2**22, "n": 2**22, "k": 2**22})
    assert "operators[0](g)" in message
    assert "overflow int64" in message


def test_repeat_that_would_overflow_int64(tmp_path):
    message = workload_error(tmp_path, {**GEMM, "m": 2**20, "n": 2**20, "k": 2**20,
                                        "repeat": 2**3})
    assert "operators[0](g)" in message and "overflow int64" in message


def test_duplicate_operator_names(tmp_path):
    message = workload_error(tmp_path, GEMM, CONV, {**GEMM, "m": 8})
    assert "operators: " in message
    assert "'g' appears twice" in message


def test_missing_required_platform_field(tmp_path, platform_raw):
    raw = copy.deepcopy(platform_raw)
    del raw["clock_ghz"]
    message = platform_error(tmp_path, raw)
    assert ": clock_ghz: required field is missing" in message


def test_missing_nested_platform_field(tmp_path, platform_raw):
    raw = copy.deepcopy(platform_raw)
    del raw["offchip"]["latency_cycles"]
    message = platform_error(tmp_path, raw)
    assert "offchip.latency_cycles: required field is missing" in message


def test_missing_operator_field(tmp_path):
    operator = {key: value for key, value in CONV.items() if key != "cout"}
    message = workload_error(tmp_path, operator)
    assert "operators[0](c).cout: required field is missing" in message


def test_unknown_dataflow(tmp_path, platform_raw):
    raw = copy.deepcopy(platform_raw)
    raw["systolic_array"]["dataflows"] = ["ws", "rs"]
    message = platform_error(tmp_path, raw)
    assert "systolic_array.dataflows[1]" in message and "'os'" in message


def test_mac_energy_missing_for_an_input_dtype(tmp_path, platform_raw):
    raw = copy.deepcopy(platform_raw)
    raw["energy"]["mac_pj"] = {"fp32": 4.6}
    message = platform_error(tmp_path, raw)
    assert "energy.mac_pj lacks the array's input dtypes ['int8']" in message


def test_missing_file():
    with pytest.raises(AccsimError, match="no-such-file.yaml: file not found"):
        load_model("no-such-file.yaml", Platform)


@pytest.mark.parametrize("kind", ["platform", "workload"])
def test_unknown_shipped_name_lists_the_known_ones(kind):
    known = shipped_names(kind)
    assert known
    with pytest.raises(AccsimError) as info:
        locate("tpu_v99", kind)
    message = str(info.value)
    assert message.startswith("tpu_v99: ")
    assert f"no shipped {kind} of that name" in message
    assert f"(shipped: {', '.join(known)})" in message
