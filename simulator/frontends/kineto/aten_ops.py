"""aten operators as accsim operators: one table from operator name to converter.

A converter reads an event's recorded input shapes (`Input Dims`, positional as in
the aten schema) and, where it needs them, its scalar arguments (`Concrete Inputs`),
and returns operator fields without a name. Vector ops without an accsim kind of their
own are costed as the nearest one (ELEMENTWISE, counted in the notes).
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.frontends.kineto.trace import Event
from simulator.frontends.shapes import (Contradiction, Window, broadcast, matmul_gemm,
                                        numel, out_size)
from simulator.frontends.tally import Tally, Unsupported
from simulator.inputs.loader import excerpt

# aten op -> accsim elementwise op costing it (as in the ONNX importer's table).
ELEMENTWISE = {
    "add": "add", "sub": "add", "rsub": "add",
    "mul": "mul", "div": "mul", "pow": "mul", "sqrt": "mul", "rsqrt": "mul",
    "reciprocal": "mul", "neg": "mul", "batch_norm": "mul", "native_batch_norm": "mul",
    "relu": "relu", "leaky_relu": "relu", "clamp": "relu", "where": "relu",
    "maximum": "relu", "minimum": "relu", "abs": "relu",
    "gelu": "gelu", "tanh": "gelu", "exp": "gelu", "log": "gelu", "erf": "gelu",
    "sin": "gelu", "cos": "gelu",
    "silu": "silu", "sigmoid": "silu", "hardswish": "silu", "hardsigmoid": "silu",
    "mish": "silu",
}

# Ops that cost nothing here: views and tensor bookkeeping, and copies (no copy kind).
SHAPE_ONLY = frozenset({
    "view", "reshape", "_reshape_alias", "_unsafe_view", "t", "transpose", "permute",
    "expand", "expand_as", "squeeze", "unsqueeze", "flatten", "unflatten", "slice",
    "select", "split", "split_with_sizes", "chunk", "narrow", "unbind", "as_strided",
    "alias", "detach", "detach_", "empty", "empty_like", "empty_strided", "zeros",
    "zeros_like", "ones", "ones_like", "full", "arange", "resolve_conj", "resolve_neg",
    "lift_fresh", "item", "_local_scalar_dense", "dropout", "result_type", "size",
    "stride", "is_nonzero", "set_", "resize_", "fill_", "zero_", "new_empty",
    "new_zeros", "scalar_tensor", "record_stream", "requires_grad_",
})
MOVES_DATA = frozenset({"copy_", "to", "_to_copy", "contiguous", "clone", "cat",
                        "stack", "index_select", "embedding", "gather", "index",
                        "repeat", "pad", "constant_pad_nd"})

Converter = Callable[[Event, Tally], list[dict]]


def _gemm(fields: dict) -> list[dict]:
    return [{"kind": "gemm", **fields}]


def mm(event: Event, tally: Tally) -> list[dict]:
    """mm(self, mat2), matmul(self, other), bmm(self, mat2)."""
    a, b = event.dims[0], event.dims[1]
    return _gemm(matmul_gemm(a, b))


def addmm(event: Event, tally: Tally) -> list[dict]:
    """addmm(bias, mat1, mat2, ...), baddbmm(bias, batch1, batch2, ...)."""
    return _gemm(matmul_gemm(event.dims[1], event.dims[2]))


def linear(event: Event, tally: Tally) -> list[dict]:
    """linear(input [..., K], weight [N, K], bias)."""
    x, weight = event.dims[0], event.dims[1]
    if weight[-1] != x[-1]:
        raise Contradiction(f"input {excerpt(x)} and weight {excerpt(weight)} disagree "
                            "on K")
    return _gemm({"m": numel(x[:-1]), "n": weight[0], "k": x[-1]})


# Positions of (stride, padding, dilation, transposed, groups) in each conv schema.
CONV_ARGUMENTS = {
    "conv1d": (3, 4, 5, None, 6), "conv2d": (3, 4, 5, None, 6),
    "convolution": (3, 4, 5, 6, 8), "_convolution": (3, 4, 5, 6, 8),
}


def _pair(value, dims: int) -> list[int]:
    return list(value) * (dims // len(value)) if isinstance(value, (list, tuple)) \
        else [value] * dims


def conv(event: Event, tally: Tally) -> list[dict]:
    """conv1d/conv2d(input, weight, bias, stride, padding, dilation, groups) and
    convolution (also transposed, output_padding). Scalars missing from the trace
    (PyTorch < 2.1) are taken as stride 1, padding 0, dilation 1 and counted."""
    x, weight = event.dims[0], event.dims[1]
    if len(x) not in (3, 4):
        raise Unsupported(f"{len(x) - 2}-D")
    at = CONV_ARGUMENTS[event.op]
    if at[3] is not None and event.concrete(at[3], False):
        raise Unsupported("transposed")
    spatial = len(x) - 2
    stride = _pair(event.concrete(at[0], 1), spatial)
    dilation = _pair(event.concrete(at[2], 1), spatial)
    padding = event.concrete(at[1], 0)
    if event.concrete(at[0]) is None or event.concrete(at[1]) is None:
        tally.assumed["conv stride 1, padding 0 (no Concrete Inputs recorded)"] += 1
    groups = event.concrete(at[4], x[1] // weight[1])
    kernel = list(weight[2:])
    sizes = list(x[2:])
    if padding == "valid":
        pads = [0] * 2 * spatial
    elif padding == "same":
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        pads = [t // 2 for t in totals] + [t - t // 2 for t in totals]
    else:
        pads = _pair(padding, spatial) * 2
    out = [out_size(n, p, q, k, s, d) for n, p, q, k, s, d in
           zip(sizes, pads[:spatial], pads[spatial:], kernel, stride, dilation)]
    if spatial == 1:
        window = Window(batch=x[0], h=1, w=sizes[0], kernel=(1, kernel[0]),
                        strides=(stride[0],) * 2, pads=(0, pads[0], 0, pads[1]),
                        dilations=(dilation[0],) * 2, out=(1, out[0]))
    else:
        window = Window(batch=x[0], h=sizes[0], w=sizes[1], kernel=tuple(kernel),
                        strides=tuple(stride), pads=(pads[0], pads[1], pads[2], pads[3]),
                        dilations=tuple(dilation), out=tuple(out))
    if not window.exact:
        tally.fitted.append(event.where)
    return [{"kind": "conv2d", **window.fields(), "cin": x[1], "cout": weight[0],
             "groups": groups}]


# Per attention op: (layout of Q/K/V, position of is_causal).
ATTENTION_ARGUMENTS = {
    "scaled_dot_product_attention": ("bhsd", 5),
    "_scaled_dot_product_flash_attention": ("bhsd", 4),
    "_scaled_dot_product_efficient_attention": ("bhsd", 6),
    "_scaled_dot_product_cudnn_attention": ("bhsd", 6),
    "_flash_attention_forward": ("bshd", 8),
}


def attention(event: Event, tally: Tally) -> list[dict]:
    """softmax(Q K^T) V from Q, K, V shapes: [batch..., heads, seq, head_dim] for the
    scaled_dot_product_* ops, [batch, seq, heads, head_dim] for flash's kernel."""
    layout, causal_at = ATTENTION_ARGUMENTS[event.op]
    q, k, v = (list(d) for d in event.dims[:3])
    if layout == "bshd":
        q, k, v = ([t[0], t[2], t[1], t[3]] for t in (q, k, v))
    if len(q) < 3 or v[-1] != q[-1]:
        raise Unsupported("value head size differs from the query's")
    causal = bool(event.concrete(causal_at, False))
    return [{"kind": "attention", "batch": numel(q[:-3]), "heads": q[-3],
             "kv_heads": k[-3], "q_len": q[-2], "kv_len": k[-2], "head_dim": q[-1],
             "causal": causal}]


