"""Shape rules the graph and trace importers share: a matrix product's GEMM, and a
convolution's or pooling window's accsim fields.

accsim's conv2d and pool take one symmetric `padding` and one `stride` (and conv2d one
`dilation`) for both axes; ONNX and PyTorch allow each side and axis its own. The rule
(DESIGN.md section 13), chosen so that the output size, hence M, N, K and every MAC,
stays exact:

- padding = the smallest of the four pads; what a side pads beyond it is folded into
  the input extent (h, w), i.e. the operator reads the zero-padded tensor it convolves.
  Symmetric pads give the input extent unchanged.
- where the two axes' strides or dilations differ, the H axis's are used and the W
  extent is the one that gives the true output width under them.
- an extent that still misses the true output size (a pooling window's ceil_mode) is
  the smallest one that gives it.

Such an operator reads a few more (or fewer) input elements than the original: the
import notes say which operators were fitted this way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.inputs.loader import excerpt


class Contradiction(ValueError):
    """Shapes no run can have recorded (a matrix product whose inner dimensions
    differ): the file is damaged or forged, not merely outside a rule."""


def numel(shape: Sequence[int]) -> int:
    """Elements of a tensor of this shape (1 for a scalar)."""
    return math.prod(shape)


def broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of two shapes; ValueError where they do not broadcast."""
    out = []
    for x, y in zip(reversed([1] * (len(b) - len(a)) + list(a)),
                    reversed([1] * (len(a) - len(b)) + list(b))):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return tuple(reversed(out))


def matmul_gemm(a: Sequence[int], b: Sequence[int]) -> dict[str, int]:
    """gemm fields (batch, m, n, k) of numpy's matmul of shapes a and b.

    A 1-D operand is a vector (m or n of 1). When only A has batch dimensions (a
    linear layer applied to [batch, seq, hidden]), they are folded into M, since every
    row meets the same B; otherwise the broadcast batch dimensions are the gemm batch.
    """
    if not a or not b:
        raise ValueError("matmul of a scalar")
    a2 = [1, *a] if len(a) == 1 else list(a)
    b2 = [*b, 1] if len(b) == 1 else list(b)
    if a2[-1] != b2[-2]:
        raise Contradiction(f"inner dimensions differ: {excerpt(list(a))} x "
                            f"{excerpt(list(b))}")
    m, k, n = a2[-2], a2[-1], b2[-1]
    if numel(b2[:-2]) == 1:
        return {"batch": 1, "m": numel(a2[:-2]) * m, "n": n, "k": k}
    return {"batch": numel(broadcast(a2[:-2], b2[:-2])), "m": m, "n": n, "k": k}


def out_size(size: int, before: int, after: int, kernel: int, stride: int,
             dilation: int = 1, ceil: bool = False) -> int:
    """Output length along one axis of a window of `kernel` taps."""
    span = dilation * (kernel - 1) + 1
    reach = size + before + after - span
    return (-(-reach // stride) if ceil else reach // stride) + 1


@dataclass(frozen=True, kw_only=True)
class Window:
    """A convolution or pooling window over [batch, channels, H, W] (1-D: H = 1):
    kernel, strides, pads (top, left, bottom, right), dilations, and the true output
    size, as the source format states them."""

    batch: int
    h: int
    w: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    dilations: tuple[int, int]
    out: tuple[int, int]

    def fields(self) -> dict[str, int]:
        """accsim's batch, h, w, kh, kw, stride, padding, dilation with the output
        size `out` (the module docstring's rule)."""
        # H's stride and dilation serve both axes; W's extent is fitted to them.
        (kh, kw), (sh, _), (dh, _) = self.kernel, self.strides, self.dilations
        top, left, bottom, right = self.pads
        for padding in sorted({min(self.pads), 0}, reverse=True):
            h = _extent(self.h, top + bottom, padding, self.out[0], kh, sh, dh)
            w = _extent(self.w, left + right, padding, self.out[1], kw, sh, dh)
            if h >= 1 and w >= 1:
                break
        return {"batch": self.batch, "h": h, "w": w, "kh": kh, "kw": kw, "stride": sh,
                "padding": padding, "dilation": dh}

    @property
    def exact(self) -> bool:
        """True when accsim's fields describe the same input (no fitting needed)."""
        fitted = self.fields()
        return (fitted["h"], fitted["w"]) == (self.h, self.w) and \
            self.strides[0] == self.strides[1] and \
            self.dilations[0] == self.dilations[1]


def _extent(size: int, pads: int, padding: int, out: int, kernel: int, stride: int,
            dilation: int) -> int:
    """The input extent along one axis that gives `out` under accsim's formula with
    this symmetric padding: the padded input itself where it does, else the smallest."""
    span = dilation * (kernel - 1) + 1
    extent = size + pads - 2 * padding
    if (extent + 2 * padding - span) // stride + 1 == out:
        return extent
    return (out - 1) * stride + span - 2 * padding
