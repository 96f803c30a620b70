"""LlmCost's iteration prices for the compiled serving loop (simulator.serving.loop_kernel),
operation for operation: `LlmCost.iteration` and `LlmCost.decode_run` (its stretches
between grid points, their changes and running sums) over tables copied from the cost
model's memos. A lacking entry is a MISS naming it (I_MISS_KIND, I_MISS_A, I_MISS_B):
the driver asks the cost model, as the reference would at that point, and the kernel
prices the plan again."""

from __future__ import annotations

from simulator.kernels.jit import njit
from simulator.serving.loop_state import (DONE, FIXED, I_BITS, I_MISS_A, I_MISS_B,
                                          I_MISS_KIND, I_NTOUCHED, K_CALL, K_DECODE,
                                          K_DENSE, K_GRID, K_PREFILL, MISS, R_KV_TOKENS,
                                          R_PREFILLED, S_NCHUNK, S_NDEC, S_RUN, VARIABLE)


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
def _miss(si, kind, a, b):
    si[I_MISS_KIND], si[I_MISS_A], si[I_MISS_B] = kind, a, b
    return MISS


@njit(cache=True)
def _stretch(si, grid, which, context, end, out):
    """LlmCost._stretches' stretch of one part from iteration `end` on, into `out`
    (start, end, then a_s, a_e, b_s, b_e); MISS where a grid point is lacking."""
    low, high = _grid_cell(context + end, si[I_BITS])
    if low not in grid:
        return _miss(si, K_GRID, low, 0)
    point = grid[low]
    s0, e0 = point[2 * which], point[2 * which + 1]
    if low == high:
        out[0], out[1], out[2], out[3], out[4], out[5] = end, end + 1, s0, e0, 0.0, 0.0
        return DONE
    if high not in grid:
        return _miss(si, K_GRID, high, 0)
    point = grid[high]
    s1, e1 = point[2 * which], point[2 * which + 1]
    span = high - low
    b_s, b_e = (s1 - s0) / span, (e1 - e0) / span
    out[0], out[1] = end, high - context
    out[2], out[3] = s0 + b_s * (context - low), e0 + b_e * (context - low)
    out[4], out[5] = b_s, b_e
    return DONE


@njit(cache=True)
def price_iteration(si, s, ri, dec, ch_req, ch_new, cost_s, cost_e,
                     dense, prefill, dcost, call):
    """LlmCost.iteration of the plan's chunks and decodes, in its order of reads."""
    ndec, nchunk = s[S_NDEC], s[S_NCHUNK]
    tokens = ndec
    for i in range(nchunk):
        tokens += ch_new[i]
    if tokens not in dense:
        return _miss(si, K_DENSE, tokens, 0)
    seconds, energy = dense[tokens]
    for i in range(nchunk):
        new, cached = ch_new[i], ri[ch_req[i], R_PREFILLED]
        key = (new << 32) | cached
        if key not in prefill:
            return _miss(si, K_PREFILL, new, cached)
        part_s, part_e = prefill[key]
        seconds += part_s
        energy += part_e
    longest = -1
    for j in range(ndec):
        context = ri[dec[j], R_KV_TOKENS] + 1
        longest = max(longest, context)
        if context not in dcost:
            return _miss(si, K_DECODE, context, 0)
        part = dcost[context]
        seconds += part[0]
        energy += part[1]
    if ndec:
        part = dcost[longest]
        seconds += part[2]
        energy += part[3]
    requests = ndec + nchunk
    key = (tokens << 32) | requests
    if key not in call:
        return _miss(si, K_CALL, tokens, requests)
    call_s, call_e = call[key]
    cost_s[0] = seconds + call_s
    cost_e[0] = energy + call_e
    return DONE


@njit(cache=True)
def price_decode_run(si, s, ctx, rows, touched, tlist, cross, out, cost_s, cost_e,
                      dense, call, grid):
    """LlmCost.decode_run of the decoding requests' contexts (ctx) over I_RUN
    iterations, in its order of reads and sums."""
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
        if _stretch(si, grid, which, context, 0, out) == MISS:
            return MISS
        first_s += out[2]
        first_e += out[3]
        slope_s += out[4]
        slope_e += out[5]
        if out[1] < iterations:
            cross[ncross] = p
            ncross += 1
    if n not in dense:
        return _miss(si, K_DENSE, n, 0)
    dense_s, dense_e = dense[n]
    key = (n << 32) | n
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
            if _stretch(si, grid, which, context, end, out) == MISS:
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


@njit(cache=True)
def fill_quads(table, keys, values):
    """fill_pairs for (variable, fixed) pairs: four values a key."""
    for i in range(keys.shape[0]):
        table[keys[i]] = (values[i, 0], values[i, 1], values[i, 2], values[i, 3])
