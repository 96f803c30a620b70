"""Continuous batching in the compiled serving loop: ContinuousBatching's plan and commit
(simulator.serving.schedulers), the paged KV cache and the memory-tail marks
(kv_cache, tails) over the loop's arrays (layout: simulator.serving.loop_state), and a
plan's prices (loop_prices) summed as the scheduler sums them.

Each function takes the lane's Batch (loop_state): its rows (`s`, `g`: its scheduler)
and, where the state is the replica's, its pool row (`p`, `gp`: the queue and KV
blocks every micro-batch of a pipelined replica shares, and the store's totals); a
replica of one stage is one lane, its own pool."""

from __future__ import annotations

import numpy as np

from simulator.kernels.jit import njit
from simulator.serving.loop_prices import price_decode_run, price_iteration
from simulator.serving.loop_state import (DONE, F_NOW, GROW, G_BUSY, G_CLOCK_SECONDS,
                                          G_CLOCK_SINCE, G_ENERGY, G_PLAN_START, INLINED,
                                          I_ARRIVED, I_BLOCK, I_CAP_CALLED, I_CAP_HIGH,
                                          I_CAP_LOW, I_LANES, I_LIMIT, I_MAX_BATCH,
                                          I_MAX_TOKENS, I_NCHANGES, I_NDROP, I_NFIN,
                                          I_NSHAPES, I_PREEMPTIONS, I_SEEN, I_SHAPE_USED,
                                          I_STRIDE, I_TOTAL_BLOCKS, LOOP,
                                          MAX_RUN_ITERATIONS, PLAN_DECODE_RUN,
                                          PLAN_ITERATION, Q_ADMITTED, Q_FINISH, Q_FIRST,
                                          Q_KV_MARK, Q_KV_WAIT, Q_KV_WAIT_FIRST,
                                          Q_LOST_SINCE, Q_PREEMPT_LOST, R_DROPPED,
                                          R_KV_HELD, R_KV_TOKENS, R_OUTPUT, R_PREEMPT,
                                          R_PREFILLED, R_PRODUCED, R_PROMPT, R_TARGET,
                                          S_FREE, S_INTERRUPT, S_ITERS, S_NCHUNK, S_NDEC,
                                          S_NPRE, S_OFFERED, S_PLAN_KIND, S_RUN,
                                          S_RUNNING_MAX, S_WCOUNT, S_WHEAD)


@njit(**LOOP)
def _clock_at(g, now):
    since = g[G_CLOCK_SINCE]
    return g[G_CLOCK_SECONDS] + (now - since if not np.isnan(since) else 0.0)


@njit(**LOOP)
def _clock_set(g, now, blocked):
    since = g[G_CLOCK_SINCE]
    if blocked and np.isnan(since):
        g[G_CLOCK_SINCE] = now
    elif not blocked and not np.isnan(since):
        g[G_CLOCK_SECONDS] += now - since
        g[G_CLOCK_SINCE] = np.nan


@njit(**LOOP)
def _on_admitted(g, rf, r, now):
    if np.isnan(rf[r, Q_LOST_SINCE]):
        waited = _clock_at(g, now) - rf[r, Q_KV_MARK]
        rf[r, Q_KV_WAIT] += waited
        if np.isnan(rf[r, Q_ADMITTED]):
            rf[r, Q_KV_WAIT_FIRST] = waited
    if np.isnan(rf[r, Q_ADMITTED]):
        rf[r, Q_ADMITTED] = now


