"""A lower bound on an attention lowering's cycles (lowering.attention), from its tile
pairs alone: the default search walks attention's candidates in its order and stops
once it exceeds the best found (search.operator._search_attention), so it lowers and
replays a few of them instead of every one.

Why it is a bound (the fast engine's accounting, DESIGN.md section 3): a program run's
total is its dispatch overhead plus at least the end of its last compute, which is at
least the sum of its computes (they run one after another), at least the end of its
vector-unit work (the vector unit's steps run one after another), and at least the end
of its last transfer's access (the one memory serves transfers one after another, the
first starting at cycle 1). Each is bounded below by a part of it: the tile products
(and the softmax where it runs as compute), the softmax beside the array and the
evacuations, and the K/V bytes.
"""

from __future__ import annotations

from simulator.inputs.platform import Platform
from simulator.lowering.attention import (SOFTMAX_PASSES, VECTOR, QueryTile, check_choice,
                                          group_kv_bytes, query_tiles, tile_costs,
                                          tile_pair_counts)
from simulator.lowering.tile_table import TileTables
from simulator.mapping.footprint import attention_instances
from simulator.mapping.plan import Tiling
from simulator.model.timing import vector_cycles
from simulator.program.tile_program import memory_params


def cycles_bound(op, tiling: Tiling, fusion: str, platform: Platform, *,
                 orientation: str | None, unit: str, tables: TileTables) -> int:
    """A lower bound on the cycles of all runs of one lowering (as the search totals a
    candidate): per run the dispatch overhead plus the largest of the bounds on its
    computes, its vector-unit work and its transfers (the module's docstring says
    why). `tables`: the lowerings', whose query tiles and tile products it shares.
    Raises as lower_attention_as does for a choice the operator or platform refuses."""
    if tables is None or not tables.serves(op, platform):
        tables = TileTables(op, platform)
    orientation = None if unit == VECTOR else orientation
    check_choice(op, tiling, platform, orientation, unit, None)
    tiles = tables.get(("query tiles", tiling.tm, tiling.tn),
                       lambda: query_tiles(op, tiling.tm, tiling.tn))
    pairs = tables.get(("tile pairs", tiling.tm, tiling.tn),
                       lambda: tile_pair_counts(tiles))
    compute, scores_out, outputs_out = tables.get(
        ("bound of products", tiling.tm, tiling.tn, tiling.dataflow, orientation, unit),
        lambda: _products_bound(tile_costs(op, platform, tiling.dataflow, orientation,
                                           unit, tables), op.head_dim, pairs))
    softmax, moved = tables.get(("bound of tile sizes", fusion, tiling.tm, tiling.tn),
                                lambda: _sizes_bound(op, platform, fusion, tiles, pairs))
    if fusion == "flash":   # both products evacuated
        vector = scores_out + outputs_out
        if unit == VECTOR:   # the softmax runs as compute on the vector unit
            compute += softmax
        else:
            vector += softmax
    else:   # the softmax steps' compute, the score tiles' evacuations
        compute += softmax
        vector = scores_out
    groups = attention_instances(op)
    # A run's first service starts at cycle 1 at the earliest, and its last transfer
    # is usable (or complete) its access latency after its service ends.
    latency = 1 + memory_params(platform).access_cycles
    return op.repeat * (platform.runtime.op_overhead_cycles
                        + max(groups * compute, groups * vector, groups * moved + latency))


def _products_bound(steps, d: int, pairs: dict[tuple[int, int], int]
                    ) -> tuple[int, int, int]:
    """cycles_bound's parts that depend on where the products run (`steps`:
    lowering.attention.tile_costs), summed over the tile pairs: both products' cycles,
    the score products' evacuations and the output products' (flash evacuates both)."""
    products = scores = outputs = 0
    for (rows, keys), count in pairs.items():
        products += count * (steps.product_cost(rows, keys, d)[0]
                             + steps.product_cost(rows, d, keys)[0])
        scores += count * steps.evacuated(rows, keys, d)
        outputs += count * steps.evacuated(rows, d, keys)
    return products, scores, outputs


def _sizes_bound(op, platform: Platform, fusion: str, tiles: list[QueryTile],
                 pairs: dict[tuple[int, int], int]) -> tuple[int, int]:
    """cycles_bound's parts that depend on the tile sizes alone: the softmax's
    vector-unit cycles (flash: per tile pair with the output's rescale, _flash's;
    unfused: per query tile, _unfused's) and the K/V bytes' off-chip service cycles."""
    d, unit = op.head_dim, platform.vector_unit
    cost = unit.cycles_per_element
    if fusion == "flash":
        softmax = sum(count * (vector_cycles(rows * keys, unit.lanes, cost.softmax,
                                             SOFTMAX_PASSES)
                               + vector_cycles(rows * d, unit.lanes, cost.mul, 1))
                      for (rows, keys), count in pairs.items())
    else:
        softmax = sum(vector_cycles(tile.rows * sum(tile.key_tiles), unit.lanes,
                                    cost.softmax, SOFTMAX_PASSES) for tile in tiles)
    # Each transfer's service is a float64 ceil of its bytes over the rate: the
    # margin keeps the bound below it whatever the rounding.
    moved = int(group_kv_bytes(op, platform, fusion, pairs)
                / memory_params(platform).bytes_per_cycle * (1 - 1e-9))
    return softmax, moved
