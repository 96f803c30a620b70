"""`accsim import onnx MODEL.onnx`: an ONNX graph as an accsim workload, one operator
per costed node in graph order (DESIGN.md section 13).

Shapes come from onnx's shape inference after --input-shape and --batch are applied;
Conv, Gemm, MatMul, attention (the Attention op or a MatMul-Softmax-MatMul chain) and
vector ops become operators (simulator.frontends.onnx.ops), shape-only and copying ops
cost nothing, and every node that became nothing is counted in the notes. The onnx
package is an optional extra, imported only when a model is read.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from simulator.errors import AccsimError
from simulator.frontends.command import Imported
from simulator.frontends.tally import Tally, Unsupported
from simulator.workload import Operator, Workload

HELP = "an ONNX model (.onnx): shapes from onnx's shape inference; weights not needed"
MISSING = "the onnx importer needs the onnx package: install with pip install 'accsim[onnx]'"
OPERATOR = TypeAdapter(Operator)


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`name=1x3x224x224` as (name, shape); argparse reports a bad one."""
    match = re.fullmatch(r"(.+)=(\d+(?:x\d+)*)", text)
    if not match or any(int(d) < 1 for d in match.group(2).split("x")):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=DxDx... with positive "
                                         "dimensions (e.g. input=1x3x224x224)")
    return match.group(1), tuple(int(d) for d in match.group(2).split("x"))


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=positive, metavar="B",
                        help="set the first dimension of every input to B")
    parser.add_argument("--input-shape", type=input_shape, action="append", default=[],
                        metavar="NAME=DxD...", help="set one input's shape (repeatable), "
                        "e.g. input=1x3x224x224; wins over --batch for that input")
    parser.add_argument("--strict", action="store_true",
                        help="fail on any op that is not supported instead of listing it")


def load(args: argparse.Namespace) -> Imported:
    return import_onnx(args.file, batch=args.batch, input_shapes=dict(args.input_shape),
                       strict=args.strict)


def import_onnx(path: str, *, batch: int | None = None,
                input_shapes: dict[str, tuple[int, ...]] | None = None,
                strict: bool = False) -> Imported:
    """The workload of an ONNX file, with notes of what did not become operators."""
    try:
        from simulator.frontends.onnx.attention import find_attention
        from simulator.frontends.onnx.graph import DEFAULT_DOMAINS, ShapeUnknown, read_graph
        from simulator.frontends.onnx.ops import CONVERTERS, MOVES_DATA, SHAPE_ONLY
    except ImportError as exc:
        if exc.name not in ("onnx", "google", "google.protobuf"):
            raise
        raise AccsimError(MISSING, file=path) from None
    graph = read_graph(path, batch=batch, input_shapes=input_shapes)
    tally = Tally()
    patterns = {p.nodes[0].name: p for p in find_attention(graph)}
    inside = {node.name for p in patterns.values() for node in p.nodes}
    operators = []
    for node in graph.nodes:
        where = f"node {node.name} ({node.op_type})"
        if node.name in patterns:
            pattern = patterns[node.name]
            tally.absorbed.update(n.op_type for n in pattern.nodes)
            operators.append(_operator(pattern.fields, node.name, graph.file, where))
        elif node.name in inside:
            continue
        elif node.op_type in SHAPE_ONLY:
            tally.shape_only[node.op_type] += 1
        elif node.op_type in MOVES_DATA:
            tally.moves_data[node.op_type] += 1
        elif node.op_type in CONVERTERS and node.domain in DEFAULT_DOMAINS:
            try:
                fields = CONVERTERS[node.op_type](node, graph, tally)
            except Unsupported as exc:
                tally.leave_out(f"{node.op_type} ({exc.reason})", where)
                continue
            except ShapeUnknown as exc:
                if not tally.unsupported:
                    raise AccsimError(f"the shape of tensor {exc} is unknown after shape "
                                      "inference (an input too small for the kernels, or "
                                      "sizes computed at run time: give them with "
                                      "--input-shape)", file=graph.file,
                                      field=where) from None
                # Downstream of an op inference does not know: counted, like that op.
                tally.leave_out(f"{node.op_type} (shape unknown)", where)
                continue
            except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as exc:
                raise AccsimError(f"cannot read this {node.op_type} node's attributes or "
                                  f"shapes ({type(exc).__name__}: {exc})", file=graph.file,
                                  field=where) from None
            operators += [_operator(f, node.name, graph.file, where) for f in fields]
        else:
            op = node.op_type if node.domain in DEFAULT_DOMAINS else \
                f"{node.domain}.{node.op_type}"
            tally.leave_out(op, where)
    if strict:
        tally.refuse_unsupported(graph.file)
    if not operators:
        raise AccsimError("no node of the graph is a supported operator ("
                          + "; ".join(tally.notes()) + ")", file=graph.file)
    description = (f"ONNX graph {graph.name!r} (opset {graph.opset}, {len(graph.nodes)} "
                   f"nodes) imported as {len(operators)} operators.")
    workload = Workload(name=Path(path).stem, description=description,
                        operators=operators)
    return Imported(workload, tally.notes())


def _operator(fields: dict, name: str, file: str, where: str):
    """One operator, validated here so that a shape accsim refuses names its node."""
    try:
        return OPERATOR.validate_python({"name": name, **fields})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise AccsimError(f"cannot be an accsim {fields['kind']}: "
                          f"{error['msg'].removeprefix('Value error, ')}", file=file,
                          field=where) from None
