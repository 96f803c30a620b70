"""An ONNX graph's nodes as accsim operators: attention chains first, then each node by
the op table (simulator.frontends.onnx.ops); what becomes nothing is counted."""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from simulator.errors import AccsimError
from simulator.frontends.onnx.attention_pattern import find_attention
from simulator.frontends.onnx.graph import DEFAULT_DOMAINS, Graph, Node, ShapeUnknown
from simulator.frontends.onnx.ops import CONVERTERS, MOVES_DATA, SHAPE_ONLY
from simulator.frontends.tally import Tally, Unsupported
from simulator.inputs.workload import Operator

OPERATOR = TypeAdapter(Operator)


def convert_graph(graph: Graph) -> tuple[list, Tally]:
    """The graph's operators in node order, and the tally of the rest."""
    tally = Tally()
    patterns = {p.nodes[0].name: p for p in find_attention(graph)}
    inside = {node.name for p in patterns.values() for node in p.nodes}
    operators = []
    for node in graph.nodes:
        if node.name in patterns:
            pattern = patterns[node.name]
            tally.absorbed.update(n.op_type for n in pattern.nodes)
            operators.append(_operator(pattern.fields, node, graph.file))
        elif node.name not in inside:
            operators += _convert(node, graph, tally)
    return operators, tally


def _convert(node: Node, graph: Graph, tally: Tally) -> list:
    """A node's operators; none for a zero-cost or unsupported node (counted)."""
    where = f"node {node.name} ({node.op_type})"
    if node.domain not in DEFAULT_DOMAINS:
        tally.leave_out(f"{node.domain}.{node.op_type}", where)
        return []
    if node.op_type in SHAPE_ONLY:
        tally.shape_only[node.op_type] += 1
        return []
    if node.op_type in MOVES_DATA:
        tally.moves_data[node.op_type] += 1
        return []
    if node.op_type not in CONVERTERS:
        tally.leave_out(node.op_type, where)
        return []
    try:
        fields = CONVERTERS[node.op_type](node, graph, tally)
    except Unsupported as exc:
        tally.leave_out(node.op_type, where, exc.reason)
        return []
    except ShapeUnknown as exc:
        if not tally.unsupported:
            raise AccsimError(f"the shape of tensor {exc} is unknown after shape inference "
                              "(an input too small for the kernels, or sizes computed at "
                              "run time: give them with --input-shape)", file=graph.file,
                              field=where) from None
        # Downstream of an op that inference does not know: counted, like that op.
        tally.leave_out(node.op_type, where, "shape unknown")
        return []
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise AccsimError(f"cannot read this {node.op_type} node's attributes or shapes "
                          f"({type(exc).__name__}: {str(exc)[:200]})", file=graph.file,
                          field=where) from None
    return [_operator(f, node, graph.file) for f in fields]


def _operator(fields: dict, node: Node, file: str):
    """One operator, validated here so that a shape accsim refuses names its node."""
    try:
        return OPERATOR.validate_python({"name": node.name, **fields})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise AccsimError(f"cannot be an accsim {fields['kind']}: "
                          f"{error['msg'].removeprefix('Value error, ')}", file=file,
                          field=f"node {node.name} ({node.op_type})") from None
