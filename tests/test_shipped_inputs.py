"""The shipped platforms and workloads load, cite their sources, and match the published
figures of the chips and networks they model (DESIGN.md section 2)."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from simulator.inputs.platform import Platform
from simulator.inputs.loader import shipped_folder, load_model, locate, shipped_names
from simulator.inputs.platform_file import load_platform as load_platform_file
from simulator.inputs.workload import Conv2d, Elementwise, Gemm, Pool, Workload, is_compute

PLATFORMS = shipped_names("platform")
WORKLOADS = shipped_names("workload")

# Published peak dense rate (FLOP/s or OP/s, a MAC counting 2) and off-chip bandwidth
# (GB/s) of every shipped platform that models a real chip:
# TPU v1: Jouppi et al., ISCA 2017 (92 TOPS int8, 34 GB/s DDR3).
# TPU v5e: Google Cloud TPU v5e documentation (197 TFLOP/s bf16, 819 GB/s HBM2).
# What-if variants keep their chip's peak rate and bandwidth.
CITED = {
    "tpu_v1": (92e12, 34.0),
    "tpu_v5e_like": (197e12, 819.0),
    "whatif/tpu_v1_all_dataflows": (92e12, 34.0),
    "whatif/tpu_v5e_256x256": (197e12, 819.0),
    "whatif/tpu_v5e_all_dataflows": (197e12, 819.0),
    "whatif/tpu_v5e_switch": (197e12, 819.0),
    "whatif/tpu_v5e_fp8": (197e12, 819.0),
    "whatif/tpu_v5e_int4": (197e12, 819.0),
    "whatif/tpu_v5e_sparse24": (197e12, 819.0),
    "whatif/tpu_v5e_psum": (197e12, 819.0),
    "whatif/tpu_v5e_capped": (197e12, 819.0),   # at clock_ghz, its uncapped clock
    "whatif/tpu_v5e_host": (197e12, 819.0),
}
# A real chip as it is: its only dataflows, its arrays as they are (DESIGN.md section 2).
CHIPS = {"tpu_v1": {"dataflows": ["ws"], "count": 1, "rows": 256},
         "tpu_v5e_like": {"dataflows": ["ws"], "count": 4, "rows": 128}}
# Shipped platforms that model no real chip, so have no published figures to match.
NOT_A_CHIP = {"edge_32x32"}


def load_platform(name: str) -> Platform:
    return load_platform_file(locate(name, "platform"))[0]


def load_workload(name: str) -> Workload:
    return load_model(locate(name, "workload"), Workload)[0]


def test_expected_files_are_shipped():
    assert {"tpu_v1", "edge_32x32", "tpu_v5e_like"} <= set(PLATFORMS)
    assert {"resnet50_b1", "gemm_4096"} <= set(WORKLOADS)


@pytest.mark.parametrize("name", PLATFORMS)
def test_platform_loads(name):
    platform = load_platform(name)
    assert platform.name == name
    assert platform.peak_flops > 0 and platform.bytes_per_cycle > 0


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_loads(name):
    workload = load_workload(name)
    assert workload.name == name
    # dtype is left to the platform in shipped workloads, so they run on any platform.
    assert all(op.dtype is None for op in workload.operators)


@pytest.mark.parametrize("name", PLATFORMS)
def test_every_platform_is_real_or_declared_not(name):
    assert (name in CITED) != (name in NOT_A_CHIP), \
        f"{name}: add its published peak and bandwidth to CITED, or list it in NOT_A_CHIP"


@pytest.mark.parametrize("name", sorted(CHIPS))
def test_real_chip_models_its_arrays_and_dataflows_as_they_are(name):
    array = load_platform(name).systolic_array
    assert {key: getattr(array, key) for key in CHIPS[name]} == CHIPS[name]
    assert array.fold_model == "pipelined"


def test_what_if_variants_are_shipped_by_name():
    assert {"whatif/tpu_v5e_256x256", "whatif/tpu_v5e_all_dataflows",
            "whatif/tpu_v1_all_dataflows"} <= set(PLATFORMS)
    assert load_platform("whatif/tpu_v5e_256x256").systolic_array.count == 1


@pytest.mark.parametrize("name", sorted(CITED))
def test_real_chip_matches_cited_peak_and_bandwidth(name):
    platform = load_platform(name)
    peak, bandwidth = CITED[name]
    assert platform.peak_flops == pytest.approx(peak, rel=0.01)
    assert platform.offchip.bandwidth_gbps == pytest.approx(bandwidth, rel=0.01)


def test_edge_32x32_equals_scalesim_example_config():
    platform = load_platform("edge_32x32")
    array = platform.systolic_array
    assert (array.rows, array.cols, array.default_dataflow) == (32, 32, "ws")
    # scale.cfg: 64 KiB of 1-byte words for each SRAM; Bandwidth 10 words/cycle.
    buffers = platform.buffers
    assert buffers.ifmap_bytes == buffers.weight_bytes == buffers.output_bytes == 64 * 1024
    assert array.input_dtypes[0] == "int8"
    assert platform.bytes_per_cycle == pytest.approx(10.0)


def test_tpu_v1_buffers_follow_the_paper():
    platform = load_platform("tpu_v1")
    assert platform.buffers.ifmap_bytes == 24 * 2**20  # unified buffer
    assert platform.activation_memory_bytes == 24 * 2**20
    assert platform.buffers.weight_bytes == 4 * 64 * 1024  # 4-tile weight FIFO
    assert platform.buffers.output_bytes == 4096 * 256 * 4  # 32-bit accumulators
    assert platform.systolic_array.default_dataflow == "ws"
    # ~28 W idle, all of it split across components.
    static = platform.energy.static_power
    total = static.array_w + static.sram_w + static.offchip_w + static.vector_w \
        + static.other_w
    assert total == pytest.approx(28.0)


def _key_lines_without_source(text: str) -> list[str]:
    """Keys holding a value (scalar or list) with no comment on their line or in a
    comment block directly above."""
    lines = text.splitlines()
    missing = []

    def walk(node):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(value, yaml.MappingNode):
                    walk(value)
                elif key.value != "description":
                    line = key.start_mark.line
                    above = lines[line - 1].strip() if line else ""
                    if "#" not in lines[line] and not above.startswith("#"):
                        missing.append(f"line {line + 1}: {lines[line].strip()}")

    walk(yaml.compose(text))
    return missing


@pytest.mark.parametrize("name", PLATFORMS)
def test_every_platform_value_cites_a_source(name):
    text = (shipped_folder("platform") / f"{name}.yaml").read_text()
    assert _key_lines_without_source(text) == []


def test_source_check_catches_an_uncommented_value():
    assert _key_lines_without_source("a: 1  # ok\n# why\nb: 2\nc: 3\n") == ["line 4: c: 3"]


# ResNet-50 v1.5 at 224x224: about 4.1 G multiply-accumulates in conv + fc layers.
RESNET50_MACS = 4.1e9


def test_resnet50_layer_counts():
    ops = load_workload("resnet50_b1").operators
    convs = [op for op in ops if isinstance(op, Conv2d)]
    assert len(convs) == 53
    assert sum(isinstance(op, Elementwise) and op.op == "add" for op in ops) == 16
    assert [op.name for op in ops if isinstance(op, Pool)] == ["pool1", "avgpool"]
    assert [op.name for op in ops if isinstance(op, Gemm)] == ["fc1000"]
    by_type = {}
    for op in ops:
        by_type[op.layer_type] = by_type.get(op.layer_type, 0) + 1
    assert by_type == {"conv.stem": 1, "pool": 2, "conv1x1": 32, "conv3x3": 16,
                       "conv.shortcut": 4, "residual_add": 16, "fc": 1}


def test_resnet50_output_sizes_per_stage():
    ops = {op.name: op for op in load_workload("resnet50_b1").operators}
    assert ops["conv1"].ho == ops["conv1"].wo == 112
    assert ops["pool1"].ho == ops["pool1"].wo == 56
    for stage, blocks, size, channels in [(2, "abc", 56, 256), (3, "abcd", 28, 512),
                                          (4, "abcdef", 14, 1024), (5, "abc", 7, 2048)]:
        for block in blocks:
            last = ops[f"res{stage}{block}_branch2c"]
            assert (last.ho, last.wo, last.cout) == (size, size, channels)
            assert ops[f"res{stage}{block}_add"].elements == size * size * channels
        shortcut = ops[f"res{stage}a_branch1"]
        assert (shortcut.ho, shortcut.cout) == (size, channels)
        # v1.5: the stride sits on the 3x3, the first 1x1 keeps the input size.
        first = ops[f"res{stage}a_branch2a"]
        assert first.stride == 1 and first.ho == first.h
    assert (ops["avgpool"].ho, ops["avgpool"].channels) == (1, 2048)
    assert (ops["fc1000"].m, ops["fc1000"].n, ops["fc1000"].k) == (1, 1000, 2048)


def test_resnet50_convs_chain_their_shapes():
    """Each conv reads the size its producer wrote (inside blocks and across them)."""
    ops = load_workload("resnet50_b1").operators
    size, channels = 56, 64  # after pool1
    for op in ops:
        if isinstance(op, Conv2d) and op.name.endswith("branch2a"):
            assert (op.h, op.cin) == (size, channels), op.name
            h, c = op.ho, op.cout
        elif isinstance(op, Conv2d) and op.name.endswith(("branch2b", "branch2c")):
            assert (op.h, op.cin) == (h, c), op.name
            h, c = op.ho, op.cout
        elif isinstance(op, Conv2d) and op.name.endswith("branch1"):
            assert (op.h, op.cin, op.ho, op.cout) == (size, channels, h, c), op.name
        elif isinstance(op, Elementwise):
            size, channels = h, c


def test_resnet50_total_macs():
    ops = load_workload("resnet50_b1").operators
    total = sum(op.gemm().macs for op in ops if is_compute(op))
    assert total == pytest.approx(RESNET50_MACS, rel=0.02)
    assert total == 4_089_184_256  # the exact count of this trace


def test_resnet50_yaml_is_what_the_generator_writes():
    path = shipped_folder("workload") / "make_resnet50.py"
    spec = importlib.util.spec_from_file_location("make_resnet50", str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = (shipped_folder("workload") / "resnet50_b1.yaml")
    assert module.render(module.operators()) == shipped.read_text()


def test_gemm_4096():
    ops = load_workload("gemm_4096").operators
    assert len(ops) == 1
    op = ops[0]
    assert (op.kind, op.layer_type, op.batch, op.m, op.n, op.k) == \
        ("gemm", "gemm", 1, 4096, 4096, 4096)
