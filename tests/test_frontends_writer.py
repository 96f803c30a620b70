"""The importers' YAML writer: what it writes loads back to the same workload."""

from simulator.frontends.writer import workload_to_yaml
from simulator.loader import load_model, locate, parse_model
from simulator.workload import Workload


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
