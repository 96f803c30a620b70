"""Lower bounds of the search's candidates (DESIGN.md section 2, Mapping): every
candidate tiling of one operator as parallel arrays with a lower bound of its cycles
and energy over all its runs, computed in closed form from mapping.footprint, so the
walk in search.operator can stop once the bound exceeds the best found. The cycle
bound is the largest of: the first load's service and latency + the exact busy cycles
+ the last epilogue and the last store's service and latency; the compulsory off-chip
bytes over the bandwidth; for vector operators, every transfer's service one after
another. The energy bound counts the MACs, vector work, compulsory off-chip bytes and
SRAM traffic no tiling avoids (SRAM reads exactly) plus static power over the cycle
bound."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.inputs.platform import Platform
from simulator.metrics.energy import static_power_w
from simulator.mapping.footprint import (a_tile_bytes, activation_bytes, array_speed,
                                         b_tile_bytes, c_tile_bytes, operand_bytes,
                                         operator_dtype, operator_onchip, sparse_speedup,
                                         row_shares, transpose_work, vector_tile_split,
                                         weight_bytes)
from simulator.model.loop_nest import (EFFECTIVE_ORDER, ORIENTATIONS, ORIENTED_ORDER,
                                       array_busy_cycles, c_offchip_bytes,
                                       inside_product, loop_tables_index, lru_fetches,
                                       oriented)
from simulator.mapping.heuristics import (check_candidates, coarse_candidates,
                                          dim_candidates, divisors)
from simulator.mapping.plan import LOOP_ORDERS, Tiling
from simulator.mapping.windows import window_elements, window_grid, window_maxima
from simulator.program.tile_program import MAX_DEPTH, memory_params
from simulator.model.dataflow import (A_READS, B_READS, DATAFLOW_CODES, PER_COL_FOLD,
                                      PER_ROW_FOLD)
from simulator.model.timing import ceil_div
from simulator.inputs.workload import Conv2d, is_attention, is_compute

MAPPER = "mapper"  # the heuristic field of the mapper's own tilings
OPEN = (None, None, None)  # an array operator's grid with every tile size open


def runs_of(op) -> int:
    if is_attention(op):
        return op.batch * op.kv_heads * op.repeat
    return (op.gemm().instances if is_compute(op) else 1) * op.repeat



@dataclass
class Candidates:
    """Candidate tilings as parallel arrays with their lower bounds (totals over all
    runs). Before `expand`, one entry per (tiles, loop order, dataflow) with the deepest
    depth that fits; after, one entry per depth 1..that."""

    tm: np.ndarray
    tn: np.ndarray
    tk: np.ndarray
    order: np.ndarray       # index into LOOP_ORDERS
    dataflow: np.ndarray    # index into the dataflows searched
    orientation: np.ndarray  # index into model.loop_nest.ORIENTATIONS
    max_depth: np.ndarray   # 0: not even depth 1 fits
    cycles_lb: np.ndarray
    energy_lb: np.ndarray
    effective: np.ndarray   # EFFECTIVE_ORDER code: equal codes, equal step sequences
    depth: np.ndarray | None = None

    def select(self, mask: np.ndarray) -> Candidates:
        return Candidates(*(None if getattr(self, f) is None else getattr(self, f)[mask]
                             for f in self.__dataclass_fields__))

    def expand(self) -> Candidates:
        """One entry per fitting depth."""
        repeat = self.max_depth
        fields = {f: np.repeat(getattr(self, f), repeat)
                  for f in self.__dataclass_fields__ if f != "depth"}
        starts = np.cumsum(repeat) - repeat
        depth = np.arange(int(repeat.sum()), dtype=np.int64) - np.repeat(starts, repeat) + 1
        return Candidates(**fields, depth=depth)

    def __len__(self) -> int:
        return int(self.tm.shape[0])


def _service(nbytes, bytes_per_cycle: float) -> np.ndarray:
    """Server cycles of transfers of nbytes (0 for none), the engines' float64 ceil."""
    nbytes = np.asarray(nbytes)
    return np.where(nbytes > 0, np.ceil(nbytes / bytes_per_cycle), 0).astype(np.int64)


