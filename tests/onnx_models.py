"""Small ONNX models built in code with onnx.helper for the importer's tests, and an
independent MAC count read off a graph's inferred shapes.

Weights are stored three ways, since the importer must not need them: real data,
graph inputs with shapes only, or initializers whose data lives in an external file
that does not exist.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference


class Builder:
    """A graph under construction: inputs, weights, nodes, one output."""

    def __init__(self, name: str, *, weights: str = "external", opset: int = 17):
        self.name, self.weights, self.opset = name, weights, opset
        self.nodes, self.inputs, self.initializers = [], [], []
        self.count = 0

    def tensor(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def input(self, name: str, shape: list) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def weight(self, shape: list[int]) -> str:
        name = self.tensor("w")
        if self.weights == "data":
            self.initializers.append(numpy_helper.from_array(
                np.zeros(shape, dtype=np.float32), name))
        elif self.weights == "inputs":
            self.input(name, shape)
        else:
            tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)
            tensor.data_location = TensorProto.EXTERNAL
            entry = tensor.external_data.add()
            entry.key, entry.value = "location", "missing_weights.bin"
            self.initializers.append(tensor)
        return name

    def constant(self, values: list[int]) -> str:
        name = self.tensor("c")
        self.initializers.append(numpy_helper.from_array(
            np.array(values, dtype=np.int64), name))
        return name

    def op(self, op_type: str, inputs: list[str], *, outputs: int = 1, name=None,
           **attrs) -> str:
        outs = [self.tensor(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name or outs[0],
                                           **attrs))
        return outs[0]

    def model(self, output: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs,
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
            self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("",
                                                                           self.opset)])


def conv(b: Builder, x: str, cin: int, cout: int, k: int, *, stride: int = 1,
         pad: int | None = None, groups: int = 1, dilation: int = 1, bn: bool = False,
         relu: bool = False, pads: list[int] | None = None) -> str:
    w = b.weight([cout, cin // groups, k, k])
    p = k // 2 if pad is None else pad
    y = b.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
             pads=pads or [p, p, p, p], group=groups, dilations=[dilation, dilation])
    if bn:
        y = b.op("BatchNormalization", [y] + [b.weight([cout]) for _ in range(4)])
    return b.op("Relu", [y]) if relu else y


def resnet18(*, batch=1, size=224, weights="external") -> onnx.ModelProto:
    """ResNet-18 (He et al. 2016, torchvision's layout): 7x7/2 stem, 3x3/2 max pool,
    four stages of two basic blocks, global average pool, 1000-way Gemm."""
    b = Builder("resnet18", weights=weights)
    x = b.input("image", [batch, 3, size, size])
    y = conv(b, x, 3, 64, 7, stride=2, bn=True, relu=True)
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and not block else 1
            h = conv(b, y, cin, cout, 3, stride=stride, bn=True, relu=True)
            h = conv(b, h, cout, cout, 3, bn=True)
            skip = conv(b, y, cin, cout, 1, stride=stride, bn=True) \
                if stride != 1 or cin != cout else y
            y = b.op("Relu", [b.op("Add", [h, skip])])
            cin = cout
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    y = b.op("Gemm", [y, b.weight([1000, 512]), b.weight([1000])], transB=1)
    return b.model(y)


def conv_net(*, batch="N", weights="inputs") -> onnx.ModelProto:
    """Convolutions with groups, strides, dilation and asymmetric pads, a 1-D conv,
    pools with ceil_mode, and vector ops; the batch dimension is symbolic."""
    b = Builder("conv_net", weights=weights, opset=17)
    x = b.input("x", [batch, 8, 33, 31])
    y = conv(b, x, 8, 16, 3, stride=2, relu=True)                   # symmetric
    y = conv(b, y, 16, 16, 3, groups=16, pads=[0, 1, 2, 1])         # depthwise, asym
    y = conv(b, y, 16, 32, 3, groups=4, dilation=2, pad=2)          # grouped, dilated
    w = b.weight([32, 32, 1, 7])
    y = b.op("Conv", [y, w], kernel_shape=[1, 7], pads=[0, 3, 0, 3])  # per-axis pads
    w = b.weight([24, 32, 3, 3])
    y = b.op("Conv", [y, w], kernel_shape=[3, 3], strides=[2, 1])    # unequal strides
    y = b.op("Sigmoid", [y])
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    y = b.op("AveragePool", [y], kernel_shape=[2, 2], auto_pad="SAME_UPPER")
    y = b.op("Reshape", [y, b.constant([0, 24, -1])])                 # [N, 24, L]
    w = b.weight([12, 24, 3])
    y = b.op("Conv", [y, w], kernel_shape=[3], strides=[2], pads=[1, 0])  # 1-D
    y = b.op("ReduceMean", [y], axes=[2], keepdims=0)
    y = b.op("Softmax", [y], axis=-1)
    return b.model(y)


def mlp(*, batch=4, widths=(64, 128, 128, 10), weights="data") -> onnx.ModelProto:
    """Gemm and MatMul layers with activations, real weights."""
    b = Builder("mlp", weights=weights)
    y = b.input("features", [batch, widths[0]])
    for i, (k, n) in enumerate(zip(widths, widths[1:])):
        if i % 2:
            y = b.op("Add", [b.op("MatMul", [y, b.weight([k, n])]), b.weight([n])])
        else:
            y = b.op("Gemm", [y, b.weight([k, n]), b.weight([n])])
        y = b.op("Relu" if i % 2 else "Tanh", [y])
    return b.model(b.op("Softmax", [y], axis=1))


def transformer_block(*, layers=1, batch=2, seq=16, hidden=64, heads=4, ffn=256,
                      weights="external") -> onnx.ModelProto:
    """`layers` pre-norm encoder blocks as PyTorch exports them: LayerNormalization,
    Q/K/V MatMuls, reshapes and transposes into heads, MatMul-Div-Add-Softmax-MatMul,
    output projection, residual, LayerNormalization, MatMul-Gelu-MatMul, residual."""
    b = Builder("transformer_block", weights=weights, opset=20)
    x = b.input("hidden", [batch, seq, hidden])
    mask = b.input("mask", [batch, 1, 1, seq])
    dh = hidden // heads

    def split_heads(t: str, perm: list[int]) -> str:
        t = b.op("Reshape", [t, b.constant([batch, seq, heads, dh])])
        return b.op("Transpose", [t], perm=perm)

    for layer in range(layers):
        h = b.op("LayerNormalization", [x, b.weight([hidden]), b.weight([hidden])],
                 axis=-1)
        q = split_heads(b.op("MatMul", [h, b.weight([hidden, hidden])]), [0, 2, 1, 3])
        k = split_heads(b.op("MatMul", [h, b.weight([hidden, hidden])]), [0, 2, 3, 1])
        v = split_heads(b.op("MatMul", [h, b.weight([hidden, hidden])]), [0, 2, 1, 3])
        s = b.op("MatMul", [q, k], name="scores" if layers == 1 else f"scores_{layer}")
        s = b.op("Div", [s, b.weight([])])
        s = b.op("Add", [s, mask])
        p = b.op("Softmax", [s], axis=-1)
        o = b.op("MatMul", [p, v])
        o = b.op("Reshape", [b.op("Transpose", [o], perm=[0, 2, 1, 3]),
                             b.constant([batch, seq, hidden])])
        x = b.op("Add", [x, b.op("MatMul", [o, b.weight([hidden, hidden])])])
        h = b.op("LayerNormalization", [x, b.weight([hidden]), b.weight([hidden])],
                 axis=-1)
        h = b.op("Gelu", [b.op("MatMul", [h, b.weight([hidden, ffn])])])
        x = b.op("Add", [x, b.op("MatMul", [h, b.weight([ffn, hidden])])])
    return b.model(x)


def conv_stack(*, layers=100, batch=1, size=56, channels=64) -> onnx.ModelProto:
    """`layers` 3x3 Conv-BatchNormalization-Relu layers at one resolution."""
    b = Builder("conv_stack")
    y = b.input("image", [batch, channels, size, size])
    for _ in range(layers):
        y = conv(b, y, channels, channels, 3, bn=True, relu=True)
    return b.model(y)


def attention_op(*, batch=2, seq=32, heads=8, kv_heads=2, dh=16, causal=True):
    """The Attention op of opset 23 on 4-D Q, K, V (grouped-query)."""
    b = Builder("attention_op", weights="inputs", opset=23)
    q = b.input("q", [batch, heads, seq, dh])
    k = b.input("k", [batch, kv_heads, seq, dh])
    v = b.input("v", [batch, kv_heads, seq, dh])
    return b.model(b.op("Attention", [q, k, v], is_causal=int(causal)))


def graph_macs(model: onnx.ModelProto) -> int:
    """MACs of Conv, Gemm and MatMul nodes from onnx's inferred output shapes and the
    reduced dimension (Conv: Cin/groups x kernel; Gemm, MatMul: K), independently of
    accsim's importer."""
    inferred = shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {t.name: list(t.dims) for t in inferred.graph.initializer}
    for info in (*inferred.graph.input, *inferred.graph.value_info,
                 *inferred.graph.output):
        shapes[info.name] = [d.dim_value for d in info.type.tensor_type.shape.dim]
    total = 0
    for node in inferred.graph.node:
        out = math.prod(shapes[node.output[0]])
        if node.op_type == "Conv":
            w = shapes[node.input[1]]
            total += out * math.prod(w[1:])
        elif node.op_type == "MatMul":
            total += out * shapes[node.input[0]][-1]
        elif node.op_type == "Gemm":
            a = shapes[node.input[0]]
            trans = any(attr.name == "transA" and attr.i for attr in node.attribute)
            total += out * (a[0] if trans else a[1])
    return total


if __name__ == "__main__":
    # The shipped example workloads/examples/resnet18.onnx (SOURCE.md beside it):
    # `python tests/onnx_models.py workloads/examples/resnet18.onnx`. Weights are graph
    # inputs with shapes only, so the file is the graph alone (a few kB).
    onnx.save(resnet18(weights="inputs"), sys.argv[1])
