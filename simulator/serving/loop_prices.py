"""LlmCost's iteration prices for the compiled serving loop (simulator.serving.loop_kernel),
operation for operation: `LlmCost.iteration` and `LlmCost.decode_run` (its stretches
between grid points, their changes and running sums) over tables copied from the cost
model's memos and grid points; a size between grid points is interpolated here as
LlmCost interpolates it (its dense part, a chunk's attention, a decode's) and kept in
the memo's table. A lacking grid point or call is a MISS naming it (I_MISS_KIND,
I_MISS_A, I_MISS_B): the driver asks the cost model, as the reference would at that
point, and the kernel prices the plan again.

The decode memo and grid points, read once per decoding request per iteration, are
dense tables indexed by context (a row of (variable, fixed) and a flag saying it is
known: an array read where a typed dictionary's lookup costs ~25 ns); the driver
enlarges them where a context lies beyond their rows (K_DECODE_ROOM, or a K_GRID miss
of a point beyond)."""

from __future__ import annotations

from typing import NamedTuple

from simulator.kernels.jit import njit
from simulator.serving.loop_state import (CALL_ANY, DONE, FIXED, I_BITS, I_CALL_KEYED,
                                          I_MISS_A, I_MISS_B, I_MISS_KIND, I_NTOUCHED,
                                          K_CALL, K_DECODE_ROOM, K_DENSE_GRID, K_GRID,
                                          K_PREFILL_GRID, MISS, R_KV_TOKENS, R_PREFILLED,
                                          S_NCHUNK, S_NDEC, S_RUN, VARIABLE)


class CostTables(NamedTuple):
    """The cost model's memos and grid points (the driver fills them): as typed
    dictionaries the memos' dense part by tokens, prefill attention by (new << 32 |
    cached), call by call_key, and the grid points' dense part by tokens, prefill
    attention by (new << 32 | cached); as dense tables (rows of (variable seconds,
    joules, fixed seconds, joules) by context, and whether each row is known) the
    memo's decode and the grid points' decode."""

    dense: object
    prefill: object
    decode: object
    decode_known: object
    call: object
    grid: object
    grid_known: object
    dense_grid: object
    prefill_grid: object


@njit(cache=True)
def _known(known, index):
    """Whether row `index` of a dense table is known (False beyond its rows)."""
    return index < known.shape[0] and known[index]


@njit(cache=True)
def _grid_cell(value, bits):
    """llm_cost.grid_cell."""
    if value < (1 << bits):
        return value, value
    length, v = 0, value
    while v:
        v >>= 1
        length += 1
    shift = length - bits
    low = (value >> shift) << shift
    return (low, low) if low == value else (low, low + (1 << shift))


@njit(cache=True)
def call_key(keyed, tokens, requests):
    """A call's key in CostTables.call: (tokens << 32 | requests) where its cost
    depends on them (`keyed`: I_CALL_KEYED), else CALL_ANY, so that a run asks the
    cost model for one call's cost instead of one per (tokens, requests)."""
    return (tokens << 32) | requests if keyed else CALL_ANY


@njit(cache=True)
def _miss(si, kind, a, b):
    si[I_MISS_KIND], si[I_MISS_A], si[I_MISS_B] = kind, a, b
    return MISS


@njit(cache=True)
def _between(low, high, fraction):
    """llm_cost._between of two (seconds, joules) pairs."""
    return (low[0] + (high[0] - low[0]) * fraction,
            low[1] + (high[1] - low[1]) * fraction)


@njit(cache=True)
def _dense_cost(si, dense, dgrid, tokens):
    """LlmCost._dense_cost into `dense`: False (a MISS named) where a grid point is
    lacking."""
    if tokens in dense:
        return True
    low, high = _grid_cell(tokens, si[I_BITS])
    for point in (low, high):  # at(low), then at(high): the reference's order
        if point not in dgrid:
            _miss(si, K_DENSE_GRID, point, 0)
            return False
    dense[tokens] = dgrid[low] if low == high else \
        _between(dgrid[low], dgrid[high], (tokens - low) / (high - low))
    return True