def _fold_sum(size: int, tile: np.ndarray, unit: int) -> np.ndarray:
    """Sum over the tiles of one dim of ceil(tile size / unit)."""
    full, rem = size // tile, size % tile
    return full * -(-tile // unit) + (rem > 0) * -(-rem // unit)


def _input_reads(reads: int, size: int, tile: np.ndarray, count: np.ndarray,
                 array) -> np.ndarray:
    """An input's SRAM reads over the whole GEMM in units of its elements: summed over
    the tiles of its free dim (`size` in tiles `tile`, `count` of them), the folds
    along it where that dim is spatial, else one per tile (model.dataflow A_READS)."""
    if reads == PER_ROW_FOLD:
        return _fold_sum(size, tile, array.rows)
    if reads == PER_COL_FOLD:
        return _fold_sum(size, tile, array.cols)
    return count


def _static_pj_per_cycle(platform: Platform) -> float:
    return static_power_w(platform) / platform.clock_hz * 1e12


def _middle_windows(op, platform: Platform, vm: np.ndarray, vk: np.ndarray,
                    wanted: np.ndarray) -> np.ndarray:
    """Bytes of the window of a conv's middle m tile (its first tk columns) for the
    tile sizes (vm[i], vk[j]) where wanted[i, j], in np.nonzero order: counted in one
    call over the rows and columns holding any, as one call per tile costs mostly
    its call."""
    g = op.gemm()
    rows, cols = np.flatnonzero(wanted.any(axis=1)), np.flatnonzero(wanted.any(axis=0))
    m0 = -(-g.m // vm[rows]) // 2 * vm[rows]
    counts = window_grid(op, m0, np.minimum(g.m, m0 + vm[rows]), np.zeros_like(cols),
                         vk[cols])
    return activation_bytes(op, platform, counts[wanted[np.ix_(rows, cols)]])


def _compute_grid(op, fuse: str | None, following, platform: Platform,
                  coarse: bool = False, orientations: tuple[str, ...] = ("normal",),
                  fixed: tuple = OPEN) -> Candidates:
    """Every tile size (`dim_candidates`, or `coarse_candidates`; those `fixed` sets
    alone), loop order, dataflow and orientation of an array operator with the deepest
    depth that fits and its lower bounds: the grid of each orientation, one after
    another."""
    grids = [_oriented_grid(op, fuse, following, platform, coarse, orientation, fixed)
             for orientation in orientations]
    if len(grids) == 1:
        return grids[0]
    return Candidates(*(np.concatenate([getattr(g, f) for g in grids])
                        for f in Candidates.__dataclass_fields__ if f != "depth"))


def _oriented_grid(op, fuse: str | None, following, platform: Platform, coarse: bool,
                   orientation: str, fixed: tuple = OPEN) -> Candidates:
    """_compute_grid's candidates of one orientation. Quantities are built on axes (m
    tile, n tile, k tile, loop order, dataflow) of the operator's own dims and
    broadcast, so each is computed on its own axes. Run transposed, the nest is the
    same loop nest with A and B exchanged (model.loop_nest): each operand's reuse is
    unchanged, but A's tiles sit in the weight buffer and B's in the ifmap buffer, A
    and B trade their SRAM read rules, and the array's busy cycles are those of the
    nest of Bᵀ.Aᵀ."""
    array = platform.systolic_array
    g = op.gemm()
    _, acc, out = operand_bytes(op, platform)
    units = (array.rows, array.cols)
    dataflows = array.dataflows
    sizes = coarse_candidates if coarse else dim_candidates
    vm, vn, vk = (np.asarray(sizes(size, units), dtype=np.int64)
                  for size in (g.m, g.n, g.k))
    check_candidates(len(vm) * len(vn) * len(vk) * len(LOOP_ORDERS) * len(dataflows), op,
                     "the mapper")
    # A size the plan fixes: its candidates alone (each figure below is per candidate,
    # so theirs are what the whole grid's would be).
    vm, vn, vk = (values if size is None else values[values == size]
                  for values, size in zip((vm, vn, vk), fixed))
    # Axes: 0 m tile, 1 n tile, 2 k tile, 3 loop order, 4 dataflow.
    tm, tn, tk = vm[:, None, None], vn[None, :, None], vk[None, None, :]
    order = np.arange(len(LOOP_ORDERS))[None, None, None, :]
    cm, cn, ck = -(-g.m // tm), -(-g.n // tn), -(-g.k // tk)
    onchip = operator_onchip(op, platform)
    buffers = platform.buffers
    transposed = orientation != "normal"
    # The buffers A's and B's tiles sit in (the nest's A in ifmap, its B in weight).
    a_capacity, b_capacity = oriented((buffers.ifmap_bytes, buffers.weight_bytes),
                                      orientation)
    # Fit: the deepest depth at which every operand's depth tiles fit.
    # A's largest tile: its im2col size for a GEMM. For a conv, its window lies between
    # one middle tile's window (a_low; counted only where the bound a_bytes leaves the
    # depth open) and a_bytes (mapping.a_tile_bound); the exact largest window is
    # counted only where those two disagree on the depth that fits.
    a_bytes = np.broadcast_to(a_tile_bytes(op, platform, tm, tk, "bound"),
                              (len(vm), 1, len(vk))).copy()
    a_low = np.zeros_like(a_bytes) if isinstance(op, Conv2d) else a_bytes.copy()
    a_elements = window_elements(op, 0, g.m, 0, g.k) if isinstance(op, Conv2d) \
        else g.m * g.k
    a_compulsory = activation_bytes(op, platform, a_elements)
    if isinstance(op, Conv2d):
        unsure = a_capacity // a_bytes < MAX_DEPTH
        if unsure.any():
            a_low[unsure] = _middle_windows(op, platform, vm, vk, unsure[:, 0, :])
        undecided = unsure & (np.minimum(a_capacity // a_bytes, MAX_DEPTH)
                              != np.minimum(a_capacity // np.maximum(a_low, 1),
                                            MAX_DEPTH))
        for i in np.flatnonzero(undecided.any(axis=(1, 2))):
            js = np.flatnonzero(undecided[i, 0])
            a_bytes[i, 0, js] = a_low[i, 0, js] = activation_bytes(
                op, platform, window_maxima(op, int(vm[i]), vk[js]))
    b_slots = b_capacity // b_tile_bytes(op, platform, tk, tn)
    c_slots = buffers.output_bytes // c_tile_bytes(op, platform, tm, tn)
    max_depth = np.minimum(np.minimum(a_capacity // a_bytes, MAX_DEPTH),
                           np.minimum(b_slots, c_slots))
    # Off-chip bytes, per loop order (axis 3): exact for a GEMM (the LRU reuse that
    # mapping.offchip_by_order models), a lower bound for a conv, whose A tiles are
    # counted as its compulsory window and whose A slots as at most those of the mean
    # window (so reuse is never underestimated).
    counts = {"m": cm[..., None], "n": cn[..., None], "k": ck[..., None]}

    def inside(reuse: str, own: str) -> np.ndarray:
        return inside_product(reuse, own, counts, order)

    def fetches(reuse: str, own: str, slots: np.ndarray) -> np.ndarray:
        return lru_fetches(counts[reuse], inside(reuse, own), slots[..., None])

    # A's mean tile, whole elements rounded up, packed: no larger than its largest
    a_mean = np.maximum(a_low, activation_bytes(op, platform, -(-a_elements // (cm * ck))))
    a_moves = a_compulsory * fetches("n", "mk", a_capacity // a_mean)
    # B: its packed (compressed) tensor per fetch, a lower bound of its packed tiles
    b_moves = weight_bytes(op, platform, g.k * g.n, offchip=True) * \
        fetches("m", "kn", b_slots)
    c_moves = c_offchip_bytes(g, out, acc, counts["k"],
                              c_slots[..., None] < inside("k", "mn"))
    offchip = b_moves + (0 if onchip else a_moves + c_moves)
    # Cycles: the first load, exact busy array cycles, the last epilogue and store; or
    # the off-chip server busy with every byte (a cycle spared for float rounding),
    # then the last store's latency.
    memory = memory_params(platform)
    bpc, access = memory.bytes_per_cycle, memory.access_cycles
    a0 = 0 if onchip or isinstance(op, Conv2d) else \
        activation_bytes(op, platform, tm * tk)  # conv: 0, a bound
    head = 1 + _service(a0 + weight_bytes(op, platform, tk * tn, offchip=True), bpc) + access
    ms_last, ns_last = g.m - (cm - 1) * tm, g.n - (cn - 1) * tn
    epilogue, passes = 0, 0
    lanes = platform.vector_unit.lanes
    if fuse is not None and following is not None and not is_compute(following):
        shape = following.vector()
        cpe = getattr(platform.vector_unit.cycles_per_element, shape.cost_kind)
        passes = shape.passes
        epilogue = -(-(ms_last * ns_last) // lanes) * cpe * passes
    elif transposed:   # the last tile's transpose on store, where it takes a pass
        store_work = transpose_work(platform, orientation, "os")[2]
        epilogue = -(-(ms_last * ns_last) // lanes) * store_work
    tail = 0 if onchip else 1 + _service(ms_last * ns_last * out, bpc) + access
    # The nest's dims, tiles and loop order (model.loop_nest.oriented).
    (nest_m, nest_n, _), (nest_tm, nest_tn, _) = oriented((g.m, g.n, g.k), orientation), \
        oriented((tm[..., None], tn[..., None], tk), orientation)
    nest_order = ORIENTED_ORDER[ORIENTATIONS.index(orientation)][order]
    busy = np.stack([array_busy_cycles(nest_m, nest_n, g.k, nest_tm, nest_tn,
                                       tk[..., None], order=nest_order, dataflow=name,
                                       rows=array.rows, cols=array.cols,
                                       count=array.count, fold_model=array.fold_model,
                                       speed=array_speed(op, platform))
                     for name in dataflows], axis=-1)
    served = np.floor(offchip / bpc).astype(np.int64) + (0 if onchip else access)
    per_run = np.maximum((head + epilogue + tail)[..., None, None] + busy,
                         served[..., None]) + platform.runtime.op_overhead_cycles
    runs = runs_of(op)
    # Energy: MACs, fused vector work, the off-chip bytes above, SRAM reads (exact,
    # SCALE-Sim's per-fold counting in closed form), SRAM writes of those A and B
    # fetches and of the C partial sums, and static power over the cycle bound.
    reads = []
    a_rule, b_rule = oriented((A_READS, B_READS), orientation)
    for name in dataflows:
        code = DATAFLOW_CODES[name]
        a_reads = g.m * g.k * _input_reads(a_rule[code], g.n, tn, cn, array)
        b_reads = g.k * g.n * _input_reads(b_rule[code], g.m, tm, cm, array)
        reads.append(np.broadcast_to(activation_bytes(op, platform, a_reads)
                                     + weight_bytes(op, platform, b_reads, offchip=False),
                                     max_depth.shape))
    c_traffic = g.m * g.n * acc * ck
    table = platform.energy
    # A coefficient near a double's limit makes a bound inf, and the run refuses it in
    # its own words (metrics): numpy's warning would print above that error line.
    with np.errstate(over="ignore", invalid="ignore"):
        dynamic = (np.stack(reads, axis=-1)[:, :, :, None, :] * table.sram_read_pj_per_byte
                   + ((a_moves + b_moves) * table.sram_write_pj_per_byte
                      + offchip * table.offchip_pj_per_byte
                      + (c_traffic * (table.sram_read_pj_per_byte
                                      + table.sram_write_pj_per_byte))[..., None])[..., None]
                   + g.m * g.n * g.k * table.mac_pj[operator_dtype(op, platform)]
                   / sparse_speedup(op, platform)
                   + g.m * g.n * passes * table.vector_op_pj)
        # A hair under, so float rounding in another summation order cannot lift the
        # bound above a candidate's true energy.
        energy = (dynamic + _static_pj_per_cycle(platform) * per_run) * runs * (1 - 1e-9)
    effective = EFFECTIVE_ORDER[loop_tables_index(g.m, g.n, g.k, tm[..., None],
                                                  tn[..., None], tk[..., None],
                                                  order=order)]
    shape = (len(vm), len(vn), len(vk), len(LOOP_ORDERS), len(dataflows))

    def flat(values) -> np.ndarray:
        values = np.asarray(values)
        return np.broadcast_to(values.reshape(values.shape + (1,) * (5 - values.ndim)),
                               shape).ravel()

    return Candidates(flat(tm), flat(tn), flat(tk), flat(order),
                       np.broadcast_to(np.arange(len(dataflows)), shape).ravel(),
                       flat(np.full((), ORIENTATIONS.index(orientation))),
                       flat(max_depth), per_run.ravel() * runs, energy.ravel(),
                       flat(effective))


# Rows-per-tile candidates of a vector operator step by an eighth of a lane pass, and
# there are at most this many steps (coarser steps beyond).
VECTOR_STEPS_PER_PASS = 8
MAX_VECTOR_SIZES = 4096


def vector_sizes(op, platform: Platform) -> list[int]:
    """Rows per tile worth trying: the divisors of the rows and the multiples of a step
    of rows (an eighth of what one pass of the lanes covers, coarser where that would
    give more than MAX_VECTOR_SIZES sizes), ascending."""
    shape = op.vector()
    lanes = platform.vector_unit.lanes
    step = max(1, ceil_div(lanes, VECTOR_STEPS_PER_PASS * shape.cols),
               ceil_div(shape.rows, MAX_VECTOR_SIZES))
    rows = set(divisors(shape.rows))
    rows.update(range(step, shape.rows, step))
    rows.add(shape.rows)
    return sorted(rows)


def _vector_grid(op, platform: Platform) -> Candidates:
    """Rows per tile (`vector_sizes`) of a vector operator with the deepest depth that
    fits and its lower bounds (its dynamic energy is fixed)."""
    shape = op.vector()
    e = operand_bytes(op, platform)[0]
    buffers = platform.buffers
    memory = memory_params(platform)
    bpc, access = memory.bytes_per_cycle, memory.access_cycles
    onchip = operator_onchip(op, platform)
    cpe = getattr(platform.vector_unit.cycles_per_element, shape.cost_kind)
    lanes = platform.vector_unit.lanes
    total_in, total_out = shape.input_elements * e, shape.output_elements * e
    table = platform.energy
    dynamic = (shape.rows * shape.cols * shape.passes * table.vector_op_pj
               + (total_in + total_out) * (table.sram_read_pj_per_byte
                                           + table.sram_write_pj_per_byte)
               + (0 if onchip else (total_in + total_out) * table.offchip_pj_per_byte))
    sizes = np.asarray(vector_sizes(op, platform), dtype=np.int64)
    full, rem = shape.rows // sizes, shape.rows % sizes
    if shape.input_elements % shape.rows == 0 and shape.output_elements % shape.rows == 0:
        # Every row holds the same elements: full tiles and one edge tile.
        per_in, per_out = shape.input_elements // shape.rows * e, \
            shape.output_elements // shape.rows * e
        in_max, out_max = per_in * sizes, per_out * sizes
        in_service = full * _service(in_max, bpc) + _service(per_in * rem, bpc)
        out_service = full * _service(out_max, bpc) + _service(per_out * rem, bpc)
        last_out = np.where(rem > 0, per_out * rem, out_max)
        last_in = np.where(rem > 0, per_in * rem, in_max)
    else:  # rows of unequal share (pool): every tile, counted as lowering splits
        columns = []
        for tile in sizes.tolist():
            in_bytes, out_bytes = vector_tile_split(op, tile, e)
            columns.append((in_bytes.max(), out_bytes.max(), _service(in_bytes, bpc).sum(),
                            _service(out_bytes, bpc).sum(), in_bytes[-1], out_bytes[-1]))
        in_max, out_max, in_service, out_service, last_in, last_out = \
            np.array(columns, dtype=np.int64).T
    max_depth = np.minimum(np.minimum(buffers.ifmap_bytes // in_max, MAX_DEPTH),
                           buffers.output_bytes // out_max)

    def cycles(rows):
        return -(-(rows * shape.cols) // lanes) * cpe * shape.passes

    busy = full * cycles(sizes) + np.where(rem > 0, cycles(rem), 0)
    last_rows = np.where(rem > 0, rem, sizes)
    if onchip:  # nothing moves off chip: the vector unit's work is the bound
        per_run = busy
    else:
        # The first tile's load precedes all compute, the last store follows it; and
        # the server serves every transfer, one at a time, the last store's completion
        # coming `access` cycles after its service.
        first_in = row_shares(shape.input_elements, np.minimum(sizes, shape.rows),
                              shape.rows) * e
        head = np.where(first_in > 0, 1 + _service(first_in, bpc) + access, 0)
        tail = np.where(last_out > 0, 1 + _service(last_out, bpc) + access, 0)
        # The last tile computes after every load has been served, then stores.
        last_load = np.where(last_in > 0, 1 + in_service + access, 0) + \
            cycles(last_rows) + tail
        served = np.where(last_out > 0, 1 + in_service + out_service + access, 0)
        per_run = np.maximum.reduce([head + busy + tail, last_load, served])
    per_run = per_run + platform.runtime.op_overhead_cycles
    runs = runs_of(op)
    zeros = np.zeros(len(sizes), dtype=np.int64)
    return Candidates(sizes, zeros + 1, zeros + 1, zeros + LOOP_ORDERS.index("mnk"),
                       zeros, zeros, max_depth, per_run * runs,
                       (dynamic + _static_pj_per_cycle(platform) * per_run) * runs
                       * (1 - 1e-9), zeros)


def candidate_grid(op, fuse: str | None, following, platform: Platform,
                   coarse: bool = False, orientations: tuple[str, ...] = ORIENTATIONS,
                   fixed: tuple = OPEN) -> tuple[Candidates, list[str]]:
    """An operator's candidates before depth (an array operator's in `orientations`,
    with the tile sizes (tm, tn, tk) `fixed` sets, None where open), and the dataflows
    they index."""
    if is_compute(op):
        return (_compute_grid(op, fuse, following, platform, coarse, orientations,
                              fixed), list(platform.systolic_array.dataflows))
    return _vector_grid(op, platform), ["os"]



def candidate_bounds(op, platform: Platform, *, fuse: str | None = None,
                     following=None, orientations: tuple[str, ...] = ORIENTATIONS
                     ) -> tuple[list[Tiling], np.ndarray, np.ndarray]:
    """Every fitting grid candidate of an operator with its (cycles, energy) lower
    bounds, totals over its runs (for tests and studies of the bound)."""
    grid, dataflows = candidate_grid(op, fuse, following, platform,
                                     orientations=orientations)
    grid = grid.expand()
    tilings = [Tiling(tm=int(grid.tm[i]), tn=int(grid.tn[i]), tk=int(grid.tk[i]),
                      loop_order=LOOP_ORDERS[int(grid.order[i])],
                      dataflow=dataflows[int(grid.dataflow[i])], depth=int(grid.depth[i]),
                      fuse=fuse, heuristic=MAPPER,
                      orientation=ORIENTATIONS[int(grid.orientation[i])])
               for i in range(len(grid))]
    return tilings, grid.cycles_lb, grid.energy_lb


