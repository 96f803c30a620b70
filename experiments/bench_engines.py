"""How fast accsim lowers and replays long tile programs, and what a 16-million-step GEMM
costs end to end; the figures against the fast-engine issue's targets, in one table.

1. Engines on the same program: a GEMM tiled k-innermost on a 128 x 128
   output-stationary array, built directly with make_program (no lowering): every step
   loads an A and a B tile, the first k step of each C tile starts a residency and pays
   the fold fill, the last one stores the tile. SimPy (engines.des) and the fast Numba
   kernel (engines.fast, warm JIT cache: one untimed call first) replay it; both
   figures include the engines' program and memory validation.
2. Lowering of a big GEMM (BIG_* below, over 16 million steps) on the tpu_v5e_like
   platform: the compiled step generator `lowering.nest_steps.fill_steps` alone, timed
   inside a real `lower_compute` call so both figures use the same arguments, and the
   whole `lower_compute` call (kernel, buffer checks, program validation, counters).
   The fast engine then replays that lowered program.
3. Cold-cache JIT compile times of the engine kernel and of the lowering kernel, each in
   a fresh interpreter whose NUMBA_CACHE_DIR is an empty temporary folder: the first
   call's seconds minus the second's.
4. The big GEMM end to end (`simulate.simulate`: lowering, fast engine, metrics) in a
   fresh interpreter with a warm on-disk JIT cache (this script fills it first), so that
   its peak RSS (getrusage ru_maxrss) counts nothing done before; the time is that of
   the one simulate() call, loading the cached kernels included. Linux carries the
   parent's peak RSS into a child's ru_maxrss across (v)fork and exec, so this runs
   before the parent does any big work, and the child's own high-water mark (VmHWM in
   /proc/self/status) is printed beside it.

Timed figures are the best of a few repeats, so they show the code, not the machine's
noise. Every kernel is single-threaded, so each figure is one core's.
Run: `python experiments/bench_engines.py` (about a minute).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import numpy as np

import simulator.lowering
from simulator.inputs.named_inputs import load_inputs
from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.lowering import lower_compute
from simulator.lowering import nest_steps as lowering_kernel
from simulator.mapping.plan import Mapping, TilingSpec, merged_spec
from simulator.search.resolve import resolve_tiling
from simulator.program.tile_program import MemoryParams, TileProgram, make_program
from simulator.program.tile_program import memory_params
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

# 1. Engine program: GEMM in tiles (M = N = 4096, K = 8192 at 128-element tiles), 65,536 steps.
TILES_M, TILES_N, TILES_K = 32, 32, 64
TILE_ELEMENTS = 128                  # Tm = Tn = Tk, elements
ELEMENT_BYTES = 2                    # bf16 operands and output, bytes
ARRAY_FILL_CYCLES = 2 * 128 - 2      # os fill of a 128 x 128 array, cycles
DEPTH = 4                            # prefetch depth, steps
SLOTS = 4                            # output-buffer slots, C tiles
BYTES_PER_CYCLE = 819 / 1.5          # 819 GB/s at 1.5 GHz, bytes/cycle
LATENCY_CYCLES = 400                 # off-chip latency, cycles
DMA_SETUP_CYCLES = 32                # per transfer, cycles
REPEATS = 3                          # timed runs of SimPy and of lowering; best reported
FAST_REPEATS = 20                    # timed runs of the fast engine (each a few ms)

# 2 and 4. Big GEMM: M = N = K = 16384 elements in 64^3 tiles: 256^3 = 16,777,216 steps.
BIG_PLATFORM = "tpu_v5e_like"        # shipped platform (4 x 128 x 128 arrays, 16 MiB buffers)
BIG_SIZE = 16384                     # M = N = K, elements
BIG_TILE = 64                        # tm = tn = tk, elements
BIG_LOOP_ORDER = "mnk"               # outermost first: k innermost
BIG_DATAFLOW = "ws"                  # the platform's default dataflow
BIG_DEPTH = 2                        # double buffering (the plan sets every field)
WARM_SIZE = 1024                     # M = N = K of the GEMM that fills the JIT cache

# The targets.
FAST_TARGET = 10e6                   # fast engine, steps/s
LOWERING_TARGET = 4e6                # lowering, steps/s
END_TO_END_TARGET_S = 10.0           # big GEMM through simulate(), seconds
PEAK_RSS_TARGET_MIB = 2048           # peak resident memory of that run, MiB


def gemm_program() -> TileProgram:
    """The k-innermost GEMM of part 1: one C tile per TILES_K consecutive steps."""
    tile_bytes = TILE_ELEMENTS * TILE_ELEMENTS * ELEMENT_BYTES
    c_tiles = TILES_M * TILES_N
    first_k = np.zeros(TILES_K, dtype=bool)
    first_k[0] = True
    last_k = np.zeros(TILES_K, dtype=bool)
    last_k[-1] = True
    acquire = np.tile(first_k, c_tiles)
    release = np.tile(last_k, c_tiles)
    steps = acquire.size
    # The first k step fills the array; later ones continue its fold (DESIGN.md s3).
    compute = np.where(acquire, TILE_ELEMENTS + ARRAY_FILL_CYCLES, TILE_ELEMENTS)
    return make_program(
        load_bytes=np.full(steps, 2 * tile_bytes),
        compute_cycles=compute,
        acquire=acquire,
        release=release,
        store_bytes=np.where(release, tile_bytes, 0),
        depth=DEPTH,
        slots=SLOTS,
    )


def gemm_inputs(size: int) -> Inputs:
    """A size^3 GEMM on BIG_PLATFORM with the BIG_* tiling."""
    platform = load_inputs(BIG_PLATFORM, "gemm_4096", None).platform
    workload = Workload.model_validate({"name": f"gemm_{size}", "operators": [
        {"name": "gemm", "layer_type": "gemm", "kind": "gemm", "m": size, "n": size,
         "k": size}]})
    mapping = Mapping(name="bench", default=TilingSpec(
        tm=BIG_TILE, tn=BIG_TILE, tk=BIG_TILE, loop_order=BIG_LOOP_ORDER,
        dataflow=BIG_DATAFLOW, depth=BIG_DEPTH))
    return Inputs(platform, workload, mapping)


def best_seconds(action, repeats: int) -> tuple[float, object]:
    """Best wall seconds of `action()` over `repeats` calls, and its last result."""
    best = float("inf")
    result = None
    for _ in range(repeats):
        result = None  # free the previous result before the next call allocates its own
        began = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - began)
    return best, result


def measure_engines(program: TileProgram, memory: MemoryParams) -> dict:
    """Part 1: best seconds and total cycles of each engine on the same program."""
    des_s, des = best_seconds(lambda: run_des(program, memory), REPEATS)
    run_fast(program, memory)  # compiles, or loads the kernel from the on-disk cache
    fast_s, fast = best_seconds(lambda: run_fast(program, memory), FAST_REPEATS)
    return {"des_s": des_s, "fast_s": fast_s, "des_total": des.breakdown.total_cycles,
            "fast_total": fast.breakdown.total_cycles}


@contextmanager
def kernel_timer(times: list[float]):
    """Time every fill_steps call that lower_compute makes, appending seconds to `times`."""
    original = lowering_kernel.fill_steps

    def timed(*args):
        began = time.perf_counter()
        result = original(*args)
        times.append(time.perf_counter() - began)
        return result

    lowering_kernel.fill_steps = timed
    try:
        yield
    finally:
        lowering_kernel.fill_steps = original


def measure_lowering(inputs: Inputs) -> dict:
    """Part 2: best seconds of the lowering kernel and of lower_compute on the big GEMM,
    then of the fast engine on the lowered program."""
    op = inputs.workload.operators[0]
    tiling = resolve_tiling(op, merged_spec(inputs.mapping, op), inputs.platform)
    assert simulator.lowering.nest.k is lowering_kernel  # the module kernel_timer patches
    kernel_times: list[float] = []
    with kernel_timer(kernel_times):
        lower_s, lowered = best_seconds(
            lambda: lower_compute(op, tiling, inputs.platform), REPEATS)
    memory = memory_params(inputs.platform)
    engine_s, _ = best_seconds(lambda: run_fast(lowered.program, memory), REPEATS)
    return {"steps": lowered.program.steps, "kernel_s": min(kernel_times),
            "lower_s": lower_s, "engine_s": engine_s}


# Run in a fresh interpreter with an empty cache: first call minus second call.
_COLD_ENGINE = """
import time
from simulator.engines.fast import run_fast
from simulator.program.tile_program import MemoryParams, make_program
program = make_program([1024] * 3, [20] * 3, None, [1, 0, 0], [0, 0, 1], [0, 0, 512],
                       depth=2, slots=2)