@njit(cache=True)
def _prefill_cost(si, prefill, pgrid, new, cached):
    """LlmCost._prefill_cost (_prefill_between) into `prefill`: False (a MISS named)
    where a grid point is lacking."""
    if ((new << 32) | cached) in prefill:
        return True
    n0, n1 = _grid_cell(new, si[I_BITS])
    c0, c1 = _grid_cell(cached, si[I_BITS])
    for i in range(2 if c1 != c0 else 1):  # the grid points in the reference's order
        c = c0 if i == 0 else c1
        for j in range(2 if n1 != n0 else 1):
            n = n0 if j == 0 else n1
            if ((n << 32) | c) not in pgrid:
                _miss(si, K_PREFILL_GRID, n, c)
                return False
    across = (new - n0) / (n1 - n0) if n1 != n0 else 0.0
    low = pgrid[(n0 << 32) | c0] if n1 == n0 else \
        _between(pgrid[(n0 << 32) | c0], pgrid[(n1 << 32) | c0], across)
    if c1 != c0:
        high = pgrid[(n0 << 32) | c1] if n1 == n0 else \
            _between(pgrid[(n0 << 32) | c1], pgrid[(n1 << 32) | c1], across)
        low = _between(low, high, (cached - c0) / (c1 - c0))
    prefill[(new << 32) | cached] = low
    return True


@njit(cache=True)
def _decode_cost(si, tables, context):
    """LlmCost._decode_cost into the decode table ((variable, fixed) pairs): False (a
    MISS named) where a grid point is lacking, or the table's room."""
    dcost, dknown, grid, gknown = (tables.decode, tables.decode_known, tables.grid,
                                   tables.grid_known)
    if _known(dknown, context):
        return True
    if context >= dknown.shape[0]:
        _miss(si, K_DECODE_ROOM, context, 0)
        return False
    low, high = _grid_cell(context, si[I_BITS])
    fraction = (context - low) / (high - low if high != low else 1)
    for point in (low, high):  # _decode_at(low), then _decode_at(high)
        if not _known(gknown, point):
            _miss(si, K_GRID, point, 0)
            return False
    variable = _between((grid[low, 0], grid[low, 1]), (grid[high, 0], grid[high, 1]),
                        fraction)
    fixed = _between((grid[low, 2], grid[low, 3]), (grid[high, 2], grid[high, 3]),
                     fraction)
    dcost[context, 0], dcost[context, 1] = variable
    dcost[context, 2], dcost[context, 3] = fixed
    dknown[context] = True
    return True


@njit(cache=True, inline="always")
def _stretch(si, grid, gknown, which, context, end, out):
    """LlmCost._stretches' stretch of one part from iteration `end` on, into `out`
    (start, end, then a_s, a_e, b_s, b_e); MISS where a grid point is lacking."""
    low, high = _grid_cell(context + end, si[I_BITS])
    if not _known(gknown, low):
        return _miss(si, K_GRID, low, 0)
    s0, e0 = grid[low, 2 * which], grid[low, 2 * which + 1]
    if low == high:
        out[0], out[1], out[2], out[3], out[4], out[5] = end, end + 1, s0, e0, 0.0, 0.0
        return DONE
    if not _known(gknown, high):
        return _miss(si, K_GRID, high, 0)
    s1, e1 = grid[high, 2 * which], grid[high, 2 * which + 1]
    span = high - low
    b_s, b_e = (s1 - s0) / span, (e1 - e0) / span
    out[0], out[1] = end, high - context
    out[2], out[3] = s0 + b_s * (context - low), e0 + b_e * (context - low)
    out[4], out[5] = b_s, b_e
    return DONE


