"""`accsim export chakra`: the trace read back against Chakra's schema and framing.

Schema: mlcommons/chakra schema/protobuf/et_def.proto (GlobalMetadata: version = 1,
attr = 2; Node: id = 1, name = 2, type = 3, data_deps = 5, duration_micros = 7,
attr = 10; AttributeProto: name = 1, int64_val = 9, uint64_val = 13, bool_val = 27,
string_val = 29; NodeType COMP_NODE = 4, COMM_COLL_NODE = 7; CollectiveCommType
ALL_REDUCE = 0). Framing: each message preceded by its varint length (chakra's
encode_message, as src/converter/text_converter.py writes a GlobalMetadata then Nodes).
The bytes are decoded here by a wire-format reader of the test's own, independent of
the descriptor accsim builds, and then parsed with protobuf through it.
"""

import pytest

from simulator.cli import main
from simulator.inputs.platform import Platform
from simulator.export.chakra import protobuf_classes
from simulator.export.profile import ModelProfile
from simulator.frontends import hf
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload
from tests.export_models import RUN_AGREEMENT, layer_and_head, layer_compute_seconds

WIRE_TYPES = {"varint": 0, "bytes": 2}
NODE_FIELDS = {1: "varint", 2: "bytes", 3: "varint", 4: "bytes", 5: "bytes",
               6: "varint", 7: "varint", 10: "bytes"}
ATTR_FIELDS = {1: "bytes", 2: "bytes", 9: "varint", 13: "varint", 27: "varint",
               29: "bytes"}
METADATA_FIELDS = {1: "bytes", 2: "bytes"}


def varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes, schema: dict) -> dict[int, list]:
    """Field number -> values, each field's wire type checked against the schema."""
    found, at = {}, 0
    while at < len(data):
        key, at = varint(data, at)
        number, wire = key >> 3, key & 7
        assert number in schema, f"field {number} is not in et_def.proto's message"
        assert wire == WIRE_TYPES[schema[number]], f"field {number}: wire type {wire}"
        if wire == 0:
            value, at = varint(data, at)
        else:
            size, at = varint(data, at)
            value, at = data[at:at + size], at + size
        found.setdefault(number, []).append(value)
    return found


