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

import numpy as np

from simulator.errors import AccsimError
from simulator.inputs.platform import Platform
from simulator.lowering.attention import SOFTMAX_PASSES, VECTOR, checked_choice, tile_costs
from simulator.lowering.attention_tiles import (QueryTile, group_kv_bytes, product_shapes,
                                                query_tiles, tile_pair_counts)
from simulator.lowering.tile_table import TileTables
from simulator.mapping.footprint import attention_instances
from simulator.mapping.plan import Tiling
from simulator.model.timing import vector_cycles_each
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
    bounds.prepare(tilings)
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

    def check(self, tiling: Tiling, orientation: str | None, unit: str) -> None:
        """check_choice of a lowering (`orientation` None on the vector unit), its
        verdict kept in the tables (lowering.attention.checked_choice)."""
        checked_choice(self.op, tiling, self.platform, orientation=orientation, unit=unit,
                       source=None, tables=self.tables)

    def prepare(self, tilings: list[Tiling]) -> None:
        """Work out, for every tiling that check_choice allows (under its own fuse,
        orientation and unit), its tile products (each place products run in one
        kernel call, tile_costs' product_costs) and its parts that depend on the tile
        sizes alone (_sizes_bounds: two kernel calls in all), instead of a kernel
        call or two per product and per softmax."""
        places: dict[tuple, dict] = {}   # by where products run: tile sizes, in order
        sizes: dict[tuple, None] = {}    # (fusion, tm, tn) not worked out yet
        for tiling in tilings:
            unit = tiling.unit
            orientation = None if unit == VECTOR else tiling.orientation
            try:
                self.check(tiling, orientation, unit)
            except AccsimError:
                continue
            places.setdefault((tiling.dataflow, orientation, unit), {})[
                tiling.tm, tiling.tn] = None
            if (tiling.fuse, tiling.tm, tiling.tn) not in self.sizes:
                sizes[tiling.fuse, tiling.tm, tiling.tn] = None
        d = self.op.head_dim
        for (dataflow, orientation, unit), tiles in places.items():
            self._costs(dataflow, orientation, unit).product_costs(
                [shape for tm, tn in tiles for shape in product_shapes(self._pairs(tm, tn)[1],
                                                                       d)])
        if sizes:
            self.sizes.update(self._sizes_bounds(list(sizes)))

    def _pairs(self, tm: int, tn: int) -> tuple[list[QueryTile], dict]:
        """The query tiles of tiles tm x tn and their tile pairs (tile_pair_counts),
        kept in the lowerings' tables."""
        op, tables = self.op, self.tables
        tiles = tables.get(("query tiles", tm, tn), lambda: query_tiles(op, tm, tn))
        return tiles, tables.get(("tile pairs", tm, tn), lambda: tile_pair_counts(tiles))

    def _costs(self, dataflow: str, orientation: str | None, unit: str):
        """tile_costs of products run there, made once."""
        costs = self.costs.get((dataflow, orientation, unit))
        if costs is None:
            costs = self.costs[dataflow, orientation, unit] = tile_costs(
                self.op, self.platform, dataflow, orientation, unit, self.tables)
        return costs

    def of(self, tiling: Tiling, fusion: str, orientation: str | None, unit: str) -> int:
        """cycles_bound of one lowering (raises as it does)."""
        op = self.op
        orientation = None if unit == VECTOR else orientation
        self.check(tiling, orientation, unit)
        tm, tn, dataflow = tiling.tm, tiling.tn, tiling.dataflow
        products = self.products.get((tm, tn, dataflow, orientation, unit))
        if products is None:
            products = self.products[tm, tn, dataflow, orientation, unit] = \
                _products_bound(self._costs(dataflow, orientation, unit), op.head_dim,
                                self._pairs(tm, tn)[1])
        sizes = self.sizes.get((fusion, tm, tn))
        if sizes is None:
            sizes = self.sizes[fusion, tm, tn] = self._sizes_bounds([(fusion, tm, tn)])[
                fusion, tm, tn]
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

    def _sizes_bounds(self, sizes: list[tuple]) -> dict[tuple, tuple[int, int]]:
        """cycles_bound's parts that depend on the tile sizes alone, by (fusion, tm, tn):
        the softmax's vector-unit cycles (flash: per tile pair with the output's
        rescale, _flash's; unfused: per query tile, _unfused's) and the K/V bytes'
        off-chip service cycles; the softmax's vector_cycles of all in one kernel call,
        the rescale's in another."""
        op, platform = self.op, self.platform
        d, unit = op.head_dim, platform.vector_unit
        cost = unit.cycles_per_element
        softmax_elements, rescale_elements = [], []
        for fusion, tm, tn in sizes:
            tiles, pairs = self._pairs(tm, tn)
            if fusion == "flash":
                softmax_elements.extend(rows * keys for rows, keys in pairs)
                rescale_elements.extend(rows * d for rows, _ in pairs)
            else:
                softmax_elements.extend(tile.rows * sum(tile.key_tiles) for tile in tiles)
        softmax_cycles = iter(_vector_cycles(softmax_elements, unit.lanes, cost.softmax,
                                             SOFTMAX_PASSES))
        rescale_cycles = iter(_vector_cycles(rescale_elements, unit.lanes, cost.mul, 1))
        found = {}
        for fusion, tm, tn in sizes:
            tiles, pairs = self._pairs(tm, tn)
            if fusion == "flash":
                softmax = sum(count * (next(softmax_cycles) + next(rescale_cycles))
                              for count in pairs.values())
            else:
                softmax = sum(next(softmax_cycles) for _ in tiles)
            # Each transfer's service is a float64 ceil of its bytes over the rate: the
            # margin keeps the bound below it whatever the rounding.
            moved = int(group_kv_bytes(op, platform, fusion, pairs) / self.bytes_per_cycle
                        * (1 - 1e-9))
            found[fusion, tm, tn] = softmax, moved
        return found


def _vector_cycles(elements: list[int], lanes: int, cycles_per_element: int,
                   passes: int) -> list[int]:
    """vector_cycles of each count of `elements`, in one kernel call (none if empty)."""
    if not elements:
        return []
    return vector_cycles_each(np.array(elements, dtype=np.int64), lanes, cycles_per_element,
                              passes).tolist()


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
