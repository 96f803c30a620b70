"""The compiled serving loop (issue 44, speed): the reference event loop
(simulator.serving.engine with its SimPy processes, the continuous-batching scheduler,
the paged KV cache and LlmCost's iteration prices) run as one Numba kernel
(simulator.serving.loop_kernel, loop_batching, loop_pipeline, loop_prices, loop_state)
where a run is within its scope: replicas of one pipeline stage or of several (their
micro-batches through the stages, engine.PipelinedReplica) under the default router
(round robin; one replica under any router), continuous batching, a paged KV cache
that preempts by recompute (no host tier, no prefix cache), an LLM cost model of
LlmCost's own class. Every other run takes the SimPy loop. Both give the same store:
the same per-request records, totals, sampled shapes and number in the system, bit
for bit (tests/test_serving_compiled_loop.py, test_serving_compiled_pipeline.py).

Iteration costs: the kernel reads tables filled from LlmCost's memos and grid points,
and interpolates between grid points as LlmCost does; where one lacks a grid point
(or a call's cost) it stops, this driver asks LlmCost for it the way its iteration or
decode run would at that point (so the same grid points are simulated, in the same
order), and the kernel goes on (loop_tables). The sizes it interpolates stay in its
own tables (the same values LlmCost's memos would hold), but for a prefill chunk's
attention, interpolated at each read (loop_prices._prefill_cost). A call's cost
depends on its tokens and requests only over a host link
(invocation.call_cost_reads_bytes); without one the kernel asks for one call's cost a
run, not one per (tokens, requests) (loop_prices.call_key).
"""

from __future__ import annotations

import numpy as np

from simulator.invocation import call_cost_reads_bytes
from simulator.serving import loop_state as k
from simulator.serving.kv_cache import PagedKvCache
from simulator.serving.llm_cost import LlmCost
from simulator.serving.loop_kernel import serve_loop, serve_pipelined
from simulator.serving.loop_tables import cost_tables, filled
from simulator.serving.metrics import MetricsStore
from simulator.serving.request_rows import RequestRows

KEY_LIMIT = 1 << 31  # token counts packed two to an int64 key
MAX_SLOTS = 1 << 25  # replicas x requests: the per-replica lists' room (int64 each)


def applies(spec, arrivals, cost, kv, store, *, llm: bool) -> bool:
    """Whether the run is within the compiled loop's scope (module docstring)."""
    if not llm or spec.batching != "continuous" or spec.max_batch is None \
            or (spec.routing != "round_robin" and spec.replicas != 1) \
            or type(cost) is not LlmCost \
            or type(kv) is not PagedKvCache or kv.host is not None \
            or type(store) is not MetricsStore or store.prefix_cache is not None \
            or store.arrived or store.sample.seen \
            or arrivals.prefix_tokens is not None or arrivals.prefix_ids is not None \
            or len(arrivals) == 0 \
            or spec.replicas * lanes_of(spec) * (len(arrivals) + 2) > MAX_SLOTS:
        return False
    prompts, outputs = arrivals.prompt_tokens, arrivals.output_tokens
    return bool(prompts.min() >= 1 and outputs.min() >= 1
                and int(prompts.max()) + int(outputs.max()) < KEY_LIMIT
                and spec.max_tokens < KEY_LIMIT)


def lanes_of(spec) -> int:
    """A replica's processes: one, or one per micro-batch of its pipeline
    (engine.make_replicas)."""
    return (spec.micro_batches or spec.system.pp) if spec.system.pp > 1 else 1


def queue_room(requests: int, lanes: int) -> int:
    """Rows the event heap needs at most: each arrival's news to its lane and each
    lane's news of the end of arrivals (pending, or gone and left behind the timeout
    it cut short, stale: requests + lanes in all), per lane one live timeout and
    one first_of event (pipelined: one condition's event, one iteration's end, one
    replica's `freed`), the arrival process's timeout and end, every process's start,
    and the row `pop` leaves the head in."""
    return requests + 4 * lanes + 4


