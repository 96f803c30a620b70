"""An ONNX file read into what the importer needs: its nodes in order, with every
tensor's shape after onnx's own shape inference.

Only the graph is read: weights stored as external data are never opened (their shapes
are in the graph), so shape-only files and models whose weights are missing import the
same. Everything that can go wrong with the file - not protobuf, truncated, a node
reading a tensor nothing makes, shapes that do not agree - is one AccsimError naming the
file and the node; protobuf's and onnx's own exceptions never reach the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import helper, shape_inference

from simulator.errors import AccsimError
from simulator.inputs.loader import read_bytes

Shape = tuple[int, ...]
DEFAULT_DOMAINS = ("", "ai.onnx")
# Largest model file read: protobuf's own limit on one message.
MAX_MODEL_BYTES = 2 * 2**30
# Most nodes a graph may have, checked before its wiring and shapes are walked: a
# 100-block encoder at BERT-base width has 2,400 (experiments/bench_import.py), a
# large LLM export tens of thousands.
MAX_NODES = 1_000_000


class ShapeUnknown(Exception):
    """A tensor whose shape onnx's shape inference left unknown."""


@dataclass(frozen=True)
class Node:
    """One graph node: its name (made up from op type and position when it has none),
    op type, domain, tensor names and attributes as Python values."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict


@dataclass(frozen=True)
class Graph:
    """The nodes of a model in order and the known shapes of its tensors."""

    file: str
    name: str
    opset: int                      # of the default domain
    nodes: list[Node]
    shapes: dict[str, Shape]        # tensors whose every dimension is known

    def shape(self, node: Node, tensor: str) -> Shape:
        """A tensor's shape; ShapeUnknown where inference could not tell it."""
        if tensor not in self.shapes:
            raise ShapeUnknown(tensor)
        return self.shapes[tensor]

    def input_shape(self, node: Node, position: int) -> Shape:
        return self.shape(node, node.inputs[position])

    def output_shape(self, node: Node, position: int = 0) -> Shape:
        return self.shape(node, node.outputs[position])

    def has_input(self, node: Node, position: int) -> bool:
        """True where the node has an (optional) input at this position."""
        return len(node.inputs) > position and node.inputs[position] != ""