@njit(**LOOP)
def _take_blocks(si, p, short):
    """PagedKvCache.grow's blocks for `short` tokens beyond a request's blocks: the
    tokens they add (taken from the free ones), or -1 where too few are free."""
    block = si[I_BLOCK]
    extra = -(-short // block) if short > 0 else 0
    if extra > p[S_FREE]:
        return -1
    p[S_FREE] -= extra
    return extra * block


@njit(**LOOP)
def _grow(si, p, ri, r, tokens):
    """PagedKvCache.grow of request r (not decoding: its row is current)."""
    added = _take_blocks(si, p, tokens - ri[r, R_KV_HELD])
    if added < 0:
        return False
    ri[r, R_KV_HELD] += added
    return True


@njit(**LOOP)
def _grow_decoding(si, p, slack, j, steps):
    """PagedKvCache.grow of the lane's decoding request j to `steps` tokens beyond
    its KV tokens (its slack: loop_state.Lanes)."""
    added = _take_blocks(si, p, steps - slack[j])
    if added > 0:
        slack[j] += added


@njit(**LOOP)
def _stop_decoding(ri, r, context, slack, left):
    """Request r's row made current again from its lane's values (it stops decoding:
    loop_state.Lanes)."""
    tokens = context - 1
    ri[r, R_KV_TOKENS] = tokens
    ri[r, R_KV_HELD] = slack + tokens
    ri[r, R_PRODUCED] = ri[r, R_OUTPUT] - left


@njit(**LOOP)
def _release(si, p, ri, r):
    p[S_FREE] += ri[r, R_KV_HELD] // si[I_BLOCK]
    ri[r, R_KV_HELD] = 0


@njit(**LOOP)
def _below_cap(si, s):
    """ContinuousBatching._below_cap with MetricsStore.on_cap_check."""
    running = s[S_NDEC] + s[S_NPRE]
    below = running < si[I_MAX_BATCH]
    low = si[I_CAP_LOW] if si[I_CAP_CALLED] else 1
    high = si[I_CAP_HIGH] if si[I_CAP_CALLED] else -1  # -1: infinity
    if below:
        low = max(low, running + 1)
    elif high < 0 or running < high:
        high = running
    si[I_CAP_CALLED], si[I_CAP_LOW], si[I_CAP_HIGH] = 1, low, high
    return below


@njit(**LOOP)
def _log_change(si, chg_t, chg_d, now, change):
    k = si[I_NCHANGES]
    chg_t[k], chg_d[k] = now, change
    si[I_NCHANGES] = k + 1


@njit(**LOOP)
def enqueue(si, requests, lanes, replica, r, at):
    """Arrival of request r (MetricsStore.on_arrival, ReplicaScheduler.enqueue) on
    replica `replica` (its pool row `p`, its first lane's scheduler: that lane's KV
    clock)."""
    pool = replica * si[I_LANES]
    p, gp, wq = lanes.ints[pool], lanes.floats[pool], lanes.waiting[replica]
    ri, rf, drops = requests.ints, requests.floats, requests.dropped
    chg_t, chg_d = requests.change_times, requests.change_deltas
    si[I_ARRIVED] += 1
    _log_change(si, chg_t, chg_d, at, 1)
    need = ri[r, R_PROMPT] + ri[r, R_OUTPUT] - 1
    if -(-need // si[I_BLOCK]) > si[I_TOTAL_BLOCKS]:
        ri[r, R_DROPPED] = 1
        rf[r, Q_FINISH] = at
        drops[si[I_NDROP]] = r
        si[I_NDROP] += 1
        _log_change(si, chg_t, chg_d, at, -1)
        return
    if ri[r, R_PRODUCED] == 0:
        ri[r, R_TARGET] = ri[r, R_PROMPT]
        ri[r, R_PREFILLED] = 0
    rf[r, Q_KV_MARK] = _clock_at(gp, at)
    n = wq.shape[0]
    wq[(p[S_WHEAD] + p[S_WCOUNT]) % n] = r
    p[S_WCOUNT] += 1


@njit(**INLINED)
def plan(si, sf, batch, requests, work):
    """ContinuousBatching.plan up to its costs: False where it returns None. One pass
    over the decoding requests' slack and tokens left (the lane's: loop_state.Lanes)
    finds those short of a block (their indices in work.shorts, in order) and the
    fewest output tokens any has left."""
    s, p, g, wq = batch.s, batch.p, batch.g, batch.waiting
    dec, pre = batch.decoding, batch.prefilling
    ctx, slack, left = batch.contexts, batch.slack, batch.left
    ch_req, ch_new = batch.chunk_requests, batch.chunk_tokens
    ri, rf = requests.ints, requests.floats
    shorts = work.shorts
    now = sf[F_NOW]
    if s[S_NDEC] + s[S_NPRE] == 0 and p[S_WCOUNT] == 0:
        return False
    nq = wq.shape[0]
    # _preempt_until_decodes_fit: the decoding requests short of a block
    short = 0
    fewest = MAX_RUN_ITERATIONS  # the fewest output tokens left (a run's cap at most)
    ndec = s[S_NDEC]
    for j in range(ndec):
        if slack[j] <= 0:
            shorts[short] = j
            short += 1
        fewest = min(fewest, left[j])
    if short > p[S_FREE]:
        while short > p[S_FREE]:
            if s[S_NPRE] > 0:
                s[S_NPRE] -= 1
                victim = pre[s[S_NPRE]]
            else:
                s[S_NDEC] -= 1
                j = s[S_NDEC]
                victim = dec[j]
                _stop_decoding(ri, victim, ctx[j], slack[j], left[j])
                if short > 0 and shorts[short - 1] == j:
                    short -= 1
            _release(si, p, ri, victim)
            ri[victim, R_PREEMPT] += 1
            rf[victim, Q_LOST_SINCE] = now
            p[S_WHEAD] = (p[S_WHEAD] - 1) % nq
            wq[p[S_WHEAD]] = victim
            p[S_WCOUNT] += 1
            ri[victim, R_TARGET] = ri[victim, R_PROMPT] + ri[victim, R_PRODUCED]
            ri[victim, R_PREFILLED] = 0
            ri[victim, R_KV_TOKENS] = 0
            si[I_PREEMPTIONS] += 1
        if s[S_NDEC] < ndec:  # the fewest left among those still decoding
            fewest = MAX_RUN_ITERATIONS
            for j in range(s[S_NDEC]):
                fewest = min(fewest, left[j])
    for i in range(short):
        _grow_decoding(si, p, slack, shorts[i], 1)
    ndec = s[S_NDEC]
    budget = si[I_MAX_TOKENS] - ndec
    nchunk = 0
    for j in range(s[S_NPRE]):
        if budget <= 0:
            break
        r = pre[j]
        left = ri[r, R_TARGET] - ri[r, R_PREFILLED]
        new = left if left < budget else budget
        ch_req[nchunk], ch_new[nchunk] = r, new
        nchunk += 1
        budget -= new
    refused = False
    while budget > 0 and p[S_WCOUNT] > 0 and _below_cap(si, s):
        head = wq[p[S_WHEAD]]
        if not _grow(si, p, ri, head, ri[head, R_TARGET]):
            refused = True
            break
        _on_admitted(g, rf, head, now)
        p[S_WHEAD] = (p[S_WHEAD] + 1) % nq
        p[S_WCOUNT] -= 1
        pre[s[S_NPRE]] = head
        s[S_NPRE] += 1
        left = ri[head, R_TARGET] - ri[head, R_PREFILLED]
        new = left if left < budget else budget
        ch_req[nchunk], ch_new[nchunk] = head, new
        nchunk += 1
        budget -= new
    _clock_set(g, now, refused)
    s[S_NCHUNK] = nchunk
    if nchunk == 0 and ndec == 0:
        return False
    s[S_OFFERED] = 0
    if nchunk:
        s[S_PLAN_KIND], s[S_RUN], s[S_INTERRUPT] = PLAN_ITERATION, 1, 0
        return True
    # _decode_run: until the first request finishes or the KV blocks run out
    run = fewest
    if not _fits(si, p, slack, ndec, run):
        low, high = 1, run - 1
        while low < high:
            middle = (low + high + 1) // 2
            if _fits(si, p, slack, ndec, middle):
                low = middle
            else:
                high = middle - 1
        run = low
    s[S_PLAN_KIND], s[S_RUN] = PLAN_DECODE_RUN, run
    s[S_INTERRUPT] = 1 if p[S_WCOUNT] == 0 and _below_cap(si, s) else 0
    return True


@njit(**LOOP)
def _fits(si, p, slack, ndec, steps):
    """kv.extra_blocks_after(decoding, steps) <= kv.free_blocks (each decoding
    request's slack: its blocks' room beyond its tokens)."""
    block, total = si[I_BLOCK], 0
    for j in range(ndec):
        short = steps - slack[j]
        if short > 0:
            total += -(-short // block)
    return total <= p[S_FREE]


@njit(**INLINED)
def _offer_shape(si, s, ri, ctx, ch_req, ch_new, shp, shp_off):
    """MetricsStore.offer_shape of the plan (ShapeSample.offer): its chunks (new,
    cached) and decode contexts (`ctx`), as [chunks, decodes, new, cached, ...,
    context, ...]; GROW where the buffer lacks room (the driver enlarges it and calls
    again)."""
    if si[I_LIMIT] == 0 or s[S_OFFERED]:
        return DONE
    if si[I_SEEN] % si[I_STRIDE] == 0:
        ndec, nchunk = s[S_NDEC], s[S_NCHUNK]
        at = si[I_SHAPE_USED]
        if at + 2 + 2 * nchunk + ndec > shp.shape[0]:
            return GROW
        shp[at], shp[at + 1] = nchunk, ndec
        k = at + 2
        for i in range(nchunk):
            shp[k], shp[k + 1] = ch_new[i], ri[ch_req[i], R_PREFILLED]
            k += 2
        for j in range(ndec):
            shp[k] = ctx[j]
            k += 1
        count = si[I_NSHAPES]
        shp_off[count] = at
        shp_off[count + 1] = k
        count += 1
        si[I_SHAPE_USED] = k
        if count >= 2 * si[I_LIMIT]:  # shapes[::2]: the even ones, moved to the front
            used = 0
            kept = 0
            for i in range(0, count, 2):
                begin, stop = shp_off[i], shp_off[i + 1]
                shp_off[kept] = used
                for m in range(begin, stop):
                    shp[used] = shp[m]
                    used += 1
                kept += 1
                shp_off[kept] = used
            count = kept
            si[I_SHAPE_USED] = used
            si[I_STRIDE] *= 2
        si[I_NSHAPES] = count
    si[I_SEEN] += 1
    s[S_OFFERED] = 1
    return DONE


@njit(**INLINED)
def price(si, sf, batch, requests, work, tables):
    """The planned iterations' shape offered, their costs, and their end times from
    now and energies as running sums (schedulers._plan, _one); MISS or GROW where
    the driver must act first (then price again). The decoding requests' contexts
    are the lane's (batch.contexts)."""
    s, g = batch.s, batch.g
    p_ends, p_energy, ri = batch.ends, batch.energies, requests.ints
    status = _offer_shape(si, s, ri, batch.contexts, batch.chunk_requests,
                          batch.chunk_tokens, work.shapes, work.shape_offsets)
    if status != DONE:
        return status
    if s[S_PLAN_KIND] == PLAN_ITERATION:
        status = price_iteration(si, batch, ri, batch.contexts, tables)
    else:
        status = price_decode_run(si, batch, work, tables)
    if status != DONE:
        return status
    now = sf[F_NOW]
    g[G_PLAN_START] = now
    end, energy = now, 0.0
    for i in range(s[S_RUN]):
        end += p_ends[i]
        energy += p_energy[i]
        p_ends[i], p_energy[i] = end, energy
    return DONE


@njit(**INLINED)
def commit(si, batch, requests, done, end, busy):
    """ContinuousBatching.commit of the plan's first `done` iterations, the last of
    them ending at `end`, `busy` seconds and their energy (the plan's running sum)
    in all (on_iterations)."""
    energy = batch.energies[done - 1]
    s, p, gp = batch.s, batch.p, batch.gp
    dec, pre = batch.decoding, batch.prefilling
    ctx, slack, left = batch.contexts, batch.slack, batch.left
    cells, stretches = batch.cells, batch.stretches
    ch_req, ch_new = batch.chunk_requests, batch.chunk_tokens
    ri, rf, fin = requests.ints, requests.floats, requests.finished
    chg_t, chg_d = requests.change_times, requests.change_deltas
    running = s[S_NDEC] + s[S_NPRE]
    gp[G_BUSY] += busy
    gp[G_ENERGY] += energy
    p[S_ITERS] += done
    p[S_RUNNING_MAX] = max(p[S_RUNNING_MAX], running)
    nfin0 = si[I_NFIN]
    nfin = nfin0
    kept = s[S_NDEC]  # the first finished one's place
    for j in range(s[S_NDEC]):
        ctx[j] += done
        slack[j] -= done
        if slack[j] < 0:
            _grow_decoding(si, p, slack, j, 0)
        left[j] -= done
        if left[j] == 0:
            r = dec[j]
            _stop_decoding(ri, r, ctx[j], slack[j], 0)
            fin[nfin] = r
            nfin += 1
            kept = min(kept, j)
    if nfin > nfin0:  # the finished ones out, the others' order kept
        for j in range(kept + 1, s[S_NDEC]):
            if left[j]:
                dec[kept], ctx[kept] = dec[j], ctx[j]
                slack[kept], left[kept] = slack[j], left[j]
                cells[kept, 0], cells[kept, 1] = cells[j, 0], cells[j, 1]
                for m in range(4):
                    stretches[kept, m] = stretches[j, m]
                kept += 1
        s[S_NDEC] = kept
    prefilled = 0
    for i in range(s[S_NCHUNK]):
        r = ch_req[i]
        ri[r, R_PREFILLED] += ch_new[i]
        if ri[r, R_PREFILLED] >= ri[r, R_TARGET]:
            prefilled += 1
            ri[r, R_KV_TOKENS] = ri[r, R_TARGET]
            ri[r, R_PRODUCED] += 1
            if not np.isnan(rf[r, Q_LOST_SINCE]):  # on_recovered
                rf[r, Q_PREEMPT_LOST] += end - rf[r, Q_LOST_SINCE]
                rf[r, Q_LOST_SINCE] = np.nan
            if np.isnan(rf[r, Q_FIRST]):
                rf[r, Q_FIRST] = end
            if ri[r, R_PRODUCED] == ri[r, R_OUTPUT]:
                fin[nfin] = r
                nfin += 1
            else:  # it decodes: its values into the lane's (loop_state.Lanes)
                j = s[S_NDEC]
                dec[j], ctx[j] = r, ri[r, R_TARGET] + 1
                slack[j] = ri[r, R_KV_HELD] - ri[r, R_TARGET]
                left[j] = ri[r, R_OUTPUT] - ri[r, R_PRODUCED]
                cells[j, 0] = cells[j, 1] = 0  # no stretch kept
                s[S_NDEC] = j + 1
    npre = s[S_NPRE]
    for j in range(prefilled, npre):
        pre[j - prefilled] = pre[j]
    s[S_NPRE] = npre - prefilled
    for k in range(nfin0, nfin):
        r = fin[k]
        _release(si, p, ri, r)
        rf[r, Q_FINISH] = end
        _log_change(si, chg_t, chg_d, end, -1)
    si[I_NFIN] = nfin
    s[S_NCHUNK] = 0
