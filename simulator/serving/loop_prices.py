"""LlmCost's iteration prices for the compiled serving loop (simulator.serving.loop_kernel),
operation for operation: `LlmCost.iteration` and `LlmCost.decode_run` (its stretches
between grid points, their changes and running sums) over tables copied from the cost
model's memos and grid points; a size between grid points is interpolated here as
LlmCost interpolates it (its dense part, a chunk's attention, a decode's) and kept in
the memo's table (a chunk's attention is not: see _prefill_cost). A lacking grid point
or call is a MISS naming it (I_MISS_KIND, I_MISS_A, I_MISS_B): the driver asks the
cost model, as the reference would at that point, and the kernel prices the plan
again.

The tables keyed by one number (decode costs by context, the dense part by tokens)
are dense: a row of values by index and a flag saying it is known, an array read
(a typed dictionary's lookup cost ~25 ns); those keyed by two are loop_maps. The driver
enlarges them where an index lies beyond their rows or a map is half full
(K_DECODE_ROOM, K_DENSE_ROOM, or a grid point's miss beyond)."""

from __future__ import annotations

from typing import NamedTuple

from simulator.kernels.jit import njit
from simulator.serving.loop_maps import EMPTY, slot_of
from simulator.serving.loop_state import (CALL_ANY, DONE, FIXED, INLINED, I_BITS,
                                          I_CALL_KEYED, I_MISS_A, I_MISS_B, I_MISS_KIND,
                                          I_NTOUCHED, K_CALL, K_DECODE_ROOM, K_DENSE_GRID,
                                          K_DENSE_ROOM, K_GRID, K_PREFILL_GRID, LOOP,
                                          MISS, R_PREFILLED, S_NCHUNK, S_NDEC, S_RUN,
                                          VARIABLE)


class CostTables(NamedTuple):
    """The cost model's memos and grid points (the driver fills them). Dense tables
    (rows by index, and whether each row is known): the memos' dense part (seconds,
    joules) by tokens and decode (variable seconds, joules, fixed seconds, joules) by
    context, the grid points' decode by context and dense part by tokens. PairMaps:
    the memo's call by call_key, the grid points' prefill attention by (new << 32 |
    cached)."""

    dense: object
    dense_known: object
    decode: object
    decode_known: object
    call: object
    grid: object
    grid_known: object
    dense_grid: object
    dense_grid_known: object
    prefill_grid: object


@njit(**LOOP)
def _grid_cell(value, bits):
    """llm_cost.grid_cell."""
    if value < (1 << bits):
        return value, value
    shift, v = 0, value >> bits  # value's bit length less `bits`
    while v:
        v >>= 1
        shift += 1
    low = (value >> shift) << shift
    return (low, low) if low == value else (low, low + (1 << shift))


@njit(**LOOP)
def call_key(keyed, tokens, requests):
    """A call's key in CostTables.call: (tokens << 32 | requests) where its cost
    depends on them (`keyed`: I_CALL_KEYED), else CALL_ANY, so that a run asks the
    cost model for one call's cost instead of one per (tokens, requests)."""
    return (tokens << 32) | requests if keyed else CALL_ANY


@njit(**LOOP)
def _miss(si, kind, a, b):
    si[I_MISS_KIND], si[I_MISS_A], si[I_MISS_B] = kind, a, b
    return MISS


@njit(**LOOP)
def _known(known, index):
    """Whether a dense table's row `index` is known (rows beyond its end are not)."""
    return index < known.shape[0] and known[index]


@njit(**LOOP)
def _lacks_point(si, known, kind, low, high):
    """Whether grid point `low`, then `high` (the reference's order of asking), is
    lacking from `known`: a MISS of `kind` named for the first lacking."""
    for point in (low, high):
        if not _known(known, point):
            _miss(si, kind, point, 0)
            return True
    return False


@njit(**LOOP)
def _between(low, high, fraction):
    """llm_cost._between of two (seconds, joules) pairs."""
    return (low[0] + (high[0] - low[0]) * fraction,
            low[1] + (high[1] - low[1]) * fraction)


