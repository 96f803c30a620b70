"""How fast the mapper decides candidate tilings: ResNet-50 (batch 1) on tpu_v5e_like,
every operator searched, against the mapping issue's target (at least 1,000 candidates
per operator for every operator, under 60 s on 2 cores with a warm JIT cache).

1. Warm-up: one untimed search of a small workload in this process, so the Numba
   kernels are loaded from the on-disk cache (compiling them first if it is cold); the
   worker processes fork from this one and inherit them.
2. ResNet-50, objective cycles, WORKERS processes, every operator searched on its own
   (`reuse_shapes=False`: operators of the same shape are not shared). A candidate is
   one (tm, tn, tk, loop order, dataflow, depth) of an array operator or one (rows per
   tile, depth) of a vector operator; every one is decided: it does not fit, it is the
   same program as a candidate earlier in canonical order, its lower bound exceeds the
   best found, or it is lowered and replayed with the fast engine ("simulated").
3. The same search with operators of one shape searched once (the default), and on one
   process.
4. The simulation rate alone: the SIMULATE_COUNT candidates of SIMULATE_OP with the
   lowest cycle bound (the tilings a search simulates first), each lowered, replayed
   with the fast engine and totalled, on one process.

Figures are wall-clock seconds of one run each on this machine, shared with whatever
else runs; the pruned rate (candidates/s) is mostly the bound's vectorised arithmetic,
the simulated rate the lowering + fast engine + totals per candidate.
Run: `python experiments/bench_mapper.py` (about 20 s).
"""

from __future__ import annotations

import time

from simulator.inputs.named_inputs import load_inputs
import numpy as np

from simulator.search.bounds import candidate_bounds
from simulator.search.operator import evaluate as _evaluate
from simulator.search.workload_search import map_workload
from simulator.program.tile_program import memory_params
from simulator.simulate import Inputs
from simulator.inputs.workload import is_compute

PLATFORM = "tpu_v5e_like"            # shipped platform: 256 x 256 array, 16 MiB buffers
WORKLOAD = "resnet50_b1"             # shipped workload: 72 operators
OBJECTIVE = "cycles"
WORKERS = 2                          # processes (the 2 cores)
SIMULATE_OP = "res3a_branch2b"      # operator whose candidates part 4 simulates
SIMULATE_COUNT = 2000                # candidates simulated in part 4
WARM_WORKLOAD = "bert_base_s128"     # searched untimed first, to load the JIT cache

TARGET_SECONDS = 60.0                # the issue: every ResNet-50 operator, 2 cores
TARGET_CANDIDATES = 1000             # the issue: candidates per operator


def timed_search(inputs: Inputs, **options):
    started = time.perf_counter()
    result = map_workload(inputs, objective=OBJECTIVE, **options)
    return result, time.perf_counter() - started


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    warm = load_inputs(PLATFORM, WARM_WORKLOAD, None)
    map_workload(warm, objective=OBJECTIVE, workers=1)
    inputs = load_inputs(PLATFORM, WORKLOAD, None)
    every, every_s = timed_search(inputs, workers=WORKERS, reuse_shapes=False)
    shared, shared_s = timed_search(inputs, workers=WORKERS)
    serial, serial_s = timed_search(inputs, workers=1, reuse_shapes=False)
    assert [op.best for op in every.operators] == [op.best for op in shared.operators] \
        == [op.best for op in serial.operators]
    one = next(op for op in inputs.workload.operators if op.name == SIMULATE_OP)
    tilings, cycles_lb, _ = candidate_bounds(one, inputs.platform)
    first = np.argsort(cycles_lb, kind="stable")[:SIMULATE_COUNT]
    memory = memory_params(inputs.platform)
    started = time.perf_counter()
    for i in first:
        _evaluate(one, tilings[i], inputs.platform, memory, None)
    simulate_s = time.perf_counter() - started

    ops = {op.name: op for op in inputs.workload.operators}
    array_counts = [op.stats.candidates for op in every.operators
                    if is_compute(ops[op.name])]
    vector_counts = [op.stats.candidates for op in every.operators
                     if not is_compute(ops[op.name])]
    stats = every.stats
    print(f"{WORKLOAD} on {PLATFORM}, objective {OBJECTIVE}: {len(every.operators)} "
          f"operators ({len(array_counts)} on the array, {len(vector_counts)} vector)")
    print(f"every operator searched, {WORKERS} workers: {stats.candidates:,} candidates: "
          f"{stats.unfit:,} do not fit, {stats.duplicates:,} duplicate programs, "
          f"{stats.bound_pruned:,} pruned by the bound, {stats.simulated:,} simulated")
    best, _ = every.best_totals()
    print(f"best per operator summed: {best:,} cycles; "
          + "; ".join(f"{row['heuristic']} +{row['cycles_gap_percent']:.1f}%"
                      if row["cycles_gap_percent"] is not None
                      else f"{row['heuristic']}: does not fit every operator"
                      for row in every.summary()))
    rows = [
        (f"every operator, {WORKERS} workers, wall s", f"{every_s:.2f}",
         f"< {TARGET_SECONDS:g}", verdict(every_s < TARGET_SECONDS)),
        ("  candidates decided", f"{stats.candidates:,}", "", ""),
        ("  candidates/s", f"{stats.candidates / every_s:,.0f}", "", ""),
        ("  simulated/s", f"{stats.simulated / every_s:,.0f}", "", ""),
        ("  fewest candidates of an array operator", f"{min(array_counts):,}",
         f">= {TARGET_CANDIDATES:,}", verdict(min(array_counts) >= TARGET_CANDIDATES)),
        ("  fewest candidates of a vector operator", f"{min(vector_counts):,}",
         f">= {TARGET_CANDIDATES:,}", verdict(min(vector_counts) >= TARGET_CANDIDATES)),
        ("  mean candidates per operator",
         f"{stats.candidates / len(every.operators):,.0f}", "", ""),
        ("every operator, 1 worker, wall s", f"{serial_s:.2f}", "", ""),
        ("  candidates/s", f"{serial.stats.candidates / serial_s:,.0f}", "", ""),
        (f"shapes searched once ({sum(op.same_as is None for op in shared.operators)} "
         f"searches), {WORKERS} workers, wall s", f"{shared_s:.2f}", "", ""),
        (f"{len(first):,} candidates of {SIMULATE_OP} simulated, 1 process, "
         "candidates/s", f"{len(first) / simulate_s:,.0f}", "", ""),
    ]
    width = max(len(row[0]) for row in rows)
    print(f"{'figure':<{width}}  {'value':>12}  {'target':>10}  result")
    for name, value, target, result in rows:
        print(f"{name:<{width}}  {value:>12}  {target:>10}  {result}".rstrip())


if __name__ == "__main__":
    main()
