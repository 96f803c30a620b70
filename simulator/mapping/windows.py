"""Off-chip A traffic of a convolution: the distinct input elements a tile touches.

An A tile covers a range of output pixels (rows of the im2col matrix, in (batch, ho, wo)
raster order) and a range of the reduction dim K ordered (channel, kernel row, kernel
col), channel outermost. Its off-chip cost is the input window with its halo over the
channels it touches, not the im2col rows (which repeat each input element up to kh*kw
times). The kernel positions a channel's k-range covers are taken as their bounding
rectangle of kernel rows x cols.

Counted exactly, in time linear in the input rows and cols a tile spans rather than in
its im2col size: within one image a tile's output pixels are a partial first output row,
whole rows, and a partial last row; each part reads a set of input rows times a set of
input cols, so the union is counted by inclusion-exclusion over the parts from the sizes
of row-set and col-set intersections (|A x B and C x D| = |A and C| * |B and D|).
Images are disjoint, and whole images (like whole channels) count alike.

One compiled kernel (Numba) counts a grid of tiles for all three entry points, so a
first run compiles it and one helper, nothing else; its results are memoised by convolution geometry and tile size, because the
mapper asks for the same tables many times (one per candidate tiling sharing tm and tk).
tests/test_mapper.py checks it against a naive set-based count.
"""

from __future__ import annotations

import functools

import numpy as np

from simulator.kernels.jit import njit
from simulator.inputs.workload import Conv2d

# The sign of each inclusion-exclusion term, by the set of parts it intersects (bit 0:
# the first output row, 1: the whole rows between, 2: the last row): + for odd counts.
_SIGNS = (0, 1, 1, -1, 1, -1, -1, 1)


@njit(cache=True, inline="always")
def _part(part, a, b, size):
    """Part `part` of the index range [a, b) cut into units of `size` (output rows,
    images, channels): 0 the first unit's share, 1 the whole units between, 2 the last
    unit's share when it is not the first. (first unit, [lo, hi) within a unit, units);
    0 units: the part is empty."""
    first, last = a // size, (b - 1) // size
    if part == 0:
        return first, a - first * size, min(b - first * size, size), 1
    if part == 1:
        return first + 1, 0, size, max(last - first - 1, 0)
    return last, 0, b - last * size, 1 if last > first else 0


@njit(cache=True)
def _image_pixels(h, w, wo_n, st, pad, dil, a, b, r0, r1, s0, s1, flags, tally):
    """Distinct in-bounds input pixels of one image and channel read by its output
    pixels [a, b) (raster order) through kernel rows [r0, r1] x cols [s0, s1].

    flags (int64[h + w]: input rows, then cols) and tally (int64[16]) are scratch, all
    zero on entry and on exit: flags marks with bit p the rows and cols part p reads;
    tally counts the rows, then the cols, of each flag value."""
    for part in range(3):
        ho, lo, hi, rows = _part(part, a, b, wo_n)
        if rows == 0:
            continue
        bit = 1 << part
        for out_row in range(ho, ho + rows):
            for r in range(r0, r1 + 1):
                row = out_row * st + r * dil - pad
                if 0 <= row < h:
                    flags[row] |= bit
        for out_col in range(lo, hi):
            for s in range(s0, s1 + 1):
                col = out_col * st + s * dil - pad
                if 0 <= col < w:
                    flags[h + col] |= bit
    for i in range(h + w):
        tally[(8 if i >= h else 0) + flags[i]] += 1
        flags[i] = 0
    total = 0
    for parts in range(1, 8):
        rows_in_all, cols_in_all = 0, 0
        for flag in range(parts, 8):
            if flag & parts == parts:
                rows_in_all += tally[flag]
                cols_in_all += tally[8 + flag]
        total += _SIGNS[parts] * rows_in_all * cols_in_all
    for i in range(16):
        tally[i] = 0
    return total


@njit(cache=True)
def _window_grid(h, w, ho_n, wo_n, st, pad, dil, kh, kw, m0s, m1s, k0s, k1s, out, flags,
                 tally, memo, stamp):
    """out[i, j]: input elements of the A tile [m0s[i], m1s[i]) x [k0s[j], k1s[j]): its
    first and last channels' kernel positions, and every whole channel between them.
    Per m range (i), each (first, last) kernel-position pair is counted once: memo
    holds the count and stamp the i it was counted for (stamp all -1 on entry)."""
    per_channel = kh * kw
    per_image = ho_n * wo_n
    for i in range(m0s.shape[0]):
        for j in range(k0s.shape[0]):
            total = 0
            for part in range(3):
                _, p0, p_end, channels = _part(part, k0s[j], k1s[j], per_channel)
                if channels == 0:
                    continue
                key = p0 * per_channel + p_end - 1
                if stamp[key] != i:
                    r0, r1 = p0 // kw, (p_end - 1) // kw
                    s0, s1 = (p0 % kw, (p_end - 1) % kw) if r0 == r1 else (0, kw - 1)
                    pixels = 0
                    for image_part in range(3):
                        _, a, b, images = _part(image_part, m0s[i], m1s[i], per_image)
                        if images > 0:
                            pixels += images * _image_pixels(h, w, wo_n, st, pad, dil, a,
                                                             b, r0, r1, s0, s1, flags,
                                                             tally)
                    memo[key] = pixels
                    stamp[key] = i
                total += channels * memo[key]
            out[i, j] = total


