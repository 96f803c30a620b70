"""ONNX op types as accsim operators: one table from op type to converter, and the
tables of vector kinds and zero-cost ops it relies on.

A converter takes a node and the graph (for shapes) and returns operator fields
without a name (the node's name is added by the caller). layer_type is the op type in
lower case (convolutions: conv, conv.grouped, conv.depthwise). Vector ops without an
accsim kind of their own are costed as the kind of nearest per-element work (the
ELEMENTWISE table), and the import's notes count each such proxy.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.frontends.onnx.graph import Graph, Node
from simulator.frontends.shapes import Window, matmul_gemm, numel
from simulator.frontends.tally import Tally, Unsupported

# Op type -> accsim elementwise op costing it: add (one cheap binary op), mul, relu
# (compare/select), gelu (a transcendental: erf, tanh, exp, log, sin...), silu (a
# sigmoid).
ELEMENTWISE = {
    "Add": "add", "Sub": "add", "Sum": "add",
    "Mul": "mul", "Div": "mul", "Pow": "mul", "Sqrt": "mul", "Reciprocal": "mul",
    "Neg": "mul", "BatchNormalization": "mul",
    "Relu": "relu", "LeakyRelu": "relu", "PRelu": "relu", "Clip": "relu", "Abs": "relu",
    "Max": "relu", "Min": "relu", "Where": "relu", "Equal": "relu", "Less": "relu",
    "Greater": "relu", "LessOrEqual": "relu", "GreaterOrEqual": "relu", "Not": "relu",
    "And": "relu", "Or": "relu",
    "Gelu": "gelu", "Erf": "gelu", "Tanh": "gelu", "Exp": "gelu", "Log": "gelu",
    "Softplus": "gelu", "Sin": "gelu", "Cos": "gelu",
    "Sigmoid": "silu", "HardSigmoid": "silu", "HardSwish": "silu", "Mish": "silu",
}

# Ops that cost nothing here: those that only relabel a tensor's shape, and those that
# copy data (there is no copy kind; the notes say so).
SHAPE_ONLY = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Shape", "Size",
                        "Constant", "ConstantOfShape", "Identity", "Dropout", "Range"})
MOVES_DATA = frozenset({"Transpose", "Concat", "Split", "Slice", "Gather",
                        "GatherElements", "Expand", "Tile", "Pad", "Cast", "CastLike",
                        "DepthToSpace", "SpaceToDepth"})

Converter = Callable[[Node, Graph, Tally], list[dict]]


def _spatial(node: Node, rank: int) -> None:
    if rank not in (3, 4):
        raise Unsupported(f"{rank - 2}-D")


def _window(node: Node, graph: Graph, x: tuple[int, ...], kernel: list[int],
            dilations: list[int] | None = None) -> Window:
    """The node's window over input x (1-D lifted to 2-D with a unit H axis)."""
    dims = len(x) - 2
    strides = list(node.attrs.get("strides", [1] * dims))
    dilations = dilations or [1] * dims
    out = graph.output_shape(node)[2:]
    pads = _pads(node, x[2:], kernel, strides, dilations, out)
    if dims == 1:
        # The unit axis takes the real stride and dilation: its output is 1 either way.
        return Window(batch=x[0], h=1, w=x[2], kernel=(1, kernel[0]),
                      strides=(strides[0],) * 2, pads=(0, pads[0], 0, pads[1]),
                      dilations=(dilations[0],) * 2, out=(1, out[0]))
    return Window(batch=x[0], h=x[2], w=x[3], kernel=tuple(kernel), strides=tuple(strides),
                  pads=(pads[0], pads[1], pads[2], pads[3]), dilations=tuple(dilations),
                  out=tuple(out))


def _pads(node: Node, sizes, kernel, strides, dilations, out) -> list[int]:
    """Explicit pads (begin..., end...) of a node, auto_pad resolved as ONNX does."""
    auto = node.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        return list(node.attrs.get("pads", [0] * 2 * len(sizes)))
    if auto == "VALID":
        return [0] * 2 * len(sizes)
    begins, ends = [], []
    for size, k, s, d, o in zip(sizes, kernel, strides, dilations, out):
        total = max((o - 1) * s + d * (k - 1) + 1 - size, 0)
        small = total // 2
        begins.append(small if auto == "SAME_UPPER" else total - small)
        ends.append(total - begins[-1])
    return begins + ends