@njit(**LOOP)
def _dense_cost(si, tables, tokens):
    """LlmCost._dense_cost into the dense table: False (a MISS named) where a grid
    point is lacking, or the table's room."""
    dense, known = tables.dense, tables.dense_known
    dgrid, dgrid_known = tables.dense_grid, tables.dense_grid_known
    if tokens >= known.shape[0]:
        _miss(si, K_DENSE_ROOM, tokens, 0)
        return False
    low, high = _grid_cell(tokens, si[I_BITS])
    if _lacks_point(si, dgrid_known, K_DENSE_GRID, low, high):
        return False
    at_low = (dgrid[low, 0], dgrid[low, 1])
    dense[tokens, 0], dense[tokens, 1] = at_low if low == high else \
        _between(at_low, (dgrid[high, 0], dgrid[high, 1]), (tokens - low) / (high - low))
    known[tokens] = True
    return True


@njit(**LOOP)
def _point(si, keys, new, cached):
    """The slot of grid point (new, cached) in the prefill grid map, or -1 with a
    MISS named where it is lacking."""
    at = slot_of(keys, (new << 32) | cached)
    if keys[at] == EMPTY:
        _miss(si, K_PREFILL_GRID, new, cached)
        return -1
    return at


@njit(**LOOP)
def _prefill_row(si, pgrid, n0, n1, cached, across):
    """One `cached` row of a chunk's grid cell: its point at n0, or between n0's and
    n1's at `across`: (True, seconds, joules), or (False, 0, 0) with a MISS named where
    a point is lacking (n0's first)."""
    keys, values = pgrid.keys, pgrid.values
    at0 = _point(si, keys, n0, cached)
    if at0 < 0:
        return False, 0.0, 0.0
    if n1 == n0:
        return True, values[at0, 0], values[at0, 1]
    at1 = _point(si, keys, n1, cached)
    if at1 < 0:
        return False, 0.0, 0.0
    seconds, joules = _between((values[at0, 0], values[at0, 1]),
                               (values[at1, 0], values[at1, 1]), across)
    return True, seconds, joules


@njit(**LOOP)
def _prefill_cost(si, pgrid, new, cached):
    """LlmCost._prefill_cost (_prefill_between): (True, seconds, joules), or (False,
    0, 0) with a MISS named where a grid point is lacking (asked in the reference's
    order: low cached first, low new first). Not kept: LlmCost's memo holds what the
    grid points give (a run meets ~20,000 chunks: a map of them, at random slots,
    missed the caches at each read; the grid map is small)."""
    n0, n1 = _grid_cell(new, si[I_BITS])
    c0, c1 = _grid_cell(cached, si[I_BITS])
    across = (new - n0) / (n1 - n0) if n1 != n0 else 0.0
    found, seconds, joules = _prefill_row(si, pgrid, n0, n1, c0, across)
    if not found or c1 == c0:
        return found, seconds, joules
    found, high_s, high_j = _prefill_row(si, pgrid, n0, n1, c1, across)
    if not found:
        return False, 0.0, 0.0
    seconds, joules = _between((seconds, joules), (high_s, high_j),
                               (cached - c0) / (c1 - c0))
    return True, seconds, joules


@njit(**LOOP)
def _decode_cost(si, tables, context):
    """LlmCost._decode_cost into the decode table ((variable, fixed) pairs): False (a
    MISS named) where a grid point is lacking, or the table's room."""
    dcost, known, grid, gknown = (tables.decode, tables.decode_known, tables.grid,
                                  tables.grid_known)
    if context >= known.shape[0]:
        _miss(si, K_DECODE_ROOM, context, 0)
        return False
    low, high = _grid_cell(context, si[I_BITS])
    fraction = (context - low) / (high - low if high != low else 1)
    if _lacks_point(si, gknown, K_GRID, low, high):  # _decode_at(low), then (high)
        return False
    variable = _between((grid[low, 0], grid[low, 1]), (grid[high, 0], grid[high, 1]),
                        fraction)
    fixed = _between((grid[low, 2], grid[low, 3]), (grid[high, 2], grid[high, 3]),
                     fraction)
    dcost[context, 0], dcost[context, 1] = variable
    dcost[context, 2], dcost[context, 3] = fixed
    known[context] = True
    return True