def run_compiled(spec, arrivals, cost: LlmCost, kv: PagedKvCache, store: MetricsStore,
                 progress=None) -> None:
    """Serve every arrival on spec.replicas replicas, each with a cache as `kv` (fresh);
    fills `store` as the SimPy loop does."""
    n, replicas, lanes = len(arrivals), spec.replicas, lanes_of(spec)
    si = np.zeros(k.INTS, dtype=np.int64)
    si[k.I_N], si[k.I_PENDING] = n, -1
    si[k.I_TOTAL_BLOCKS], si[k.I_REPLICAS] = kv.total_blocks, replicas
    si[k.I_LANES], si[k.I_STAGES] = lanes, spec.system.pp
    si[k.I_CALL_KEYED] = call_cost_reads_bytes(cost.platform)
    rs = np.zeros((replicas * lanes, k.REPLICA_INTS), dtype=np.int64)
    rs[:, k.S_FREE] = kv.total_blocks  # (read in each replica's pool row)
    rg = np.zeros((replicas * lanes, k.REPLICA_FLOATS))
    rg[:, k.G_CLOCK_SINCE] = np.nan
    si[k.I_BLOCK], si[k.I_MAX_BATCH] = kv.block_tokens, spec.max_batch
    si[k.I_MAX_TOKENS], si[k.I_BITS] = spec.max_tokens, cost.bits
    si[k.I_STRIDE], si[k.I_LIMIT] = store.sample.stride, store.sample.limit
    si[k.I_REPORT_NEXT], si[k.I_REPORTS] = k.REPORT_EVERY, progress is not None
    sf = np.zeros(k.FLOATS)
    ri = np.zeros((n, k.REQUEST_INTS), dtype=np.int64)
    ri[:, k.R_PROMPT] = arrivals.prompt_tokens
    ri[:, k.R_OUTPUT] = arrivals.output_tokens
    rf = np.zeros((n, k.REQUEST_FLOATS))
    rf[:, k.Q_ARRIVAL] = arrivals.times_s
    for column in (k.Q_FIRST, k.Q_FINISH, k.Q_ADMITTED, k.Q_LOST_SINCE):
        rf[:, column] = np.nan
    wq = np.zeros((replicas, n + 2), dtype=np.int64)
    dec, ctx, slack, left, pre, ch_req, ch_new = (
        np.zeros((replicas * lanes, n + 2), dtype=np.int64) for _ in range(7))
    shorts = np.zeros(n + 2, dtype=np.int64)
    cells = np.zeros((replicas * lanes, n + 2, 2), dtype=np.int64)
    stretches = np.zeros((replicas * lanes, n + 2, 4))
    p_ends, p_energy = (np.zeros((replicas * lanes, k.MAX_RUN_ITERATIONS))
                        for _ in range(2))
    stage_free = np.zeros((replicas, spec.system.pp))
    rows = np.zeros((k.MAX_RUN_ITERATIONS + 1, 4))
    touched = np.zeros(k.MAX_RUN_ITERATIONS + 1, dtype=np.bool_)
    tlist = np.zeros(k.MAX_RUN_ITERATIONS + 1, dtype=np.int64)
    cross = np.zeros(n + 2, dtype=np.int64)
    fin, drops = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    chg_t, chg_d = np.zeros(2 * n), np.zeros(2 * n, dtype=np.int64)
    room = queue_room(n, replicas * lanes)
    hq_t, hq_i = np.zeros(room), np.zeros((room, 5), dtype=np.int64)
    limit = store.sample.limit
    shp = np.zeros(max(1, 64 * limit), dtype=np.int64)
    shp_off = np.zeros(2 * limit + 2, dtype=np.int64)
    tables = cost_tables(cost)
    lanes_state = k.Lanes(ints=rs, floats=rg, waiting=wq, decoding=dec, contexts=ctx,
                          slack=slack, left=left, cells=cells, stretches=stretches,
                          prefilling=pre, chunk_requests=ch_req,
                          chunk_tokens=ch_new, ends=p_ends, energies=p_energy,
                          stage_free=stage_free)
    requests = k.Requests(ints=ri, floats=rf, finished=fin, dropped=drops,
                          change_times=chg_t, change_deltas=chg_d)
    work = k.PriceWork(shorts=shorts, rows=rows, touched=touched, touched_list=tlist,
                       crossings=cross, shapes=shp, shape_offsets=shp_off)
    state = k.LoopState(ints=si, floats=sf, queue=k.EventQueue(si, hq_t, hq_i),
                        lanes=lanes_state, requests=requests, work=work)
    kernel = serve_pipelined if spec.system.pp > 1 else serve_loop  # (compiled apart)
    loop = kernel.specialised(state, tables)  # typed once, not at each call
    while True:
        status = loop(state, tables)
        if status == k.DONE:
            break
        if status == k.MISS:
            tables = filled(si, cost, tables)
        elif status == k.GROW:
            shp = np.concatenate([shp, np.zeros_like(shp)])
            state = state._replace(work=state.work._replace(shapes=shp))
            loop = kernel.specialised(state, tables)
        elif status == k.PROGRESS:
            progress(int(si[k.I_NFIN] + si[k.I_NDROP]), n)
    _record(store, si, rs[::lanes], rg[::lanes], ri, rf, fin, drops, chg_t, chg_d, shp,
            shp_off, arrivals)


