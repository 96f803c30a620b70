"""A deliberately naive reference for the engines' per-step times and breakdown.

It shares nothing with the engines but the formulas of simulator.model.timing. A global clock
visits, in order, every cycle at which something can happen (every time it has written
down, and the cycle after each raised request); at each visited cycle it applies every
rule of DESIGN.md section 3 whose conditions hold, over and over until none fires. Each
rule's conditions only ever become true and stay true, so each event happens at the first
visited cycle where they hold, which is the cycle the semantics give it. Slow and plain
on purpose: it is checked by hand in test_engine_timing and trusted in test_engine_vs_naive.
"""

from __future__ import annotations

import heapq

import numpy as np

from simulator.engines.outcome import Breakdown, EngineOutcome, StepTimes
from simulator.program.tile_program import MemoryParams, TileProgram
from simulator.model.timing import input_stall, service_cycles


def naive_timeline(program: TileProgram, memory: MemoryParams) -> EngineOutcome:
    """Per-step times (always kept) and the breakdown of one run of `program`."""
    steps = program.steps
    depth = program.depth
    slots = program.slots
    load_bytes = [int(b) for b in program.load_bytes]
    store_bytes = [int(b) for b in program.store_bytes]
    compute_cycles = [int(c) for c in program.compute_cycles]
    vector_cycles = [int(c) for c in program.vector_cycles]
    evacuation = [0] * len(vector_cycles) if program.evacuation_cycles is None else \
        [int(c) for c in program.evacuation_cycles]
    acquire = [bool(a) for a in program.acquire]
    release = [bool(r) for r in program.release]
    reload_of = [int(r) for r in program.reload_of]
    latency = memory.access_cycles
    bandwidth = memory.bytes_per_cycle

    # acquisition_of[i]: n when step i is the n-th acquiring step; releasing_step[n]: the
    # step whose store ends residency n.
    acquisition_of = {}
    for i in range(steps):
        if acquire[i]:
            acquisition_of[i] = len(acquisition_of)
    releasing_step = [i for i in range(steps) if release[i]]

    # Every time is None until the event is decided (possibly for a later cycle).
    load_request = [None] * steps
    load_start = [None] * steps
    load_usable = [None] * steps
    compute_start = [None] * steps
    compute_end = [None] * steps
    vector_end = [None] * steps
    store_request = [None] * steps
    store_start = [None] * steps
    store_served = [None] * steps
    store_complete = [None] * steps

    waiting_transfers = []          # (kind, step, request cycle), kind "load" or "store"
    server_free_at = 0
    offchip_busy = 0
    cycles_to_visit = [0]           # a heap; duplicates are harmless

    def happened(cycle, now):
        return cycle is not None and cycle <= now

    def slot_free_at(step):
        n = acquisition_of[step]
        if n < slots:
            return 0
        return store_served[releasing_step[n - slots]]

    now = -1
    while True:
        # Advance the clock to the next cycle worth visiting.
        while cycles_to_visit and cycles_to_visit[0] <= now:
            heapq.heappop(cycles_to_visit)
        if not cycles_to_visit:
            break
        now = heapq.heappop(cycles_to_visit)

        something_fired = True
        while something_fired:
            something_fired = False

            # Load DMA: the next load, once the previous one is raised, compute of
            # step i - depth has ended, and the store of the partial sums it reloads
            # (if any) has completed.
            if None in load_request:
                i = load_request.index(None)
                source = reload_of[i]
                spilled = source < 0 or happened(store_complete[source], now)
                if (i < depth or happened(compute_end[i - depth], now)) and spilled:
                    load_request[i] = now
                    if load_bytes[i] == 0:
                        load_start[i] = now
                        load_usable[i] = now
                    else:
                        waiting_transfers.append(("load", i, now))
                        heapq.heappush(cycles_to_visit, now + 1)
                    something_fired = True

            # Off-chip memory: when free, serve a request raised before this cycle:
            # stores first, then the earliest request, then the lowest step.
            eligible = [t for t in waiting_transfers if t[2] <= now - 1]
            if server_free_at <= now and eligible:
                chosen = min(eligible,
                             key=lambda t: (0 if t[0] == "store" else 1, t[2], t[1]))
                waiting_transfers.remove(chosen)
                kind, i, _ = chosen
                nbytes = store_bytes[i] if kind == "store" else load_bytes[i]
                service = service_cycles(nbytes, bandwidth)
                offchip_busy += service
                server_free_at = now + service
                if kind == "store":
                    store_start[i] = now
                    store_served[i] = now + service
                    store_complete[i] = now + service + latency
                else:
                    load_start[i] = now
                    load_usable[i] = now + service + latency
                heapq.heappush(cycles_to_visit, now + service)
                heapq.heappush(cycles_to_visit, now + service + latency)
                something_fired = True

            # Compute unit: the next step, once the previous one ended, its load is
            # usable, and its output slot (if it takes one) is free.
            if None in compute_start:
                i = compute_start.index(None)
                previous_done = i == 0 or happened(compute_end[i - 1], now)
                slot_ready = not acquire[i] or happened(slot_free_at(i), now)
                if previous_done and happened(load_usable[i], now) and slot_ready:
                    compute_start[i] = now
                    compute_end[i] = now + compute_cycles[i]
                    heapq.heappush(cycles_to_visit, compute_end[i])
                    something_fired = True

            # Vector unit: the next step's epilogue, once its compute ended and the
            # previous epilogue ended.
            if None in vector_end:
                i = vector_end.index(None)
                previous_done = i == 0 or happened(vector_end[i - 1], now)
                if previous_done and happened(compute_end[i], now):
                    vector_end[i] = now + evacuation[i] + vector_cycles[i]
                    heapq.heappush(cycles_to_visit, vector_end[i])
                    something_fired = True

            # Store DMA: the next step's store, raised when its epilogue ends.
            if None in store_request:
                i = store_request.index(None)
                if happened(vector_end[i], now):
                    store_request[i] = now
                    if store_bytes[i] == 0:
                        store_start[i] = now
                        store_served[i] = now
                        store_complete[i] = now
                    else:
                        waiting_transfers.append(("store", i, now))
                        heapq.heappush(cycles_to_visit, now + 1)
                    something_fired = True

    if None in store_complete:
        unfinished = store_complete.index(None)
        raise RuntimeError(f"naive timeline: step {unfinished} never finished")

    # Accounting, straight from DESIGN.md section 3.
    total = max(max(store_complete), vector_end[-1])
    fill = compute_start[0]
    input_stalled = 0
    output_stalled = 0
    output_stalled_vector = 0
    for i in range(1, steps):
        gap = compute_start[i] - compute_end[i - 1]
        if gap > 0:
            waited_for_load = input_stall(load_usable[i], compute_start[i],
                                          compute_end[i - 1])
            input_stalled += waited_for_load
            output_stalled += gap - waited_for_load
            if acquire[i] and acquisition_of[i] >= slots:
                j = releasing_step[acquisition_of[i] - slots]
                if vector_end[j] > compute_end[j]:
                    output_stalled_vector += gap - waited_for_load
    drain = total - compute_end[-1]
    vector_tail = max(0, vector_end[-1] - compute_end[-1])
    breakdown = Breakdown(
        total_cycles=total + program.overhead_cycles,
        busy_cycles=sum(compute_cycles),
        fill_cycles=fill,
        input_stall_cycles=input_stalled,
        output_stall_cycles=output_stalled,
        output_stall_vector_cycles=output_stalled_vector,
        drain_cycles=drain,
        vector_tail_cycles=vector_tail,
        store_tail_cycles=drain - vector_tail,
        offchip_busy_cycles=offchip_busy,
        vector_busy_cycles=sum(vector_cycles),
        overhead_cycles=program.overhead_cycles,
        evacuation_cycles=sum(evacuation),
    )
    times = StepTimes(
        load_request=np.array(load_request, dtype=np.int64),
        load_start=np.array(load_start, dtype=np.int64),
        load_usable=np.array(load_usable, dtype=np.int64),
        compute_start=np.array(compute_start, dtype=np.int64),
        compute_end=np.array(compute_end, dtype=np.int64),
        vector_end=np.array(vector_end, dtype=np.int64),
        store_request=np.array(store_request, dtype=np.int64),
        store_start=np.array(store_start, dtype=np.int64),
        store_served=np.array(store_served, dtype=np.int64),
        store_complete=np.array(store_complete, dtype=np.int64),
    )
    return EngineOutcome(breakdown=breakdown, steps=times)