def elementwise(event: Event, tally: Tally) -> list[dict]:
    name = event.op.rstrip("_")
    op = ELEMENTWISE[name]
    shape: tuple[int, ...] = ()
    for dims in event.dims:
        if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
            try:
                shape = broadcast(shape, dims)
            except ValueError:
                raise Unsupported("inputs do not broadcast: an output or extra "
                                  "tensor among them") from None
            if name in ("batch_norm", "native_batch_norm"):
                break  # the input; the rest are per-channel statistics
    if op != name:
        tally.proxies[f"{name} as {op}"] += 1
    return [{"kind": "elementwise", "elements": numel(shape), "op": op}]


def softmax(event: Event, tally: Tally) -> list[dict]:
    """softmax/_softmax/log_softmax(self, dim, ...)."""
    x = event.dims[0]
    cols = x[event.concrete(1, -1) % len(x)]
    return [{"kind": "softmax", "rows": numel(x) // cols, "cols": cols}]


def layer_norm(event: Event, tally: Tally) -> list[dict]:
    """layer_norm/native_layer_norm/rms_norm(input, normalized_shape, ...): rows over
    the trailing normalized_shape (recorded, or the weight's shape, or the last dim)."""
    x = event.dims[0]
    shape = event.concrete(1)
    if not isinstance(shape, (list, tuple)):
        weight = event.dims[2] if len(event.dims) > 2 else []
        shape = weight if weight else x[-1:]
    cols = numel(shape)
    return [{"kind": "norm", "rows": numel(x) // cols, "cols": cols}]


def group_norm(event: Event, tally: Tally) -> list[dict]:
    """group_norm(input, num_groups, ...)."""
    x = event.dims[0]
    rows = x[0] * event.concrete(1, 1)
    return [{"kind": "norm", "rows": rows, "cols": numel(x) // rows}]


def reduction(event: Event, tally: Tally) -> list[dict]:
    """mean/sum/amax/amin(self, dim, keepdim): over the recorded dims, else all."""
    x = event.dims[0]
    axes = event.concrete(1)
    axes = [axes] if isinstance(axes, int) else axes
    cols = numel([x[a % len(x)] for a in axes]) if axes else numel(x)
    return [{"kind": "reduction", "rows": numel(x) // cols, "cols": cols}]


# Positions of (kernel_size, stride, padding, ceil_mode) per pooling schema.
POOL_ARGUMENTS = {"max_pool2d": (1, 2, 3, 5), "max_pool2d_with_indices": (1, 2, 3, 5),
                  "avg_pool2d": (1, 2, 3, 4)}


def pool(event: Event, tally: Tally) -> list[dict]:
    x = event.dims[0]
    if len(x) != 4:
        raise Unsupported(f"{len(x) - 2}-D")
    name = event.op
    if name.startswith("adaptive"):
        out = _pair(event.concrete(1, 1), 2)
        if any(size % o for size, o in zip(x[2:], out)):
            raise Unsupported("adaptive windows of unequal sizes")
        kernel = stride = [size // o for size, o in zip(x[2:], out)]
        pads, ceil = [0] * 4, False
    else:
        at = POOL_ARGUMENTS[name]
        kernel = _pair(event.concrete(at[0], 1), 2)
        stride = _pair(event.concrete(at[1]) or kernel, 2)
        pads = _pair(event.concrete(at[2], 0), 2) * 2
        ceil = bool(event.concrete(at[3], False))
    out = [out_size(n, p, p, k, s, ceil=ceil) for n, p, k, s in
           zip(x[2:], pads, kernel, stride)]
    window = Window(batch=x[0], h=x[2], w=x[3], kernel=tuple(kernel), strides=tuple(stride),
                    pads=tuple(pads), dilations=(1, 1), out=tuple(out))
    if not window.exact:
        tally.fitted.append(event.where)
    fields = window.fields()
    del fields["dilation"]
    return [{"kind": "pool", **fields, "channels": x[1]}]


CONVERTERS: dict[str, Converter] = {
    "mm": mm, "matmul": mm, "bmm": mm, "addmm": addmm, "baddbmm": addmm,
    "linear": linear,
    **{op: conv for op in CONV_ARGUMENTS},
    **{op: attention for op in ATTENTION_ARGUMENTS},
    "softmax": softmax, "_softmax": softmax, "log_softmax": softmax,
    "_log_softmax": softmax,
    "layer_norm": layer_norm, "native_layer_norm": layer_norm, "rms_norm": layer_norm,
    "group_norm": group_norm,
    "mean": reduction, "sum": reduction, "amax": reduction, "amin": reduction,
    **{op: pool for op in POOL_ARGUMENTS},
    "adaptive_avg_pool2d": pool, "adaptive_max_pool2d": pool,
    **{op: elementwise for op in ELEMENTWISE},
    **{f"{op}_": elementwise for op in ELEMENTWISE},
}