memory = MemoryParams(64.0, 10, 2)
began = time.perf_counter()
run_fast(program, memory)
first = time.perf_counter() - began
began = time.perf_counter()
run_fast(program, memory)
print(first - (time.perf_counter() - began))
"""

_COLD_LOWERING = """
import sys, time
sys.path.insert(0, {folder!r})
from bench_engines import gemm_inputs
from simulator.lowering import lower_compute
from simulator.mapping.plan import merged_spec
from simulator.search.resolve import resolve_tiling
inputs = gemm_inputs(256)
op = inputs.workload.operators[0]
tiling = resolve_tiling(op, merged_spec(inputs.mapping, op), inputs.platform)
began = time.perf_counter()
lower_compute(op, tiling, inputs.platform)
first = time.perf_counter() - began
began = time.perf_counter()
lower_compute(op, tiling, inputs.platform)
print(first - (time.perf_counter() - began))
"""


def cold_compile_seconds(code: str) -> float:
    """Seconds of JIT compile in a fresh subprocess with an empty Numba cache."""
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        done = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                              capture_output=True, text=True)
    return float(done.stdout.strip())


def high_water_kib() -> int:
    """This process's own peak RSS in KiB (VmHWM), which no parent's peak inflates."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def end_to_end() -> None:
    """Part 4, in the subprocess: simulate the big GEMM once; print a JSON line."""
    inputs = gemm_inputs(BIG_SIZE)
    hwm_before = high_water_kib()
    began = time.perf_counter()
    result = simulate(inputs)
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    steps = sum(op.lowered.program.steps for op in result.operators)
    print(json.dumps({"seconds": seconds, "hwm_before_kib": hwm_before,
                      "peak_rss_kib": peak, "hwm_kib": high_water_kib(), "steps": steps,
                      "total_cycles": result.total.cycles, "engine": result.engine}))


