"""Off-chip A traffic of a convolution: the distinct input elements a tile touches.

An A tile covers a range of output pixels (rows of the im2col matrix, in (batch, ho, wo)
raster order) and a range of the reduction dim K ordered (channel, kernel row, kernel
col), channel outermost. Its off-chip cost is the input window with its halo over the
channels it touches, not the im2col rows (which repeat each input element up to kh*kw
times). The kernel positions a channel's k-range covers are taken as their bounding
rectangle of kernel rows x cols.

The counting is compiled (Numba) and memoised by convolution geometry and tile size,
because the mapper asks for the same window tables many times (one per candidate
tiling sharing tm and tk); tests/test_mapper.py checks it against a naive set-based
count.
"""

from __future__ import annotations

import functools

import numpy as np

from simulator.jit import njit
from simulator.workload import Conv2d


@njit(cache=True)
def _touched_pixels(h, w, ho_n, wo_n, st, pad, dil, m0, m1, r0, r1, s0, s1, mask,
                    marked):
    """Distinct in-bounds input pixels (per channel) read by output pixels [m0, m1)
    through kernel rows [r0, r1] and cols [s0, s1], summed over images.

    mask (bool[h*w]) is all False on entry and on exit; marked (int64[h*w]) is scratch
    listing the pixels set, so clearing costs what marking did.
    """
    total = 0
    n_marked = 0
    image_now = -1
    per_image = ho_n * wo_n
    m = m0
    while m < m1:
        image = m // per_image
        rest = m - image * per_image
        ho = rest // wo_n
        wo_a = rest - ho * wo_n
        wo_b = min(wo_n, wo_a + (m1 - m))  # exclusive end of this output-row segment
        if image != image_now:  # pixels of different images are distinct
            for i in range(n_marked):
                mask[marked[i]] = False
            n_marked = 0
            image_now = image
        for r in range(r0, r1 + 1):
            row = ho * st + r * dil - pad
            if row < 0 or row >= h:
                continue
            for wo in range(wo_a, wo_b):
                for s in range(s0, s1 + 1):
                    col = wo * st + s * dil - pad
                    if col < 0 or col >= w:
                        continue
                    index = row * w + col
                    if not mask[index]:
                        mask[index] = True
                        marked[n_marked] = index
                        n_marked += 1
                        total += 1
        m += wo_b - wo_a
    for i in range(n_marked):
        mask[marked[i]] = False
    return total


@njit(cache=True)
def _positions(h, w, ho_n, wo_n, st, pad, dil, kw, m0, m1, p0, p1, mask, marked):
    """Pixels touched through kernel positions p0..p1 of one channel (their bounding
    rectangle of kernel rows x cols)."""
    r0, r1 = p0 // kw, p1 // kw
    if r0 == r1:
        s0, s1 = p0 % kw, p1 % kw
    else:
        s0, s1 = 0, kw - 1
    return _touched_pixels(h, w, ho_n, wo_n, st, pad, dil, m0, m1, r0, r1, s0, s1, mask,
                           marked)


@njit(cache=True)
def _pair_pixels(h, w, ho_n, wo_n, st, pad, dil, kw, per_channel, m0, m1, p0, p1, mask,
                 marked, memo, stamp, tag):
    """_positions, remembered per (p0, p1) pair while the m range (named by tag) holds."""
    key = p0 * per_channel + p1
    if stamp[key] != tag:
        memo[key] = _positions(h, w, ho_n, wo_n, st, pad, dil, kw, m0, m1, p0, p1, mask,
                               marked)
        stamp[key] = tag
    return memo[key]


@njit(cache=True)
def _tile_elements(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m0, m1, k0, k1, mask, marked,
                   memo, stamp, tag):
    """Input elements of one A tile [m0, m1) x [k0, k1): its first and last channels'
    partial kernel positions, and every whole channel between them."""
    per_channel = kh * kw
    first_c, last_c = k0 // per_channel, (k1 - 1) // per_channel
    geometry = (h, w, ho_n, wo_n, st, pad, dil, kw, per_channel, m0, m1)
    if first_c == last_c:
        return _pair_pixels(*geometry, k0 % per_channel, (k1 - 1) % per_channel, mask,
                            marked, memo, stamp, tag)
    total = _pair_pixels(*geometry, k0 % per_channel, per_channel - 1, mask, marked, memo,
                         stamp, tag)
    total += _pair_pixels(*geometry, 0, (k1 - 1) % per_channel, mask, marked, memo, stamp,
                          tag)
    middle = last_c - first_c - 1
    if middle > 0:
        total += middle * _pair_pixels(*geometry, 0, per_channel - 1, mask, marked, memo,
                                       stamp, tag)
    return total