@njit(cache=True)
def price_iteration(si, batch, ri, tables):
    """LlmCost.iteration of the plan's chunks and decodes, in its order of reads."""
    s, dec, cost_s, cost_e = batch.s, batch.decoding, batch.ends, batch.energies
    ch_req, ch_new = batch.chunk_requests, batch.chunk_tokens
    dense, prefill, call = tables.dense, tables.prefill, tables.call
    dcost, dknown = tables.decode, tables.decode_known
    dgrid, pgrid = tables.dense_grid, tables.prefill_grid
    ndec, nchunk = s[S_NDEC], s[S_NCHUNK]
    tokens = ndec
    for i in range(nchunk):
        tokens += ch_new[i]
    if not _dense_cost(si, dense, dgrid, tokens):
        return MISS
    seconds, energy = dense[tokens]
    for i in range(nchunk):
        new, cached = ch_new[i], ri[ch_req[i], R_PREFILLED]
        if not _prefill_cost(si, prefill, pgrid, new, cached):
            return MISS
        part_s, part_e = prefill[(new << 32) | cached]
        seconds += part_s
        energy += part_e
    longest = -1
    for j in range(ndec):
        context = ri[dec[j], R_KV_TOKENS] + 1
        longest = max(longest, context)
        if not (context < dknown.shape[0] and dknown[context]) \
                and not _decode_cost(si, tables, context):
            return MISS
        seconds += dcost[context, 0]
        energy += dcost[context, 1]
    if ndec:
        seconds += dcost[longest, 2]
        energy += dcost[longest, 3]
    requests = ndec + nchunk
    key = call_key(si[I_CALL_KEYED], tokens, requests)
    if key not in call:
        return _miss(si, K_CALL, tokens, requests)
    call_s, call_e = call[key]
    cost_s[0] = seconds + call_s
    cost_e[0] = energy + call_e
    return DONE


@njit(cache=True)
def price_decode_run(si, batch, work, tables):
    """LlmCost.decode_run of the decoding requests' contexts (work.contexts) over I_RUN
    iterations, in its order of reads and sums."""
    s, cost_s, cost_e = batch.s, batch.ends, batch.energies
    ctx, rows, touched, tlist = work.contexts, work.rows, work.touched, work.touched_list
    cross, out = work.crossings, work.out
    dense, call, dgrid = tables.dense, tables.call, tables.dense_grid
    grid, gknown = tables.grid, tables.grid_known
    n, iterations = s[S_NDEC], s[S_RUN]
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
        which, context = (VARIABLE, ctx[p]) if p < n else (FIXED, longest)
        if _stretch(si, grid, gknown, which, context, 0, out) == MISS:
            return MISS
        first_s += out[2]
        first_e += out[3]
        slope_s += out[4]
        slope_e += out[5]
        if out[1] < iterations:
            cross[ncross] = p
            ncross += 1
    if not _dense_cost(si, dense, dgrid, n):
        return MISS
    dense_s, dense_e = dense[n]
    key = call_key(si[I_CALL_KEYED], n, n)
    if key not in call:
        return _miss(si, K_CALL, n, n)
    call_s, call_e = call[key]
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
            if _stretch(si, grid, gknown, which, context, end, out) == MISS:
                return MISS
            start, end = int(out[0]), int(out[1])
            if index:
                if not touched[start]:
                    touched[start] = True
                    tlist[si[I_NTOUCHED]] = start
                    si[I_NTOUCHED] += 1
                rows[start, 0] += out[2]
                rows[start, 1] += out[3]
                rows[start, 2] += out[4]
                rows[start, 3] += out[5]
            if end < iterations:
                if not touched[end]:
                    touched[end] = True
                    tlist[si[I_NTOUCHED]] = end
                    si[I_NTOUCHED] += 1
                rows[end, 0] -= out[2]
                rows[end, 1] -= out[3]
                rows[end, 2] -= out[4]
                rows[end, 3] -= out[5]
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


@njit(cache=True)
def fill_pairs(table, keys, values):
    """table[keys[i]] = (values[i, 0], values[i, 1]) for every i (the driver's copies
    of the cost model's memos, at compiled speed)."""
    for i in range(keys.shape[0]):
        table[keys[i]] = (values[i, 0], values[i, 1])