def conv(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    x, weight = graph.input_shape(node, 0), graph.input_shape(node, 1)
    _spatial(node, len(x))
    groups = node.attrs.get("group", 1)
    window = _window(node, graph, x, list(weight[2:]),
                     list(node.attrs.get("dilations", [1] * (len(x) - 2))))
    if not window.exact:
        tally.fitted.append(node.name)
    label = "conv" if groups == 1 else "conv.depthwise" if groups == x[1] else "conv.grouped"
    return [{"layer_type": label, "kind": "conv2d", **window.fields(), "cin": x[1],
             "cout": weight[0], "groups": groups}]


def gemm(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    a, b = graph.input_shape(node, 0), graph.input_shape(node, 1)
    m, k = reversed(a) if node.attrs.get("transA", 0) else a
    n = b[0] if node.attrs.get("transB", 0) else b[1]
    return [{"layer_type": "gemm", "kind": "gemm", "m": m, "n": n, "k": k}]


def matmul(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    a, b = graph.input_shape(node, 0), graph.input_shape(node, 1)
    return [{"layer_type": "matmul", "kind": "gemm", **matmul_gemm(a, b)}]


def attention(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    """The Attention op (ONNX opset 23): Q [B, Hq, Sq, D] or [B, Sq, Hq*D], K and V
    likewise with kv heads, past K/V prepended; scale and masks are not costed."""
    q, k, v = (graph.input_shape(node, i) for i in range(3))
    if len(q) == 3:
        heads, kv_heads = node.attrs["q_num_heads"], node.attrs["kv_num_heads"]
        q = (q[0], heads, q[1], q[2] // heads)
        k = (k[0], kv_heads, k[1], k[2] // kv_heads)
        v = (v[0], kv_heads, v[1], v[2] // kv_heads)
    if v[-1] != q[-1]:
        raise Unsupported("value head size differs from the query's")
    kv_len = k[2] + (graph.input_shape(node, 4)[2] if graph.has_input(node, 4) else 0)
    return [{"layer_type": "attention", "kind": "attention", "batch": q[0],
             "heads": q[1], "kv_heads": k[1], "q_len": q[2], "kv_len": kv_len,
             "head_dim": q[3], "causal": bool(node.attrs.get("is_causal", 0))}]


def elementwise(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    op = ELEMENTWISE[node.op_type]
    if op != node.op_type.lower():
        tally.proxies[f"{node.op_type} as {op}"] += 1
    return [{"layer_type": node.op_type.lower(), "kind": "elementwise",
             "elements": numel(graph.output_shape(node)), "op": op}]


def _rows_cols(shape: tuple[int, ...], axis: int) -> tuple[int, int]:
    """Rows and columns of a tensor split before `axis` (negative counts from the end)."""
    axis %= len(shape)
    return numel(shape[:axis]), numel(shape[axis:])


def softmax(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    x = graph.input_shape(node, 0)
    if graph.opset < 13:  # axis flattens [axis:] into one row
        rows, cols = _rows_cols(x, node.attrs.get("axis", 1))
    else:
        cols = x[node.attrs.get("axis", -1) % len(x)]
        rows = numel(x) // cols
    return [{"layer_type": node.op_type.lower(), "kind": "softmax", "rows": rows,
             "cols": cols}]


def norm(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    """Normalisation over the trailing axes from `axis` (LayerNormalization,
    RMSNormalization), over each channel's (InstanceNormalization) or group's
    (GroupNormalization) elements, or along one axis (LpNormalization)."""
    x = graph.input_shape(node, 0)
    if node.op_type == "InstanceNormalization":
        rows, cols = _rows_cols(x, 2)
    elif node.op_type == "GroupNormalization":
        rows = x[0] * node.attrs["num_groups"]
        cols = numel(x) // rows
    elif node.op_type == "LpNormalization":
        cols = x[node.attrs.get("axis", -1) % len(x)]
        rows = numel(x) // cols
    else:
        rows, cols = _rows_cols(x, node.attrs.get("axis", -1))
    return [{"layer_type": node.op_type.lower(), "kind": "norm", "rows": rows,
             "cols": cols}]


def reduction(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    """Any reduction: one output element per row, the rest of the input its columns
    (so the axes, attribute or input, never need reading)."""
    rows = numel(graph.output_shape(node))
    return [{"layer_type": node.op_type.lower(), "kind": "reduction", "rows": rows,
             "cols": numel(graph.input_shape(node, 0)) // rows}]


def pool(node: Node, graph: Graph, tally: Tally) -> list[dict]:
    x = graph.input_shape(node, 0)
    _spatial(node, len(x))
    if node.op_type.startswith("Global"):
        h = 1 if len(x) == 3 else x[2]
        window = Window(batch=x[0], h=h, w=x[-1], kernel=(h, x[-1]), strides=(1, 1),
                        pads=(0, 0, 0, 0), dilations=(1, 1), out=(1, 1))
    else:
        window = _window(node, graph, x, list(node.attrs["kernel_shape"]))
    if not window.exact:
        tally.fitted.append(node.name)
    fields = window.fields()
    del fields["dilation"]  # pool windows are dense: kh x kw taps
    return [{"layer_type": node.op_type.lower(), "kind": "pool", **fields,
             "channels": x[1]}]


CONVERTERS: dict[str, Converter] = {
    "Conv": conv, "Gemm": gemm, "MatMul": matmul, "Attention": attention,
    "Softmax": softmax, "LogSoftmax": softmax,
    "LayerNormalization": norm, "RMSNormalization": norm,
    "InstanceNormalization": norm, "GroupNormalization": norm, "LpNormalization": norm,
    **{op: reduction for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                                "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                                "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin")},
    **{op: pool for op in ("MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
                           "GlobalMaxPool", "GlobalLpPool")},
    **{op: elementwise for op in ELEMENTWISE},
}
