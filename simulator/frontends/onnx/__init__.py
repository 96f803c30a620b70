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

from simulator.errors import AccsimError
from simulator.frontends.imported import Imported
from simulator.inputs.workload import Workload
from simulator.output.wording import counted

HELP = "an ONNX model (.onnx): shapes from onnx's shape inference; weights not needed"
MISSING = "the onnx importer needs the onnx package: install with pip install 'accsim[onnx]'"
# The largest dimension an ONNX shape holds (an int64): a larger one is refused here,
# not met as a traceback where it is written into the model.
MAX_DIM = 2**63 - 1


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`name=1x3x224x224` as (name, shape); argparse reports a bad one."""
    match = re.fullmatch(r"(.+)=([0-9]+(?:x[0-9]+)*)", text)
    if not match or any(not 1 <= int(d) <= MAX_DIM for d in match.group(2).split("x")):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=DxDx... with positive "
                                         "dimensions of at most 2**63-1 (e.g. "
                                         "input=1x3x224x224)")
    return match.group(1), tuple(int(d) for d in match.group(2).split("x"))


def positive(text: str) -> int:
    if not re.fullmatch("[0-9]+", text) or not 1 <= int(text) <= MAX_DIM:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer of at "
                                         "most 2**63-1")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options only `accsim import onnx` takes (its --strict and -o are shared:
    simulator.options.catalog)."""
    parser.add_argument("--batch", type=positive, metavar="B",
                        help="set the first dimension of every input to B")
    parser.add_argument("--input-shape", type=input_shape, action="append", default=[],
                        metavar="NAME=DxD...", help="set one input's shape (repeatable), "
                        "e.g. input=1x3x224x224; wins over --batch for that input")


def import_onnx(path: str, *, batch: int | None = None,
                input_shapes: dict[str, tuple[int, ...]] | None = None,
                strict: bool = False) -> Imported:
    """The workload of an ONNX file, with notes of what did not become operators."""
    try:
        from simulator.frontends.onnx.convert import convert_graph
        from simulator.frontends.onnx.graph import read_graph
    except ImportError as exc:
        if exc.name not in ("onnx", "google", "google.protobuf"):
            raise
        raise AccsimError(MISSING, file=path) from None
    graph = read_graph(path, batch=batch, input_shapes=input_shapes)
    operators, tally = convert_graph(graph)
    if strict:
        tally.refuse_unsupported(graph.file)
    if not operators:
        raise AccsimError("no node of the graph is a supported operator ("
                          + "; ".join(tally.notes()) + ")", file=graph.file)
    description = (f"ONNX graph {graph.name!r} (opset {graph.opset}, {len(graph.nodes)} "
                   f"nodes) imported as {counted(len(operators), 'operator')}.")
    workload = Workload(name=Path(path).stem, description=description,
                        operators=operators)
    return Imported(workload, tally.notes())
