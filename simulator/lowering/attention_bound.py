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

from simulator.errors import AccsimError
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
    return _bounds(op, platform, tables).of(tiling, fusion, orientation, unit)


def cycles_bounds(op, tilings: list[Tiling], platform: Platform,
                  tables: TileTables) -> list[int]:
    """cycles_bound of each tiling under its own fuse, orientation and unit, or 0 where
    its lowering would refuse it (a search then tries it, and is refused, as before)."""
    bounds, found = _bounds(op, platform, tables), []
    for tiling in tilings:
        try:
            found.append(bounds.of(tiling, tiling.fuse, tiling.orientation, tiling.unit))
        except AccsimError:
            found.append(0)
    return found


def _bounds(op, platform: Platform, tables: TileTables | None) -> Bounds:
    """Bounds of the operator sharing `tables` (fresh ones where they serve another)."""
    if tables is None or not tables.serves(op, platform):
        tables = TileTables(op, platform)
    return Bounds(op, platform, tables)


class Bounds:
    """cycles_bound of one operator's lowerings on one platform, its per-operator facts
    worked out once and its parts kept by what they depend on (a search bounds a few
    dozen candidates that share tile sizes and choices); the query tiles and tile
    products come from `tables`, which the search's lowerings share."""

    def __init__(self, op, platform: Platform, tables: TileTables):
        self.op, self.platform, self.tables = op, platform, tables
        memory = memory_params(platform)
        self.groups = attention_instances(op)
        # A run's first service starts at cycle 1 at the earliest, and its last
        # transfer is usable (or complete) its access latency after its service ends.
        self.latency = 1 + memory.access_cycles
        self.bytes_per_cycle = memory.bytes_per_cycle
        self.overhead = platform.runtime.op_overhead_cycles
        self.costs: dict[tuple, object] = {}      # tile_costs by where products run
        self.products: dict[tuple, tuple[int, int, int]] = {}
        self.sizes: dict[tuple, tuple[int, int]] = {}

    def of(self, tiling: Tiling, fusion: str, orientation: str | None, unit: str) -> int:
        """cycles_bound of one lowering (raises as it does)."""
        op, platform, tables = self.op, self.platform, self.tables
        orientation = None if unit == VECTOR else orientation
        check_choice(op, tiling, platform, orientation, unit, None)
        tm, tn, dataflow = tiling.tm, tiling.tn, tiling.dataflow
        products = self.products.get((tm, tn, dataflow, orientation, unit))
        sizes = self.sizes.get((fusion, tm, tn))
        if products is None or sizes is None:
            tiles = tables.get(("query tiles", tm, tn), lambda: query_tiles(op, tm, tn))
            pairs = tables.get(("tile pairs", tm, tn), lambda: tile_pair_counts(tiles))
            if products is None:
                costs = self.costs.get((dataflow, orientation, unit))
                if costs is None:
                    costs = self.costs[dataflow, orientation, unit] = tile_costs(
                        op, platform, dataflow, orientation, unit, tables)
                products = self.products[tm, tn, dataflow, orientation, unit] = \
                    _products_bound(costs, op.head_dim, pairs)
            if sizes is None:
                sizes = self.sizes[fusion, tm, tn] = _sizes_bound(
                    op, platform, fusion, tiles, pairs, self.bytes_per_cycle)
        compute, scores_out, outputs_out = products
        softmax, moved = sizes
        if fusion == "flash":   # both products evacuated
            vector = scores_out + outputs_out
            if unit == VECTOR:   # the softmax runs as compute on the vector unit
                compute += softmax
            else:
                vector += softmax
        else:   # the softmax steps' compute, the score tiles' evacuations
            compute += softmax
            vector = scores_out
        groups = self.groups
        return op.repeat * (self.overhead + max(groups * compute, groups * vector,
                                                groups * moved + self.latency))


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
                 pairs: dict[tuple[int, int], int],
                 bytes_per_cycle: float) -> tuple[int, int]:
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
    moved = int(group_kv_bytes(op, platform, fusion, pairs) / bytes_per_cycle
                * (1 - 1e-9))
    return softmax, moved
