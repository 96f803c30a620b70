"""The compiled serving loop's kernel: replicas of one stage under continuous batching
(round robin between them) with a paged KV cache and preemption by recompute, their
arrivals and SimPy's event queue as the reference loop (simulator.serving.engine,
schedulers, llm_cost) makes them, in arrays (the layout: simulator.serving.loop_state;
the prices: simulator.serving.loop_prices). The driver (simulator.serving.compiled_loop) says why and when.

Every float is computed as the reference computes it: the same operations in the same
order (no fastmath; a NumPy accumulate is a sequential loop here). The event queue
holds the events SimPy would hold (timeouts, an arrival's news, first_of's event,
stale ones), each with SimPy's (time, priority, id), so ties resolve as there.

The kernel returns to its driver where it lacks an iteration cost (MISS: the driver
asks the cost model, as the reference would at that point, and calls again) and every
REPORT_EVERY finished requests (PROGRESS); it resumes where it stopped (`I_PENDING`).
"""

from __future__ import annotations

import numpy as np

from simulator.kernels.jit import njit
from simulator.serving.loop_prices import price_decode_run, price_iteration
from simulator.serving.loop_state import (DONE, EV_ARRIVED, EV_ARR_END, EV_ARR_TIMEOUT,
                                          EV_EITHER, EV_INIT_ARR, EV_INIT_REP,
                                          EV_REP_TIMEOUT, F_NOW, GROW, G_BUSY,
                                          G_CLOCK_SECONDS, G_CLOCK_SINCE, G_ENERGY,
                                          G_PLAN_START, I_ARRIVED, I_ARR_INDEX,
                                          I_ARR_WAITED, I_BLOCK, I_CAP_CALLED,
                                          I_CAP_HIGH, I_CAP_LOW, I_LIMIT, I_MAX_BATCH,
                                          I_MAX_TOKENS, I_N, I_NCHANGES, I_NDROP,
                                          I_NEXT, I_NFIN, I_NSHAPES, I_PENDING,
                                          I_PENDING_REP, I_PREEMPTIONS, I_QLEN,
                                          I_REPLICAS, I_REPORTS, I_REPORT_NEXT, I_SEEN,
                                          I_SHAPE_USED, I_STARTED, I_STRIDE,
                                          I_TOTAL_BLOCKS, L_AFTER_FIRST, L_COMMIT,
                                          L_DISPATCH, L_PRICE, L_TOP,
                                          MAX_RUN_ITERATIONS, NORMAL,
                                          PLAN_DECODE_RUN, PLAN_ITERATION, PROGRESS,
                                          Q_ADMITTED, Q_ARRIVAL, Q_FINISH,
                                          Q_FIRST, Q_KV_MARK, Q_KV_WAIT,
                                          Q_KV_WAIT_FIRST, Q_LOST_SINCE, Q_PREEMPT_LOST,
                                          REPORT_EVERY, R_DROPPED, R_KV_HELD,
                                          R_KV_TOKENS, R_OUTPUT, R_PREEMPT, R_PREFILLED,
                                          R_PRODUCED, R_PROMPT, R_TARGET, S_DONE,
                                          S_FREE, S_GEN, S_INTERRUPT, S_ITERS, S_NCHUNK,
                                          S_NDEC, S_NPRE, S_OFFERED, S_PLAN_KIND,
                                          S_RESUME, S_RUN, S_RUNNING_MAX, S_TRIG,
                                          S_WAIT, S_WAIT_EID, S_WAIT_GEN, S_WCOUNT,
                                          S_WHEAD, URGENT, W_ARRIVED, W_EITHER, W_FIRST,
                                          W_NONE, W_TIMEOUT, carry_on, pop, schedule)


@njit(cache=True)
def _clock_at(g, now):
    since = g[G_CLOCK_SINCE]
    return g[G_CLOCK_SECONDS] + (now - since if not np.isnan(since) else 0.0)


@njit(cache=True)
def _clock_set(g, now, blocked):
    since = g[G_CLOCK_SINCE]
    if blocked and np.isnan(since):
        g[G_CLOCK_SINCE] = now
    elif not blocked and not np.isnan(since):
        g[G_CLOCK_SECONDS] += now - since
        g[G_CLOCK_SINCE] = np.nan