@njit(cache=True)
def _scratch(h, w, kh, kw):
    """(mask, marked, memo, stamp): the buffers _tile_elements works in."""
    pairs = (kh * kw) * (kh * kw)
    return (np.zeros(h * w, dtype=np.bool_), np.empty(h * w, dtype=np.int64),
            np.full(pairs, -1, dtype=np.int64), np.full(pairs, -1, dtype=np.int64))


@njit(cache=True)
def _window_table(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m_total, k_total, tm, tk):
    """int64[nm, nk]: input elements of each A tile. Per m tile, the pixel count of
    each (first, last) kernel-position pair is computed once and reused along k."""
    nm = (m_total + tm - 1) // tm
    nk = (k_total + tk - 1) // tk
    table = np.empty((nm, nk), dtype=np.int64)
    mask, marked, memo, stamp = _scratch(h, w, kh, kw)
    for i in range(nm):
        m0, m1 = i * tm, min(m_total, (i + 1) * tm)
        for j in range(nk):
            table[i, j] = _tile_elements(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m0, m1,
                                         j * tk, min(k_total, (j + 1) * tk), mask,
                                         marked, memo, stamp, i)
    return table


@njit(cache=True)
def _window_maxima(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m_total, k_total, tm, tks):
    """int64[len(tks)]: the largest A tile (input elements) of each tiling (tm, tks[t]),
    without the tables: per m tile, each kernel-position pair is counted once for all
    the tks."""
    nm = (m_total + tm - 1) // tm
    largest = np.zeros(tks.shape[0], dtype=np.int64)
    mask, marked, memo, stamp = _scratch(h, w, kh, kw)
    for i in range(nm):
        m0, m1 = i * tm, min(m_total, (i + 1) * tm)
        for t in range(tks.shape[0]):
            for k0 in range(0, k_total, tks[t]):
                total = _tile_elements(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m0, m1,
                                       k0, min(k_total, k0 + tks[t]), mask, marked, memo,
                                       stamp, i)
                largest[t] = max(largest[t], total)
    return largest


def window_maxima(conv: Conv2d, tm: int, tks) -> np.ndarray:
    """The largest A tile, in input elements of one group, of each tiling (tm, tk) for
    tk in tks: what window_table(conv, tm, tk).max() gives, for many tk at once."""
    return _window_maxima(*_geometry(conv), tm, np.asarray(tks, dtype=np.int64))


def _geometry(conv: Conv2d) -> tuple:
    """The fields the windows depend on (not the name, layer_type or repeat)."""
    g = conv.gemm()
    return (conv.h, conv.w, conv.ho, conv.wo, conv.stride, conv.padding, conv.dilation,
            conv.kh, conv.kw, g.m, g.k)


@functools.lru_cache(maxsize=64)  # the mapper asks for one table per (tm, tk) many times
def _cached_table(geometry: tuple, tm: int, tk: int) -> np.ndarray:
    table = _window_table(*geometry, tm, tk)
    table.setflags(write=False)
    return table


def window_table(conv: Conv2d, tm: int, tk: int) -> np.ndarray:
    """Input elements of each A tile (m-tile, k-tile) of one group, int64[nm, nk]
    (read-only; memoised by geometry and tile size)."""
    return _cached_table(_geometry(conv), tm, tk)


@functools.lru_cache(maxsize=4096)
def _cached_elements(geometry: tuple, m0: int, m1: int, k0: int, k1: int) -> int:
    h, w, ho_n, wo_n, st, pad, dil, kh, kw, _, _ = geometry
    mask, marked, memo, stamp = _scratch(h, w, kh, kw)
    return int(_tile_elements(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m0, m1, k0, k1,
                              mask, marked, memo, stamp, 0))


def window_elements(conv: Conv2d, m0: int, m1: int, k0: int, k1: int) -> int:
    """Distinct input elements of one group touched by output pixels [m0, m1) and
    reduction indices [k0, k1)."""
    return _cached_elements(_geometry(conv), m0, m1, k0, k1)
