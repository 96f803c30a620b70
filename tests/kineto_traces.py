"""Small PyTorch profiler (Kineto) traces written by the tests, in the shape Kineto
writes them: cpu_op events with Input Dims and Concrete Inputs, cudaLaunchKernel
runtime events inside them, and kernels on a device stream sharing the correlation."""

from __future__ import annotations

import contextlib
import json
import sys


class TraceWriter:
    """Operator events on one CPU thread, nested by time, with optional kernels."""

    def __init__(self, *, tid: int = 11, kernels: bool = True, shapes: bool = True):
        self.events: list[dict] = []
        self.now = 1000.0
        self.tid, self.kernels, self.shapes = tid, kernels, shapes
        self.correlation = 0

    @contextlib.contextmanager
    def op(self, name: str, dims: list, concrete: list | None = None, *,
           kernel_us: float | None = None):
        """An operator event holding what runs inside the `with` block; kernel_us
        adds a launch and a kernel of that duration."""
        start = self.now
        self.now += 1.0
        args = {"External id": len(self.events)}
        if self.shapes:
            args["Input Dims"] = dims
            if concrete is not None:
                args["Concrete Inputs"] = concrete
        event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 7, "tid": self.tid,
                 "ts": start, "args": args}
        self.events.append(event)
        yield
        if kernel_us is not None and self.kernels:
            self.correlation += 1
            self.events.append({"ph": "X", "cat": "cuda_runtime",
                                "name": "cudaLaunchKernel", "pid": 7, "tid": self.tid,
                                "ts": self.now, "dur": 2.0,
                                "args": {"correlation": self.correlation}})
            self.events.append({"ph": "X", "cat": "kernel", "name": "kernel", "pid": 0,
                                "tid": 7, "ts": self.now + 5.0, "dur": kernel_us,
                                "args": {"correlation": self.correlation}})
            self.now += 3.0
        self.now += 1.0
        event["dur"] = self.now - start

    def leaf(self, name: str, dims: list, concrete: list | None = None, *,
             kernel_us: float | None = None) -> None:
        with self.op(name, dims, concrete, kernel_us=kernel_us):
            pass

    def trace(self) -> dict:
        return {"schemaVersion": 1, "traceEvents": self.events,
                "displayTimeUnit": "ms"}


def transformer_trace(*, layers=2, batch=2, seq=64, hidden=256, heads=4, ffn=1024,
                      **writer) -> tuple[dict, int]:
    """Forward passes of a small decoder as nn.Module calls record them, and its MACs
    counted from the shapes used (linear: tokens x in x out; attention: 2 x the causal
    pairs x head_dim per head)."""
    t = TraceWriter(**writer)
    tokens, dh = batch * seq, hidden // heads
    macs = 0

    def linear(k: int, n: int, us: float) -> None:
        nonlocal macs
        with t.op("aten::linear", [[batch, seq, k], [n, k], [n]]):
            t.leaf("aten::t", [[n, k]])
            t.leaf("aten::addmm", [[n], [tokens, k], [k, n], [], []], ["", "", "", "1", "1"],
                   kernel_us=us)
        macs += tokens * k * n

    t.leaf("aten::embedding", [[1000, hidden], [batch, seq]], kernel_us=3.0)
    for _ in range(layers):
        with t.op("aten::layer_norm", [[batch, seq, hidden], [], [hidden], [hidden], [],
                                       []], ["", f"[{hidden}]", "", "", "1e-05", "True"]):
            t.leaf("aten::native_layer_norm", [[batch, seq, hidden], [], [hidden],
                                               [hidden], []], kernel_us=4.0)
        linear(hidden, 3 * hidden, 20.0)
        for _ in range(3):
            t.leaf("aten::view", [[batch, seq, hidden], []])
        qkv = [batch, heads, seq, dh]
        with t.op("aten::scaled_dot_product_attention", [qkv, qkv, qkv, [], [], [], [],
                                                         []],
                  ["", "", "", "", "0.0", "True", "", "False"]):
            t.leaf("aten::_scaled_dot_product_flash_attention", [qkv, qkv, qkv, [], [],
                                                                 [], []],
                   ["", "", "", "0.0", "True", "False", ""], kernel_us=30.0)
        macs += 2 * batch * heads * (seq * (seq + 1) // 2) * dh
        linear(hidden, hidden, 8.0)
        t.leaf("aten::add", [[batch, seq, hidden], [batch, seq, hidden], []],
               kernel_us=2.0)
        linear(hidden, ffn, 25.0)
        t.leaf("aten::gelu", [[batch, seq, ffn]], ["", "none"], kernel_us=5.0)
        linear(ffn, hidden, 25.0)
        t.leaf("aten::add_", [[batch, seq, hidden], [batch, seq, hidden], []],
               kernel_us=2.0)
    t.leaf("aten::cumsum", [[batch, seq], []], ["", "1"], kernel_us=1.0)
    return t.trace(), macs


def conv_trace(**writer) -> tuple[dict, int]:
    """conv2d (strided, padded, grouped), conv1d, max pool, softmax, on the CPU."""
    t = TraceWriter(kernels=False, **writer)
    with t.op("aten::conv2d", [[2, 3, 32, 30], [16, 3, 3, 3], [16], [], [], [], []],
              ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]):
        t.leaf("aten::convolution", [[2, 3, 32, 30], [16, 3, 3, 3], [16]])
    macs = 2 * 16 * 15 * 16 * 3 * 9          # Ho 16, Wo 15
    t.leaf("aten::conv2d", [[2, 16, 16, 15], [32, 4, 3, 3], [], [], [], [], []],
           ["", "", "", "[1, 1]", "same", "[1, 1]", "4"])
    macs += 2 * 16 * 15 * 32 * 4 * 9
    t.leaf("aten::max_pool2d", [[2, 32, 16, 15], [], [], [], [], []],
           ["", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "True"])
    t.leaf("aten::conv1d", [[2, 32, 64], [8, 32, 5], [8], [], [], [], []],
           ["", "", "", "[2]", "[2]", "[1]", "1"])
    macs += 2 * 32 * 8 * 32 * 5              # Lo 32
    t.leaf("aten::softmax", [[2, 8, 32], [], []], ["", "-1", ""])
    return t.trace(), macs