def read_graph(path: str | Path, *, batch: int | None = None,
               input_shapes: Mapping[str, Shape] | None = None) -> Graph:
    """Read, check and shape-infer an ONNX file. `input_shapes` replaces the named
    inputs' shapes; `batch` sets the symbolic first dimension of the others."""
    file = str(path)
    model = _parse(file)
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS),
                 None)
    if opset is None:
        raise AccsimError("no opset_import for the default ONNX domain (a truncated or "
                          "hand-damaged file?)", file=file)
    if not 1 <= opset <= onnx.defs.onnx_opset_version():
        raise AccsimError(f"opset {opset} is not one the installed onnx package knows "
                          f"(1 to {onnx.defs.onnx_opset_version()})", file=file)
    if not graph.node:
        raise AccsimError("the graph has no nodes (an empty or truncated file?)", file=file)
    if len(graph.node) > MAX_NODES:
        raise AccsimError(f"{len(graph.node):,} nodes, more than the {MAX_NODES:,} a graph "
                          "may have", file=file)
    weights = frozenset(t.name for t in graph.initializer)
    _check_wiring(graph, weights, file)
    if batch is not None or input_shapes:
        _override_inputs(graph, weights, batch, dict(input_shapes or {}), file)
    _require_input_shapes(graph, weights, file)
    try:
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                                data_prop=True)
    except (shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise AccsimError(f"onnx shape inference failed: {_first_line(exc)}",
                          file=file) from None
    shapes = {t.name: tuple(t.dims) for t in inferred.graph.initializer}
    for info in (*inferred.graph.input, *inferred.graph.value_info,
                 *inferred.graph.output):
        shape = _known_shape(info)
        if shape is not None:
            shapes[info.name] = shape
    nodes = [_node(node, index) for index, node in enumerate(inferred.graph.node)]
    return Graph(file, graph.name or Path(file).stem, opset, _unique(nodes), shapes)


def _parse(file: str) -> onnx.ModelProto:
    data = read_bytes(file, max_bytes=MAX_MODEL_BYTES)
    try:
        return onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise AccsimError(f"not a readable ONNX model: the file is corrupt or truncated "
                          f"(protobuf: {_first_line(exc)})", file=file) from None


def _check_wiring(graph, weights: frozenset[str], file: str) -> None:
    """Every node reads tensors that exist before it: what a truncated or damaged file
    breaks first."""
    made = {i.name for i in graph.input} | weights
    for index, node in enumerate(graph.node):
        for tensor in node.input:
            if tensor and tensor not in made:
                raise AccsimError(f"reads tensor {tensor!r}, which no earlier node, input "
                                  "or initializer makes (a truncated or unsorted graph?)",
                                  file=file, field=f"node {_name(node, index)} "
                                  f"({node.op_type})")
        made.update(node.output)


def _override_inputs(graph, weights: frozenset[str], batch: int | None,
                     given: dict[str, Shape], file: str) -> None:
    """Replace the named inputs' shapes, and `batch` for every other input whose first
    dimension is symbolic (a fixed one, such as a weight's, stays: --input-shape
    changes it)."""
    inputs = [i for i in graph.input if i.name not in weights]
    names = [i.name for i in inputs]
    for name in given:
        if name not in names:
            raise AccsimError(f"the model has no input {name!r} (inputs: "
                              f"{', '.join(names)})", file=file, field="--input-shape")
    batched = []
    for info in inputs:
        declared = list(info.type.tensor_type.shape.dim)
        shape = given.get(info.name)
        if shape is None and batch is not None and declared and \
                not declared[0].HasField("dim_value"):
            shape = (batch, *(d.dim_value if d.HasField("dim_value") else d.dim_param
                              for d in declared[1:]))
            batched.append(info.name)
        if shape is None:
            continue
        if declared and len(declared) != len(shape):
            raise AccsimError(f"input {info.name!r} has {len(declared)} dimensions, the "
                              f"given shape {len(shape)}", file=file, field="--input-shape")
        elem = info.type.tensor_type.elem_type
        info.CopyFrom(helper.make_tensor_value_info(info.name, elem, list(shape)))
    if batch is not None and not batched and not given:
        raise AccsimError("no input has a symbolic first dimension for --batch to set "
                          f"(inputs: {', '.join(names)}); set a fixed one with "
                          "--input-shape", file=file, field="--batch")
    # Shapes recorded for the old input sizes would now contradict inference.
    del graph.value_info[:]
    for info in graph.output:
        info.type.tensor_type.ClearField("shape")


def _require_input_shapes(graph, weights: frozenset[str], file: str) -> None:
    for info in graph.input:
        if info.name in weights or _known_shape(info) is not None:
            continue
        dims = [str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?"
                for d in info.type.tensor_type.shape.dim]
        example = "x".join(d if d.isdigit() else "1" for d in dims) or "1x3x224x224"
        raise AccsimError(f"input {info.name!r} has unknown dimensions "
                          f"[{', '.join(dims)}]: give --batch B or --input-shape "
                          f"{info.name}={example}", file=file)


def _known_shape(info) -> Shape | None:
    """The shape of a value_info whose every dimension is a positive number."""
    if not info.type.HasField("tensor_type") or \
            not info.type.tensor_type.HasField("shape"):
        return None
    dims = info.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def _name(node, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


def _node(node, index: int) -> Node:
    return Node(_name(node, index), node.op_type, node.domain, tuple(node.input),
                tuple(node.output),
                {a.name: helper.get_attribute_value(a) for a in node.attribute})


def _unique(nodes: list[Node]) -> list[Node]:
    """Nodes with distinct names (exporters repeat or omit them): a repeated name gets
    the first free suffix _2, _3, ... Each name's last suffix is kept, so a graph
    repeating one name N times costs N steps, not N^2 (issue 42: 60,000 duplicates)."""
    seen: set[str] = set()
    last: dict[str, int] = {}
    out = []
    for node in nodes:
        name, n = node.name, last.get(node.name, 1)
        if name in seen:
            while (name := f"{node.name}_{n + 1}") in seen:
                n += 1
            last[node.name] = n + 1
        seen.add(name)
        out.append(replace(node, name=name))
    return out


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
