"""The importers' YAML writer: what it writes loads back to the same workload."""

from simulator.frontends.writer import workload_to_yaml
from simulator.inputs.loader import load_model, locate, parse_model
from simulator.inputs.workload import Workload


def test_written_yaml_loads_back_to_the_same_workload():
    workload, _ = load_model(locate("resnet50_b1", "workload"), Workload)
    text = workload_to_yaml(workload, made_by="accsim import test x",
                            notes=["2 Foo nodes not supported"])
    assert text.startswith("# Imported by `accsim import test x`")
    assert "# 2 Foo nodes not supported\n" in text
    assert parse_model(text, Workload, file="written.yaml") == workload


def test_fields_at_their_defaults_are_left_out():
    workload, _ = load_model(locate("resnet50_b1", "workload"), Workload)
    text = workload_to_yaml(workload, made_by="accsim import test x")
    first = next(line for line in text.splitlines() if "name: conv1," in line)
    assert first.startswith("  - {name: conv1, layer_type: conv.stem, kind: conv2d,")
    assert "repeat" not in first and "dilation" not in first


def test_names_yaml_would_misread_are_quoted_and_read_back():
    names = ["/layers.0/attn/MatMul", "a, b", "key: value", "yes", "null", "1e3", "#x",
             "plain_name.1"]
    workload = Workload(name="graph: v2", operators=[
        dict(name=name, layer_type="fc", kind="gemm", m=2, n=2, k=2,
             measured_s=1e-05 * (i + 1)) for i, name in enumerate(names)])
    text = workload_to_yaml(workload, made_by="accsim import test x")
    assert parse_model(text, Workload, file="written.yaml") == workload
    assert "  - {name: plain_name.1, layer_type: fc, kind: gemm, m: 2, n: 2, k: 2, " \
        "measured_s: 8.0e-05}" in text


def test_unmeasured_operators_dump_without_measured_s():
    workload, _ = load_model(locate("resnet50_b1", "workload"), Workload)
    assert all("measured_s" not in op for op in workload.model_dump(mode="json")
               ["operators"])