def _counts(geometry: tuple, m0s: np.ndarray, m1s: np.ndarray, k0s: np.ndarray,
            k1s: np.ndarray) -> np.ndarray:
    """int64[len(m0s), len(k0s)]: input elements of one group in each A tile
    [m0s[i], m1s[i]) x [k0s[j], k1s[j]) of a convolution of this _geometry."""
    h, w, _, _, _, _, _, kh, kw, _, _ = geometry
    out = np.empty((len(m0s), len(k0s)), dtype=np.int64)
    pairs = (kh * kw) ** 2
    _window_grid(*geometry[:9], m0s, m1s, k0s, k1s, out, np.zeros(h + w, dtype=np.int64),
                 np.zeros(16, dtype=np.int64), np.empty(pairs, dtype=np.int64),
                 np.full(pairs, -1, dtype=np.int64))
    return out


def _tiles(total: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The tiles of [0, total) in steps of size: (starts, ends)."""
    starts = np.arange(0, total, size, dtype=np.int64)
    return starts, np.minimum(starts + size, total)


def _geometry(conv: Conv2d) -> tuple:
    """The fields the windows depend on (not the name, layer_type or repeat)."""
    g = conv.gemm()
    return (conv.h, conv.w, conv.ho, conv.wo, conv.stride, conv.padding, conv.dilation,
            conv.kh, conv.kw, g.m, g.k)


def window_maxima(conv: Conv2d, tm: int, tks) -> np.ndarray:
    """The largest A tile, in input elements of one group, of each tiling (tm, tk) for
    tk in tks: what window_table(conv, tm, tk).max() gives, for many tk at once (each
    kernel-position pair of an m tile counted once for all the tks)."""
    geometry = _geometry(conv)
    m_total, k_total = geometry[9:]
    k_tiles = [_tiles(k_total, int(tk)) for tk in tks]
    if not k_tiles:
        return np.zeros(0, dtype=np.int64)
    largest = _counts(geometry, *_tiles(m_total, int(tm)),
                      np.concatenate([starts for starts, _ in k_tiles]),
                      np.concatenate([ends for _, ends in k_tiles])).max(axis=0)
    firsts = np.cumsum([0] + [len(starts) for starts, _ in k_tiles[:-1]])
    return np.maximum.reduceat(largest, firsts)


def window_grid(conv: Conv2d, m0s, m1s, k0s, k1s) -> np.ndarray:
    """Input elements of one group in each A tile [m0s[i], m1s[i]) x [k0s[j], k1s[j]),
    int64[len(m0s), len(k0s)]: many tiles in one kernel call (each kernel-position
    pair of an m range counted once), where one call per tile costs mostly its call."""
    return _counts(_geometry(conv), *(np.asarray(bounds, dtype=np.int64)
                                      for bounds in (m0s, m1s, k0s, k1s)))


@functools.lru_cache(maxsize=64)  # the mapper asks for one table per (tm, tk) many times
def _cached_table(geometry: tuple, tm: int, tk: int) -> np.ndarray:
    table = _counts(geometry, *_tiles(geometry[9], tm), *_tiles(geometry[10], tk))
    table.setflags(write=False)
    return table


def window_table(conv: Conv2d, tm: int, tk: int) -> np.ndarray:
    """Input elements of each A tile (m-tile, k-tile) of one group, int64[nm, nk]
    (read-only; memoised by geometry and tile size)."""
    return _cached_table(_geometry(conv), int(tm), int(tk))


@functools.lru_cache(maxsize=4096)
def _cached_elements(geometry: tuple, m0: int, m1: int, k0: int, k1: int) -> int:
    one = np.ones(1, dtype=np.int64)
    return int(_counts(geometry, one * m0, one * m1, one * k0, one * k1)[0, 0])


def window_elements(conv: Conv2d, m0: int, m1: int, k0: int, k1: int) -> int:
    """Distinct input elements of one group touched by output pixels [m0, m1) and
    reduction indices [k0, k1)."""
    return _cached_elements(_geometry(conv), m0, m1, k0, k1)
