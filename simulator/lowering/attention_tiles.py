"""The tiles of one attention instance (lowering.attention): its query tiles, the key
tiles each visits (causal: up to the last key its rows see), the (query tile, key tile)
pairs of each shape, the products they run and the K/V bytes they read. The lowering
and its cycle bound (lowering.attention_bound) both walk these."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.inputs.platform import Platform
from simulator.mapping.footprint import attention_rows, kv_bytes, kv_pair_bytes


@dataclass(frozen=True)
class QueryTile:
    """One query tile: its rows and the key tiles (widths) its rows see."""

    rows: int
    key_tiles: list[int]


def query_tiles(op, tm: int, tn: int) -> list[QueryTile]:
    """The query tiles of one instance with the key tiles each visits (causal: up to
    the last key its last row sees)."""
    rows, group, offset = attention_rows(op), op.group, op.kv_len - op.q_len
    tiles = []
    for start in range(0, rows, tm):
        size = min(tm, rows - start)
        last_position = (start + size - 1) // group
        keys = offset + last_position + 1 if op.causal else op.kv_len
        tiles.append(QueryTile(size, [min(tn, op.kv_len - j * tn)
                                      for j in range(-(-keys // tn))]))
    return tiles


def tile_pair_counts(tiles: list[QueryTile]) -> dict[tuple[int, int], int]:
    """How many (query tile, key tile) pairs of each (rows, keys) shape the query tiles
    visit: totals over the pairs summed per shape (the same integers)."""
    counts: dict[tuple[int, int], int] = {}
    for tile in tiles:
        for keys in tile.key_tiles:
            counts[tile.rows, keys] = counts.get((tile.rows, keys), 0) + 1
    return counts


def product_shapes(pairs: dict[tuple[int, int], int], d: int) -> list[tuple[int, int, int]]:
    """The (m, n, k) of the tile products the tile pairs `pairs` (tile_pair_counts) run,
    flash or unfused: per pair S = Q K^T (rows x keys over d) and O = P V (rows x d
    over keys)."""
    return [shape for rows, keys in pairs for shape in ((rows, keys, d), (rows, d, keys))]


def group_kv_bytes(op, platform: Platform, fusion: str,
                   pairs: dict[tuple[int, int], int]) -> int:
    """Off-chip K and V bytes one group's program reads (`pairs`: tile_pair_counts):
    flash reads each key tile's K and V together, unfused K for QK^T and V for PV."""
    if fusion == "flash":
        return sum(count * kv_pair_bytes(op, platform, keys)
                   for (_, keys), count in pairs.items())
    return sum(count * kv_bytes(op, platform, 2 * keys * op.head_dim)
               for (_, keys), count in pairs.items())
