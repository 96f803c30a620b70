"""The importers' shape rules: numpy's matmul as a GEMM, and any window (pads per
side, strides and dilations per axis, ceil_mode) as accsim fields with the same output
size, so every MAC is kept."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.frontends.shapes import Window, matmul_gemm, out_size
from simulator.inputs.workload import Conv2d, Pool


@pytest.mark.parametrize("a, b", [
    ((8, 16), (16, 4)), ((2, 3, 8, 16), (16, 4)), ((2, 3, 8, 16), (2, 3, 16, 4)),
    ((1, 3, 8, 16), (5, 1, 16, 4)), ((16,), (16, 4)), ((2, 8, 16), (16,)),
])
def test_matmul_gemm_has_numpys_macs(a, b):
    gemm = matmul_gemm(a, b)
    out = np.matmul(np.zeros(a), np.zeros(b))
    assert gemm["batch"] * gemm["m"] * gemm["n"] * gemm["k"] == out.size * a[-1]
    if len(b) == 2 and len(a) > 2:      # a linear layer: its rows fold into M
        assert gemm["batch"] == 1 and gemm["m"] == int(np.prod(a[:-1]))


def test_matmul_gemm_refuses_mismatched_inner_dimensions():
    with pytest.raises(ValueError, match="inner dimensions differ"):
        matmul_gemm((4, 5), (6, 7))


sides = st.integers(0, 3)


@settings(max_examples=300, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(1, 40), kh=st.integers(1, 5),
       kw=st.integers(1, 5), sh=st.integers(1, 3), sw=st.integers(1, 3),
       dh=st.integers(1, 3), dw=st.integers(1, 3), pads=st.tuples(sides, sides, sides,
                                                                   sides))
def test_any_conv_window_keeps_its_output_size(h, w, kh, kw, sh, sw, dh, dw, pads):
    top, left, bottom, right = pads
    out = (out_size(h, top, bottom, kh, sh, dh), out_size(w, left, right, kw, sw, dw))
    if min(out) < 1:
        return
    window = Window(batch=1, h=h, w=w, kernel=(kh, kw), strides=(sh, sw), pads=pads,
                    dilations=(dh, dw), out=out)
    conv = Conv2d(name="c", layer_type="conv", kind="conv2d", cin=2, cout=2,
                  **window.fields())
    assert (conv.ho, conv.wo) == out
    if pads == (top,) * 4 and sh == sw and dh == dw:
        assert window.exact and (conv.h, conv.w) == (h, w)


@settings(max_examples=300, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(1, 40), k=st.integers(1, 5),
       s=st.integers(1, 3), p=st.integers(0, 2), ceil=st.booleans())
def test_any_pool_window_keeps_its_output_size(h, w, k, s, p, ceil):
    if p >= k:      # ONNX and PyTorch require pads smaller than the kernel
        return
    out = (out_size(h, p, p, k, s, ceil=ceil), out_size(w, p, p, k, s, ceil=ceil))
    if min(out) < 1:
        return
    fields = Window(batch=1, h=h, w=w, kernel=(k, k), strides=(s, s), pads=(p,) * 4,
                    dilations=(1, 1), out=out).fields()
    del fields["dilation"]
    pool = Pool(name="p", layer_type="pool", kind="pool", channels=3, **fields)
    assert (pool.ho, pool.wo) == out
