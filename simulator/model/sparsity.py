"""Weight sparsity (DESIGN.md section 17): N:M structured patterns and unstructured
density, and the compressed bytes of a weight tensor or tile.

N:M keeps N of every M consecutive weights along the reduction dim, plus metadata per
group of M: the platform's stated bits per kept value x N, else ceil(log2(C(M, N))).
Unstructured sparsity keeps a fraction `density` of the weights plus a one-bit mask per
dense weight; it is a bandwidth-only what-if (compute stays dense).
"""

from __future__ import annotations

import math

from simulator.model.formats import packed_bytes

MAX_GROUP = 64   # the largest M accepted in an N:M pattern

# How a sparse operator ran: compressed weights and sparse compute (the platform lists
# the pattern), decompressed on load and computed dense (it does not), or unstructured
# (compressed bytes, dense compute).
STRUCTURED, DECOMPRESSED, BANDWIDTH_ONLY = "structured", "decompressed", "bandwidth-only"


def parse_pattern(pattern: str) -> tuple[int, int]:
    """(N, M) of an "N:M" pattern; ValueError naming the rule otherwise."""
    parts = pattern.split(":")
    if len(parts) != 2 or not all(p.isdigit() and p.isascii() for p in parts):
        raise ValueError(f"sparsity pattern {pattern!r} is not of the form N:M "
                         "(e.g. 2:4)")
    n, m = int(parts[0]), int(parts[1])
    if not 0 < n < m:
        raise ValueError(f"sparsity pattern {pattern!r} needs 0 < N < M (N kept of "
                         f"every M weights)")
    if m > MAX_GROUP:
        raise ValueError(f"sparsity pattern {pattern!r}: M above {MAX_GROUP}")
    return n, m


def default_metadata_bits(n: int, m: int) -> int:
    """Bits per group of M naming which N are kept: ceil(log2(C(M, N)))."""
    return math.ceil(math.log2(math.comb(m, n)))


def structured_bytes(dtype: str, elements, n: int, m: int, group_bits: int):
    """Bytes of `elements` dense weights kept N of M, packed in `dtype`, plus
    `group_bits` of metadata per group of M (groups and bytes rounded up)."""
    groups = -(-elements // m)
    return packed_bytes(dtype, groups * n) + -(-(groups * group_bits) // 8)


def unstructured_bytes(dtype: str, elements, density: float):
    """Bytes of `elements` dense weights of which a fraction `density` is kept, packed
    in `dtype`, plus a one-bit mask per dense weight."""
    kept = -(-(elements * round(density * 1_000_000)) // 1_000_000)
    return packed_bytes(dtype, kept) + -(-elements // 8)