def _record(store: MetricsStore, si, rs, rg, ri, rf, fin, drops, chg_t, chg_d, shp, shp_off,
            arrivals) -> None:
    """The kernel's state as the SimPy loop leaves the store (rs, rg: each replica's
    pool row)."""
    # records built on the first read of one (request_rows: a search reads times only)
    store.finished = RequestRows(fin[:si[k.I_NFIN]], ri, rf, arrivals.times_s)
    store.dropped = RequestRows(drops[:si[k.I_NDROP]], ri, rf, arrivals.times_s)
    store.arrived = int(si[k.I_ARRIVED])
    store.preemptions = int(si[k.I_PREEMPTIONS])
    for replica, (ints_of, floats_of) in enumerate(zip(rs.tolist(), rg.tolist())):
        store.busy_s[replica] += floats_of[k.G_BUSY]
        store.energy_j[replica] += floats_of[k.G_ENERGY]
        store.iterations[replica] += ints_of[k.S_ITERS]
        store.running_max[replica] = max(store.running_max[replica],
                                         ints_of[k.S_RUNNING_MAX])
        store.stage_busy_s[replica] += floats_of[k.G_STAGE_BUSY]
        store.pipeline_active_s[replica] += floats_of[k.G_PIPE_ACTIVE]
    if si[k.I_CAP_CALLED]:
        high = int(si[k.I_CAP_HIGH])
        store.same_under_max_batch = (int(si[k.I_CAP_LOW]),
                                      float("inf") if high < 0 else high)
    changes = int(si[k.I_NCHANGES])
    store.change_times, store.change_deltas = chg_t[:changes], chg_d[:changes]
    sample = store.sample
    sample.stride, sample.seen = int(si[k.I_STRIDE]), int(si[k.I_SEEN])
    flat, offsets = shp.tolist(), shp_off.tolist()
    shapes = []
    for index in range(int(si[k.I_NSHAPES])):
        begin = offsets[index]
        chunks, decodes = flat[begin], flat[begin + 1]
        pairs = flat[begin + 2:begin + 2 + 2 * chunks]
        shapes.append((tuple(zip(pairs[::2], pairs[1::2])),
                       tuple(flat[begin + 2 + 2 * chunks:begin + 2 + 2 * chunks + decodes])))
    sample.shapes = shapes