def messages(data: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        size, at = varint(data, at)
        out.append(data[at:at + size])
        at += size
    assert at == len(data)
    return out


def attrs(node: dict) -> dict:
    out = {}
    for raw in node.get(10, []):
        attr = fields(raw, ATTR_FIELDS)
        name = attr[1][0].decode()
        value = next(attr[n][0] for n in (9, 13, 27, 29) if n in attr)
        out[name] = value
    return out


def platform():
    return load_model(locate("tpu_v5e_like", "platform"), Platform)[0]


def simulated_seconds(op) -> float:
    p = platform()
    single = op.model_copy(update={"repeat": 1, "inputs": None})
    return simulate(Inputs(p, Workload(name="t", operators=[single]), Mapping())
                    ).operators_total.cycles / (p.clock_ghz * 1e9)


@pytest.fixture(scope="module")
def decode_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("chakra") / "trace"
    assert main(["export", "chakra", "--model", "llama_3_1_8b", "--phase", "decode",
                 "--batch", "4", "--tokens", "256", "--tp", "2", "-o", str(out)]) == 0
    files = sorted(out.glob("*.et"))
    return files, [f.read_bytes() for f in files]


def test_trace_decodes_against_et_def(decode_trace):
    files, data = decode_trace
    assert [f.name for f in files] == ["llama_3_1_8b_decode_b4_t256.0.et",
                                       "llama_3_1_8b_decode_b4_t256.1.et"]
    assert data[0] == data[1]  # the T chips' traces are alike
    raw = messages(data[0])
    metadata = fields(raw[0], METADATA_FIELDS)
    assert metadata[1][0] == b"0.0.4"
    nodes = [fields(m, NODE_FIELDS) for m in raw[1:]]
    cfg = hf.load_model_config("llama_3_1_8b")
    names = [n[2][0].decode() for n in nodes]
    layer0 = [n.removeprefix("layer0.") for n in names if n.startswith("layer0.")]
    # Fused as accsim run fuses them: operators fused into a GEMM have no node.
    assert {"qkv", "attn", "o_proj", "mlp_gate_up", "mlp_down"} <= set(layer0)
    assert "input_norm" not in layer0  # a prologue of the QKV GEMM
    for layer in range(cfg.layers):
        assert [n for n in names if n.startswith(f"layer{layer}.")] == [
            f"layer{layer}.{n}" for n in layer0]
    assert len(nodes) == cfg.layers * len(layer0) + len(
        [n for n in names if not n.startswith("layer")])
    assert names[-1] == "lm_head"
    assert [n.get(1, [0])[0] for n in nodes] == list(range(len(nodes)))  # proto3: 0 unwritten
    for index, node in enumerate(nodes):
        assert node[3][0] in (4, 7)
        deps = node.get(5, [b""])[0]
        assert deps == (bytes([index - 1]) if 0 < index < 128 else deps)
        if node[3][0] == 4:
            assert node[7][0] >= 1 and attrs(node)["is_cpu_op"] == 0
    collectives = [n for n in nodes if n[3][0] == 7]
    assert len(collectives) == 2 * cfg.layers
    for node in collectives:
        a = attrs(node)
        assert a["comm_type"] == 0  # ALL_REDUCE
        assert a["comm_size"] == 4 * cfg.hidden * 2  # 4 tokens x hidden x bf16


def test_durations_are_the_simulated_times(decode_trace):
    _, data = decode_trace
    metadata_class, node_class, _ = protobuf_classes()
    raw = messages(data[0])
    metadata_class.FromString(raw[0])
    nodes = [node_class.FromString(m) for m in raw[1:]]
    assert [n.data_deps[:] for n in nodes[1:4]] == [[0], [1], [2]]
    by_name = {n.name: n for n in nodes}
    profile = ModelProfile(platform(), "llama_3_1_8b", tp=2)
    workload = profile.iteration((), [256] * 4)
    from_model = {op.name: op for op in workload.operators}
    # The attention is a unit of its own: its node is its time simulated alone.
    node = by_name["layer0.attn"]
    seconds = simulated_seconds(from_model["attn"])
    assert node.duration_micros == max(1, round(seconds * 1e6))
    assert next(a.uint64_val for a in node.attr if a.name == "accsim_ns") == round(
        seconds * 1e9)
    assert by_name["layer31.attn"].duration_micros == node.duration_micros
    # A layer's compute nodes add up to the layer as `accsim run` simulates it.
    layer, _ = layer_and_head(workload)
    layer0_ns = sum(next(a.uint64_val for a in n.attr if a.name == "accsim_ns")
                    for n in nodes if n.name.startswith("layer0.") and n.type == 4)
    assert layer0_ns == pytest.approx(layer_compute_seconds(layer) * 1e9,
                                      rel=RUN_AGREEMENT)
    assert by_name["lm_head"].type == 4


def test_plain_workload_trace(tmp_path):
    out = tmp_path / "plain"
    assert main(["export", "chakra", "--workload", "gemm_4096", "-o", str(out)]) == 0
    # ASTRA-sim's analytical network takes at least 2 NPUs: the one chip's trace is
    # written for two chips side by side, with a network of two.
    first, second = sorted(out.glob("*.et"))
    assert (first.name, second.name) == ("gemm_4096.0.et", "gemm_4096.1.et")
    assert first.read_bytes() == second.read_bytes()
    assert "npus_count: [ 2 ]" in (out / "network.yml").read_text()
    trace = first
    raw = messages(trace.read_bytes())
    workload = load_model(locate("gemm_4096", "workload"), Workload)[0]
    assert len(raw) == 1 + len(workload.operators)
    node = fields(raw[1], NODE_FIELDS)
    assert node[2][0].decode() == workload.operators[0].name
    assert node[7][0] == max(1, round(simulated_seconds(workload.operators[0]) * 1e6))


def test_compute_nodes_carry_what_the_roofline_reads(tmp_path):
    """ASTRA-sim (astra-sim/astra-sim at 518bd51, workload/Workload.cc issue_comp) with
    roofline-enabled reads a COMP_NODE's num_ops and tensor_size (a node with
    tensor_size 0 is skipped); every node's is_cpu_op (HardwareResource)."""
    out = tmp_path / "gemm"
    assert main(["export", "chakra", "--workload", "gemm_4096", "-o", str(out)]) == 0
    raw = messages((out / "gemm_4096.0.et").read_bytes())
    node = fields(raw[1], NODE_FIELDS)
    a = attrs(node)
    workload = load_model(locate("gemm_4096", "workload"), Workload)[0]
    op = workload.operators[0]
    p = platform()
    total = simulate(Inputs(p, Workload(name="t", operators=[
        op.model_copy(update={"inputs": None})]), Mapping())).operators_total
    assert a["num_ops"] == 2 * op.m * op.n * op.k * op.repeat == total.model_flops
    assert a["tensor_size"] == total.offchip_bytes > 0
    assert a["is_cpu_op"] == 0
    import json
    replay = json.loads((out / "system.json").read_text())
    roofline = json.loads((out / "system_roofline.json").read_text())
    assert replay["roofline-enabled"] == 0 and roofline["roofline-enabled"] == 1
    assert roofline["peak-perf"] == pytest.approx(p.peak_flops_for("bf16") / 1e12)
    assert roofline["local-mem-bw"] == p.offchip.bandwidth_gbps
    assert json.loads((out / "remote_memory.json").read_text()) == {
        "memory-type": "NO_MEMORY_EXPANSION"}


def test_nodes_carry_the_layers_operations(decode_trace):
    """num_ops: the FLOPs of the operators a node carries (2 per MAC, a vector
    operator's element operations), the layer's total kept whatever is fused."""
    _, data = decode_trace
    nodes = [fields(m, NODE_FIELDS) for m in messages(data[0])[1:]]
    layer0 = [attrs(n) for n in nodes
              if n[2][0].decode().startswith("layer0.") and n[3][0] == 4]
    profile = ModelProfile(platform(), "llama_3_1_8b", tp=2)
    layer, _ = layer_and_head(profile.iteration((), [256] * 4))
    expected = 0
    for op in layer:
        if op.kind == "collective":
            continue
        single = op.model_copy(update={"repeat": 1, "inputs": None})
        total = simulate(Inputs(platform(), Workload(name="t", operators=[single]),
                                Mapping())).operators_total
        vector = single.vector() if op.kind not in ("gemm", "attention") else None
        expected += total.model_flops + (vector.rows * vector.cols * vector.passes
                                         if vector else 0)
    assert sum(a["num_ops"] for a in layer0) == pytest.approx(expected, abs=len(layer0))
    assert all(a["tensor_size"] >= 1 and a["num_ops"] >= 1 for a in layer0)
