"""Off-chip A traffic of a convolution: the distinct input elements a tile touches.

An A tile covers a range of output pixels (rows of the im2col matrix, in (batch, ho, wo)
raster order) and a range of the reduction dim K ordered (channel, kernel row, kernel
col), channel outermost. Its off-chip cost is the input window with its halo over the
channels it touches, not the im2col rows (which repeat each input element up to kh*kw
times). The kernel positions a channel's k-range covers are taken as their bounding
rectangle of kernel rows x cols.
"""

from __future__ import annotations

import numpy as np

from simulator.workload import Conv2d


def _touched_pixels(conv: Conv2d, m0: int, m1: int, r0: int, r1: int, s0: int,
                    s1: int) -> int:
    """Distinct in-bounds input pixels (per channel) read by output pixels [m0, m1)
    through kernel rows [r0, r1] and cols [s0, s1]."""
    ho_n, wo_n = conv.ho, conv.wo
    st, pad, dil = conv.stride, conv.padding, conv.dilation
    kernel_rows = np.arange(r0, r1 + 1) * dil - pad
    kernel_cols = np.arange(s0, s1 + 1) * dil - pad
    masks: dict[int, np.ndarray] = {}
    m = m0
    while m < m1:
        image, rest = divmod(m, ho_n * wo_n)
        ho, wo_a = divmod(rest, wo_n)
        wo_b = min(wo_n, wo_a + (m1 - m))  # exclusive end of this output-row segment
        rows = ho * st + kernel_rows
        rows = rows[(rows >= 0) & (rows < conv.h)]
        cols = (np.arange(wo_a, wo_b)[:, None] * st + kernel_cols[None, :]).ravel()
        cols = np.unique(cols[(cols >= 0) & (cols < conv.w)])
        if rows.size and cols.size:
            mask = masks.setdefault(image, np.zeros((conv.h, conv.w), dtype=bool))
            mask[np.ix_(rows, cols)] = True
        m += wo_b - wo_a
    return int(sum(int(mask.sum()) for mask in masks.values()))


def window_elements(conv: Conv2d, m0: int, m1: int, k0: int, k1: int) -> int:
    """Distinct input elements of one group touched by output pixels [m0, m1) and
    reduction indices [k0, k1)."""
    per_channel = conv.kh * conv.kw
    first_c, last_c = k0 // per_channel, (k1 - 1) // per_channel

    def positions(p0: int, p1: int) -> int:
        r0, r1 = p0 // conv.kw, p1 // conv.kw
        s0, s1 = (p0 % conv.kw, p1 % conv.kw) if r0 == r1 else (0, conv.kw - 1)
        return _touched_pixels(conv, m0, m1, r0, r1, s0, s1)

    if first_c == last_c:
        return positions(k0 % per_channel, (k1 - 1) % per_channel)
    total = positions(k0 % per_channel, per_channel - 1)
    total += positions(0, (k1 - 1) % per_channel)
    middle = last_c - first_c - 1
    if middle:
        total += middle * positions(0, per_channel - 1)
    return total


def window_table(conv: Conv2d, tm: int, tk: int) -> np.ndarray:
    """Input elements of each A tile (m-tile, k-tile) of one group, int64[nm, nk]."""
    g = conv.gemm()
    m_edges = list(range(0, g.m, tm)) + [g.m]
    k_edges = list(range(0, g.k, tk)) + [g.k]
    table = np.empty((len(m_edges) - 1, len(k_edges) - 1), dtype=np.int64)
    for i in range(len(m_edges) - 1):
        for j in range(len(k_edges) - 1):
            table[i, j] = window_elements(conv, m_edges[i], m_edges[i + 1],
                                          k_edges[j], k_edges[j + 1])
    return table