def measure_end_to_end() -> dict:
    """Part 4: fill the JIT cache here, then run end_to_end() in a fresh interpreter."""
    simulate(gemm_inputs(WARM_SIZE))  # compiles or loads every kernel simulate() uses
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--end-to-end"],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def verdict(value: float, target: float, at_most: bool = False) -> str:
    met = value <= target if at_most else value >= target
    return "met" if met else "MISSED"


def main() -> None:
    e2e = measure_end_to_end()  # first: the child's ru_maxrss includes ours so far
    assert e2e["engine"] == "fast", e2e
    program = gemm_program()
    memory = MemoryParams(BYTES_PER_CYCLE, LATENCY_CYCLES, DMA_SETUP_CYCLES)
    engines = measure_engines(program, memory)
    assert engines["des_total"] == engines["fast_total"], engines
    lowering = measure_lowering(gemm_inputs(BIG_SIZE))
    folder = os.path.dirname(os.path.abspath(__file__))
    engine_compile = cold_compile_seconds(_COLD_ENGINE)
    lowering_compile = cold_compile_seconds(_COLD_LOWERING.format(folder=folder))

    steps, big_steps = program.steps, lowering["steps"]
    fast_rate = steps / engines["fast_s"]
    kernel_rate = big_steps / lowering["kernel_s"]
    lower_rate = big_steps / lowering["lower_s"]
    peak_mib = e2e["peak_rss_kib"] / 1024
    print(f"engine program: GEMM {TILES_M * TILE_ELEMENTS} x {TILES_N * TILE_ELEMENTS} x "
          f"{TILES_K * TILE_ELEMENTS} in {TILE_ELEMENTS}^3 tiles, k innermost, "
          f"{steps:,} steps; total {engines['fast_total']:,} cycles on both engines")
    print(f"big GEMM: {BIG_SIZE}^3 in {BIG_TILE}^3 tiles on {BIG_PLATFORM}, loop order "
          f"{BIG_LOOP_ORDER}, {BIG_DATAFLOW}: {big_steps:,} steps; "
          f"{e2e['total_cycles']:,} cycles")
    rows = [
        ("simpy engine (des), steps/s", f"{steps / engines['des_s']:,.0f}", "", ""),
        ("fast engine (numba, warm), steps/s", f"{fast_rate:,.0f}",
         f">= {FAST_TARGET:,.0f}", verdict(fast_rate, FAST_TARGET)),
        ("simpy / fast wall-time ratio", f"{engines['des_s'] / engines['fast_s']:,.0f}x",
         "", ""),
        ("lowering kernel fill_steps, steps/s", f"{kernel_rate:,.0f}",
         f">= {LOWERING_TARGET:,.0f}", verdict(kernel_rate, LOWERING_TARGET)),
        ("lower_compute (with validation), steps/s", f"{lower_rate:,.0f}",
         f">= {LOWERING_TARGET:,.0f}", verdict(lower_rate, LOWERING_TARGET)),
        ("fast engine on the big GEMM, steps/s",
         f"{big_steps / lowering['engine_s']:,.0f}", f">= {FAST_TARGET:,.0f}",
         verdict(big_steps / lowering["engine_s"], FAST_TARGET)),
        ("fast engine JIT compile, cold cache, s", f"{engine_compile:.2f}", "", ""),
        ("lowering JIT compile, cold cache, s", f"{lowering_compile:.2f}", "", ""),
        ("big GEMM end to end (simulate), s", f"{e2e['seconds']:.2f}",
         f"< {END_TO_END_TARGET_S:g}", verdict(e2e["seconds"], END_TO_END_TARGET_S, True)),
        ("big GEMM peak RSS (fresh process, ru_maxrss), MiB", f"{peak_mib:,.0f}",
         f"< {PEAK_RSS_TARGET_MIB:,}", verdict(peak_mib, PEAK_RSS_TARGET_MIB, True)),
        ("  its own high-water mark (VmHWM), MiB", f"{e2e['hwm_kib'] / 1024:,.0f}", "", ""),
        ("  VmHWM before simulate() (imports, inputs), MiB",
         f"{e2e['hwm_before_kib'] / 1024:,.0f}", "", ""),
    ]
    width = max(len(row[0]) for row in rows)
    print(f"{'figure':<{width}}  {'value':>14}  {'target':>14}  result")
    for name, value, target, result in rows:
        print(f"{name:<{width}}  {value:>14}  {target:>14}  {result}".rstrip())


if __name__ == "__main__":
    if sys.argv[1:] == ["--end-to-end"]:
        end_to_end()
    else:
        main()