@njit(**LOOP)
def _stretch(context, end, low, high, s0, e0, s1, e1):
    """LlmCost._stretches' stretch of one part from iteration `end` on, in the grid
    cell (low, high) of context + end whose points' costs are (s0, e0) and (s1, e1):
    (start, end, a_s, a_e, b_s, b_e)."""
    if low == high:
        return end, end + 1, s0, e0, 0.0, 0.0
    span = high - low
    b_s, b_e = (s1 - s0) / span, (e1 - e0) / span
    a_s, a_e = _on_line(context, low, s0, e0, b_s, b_e)
    return end, high - context, a_s, a_e, b_s, b_e


@njit(**LOOP)
def _on_line(context, low, s0, e0, b_s, b_e):
    """A stretch's (seconds, joules) at `context`: from (s0, e0) at `low` on by its
    slopes."""
    return s0 + b_s * (context - low), e0 + b_e * (context - low)


@njit(**INLINED)
def price_iteration(si, batch, ri, ctx, tables):
    """LlmCost.iteration of the plan's chunks and decodes (their contexts `ctx`), in
    its order of reads."""
    s, cost_s, cost_e = batch.s, batch.ends, batch.energies
    ch_req, ch_new = batch.chunk_requests, batch.chunk_tokens
    dense, dense_known, pgrid, call = (tables.dense, tables.dense_known,
                                       tables.prefill_grid, tables.call)
    dcost, dknown = tables.decode, tables.decode_known
    ndec, nchunk = s[S_NDEC], s[S_NCHUNK]
    tokens = ndec
    for i in range(nchunk):
        tokens += ch_new[i]
    if not _known(dense_known, tokens) and not _dense_cost(si, tables, tokens):
        return MISS
    seconds, energy = dense[tokens, 0], dense[tokens, 1]
    for i in range(nchunk):
        known, chunk_s, chunk_e = _prefill_cost(si, pgrid, ch_new[i],
                                                ri[ch_req[i], R_PREFILLED])
        if not known:
            return MISS
        seconds += chunk_s
        energy += chunk_e
    longest = -1
    for j in range(ndec):
        context = ctx[j]
        longest = max(longest, context)
        if not _known(dknown, context) and not _decode_cost(si, tables, context):
            return MISS
        seconds += dcost[context, 0]
        energy += dcost[context, 1]
    if ndec:
        seconds += dcost[longest, 2]
        energy += dcost[longest, 3]
    requests = ndec + nchunk
    key = call_key(si[I_CALL_KEYED], tokens, requests)
    at = slot_of(call.keys, key)
    if call.keys[at] != key:
        return _miss(si, K_CALL, tokens, requests)
    call_s, call_e = call.values[at, 0], call.values[at, 1]
    cost_s[0] = seconds + call_s
    cost_e[0] = energy + call_e
    return DONE