def unmodelled_trace(**writer) -> dict:
    """The shapes real traces hold that fit no rule, beside ops that do: an aten::sum
    over a zero-size dimension (a reduction of an empty batch), the out= variant
    aten::pow.Tensor_Scalar_out (its output tensor recorded as a third input), a pow
    whose recorded out tensor does not broadcast with its input, and a mul by a
    broadcasting scalar (modelled)."""
    t = TraceWriter(**writer)
    t.leaf("aten::linear", [[8, 64], [32, 64], [32]], kernel_us=4.0)
    t.leaf("aten::sum", [[0, 128], [], [], []], ["", "[1]", "False", ""], kernel_us=1.0)
    t.leaf("aten::sum", [[16, 0], [], [], []], ["", "[-1]", "False", ""], kernel_us=1.0)
    t.leaf("aten::pow.Tensor_Scalar_out", [[64, 128], [], [64, 128]], ["", "2", ""],
           kernel_us=2.0)
    t.leaf("aten::pow", [[64, 128], [], [3]], ["", "2", ""], kernel_us=2.0)
    t.leaf("aten::mul", [[64, 128], []], ["", "0.5"], kernel_us=2.0)
    return t.trace()


# Linear events as Holistic Trace Analysis's sampled training traces record them
# (facebookresearch/HolisticTraceAnalysis tests/data/trace_filter/sampled_rank-0.json.gz,
# read 2026-12-06): most fit aten::linear's (input, weight, bias) signature; in a few the
# sampler left the recorded shapes of several calls in one event's Input Dims, so the
# input and weight disagree on K. The dims below are copied from that trace.
HTA_LINEARS = [[[2048, 6948], [256, 6948], [256]], [[2048, 256], [6948, 256], [6948]],
               [[2048, 320], [125, 320], [125]], [[2048, 2750], [512, 2750], [512]],
               [[2048, 32], [160, 32], [160]], [[2048, 2112], [512, 2112], [512]]]
HTA_MISFITS = [[[512, 2112], [512], [2048, 512], [2048, 160, 267], [10, 267], [10]],
               [[2048, 160, 72], [2048, 2400], [256, 2400], [256]]]


def hta_sampled_trace(*, misfits: bool = True, fits: bool = True) -> tuple[dict, int]:
    """A trace in the form of HTA's sampled rank traces: schemaVersion 1 with the
    distributed info, the GEMMs of HTA_LINEARS (each launching a kernel) and, with
    `misfits`, the events of HTA_MISFITS among them; and the GEMM MACs that fit."""
    t = TraceWriter(tid=4037)
    macs = 0
    for index, dims in enumerate(HTA_LINEARS if fits else []):
        (m, k), (n, _), _ = dims
        t.leaf("aten::linear", dims, kernel_us=10.0)
        macs += m * n * k
        if misfits and index < len(HTA_MISFITS):
            t.leaf("aten::linear", HTA_MISFITS[index], kernel_us=10.0)
    if misfits and not fits:
        for dims in HTA_MISFITS:
            t.leaf("aten::linear", dims, kernel_us=10.0)
    trace = t.trace()
    trace["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 128}
    return trace, macs


if __name__ == "__main__":
    # The shipped example workloads/examples/decoder_trace.json (SOURCE.md beside it):
    # `python tests/kineto_traces.py workloads/examples/decoder_trace.json`.
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(transformer_trace()[0], out, indent=1)
        out.write("\n")
