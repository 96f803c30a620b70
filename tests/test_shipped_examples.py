"""The example inputs in workloads/examples/ (issue 29 item 5) are what the code their
SOURCE.md names makes, carry a licence, and ship in the package."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import pytest

from kineto_traces import transformer_trace

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "workloads" / "examples"
DATA = sorted(p.name for p in EXAMPLES.iterdir()
              if p.suffix in (".onnx", ".json"))


def test_the_onnx_graph_is_the_generators_resnet18():
    onnx = pytest.importorskip("onnx")
    from onnx_models import graph_macs, resnet18
    shipped = onnx.load(EXAMPLES / "resnet18.onnx")
    assert shipped.graph == resnet18(weights="inputs").graph
    assert graph_macs(shipped) == 1_814_073_344  # the figure the import how-to quotes
    assert not shipped.graph.initializer  # the graph only: no weight data


def test_the_profiler_trace_is_the_generators_decoder():
    shipped = json.loads((EXAMPLES / "decoder_trace.json").read_text())
    assert shipped == transformer_trace()[0]
    assert {e["cat"] for e in shipped["traceEvents"]} == {"cpu_op", "cuda_runtime",
                                                          "kernel"}


def test_each_example_has_its_source_and_licence_and_ships():
    assert DATA == ["decoder_trace.json", "resnet18.onnx"]
    source = (EXAMPLES / "SOURCE.md").read_text()
    for name in DATA:
        assert f"`{name}`" in source and f"workloads/examples/{name}" in source
    assert "MIT License" in (EXAMPLES / "LICENSE").read_text()
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "simulator.workloads.examples" in setup["packages"]
    patterns = setup["package-data"]["simulator.workloads.examples"]
    for name in [*DATA, "LICENSE", "SOURCE.md"]:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name