@njit(cache=True)
def _on_admitted(g, rf, r, now):
    if np.isnan(rf[r, Q_LOST_SINCE]):
        waited = _clock_at(g, now) - rf[r, Q_KV_MARK]
        rf[r, Q_KV_WAIT] += waited
        if np.isnan(rf[r, Q_ADMITTED]):
            rf[r, Q_KV_WAIT_FIRST] = waited
    if np.isnan(rf[r, Q_ADMITTED]):
        rf[r, Q_ADMITTED] = now


@njit(cache=True)
def _grow(si, s, ri, r, tokens):
    """PagedKvCache.grow."""
    short = tokens - ri[r, R_KV_HELD]
    block = si[I_BLOCK]
    extra = -(-short // block) if short > 0 else 0
    if extra > s[S_FREE]:
        return False
    if extra:
        s[S_FREE] -= extra
        ri[r, R_KV_HELD] += extra * block
    return True


@njit(cache=True)
def _release(si, s, ri, r):
    s[S_FREE] += ri[r, R_KV_HELD] // si[I_BLOCK]
    ri[r, R_KV_HELD] = 0


@njit(cache=True)
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


@njit(cache=True)
def _log_change(si, chg_t, chg_d, now, change):
    k = si[I_NCHANGES]
    chg_t[k], chg_d[k] = now, change
    si[I_NCHANGES] = k + 1


@njit(cache=True)
def _enqueue(si, s, g, ri, rf, wq, drops, chg_t, chg_d, r, at):
    """Arrival of request r (MetricsStore.on_arrival, ReplicaScheduler.enqueue)."""
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
    rf[r, Q_KV_MARK] = _clock_at(g, at)
    n = wq.shape[0]
    wq[(s[S_WHEAD] + s[S_WCOUNT]) % n] = r
    s[S_WCOUNT] += 1


@njit(cache=True)
def _wake(si, s, hq_t, hq_i, now, replica):
    if not s[S_TRIG]:
        s[S_TRIG] = 1
        schedule(si, hq_t, hq_i, now, NORMAL, EV_ARRIVED, replica, s[S_GEN])


@njit(cache=True)
def _arrivals(si, sf, rs, rg, ri, rf, wq, drops, chg_t, chg_d, hq_t, hq_i):
    """engine.arriving from where it stopped, until it waits or ends; round robin
    over the replicas (routing.RoundRobin)."""
    replicas = si[I_REPLICAS]
    n = si[I_N]
    while si[I_ARR_INDEX] < n:
        r = si[I_ARR_INDEX]
        at = rf[r, Q_ARRIVAL]
        if not si[I_ARR_WAITED] and at > sf[F_NOW]:
            delay = at - sf[F_NOW]
            if not carry_on(si, sf, hq_t, sf[F_NOW] + delay):
                schedule(si, hq_t, hq_i, sf[F_NOW] + delay, NORMAL, EV_ARR_TIMEOUT, 0,
                          0)
                si[I_ARR_WAITED] = 1
                return
        si[I_ARR_WAITED] = 0
        target = si[I_NEXT] % replicas
        si[I_NEXT] += 1
        _enqueue(si, rs[target], rg[target], ri, rf, wq[target], drops, chg_t, chg_d,
                 r, at)
        _wake(si, rs[target], hq_t, hq_i, sf[F_NOW], target)
        si[I_ARR_INDEX] = r + 1
    for replica in range(replicas):  # close(), wake(); then the process ends
        _wake(si, rs[replica], hq_t, hq_i, sf[F_NOW], replica)
    schedule(si, hq_t, hq_i, sf[F_NOW], NORMAL, EV_ARR_END, 0, 0)
    si[I_ARR_INDEX] = n + 1


@njit(cache=True)
def _plan(si, s, g, sf, ri, rf, wq, dec, pre, ch_req, ch_new):
    """ContinuousBatching.plan up to its costs: False where it returns None."""
    now = sf[F_NOW]
    if s[S_NDEC] + s[S_NPRE] == 0 and s[S_WCOUNT] == 0:
        return False
    nq = wq.shape[0]
    # _preempt_until_decodes_fit: the decoding requests short of a block
    short = 0
    last_short = -1
    for j in range(s[S_NDEC]):
        r = dec[j]
        if ri[r, R_KV_TOKENS] >= ri[r, R_KV_HELD]:
            short += 1
            last_short = j
    if short > s[S_FREE]:
        while short > s[S_FREE]:
            if s[S_NPRE] > 0:
                s[S_NPRE] -= 1
                victim = pre[s[S_NPRE]]
                was_short = False
            else:
                s[S_NDEC] -= 1
                victim = dec[s[S_NDEC]]
                was_short = short > 0 and last_short == s[S_NDEC]
            if was_short:
                short -= 1
                last_short = -1
                for j in range(s[S_NDEC] - 1, -1, -1):
                    r = dec[j]
                    if ri[r, R_KV_TOKENS] >= ri[r, R_KV_HELD]:
                        last_short = j
                        break
            _release(si, s, ri, victim)
            ri[victim, R_PREEMPT] += 1
            rf[victim, Q_LOST_SINCE] = now
            s[S_WHEAD] = (s[S_WHEAD] - 1) % nq
            wq[s[S_WHEAD]] = victim
            s[S_WCOUNT] += 1
            ri[victim, R_TARGET] = ri[victim, R_PROMPT] + ri[victim, R_PRODUCED]
            ri[victim, R_PREFILLED] = 0
            ri[victim, R_KV_TOKENS] = 0
            si[I_PREEMPTIONS] += 1
    if short:
        for j in range(s[S_NDEC]):
            r = dec[j]
            if ri[r, R_KV_TOKENS] >= ri[r, R_KV_HELD]:
                _grow(si, s, ri, r, ri[r, R_KV_TOKENS] + 1)
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
    while budget > 0 and s[S_WCOUNT] > 0 and _below_cap(si, s):
        head = wq[s[S_WHEAD]]
        if not _grow(si, s, ri, head, ri[head, R_TARGET]):
            refused = True
            break
        _on_admitted(g, rf, head, now)
        s[S_WHEAD] = (s[S_WHEAD] + 1) % nq
        s[S_WCOUNT] -= 1
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
    left = ri[dec[0], R_OUTPUT] - ri[dec[0], R_PRODUCED]
    for j in range(1, ndec):
        r = dec[j]
        left = min(left, ri[r, R_OUTPUT] - ri[r, R_PRODUCED])
    run = min(MAX_RUN_ITERATIONS, left)
    if not _fits(si, s, ri, dec, run):
        low, high = 1, run - 1
        while low < high:
            middle = (low + high + 1) // 2
            if _fits(si, s, ri, dec, middle):
                low = middle
            else:
                high = middle - 1
        run = low
    s[S_PLAN_KIND], s[S_RUN] = PLAN_DECODE_RUN, run
    s[S_INTERRUPT] = 1 if s[S_WCOUNT] == 0 and _below_cap(si, s) else 0
    return True


@njit(cache=True)
def _fits(si, s, ri, dec, steps):
    """kv.extra_blocks_after(decoding, steps) <= kv.free_blocks."""
    block, total = si[I_BLOCK], 0
    for j in range(s[S_NDEC]):
        r = dec[j]
        short = ri[r, R_KV_TOKENS] + steps - ri[r, R_KV_HELD]
        if short > 0:
            total += -(-short // block)
    return total <= s[S_FREE]


@njit(cache=True)
def _offer_shape(si, s, ri, dec, ch_req, ch_new, shp, shp_off):
    """MetricsStore.offer_shape of the plan (ShapeSample.offer): its chunks (new,
    cached) and decode contexts, as [chunks, decodes, new, cached, ..., context, ...];
    GROW where the buffer lacks room (the driver enlarges it and calls again)."""
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
            shp[k] = ri[dec[j], R_KV_TOKENS] + 1
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


@njit(cache=True)
def _commit(si, s, g, ri, rf, dec, pre, ch_req, ch_new, p_ends, p_energy, fin, chg_t,
            chg_d):
    """ContinuousBatching.commit of the plan's first I_DONE iterations."""
    done = s[S_DONE]
    end = p_ends[done - 1]
    running = s[S_NDEC] + s[S_NPRE]
    g[G_BUSY] += end - g[G_PLAN_START]
    g[G_ENERGY] += p_energy[done - 1]
    s[S_ITERS] += done
    s[S_RUNNING_MAX] = max(s[S_RUNNING_MAX], running)
    nfin0 = si[I_NFIN]
    nfin = nfin0
    for j in range(s[S_NDEC]):
        r = dec[j]
        kv_tokens = ri[r, R_KV_TOKENS] + done
        if kv_tokens > ri[r, R_KV_HELD]:
            _grow(si, s, ri, r, kv_tokens)
        ri[r, R_KV_TOKENS] = kv_tokens
        ri[r, R_PRODUCED] += done
        if ri[r, R_PRODUCED] == ri[r, R_OUTPUT]:
            fin[nfin] = r
            nfin += 1
    if nfin > nfin0:
        kept = 0
        for j in range(s[S_NDEC]):
            r = dec[j]
            if ri[r, R_PRODUCED] != ri[r, R_OUTPUT]:
                dec[kept] = r
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
            else:
                dec[s[S_NDEC]] = r
                s[S_NDEC] += 1
    npre = s[S_NPRE]
    for j in range(prefilled, npre):
        pre[j - prefilled] = pre[j]
    s[S_NPRE] = npre - prefilled
    for k in range(nfin0, nfin):
        r = fin[k]
        _release(si, s, ri, r)
        rf[r, Q_FINISH] = end
        _log_change(si, chg_t, chg_d, end, -1)
    si[I_NFIN] = nfin
    s[S_NCHUNK] = 0


@njit(cache=True)
def _bisect_left(values, n, x):
    low, high = 0, n
    while low < high:
        middle = (low + high) // 2
        if values[middle] < x:
            low = middle + 1
        else:
            high = middle
    return low


@njit(cache=True)
def _replica(label, replica, si, sf, rs, rg, ri, rf, wqs, decs, pres, ch_reqs, ch_news,
             ends, energies, ctx, rows, touched, tlist, cross, out, fin, chg_t, chg_d,
             hq_t, hq_i, shp, shp_off, dense, prefill, dcost, call, grid):
    """Replica `replica`'s Replica.serving from `label` until it waits (DONE) or the
    driver is needed (the label to go on from is then I_PENDING)."""
    s, g, wq, dec, pre = rs[replica], rg[replica], wqs[replica], decs[replica], pres[replica]
    ch_req, ch_new = ch_reqs[replica], ch_news[replica]
    p_ends, p_energy = ends[replica], energies[replica]
    while True:
        if label == L_TOP:
            if s[S_TRIG]:  # a new event for the next arrival
                s[S_GEN] += 1
                s[S_TRIG] = 0
            if not _plan(si, s, g, sf, ri, rf, wq, dec, pre, ch_req, ch_new):
                s[S_WAIT], s[S_WAIT_GEN] = W_ARRIVED, s[S_GEN]
                s[S_RESUME] = L_TOP
                return DONE
            label = L_PRICE
        if label == L_PRICE:
            status = _offer_shape(si, s, ri, dec, ch_req, ch_new, shp, shp_off)
            if status != DONE:
                si[I_PENDING], si[I_PENDING_REP] = L_PRICE, replica
                return status
            if s[S_PLAN_KIND] == PLAN_ITERATION:
                status = price_iteration(si, s, ri, dec, ch_req, ch_new, p_ends, p_energy,
                                          dense, prefill, dcost, call)
            else:
                for j in range(s[S_NDEC]):
                    ctx[j] = ri[dec[j], R_KV_TOKENS] + 1
                status = price_decode_run(si, s, ctx, rows, touched, tlist, cross, out,
                                           p_ends, p_energy, dense, call, grid)
            if status != DONE:
                si[I_PENDING], si[I_PENDING_REP] = L_PRICE, replica
                return status
            now = sf[F_NOW]
            g[G_PLAN_START] = now
            end, energy = now, 0.0  # running sums (schedulers._plan, _one)
            for i in range(s[S_RUN]):
                end += p_ends[i]
                energy += p_energy[i]
                p_ends[i], p_energy[i] = end, energy
            label = L_DISPATCH
        if label == L_DISPATCH:
            run = s[S_RUN]
            end = p_ends[run - 1]
            s[S_DONE] = run
            delay = max(0.0, end - sf[F_NOW])
            if s[S_INTERRUPT]:
                if not carry_on(si, sf, hq_t, sf[F_NOW] + delay):  # first_of
                    eid = schedule(si, hq_t, hq_i, sf[F_NOW] + delay, NORMAL,
                                    EV_REP_TIMEOUT, replica, 0)
                    s[S_WAIT], s[S_WAIT_GEN], s[S_WAIT_EID] = W_FIRST, s[S_GEN], eid
                    s[S_RESUME] = L_AFTER_FIRST
                    return DONE
                label = L_AFTER_FIRST
            else:
                if not carry_on(si, sf, hq_t, sf[F_NOW] + delay):
                    eid = schedule(si, hq_t, hq_i, sf[F_NOW] + delay, NORMAL,
                                    EV_REP_TIMEOUT, replica, 0)
                    s[S_WAIT], s[S_WAIT_EID] = W_TIMEOUT, eid
                    s[S_RESUME] = L_COMMIT
                    return DONE
                label = L_COMMIT
        if label == L_AFTER_FIRST:
            run = s[S_RUN]
            now = sf[F_NOW]
            if now < p_ends[run - 1]:  # finish the iteration under way
                done = _bisect_left(p_ends, run, now) + 1
                s[S_DONE] = done
                delay = max(0.0, p_ends[done - 1] - now)
                if not carry_on(si, sf, hq_t, now + delay):
                    eid = schedule(si, hq_t, hq_i, now + delay, NORMAL, EV_REP_TIMEOUT,
                                    replica, 0)
                    s[S_WAIT], s[S_WAIT_EID] = W_TIMEOUT, eid
                    s[S_RESUME] = L_COMMIT
                    return DONE
            label = L_COMMIT
        if label == L_COMMIT:
            _commit(si, s, g, ri, rf, dec, pre, ch_req, ch_new, p_ends, p_energy, fin,
                    chg_t, chg_d)
            label = L_TOP
            finished = si[I_NFIN] + si[I_NDROP]
            if si[I_REPORTS] and finished >= si[I_REPORT_NEXT]:  # engine.reporter
                si[I_REPORT_NEXT] = finished + REPORT_EVERY
                si[I_PENDING], si[I_PENDING_REP] = L_TOP, replica
                return PROGRESS


@njit(cache=True)
def serve_loop(si, sf, rs, rg, ri, rf, wqs, decs, pres, ch_reqs, ch_news, ends, energies,
               ctx, rows, touched, tlist, cross, out, fin, drops, chg_t, chg_d, hq_t, hq_i,
               shp, shp_off, dense, prefill, dcost, call, grid):
    """engine.run_serving's env.run(): DONE when the queue is empty; MISS, PROGRESS or
    GROW where the driver must act first (call again after)."""
    if not si[I_STARTED]:  # the arrival process, then each replica's (engine order)
        si[I_STARTED] = 1
        schedule(si, hq_t, hq_i, 0.0, URGENT, EV_INIT_ARR, 0, 0)
        for replica in range(si[I_REPLICAS]):
            schedule(si, hq_t, hq_i, 0.0, URGENT, EV_INIT_REP, replica, 0)
    label, replica = si[I_PENDING], si[I_PENDING_REP]
    si[I_PENDING] = -1
    while True:
        if label >= 0:
            status = _replica(label, replica, si, sf, rs, rg, ri, rf, wqs, decs, pres,
                              ch_reqs, ch_news, ends, energies, ctx, rows, touched, tlist,
                              cross, out, fin, chg_t, chg_d, hq_t, hq_i, shp, shp_off,
                              dense, prefill, dcost, call, grid)
            if status != DONE:
                return status
        if si[I_QLEN] == 0:
            return DONE
        pop(si, hq_t, hq_i)
        head = hq_t.shape[0] - 1
        sf[F_NOW] = hq_t[head]
        eid, kind, replica, ref = hq_i[head, 1], hq_i[head, 2], hq_i[head, 3], hq_i[head, 4]
        s = rs[replica]
        label = -1
        if kind == EV_INIT_ARR or kind == EV_ARR_TIMEOUT:
            _arrivals(si, sf, rs, rg, ri, rf, wqs, drops, chg_t, chg_d, hq_t, hq_i)
        elif kind == EV_INIT_REP:
            label = L_TOP
        elif kind == EV_ARRIVED:
            if s[S_WAIT] == W_ARRIVED and s[S_WAIT_GEN] == ref:
                label = s[S_RESUME]
            elif s[S_WAIT] == W_FIRST and s[S_WAIT_GEN] == ref:  # first_of fires
                s[S_WAIT] = W_EITHER
                schedule(si, hq_t, hq_i, sf[F_NOW], NORMAL, EV_EITHER, replica, 0)
        elif kind == EV_REP_TIMEOUT:
            if s[S_WAIT] == W_TIMEOUT and s[S_WAIT_EID] == eid:
                label = s[S_RESUME]
            elif s[S_WAIT] == W_FIRST and s[S_WAIT_EID] == eid:
                s[S_WAIT] = W_EITHER
                schedule(si, hq_t, hq_i, sf[F_NOW], NORMAL, EV_EITHER, replica, 0)
        elif kind == EV_EITHER and s[S_WAIT] == W_EITHER:
            label = s[S_RESUME]
        if label >= 0:
            s[S_WAIT] = W_NONE
