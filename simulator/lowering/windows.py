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

from collections import OrderedDict

import numpy as np
from numba import njit

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
def _window_table(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m_total, k_total, tm, tk):
    """int64[nm, nk]: input elements of each A tile. Per m tile, the pixel count of
    each (first, last) kernel-position pair is computed once and reused along k."""
    per_channel = kh * kw
    nm = (m_total + tm - 1) // tm
    nk = (k_total + tk - 1) // tk
    table = np.empty((nm, nk), dtype=np.int64)
    mask = np.zeros(h * w, dtype=np.bool_)
    marked = np.empty(h * w, dtype=np.int64)
    memo = np.full(per_channel * per_channel, -1, dtype=np.int64)
    stamp = np.full(per_channel * per_channel, -1, dtype=np.int64)
    for i in range(nm):
        m0 = i * tm
        m1 = min(m_total, m0 + tm)
        for j in range(nk):
            k0 = j * tk
            k1 = min(k_total, k0 + tk)
            first_c, last_c = k0 // per_channel, (k1 - 1) // per_channel
            if first_c == last_c:
                parts = ((k0 % per_channel, (k1 - 1) % per_channel, 1),
                         (0, 0, 0), (0, 0, 0))
            else:
                parts = ((k0 % per_channel, per_channel - 1, 1),
                         (0, (k1 - 1) % per_channel, 1),
                         (0, per_channel - 1, last_c - first_c - 1))
            total = 0
            for p0, p1, times in parts:
                if times == 0:
                    continue
                key = p0 * per_channel + p1
                if stamp[key] != i:
                    memo[key] = _positions(h, w, ho_n, wo_n, st, pad, dil, kw, m0, m1,
                                           p0, p1, mask, marked)
                    stamp[key] = i
                total += times * memo[key]
            table[i, j] = total
    return table


@njit(cache=True)
def _window_maxima(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m_total, k_total, tm, tks):
    """int64[len(tks)]: the largest A tile (input elements) of each tiling (tm, tks[t]),
    without the tables: per m tile, each kernel-position pair is counted once for all
    the tks."""
    per_channel = kh * kw
    nm = (m_total + tm - 1) // tm
    largest = np.zeros(tks.shape[0], dtype=np.int64)
    mask = np.zeros(h * w, dtype=np.bool_)
    marked = np.empty(h * w, dtype=np.int64)
    memo = np.full(per_channel * per_channel, -1, dtype=np.int64)
    stamp = np.full(per_channel * per_channel, -1, dtype=np.int64)
    for i in range(nm):
        m0 = i * tm
        m1 = min(m_total, m0 + tm)
        for t in range(tks.shape[0]):
            tk = tks[t]
            for k0 in range(0, k_total, tk):
                k1 = min(k_total, k0 + tk)
                first_c, last_c = k0 // per_channel, (k1 - 1) // per_channel
                if first_c == last_c:
                    parts = ((k0 % per_channel, (k1 - 1) % per_channel, 1),
                             (0, 0, 0), (0, 0, 0))
                else:
                    parts = ((k0 % per_channel, per_channel - 1, 1),
                             (0, (k1 - 1) % per_channel, 1),
                             (0, per_channel - 1, last_c - first_c - 1))
                total = 0
                for p0, p1, times in parts:
                    if times == 0:
                        continue
                    key = p0 * per_channel + p1
                    if stamp[key] != i:
                        memo[key] = _positions(h, w, ho_n, wo_n, st, pad, dil, kw, m0, m1,
                                               p0, p1, mask, marked)
                        stamp[key] = i
                    total += times * memo[key]
                if total > largest[t]:
                    largest[t] = total
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


# Memoised tables, least recently used dropped first once they hold more than this
# many int64 entries in all (64 MiB).
_TABLE_BUDGET = 8 * 2**20
_tables: OrderedDict[tuple, np.ndarray] = OrderedDict()
_table_entries = [0]
_totals: dict[tuple, int] = {}


def window_table(conv: Conv2d, tm: int, tk: int) -> np.ndarray:
    """Input elements of each A tile (m-tile, k-tile) of one group, int64[nm, nk]
    (read-only; memoised by geometry and tile size)."""
    key = (_geometry(conv), tm, tk)
    table = _tables.get(key)
    if table is not None:
        _tables.move_to_end(key)
        return table
    table = _window_table(*key[0], tm, tk)
    table.setflags(write=False)
    _tables[key] = table
    _table_entries[0] += table.size
    while _table_entries[0] > _TABLE_BUDGET and len(_tables) > 1:
        _, dropped = _tables.popitem(last=False)
        _table_entries[0] -= dropped.size
    return table


def window_elements(conv: Conv2d, m0: int, m1: int, k0: int, k1: int) -> int:
    """Distinct input elements of one group touched by output pixels [m0, m1) and
    reduction indices [k0, k1)."""
    key = (_geometry(conv), m0, m1, k0, k1)
    found = _totals.get(key)
    if found is not None:
        return found
    h, w, ho_n, wo_n, st, pad, dil, kh, kw, _, _ = key[0]
    # One tile covering [m0, m1) x [k0, k1): the table's machinery on a shifted range.
    per_channel = kh * kw
    mask = np.zeros(h * w, dtype=np.bool_)
    marked = np.empty(h * w, dtype=np.int64)
    first_c, last_c = k0 // per_channel, (k1 - 1) // per_channel
    args = (h, w, ho_n, wo_n, st, pad, dil, kw, m0, m1)
    if first_c == last_c:
        total = _positions(*args, k0 % per_channel, (k1 - 1) % per_channel, mask, marked)
    else:
        total = _positions(*args, k0 % per_channel, per_channel - 1, mask, marked)
        total += _positions(*args, 0, (k1 - 1) % per_channel, mask, marked)
        middle = last_c - first_c - 1
        if middle:
            total += middle * _positions(*args, 0, per_channel - 1, mask, marked)
    total = int(total)
    if len(_totals) > 4096:  # a bounded memo: the mapper asks for few distinct ranges
        _totals.clear()
    _totals[key] = total
    return total
