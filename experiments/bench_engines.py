"""How fast each engine replays a long tile program, in steps per second of wall time.

The program is a GEMM tiled k-innermost on a 128 x 128 output-stationary array, built
directly with make_program (no lowering): every step loads an A and a B tile, the first
k step of each C tile starts a residency and pays the fold fill, the last one stores the
tile. Figures are the best of a few repeats, so they show the engine, not the machine's
noise. The fast (Numba) engine is timed with a warm JIT cache (one untimed call first);
its cold-cache compile time is measured apart, in a fresh interpreter whose
NUMBA_CACHE_DIR is an empty temporary folder. Run: `python experiments/bench_engines.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.program import MemoryParams, TileProgram, make_program

# GEMM shape in tiles (M = N = 4096, K = 8192 at 128-element tiles): 65,536 steps.
TILES_M, TILES_N, TILES_K = 32, 32, 64
TILE_ELEMENTS = 128                  # Tm = Tn = Tk, elements
ELEMENT_BYTES = 2                    # bf16 operands and output, bytes
ARRAY_FILL_CYCLES = 2 * 128 - 2      # os fill of a 128 x 128 array, cycles
DEPTH = 4                            # prefetch depth, steps
SLOTS = 4                            # output-buffer slots, C tiles
BYTES_PER_CYCLE = 819 / 1.5          # 819 GB/s at 1.5 GHz, bytes/cycle
LATENCY_CYCLES = 400                 # off-chip latency, cycles
DMA_SETUP_CYCLES = 32                # per transfer, cycles
REPEATS = 3                          # timed runs per engine; the best is reported
FAST_REPEATS = 20                    # timed runs of the fast engine (each a few ms)


def gemm_program() -> TileProgram:
    """The k-innermost GEMM above: one C tile per TILES_K consecutive steps."""
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


def measure_des(program: TileProgram, memory: MemoryParams) -> tuple[float, int]:
    """Best wall seconds of the SimPy engine over REPEATS runs, and its total cycles."""
    best = float("inf")
    for _ in range(REPEATS):
        began = time.perf_counter()
        outcome = run_des(program, memory)
        best = min(best, time.perf_counter() - began)
    return best, outcome.breakdown.total_cycles


def measure_fast(program: TileProgram, memory: MemoryParams) -> tuple[float, int]:
    """Best wall seconds of the fast engine (warm JIT cache), and its total cycles."""
    run_fast(program, memory)  # compiles, or loads the kernel from the on-disk cache
    best = float("inf")
    for _ in range(FAST_REPEATS):
        began = time.perf_counter()
        outcome = run_fast(program, memory)
        best = min(best, time.perf_counter() - began)
    return best, outcome.breakdown.total_cycles


# Run in a fresh interpreter: seconds of the first run_fast call (JIT compile of the
# kernel and the timing functions it inlines) minus those of the second.
_COLD_COMPILE = """
import time
from simulator.engines.fast import run_fast
from simulator.program import MemoryParams, make_program
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


def fast_compile_seconds() -> float:
    """Cold-cache JIT compile time of the fast engine, in a fresh subprocess."""
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
        done = subprocess.run([sys.executable, "-c", _COLD_COMPILE], env=env, check=True,
                              capture_output=True, text=True)
    return float(done.stdout.strip())


def main() -> None:
    program = gemm_program()
    memory = MemoryParams(BYTES_PER_CYCLE, LATENCY_CYCLES, DMA_SETUP_CYCLES)
    engines = {"simpy (des)": measure_des, "fast (numba)": measure_fast}
    seconds_of = {}
    print(f"{'engine':<14}{'steps':>9}{'seconds':>10}{'steps/s':>12}{'total cycles':>15}")
    for name, measure in engines.items():
        seconds, total = measure(program, memory)
        seconds_of[name] = seconds
        print(f"{name:<14}{program.steps:>9}{seconds:>10.3f}"
              f"{program.steps / seconds:>12,.0f}{total:>15,}")
    print(f"simpy / fast wall-time ratio: "
          f"{seconds_of['simpy (des)'] / seconds_of['fast (numba)']:,.0f}x")
    print(f"fast JIT compile, cold cache: {fast_compile_seconds():.2f} s")


if __name__ == "__main__":
    main()