@njit(**INLINED)
def price_decode_run(si, batch, work, tables):
    """LlmCost.decode_run of the decoding requests' contexts (batch.contexts) over
    S_RUN iterations, in its order of reads and sums; each part's stretch read from the
    grid table inline (a grid point lacking: low first, as _stretches asks), or, for a
    decoding request, from the one kept with it where its context is still inside
    that stretch's grid cell (its points known, its slopes the same numbers; each
    request stays in a cell for many runs)."""
    s, cost_s, cost_e = batch.s, batch.ends, batch.energies
    ctx, rows, touched, tlist = batch.contexts, work.rows, work.touched, work.touched_list
    cells, kept = batch.cells, batch.stretches
    cross = work.crossings
    dense, dense_known, call = tables.dense, tables.dense_known, tables.call
    grid, gknown = tables.grid, tables.grid_known
    n, iterations, bits = s[S_NDEC], s[S_RUN], si[I_BITS]
    for k in range(si[I_NTOUCHED]):  # a MISS may have left changes behind
        t = tlist[k]
        touched[t] = False
        rows[t, 0] = rows[t, 1] = rows[t, 2] = rows[t, 3] = 0.0
    si[I_NTOUCHED] = 0
    longest = ctx[0]
    for j in range(1, n):
        longest = max(longest, ctx[j])
    first_s = first_e = slope_s = slope_e = 0.0
    ncross = 0
    for p in range(n + 1):
        if p < n and cells[p, 0] < ctx[p] < cells[p, 1]:  # its stretch kept
            context, low = ctx[p], cells[p, 0]
            end, b_s, b_e = cells[p, 1] - context, kept[p, 2], kept[p, 3]
            a_s, a_e = _on_line(context, low, kept[p, 0], kept[p, 1], b_s, b_e)
        else:
            which, context = (VARIABLE, ctx[p]) if p < n else (FIXED, longest)
            low, high = _grid_cell(context, bits)
            if _lacks_point(si, gknown, K_GRID, low, high):
                return MISS
            s0, e0 = grid[low, 2 * which], grid[low, 2 * which + 1]
            _, end, a_s, a_e, b_s, b_e = _stretch(
                context, 0, low, high, s0, e0, grid[high, 2 * which],
                grid[high, 2 * which + 1])
            if p < n and low != high:
                cells[p, 0], cells[p, 1] = low, high
                kept[p, 0], kept[p, 1], kept[p, 2], kept[p, 3] = s0, e0, b_s, b_e
        first_s += a_s
        first_e += a_e
        slope_s += b_s
        slope_e += b_e
        if end < iterations:
            cross[ncross] = p
            ncross += 1
    if not _known(dense_known, n) and not _dense_cost(si, tables, n):
        return MISS
    dense_s, dense_e = dense[n, 0], dense[n, 1]
    key = call_key(si[I_CALL_KEYED], n, n)
    at = slot_of(call.keys, key)
    if call.keys[at] != key:
        return _miss(si, K_CALL, n, n)
    call_s, call_e = call.values[at, 0], call.values[at, 1]
    base_s, base_e = dense_s + call_s, dense_e + call_e
    if ncross == 0:
        head_s, head_e = base_s + first_s, base_e + first_e
        for i in range(iterations):
            cost_s[i] = head_s + slope_s * i
            cost_e[i] = head_e + slope_e * i
        return DONE
    for c in range(ncross):  # _later_changes
        p = cross[c]
        which, context = (VARIABLE, ctx[p]) if p < n else (FIXED, longest)
        end, index = 0, 0
        while end < iterations:
            low, high = _grid_cell(context + end, bits)
            if _lacks_point(si, gknown, K_GRID, low, high):
                return MISS
            start, end, a_s, a_e, b_s, b_e = _stretch(
                context, end, low, high, grid[low, 2 * which], grid[low, 2 * which + 1],
                grid[high, 2 * which], grid[high, 2 * which + 1])
            if index:
                if not touched[start]:
                    touched[start] = True
                    tlist[si[I_NTOUCHED]] = start
                    si[I_NTOUCHED] += 1
                rows[start, 0] += a_s
                rows[start, 1] += a_e
                rows[start, 2] += b_s
                rows[start, 3] += b_e
            if end < iterations:
                if not touched[end]:
                    touched[end] = True
                    tlist[si[I_NTOUCHED]] = end
                    si[I_NTOUCHED] += 1
                rows[end, 0] -= a_s
                rows[end, 1] -= a_e
                rows[end, 2] -= b_s
                rows[end, 3] -= b_e
            index += 1
    t0, t1, t2, t3 = first_s, first_e, slope_s, slope_e
    v_s, v_e = t0 + base_s, t1 + base_e
    for i in range(iterations):
        if i and touched[i]:
            t0 += rows[i, 0]
            t1 += rows[i, 1]
            t2 += rows[i, 2]
            t3 += rows[i, 3]
            v_s, v_e = t0 + base_s, t1 + base_e
        cost_s[i] = v_s + t2 * i
        cost_e[i] = v_e + t3 * i
    return DONE
