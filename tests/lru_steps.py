"""The step-by-step reference of a GEMM's loop nest (a test helper; production lowers
through lowering.nest): enumerate the tile steps of one GEMM in loop order, decide
residency with one LRU cache per operand buffer, and emit the tile program's arrays and
the operator's static counters, as lowering did before the closed form. Property tests
hold the closed form and its step generator (lowering.nest, lowering.nest_steps) to it.

It knows the nest's operands A and B alone, each with its own tables and load-time
vector work, so a GEMM run transposed (model.loop_nest.ORIENTED_OPERANDS) is the same
kernel called with its operands' roles exchanged: orientation never reaches a step.
"""

from __future__ import annotations

import numpy as np

from simulator.inputs.platform import Platform
from simulator.kernels.jit import njit
from simulator.lowering.nest import (A_MISSES, A_OFFCHIP, A_SRAM_READ_ELEMS,
                                     A_SRAM_WRITE, A_VECTOR_ELEMS, ARRAY_FILL, B_MISSES,
                                     B_OFFCHIP, B_SRAM_READ_ELEMS, B_SRAM_WRITE,
                                     B_VECTOR_ELEMS, C_RELOAD_OFFCHIP, C_SRAM_READ,
                                     C_SRAM_WRITE, C_STORE_OFFCHIP, EPILOGUE_OFFCHIP,
                                     N_FLOAT_COUNTERS, N_INT_COUNTERS, PADDING, SKEW,
                                     STATIONARY_LOAD, USEFUL, GemmArgs)
from simulator.lowering.evacuation import evacuation_array
from simulator.lowering.tile_table import TileTable
from simulator.program.tile_program import TileProgram
from simulator.model.dataflow import (A_READS, B_READS, fold_shape, read_multiplier,
                                      stationary_input_elements, stationary_key)
from simulator.model.timing import array_cycles, array_split, vector_cycles

def _lru_new(n_keys: int) -> np.ndarray:
    """An LRU over keys 0..n_keys-1 as a doubly linked list; row 0 prev, row 1 next,
    column n_keys is the sentinel (its next is the most recent), -2 marks absent."""
    links = np.full((2, n_keys + 1), -2, dtype=np.int64)
    links[0, n_keys] = n_keys
    links[1, n_keys] = n_keys
    return links


@njit(cache=True, inline="always")
def _lru_unlink(links: np.ndarray, key: int) -> None:
    prev, nxt = links[0, key], links[1, key]
    links[1, prev] = nxt
    links[0, nxt] = prev


@njit(cache=True, inline="always")
def _lru_touch(links: np.ndarray, key: int, capacity: int, size: np.ndarray) -> bool:
    """Use `key`; True on a hit. A miss inserts it, evicting the least recent if full."""
    sentinel = links.shape[1] - 1
    hit = links[0, key] != -2
    if hit:
        _lru_unlink(links, key)
    else:
        if size[0] == capacity:
            oldest = links[0, sentinel]
            _lru_unlink(links, oldest)
            links[0, oldest] = -2
        else:
            size[0] += 1
    first = links[1, sentinel]
    links[0, key] = sentinel
    links[1, key] = first
    links[0, first] = key
    links[1, sentinel] = key
    return hit


def gemm_state(m: int, n: int, k: int, tm: int, tn: int, tk: int):
    """What gemm_block carries from one block of steps to the next: the two operand
    LRUs with their sizes, each C tile's last visit, the previous stationary tile and
    the float and integer counters so far."""
    nm, nn, nk = (m + tm - 1) // tm, (n + tn - 1) // tn, (k + tk - 1) // tk
    return (_lru_new(nm * nk), _lru_new(nk * nn), np.zeros(2, dtype=np.int64),
            np.full(nm * nn, -1, dtype=np.int64), np.full(1, -1, dtype=np.int64),
            np.zeros(N_FLOAT_COUNTERS, dtype=np.float64),
            np.zeros(N_INT_COUNTERS, dtype=np.int64))


def gemm_steps(m: int, n: int, k: int, tm: int, tn: int, tk: int, order: np.ndarray,
               dataflow: int, rows: int, cols: int, count: int, fold_model: int,
               a_load_bytes: TileTable, a_sram_bytes: TileTable, b_load_bytes: TileTable,
               b_sram_bytes: TileTable, a_offchip: bool, b_offchip: bool, c_offchip: bool,
               acc_bytes: int, out_bytes: int, a_slots: int, b_slots: int, spill: bool,
               epilogue: np.ndarray, lanes: int, speed: float, a_vector: int,
               b_vector: int):
    """Tile program of one GEMM instance, all its steps at once (gemm_block on one
    block): the program's seven arrays, then the float and integer counters. The
    tables go to gemm_block whole (a whole program's steps outnumber its tiles)."""
    steps = ((m + tm - 1) // tm) * ((n + tn - 1) // tn) * ((k + tk - 1) // tk)
    a_lru, b_lru, sizes, last_visit, prev, floats, ints = gemm_state(m, n, k, tm, tn, tk)
    steps = int(steps)
    load_bytes = np.zeros(steps, dtype=np.int64)
    compute = np.zeros(steps, dtype=np.int64)
    vector = np.zeros(steps, dtype=np.int64)
    acquire = np.zeros(steps, dtype=np.bool_)
    release = np.zeros(steps, dtype=np.bool_)
    store_bytes = np.zeros(steps, dtype=np.int64)
    reload_of = np.full(steps, -1, dtype=np.int64)
    gemm_block(0, steps, m, n, k, tm, tn, tk, order, dataflow, rows, cols, count,
               fold_model, a_load_bytes.to_array(), a_sram_bytes.to_array(),
               b_load_bytes.to_array(), b_sram_bytes.to_array(), a_offchip, b_offchip,
               c_offchip, acc_bytes, out_bytes, a_slots, b_slots, spill, epilogue, lanes,
               speed, a_vector, b_vector, a_lru,
               b_lru, sizes, last_visit, prev, floats, ints, load_bytes, compute, vector,
               acquire, release, store_bytes, reload_of)
    return (load_bytes, compute, vector, acquire, release, store_bytes, reload_of,
            floats, ints)


@njit(cache=True)
def gemm_block(begin: int, length: int, m: int, n: int, k: int, tm: int, tn: int,
               tk: int, order: np.ndarray, dataflow: int, rows: int, cols: int,
               count: int, fold_model: int, a_load_bytes: np.ndarray,
               a_sram_bytes: np.ndarray, b_load_bytes: np.ndarray,
               b_sram_bytes: np.ndarray, a_offchip: bool, b_offchip: bool,
               c_offchip: bool, acc_bytes: int, out_bytes: int, a_slots: int,
               b_slots: int, spill: bool, epilogue: np.ndarray, lanes: int, speed: float,
               a_vector: int, b_vector: int, a_lru, b_lru, sizes, last_visit, prev,
               floats, ints,
               load_bytes, compute, vector, acquire, release, store_bytes, reload_of):
    """Steps begin .. begin + length - 1 of one GEMM instance into the first `length`
    entries of the output arrays (which it overwrites whole), carrying gemm_state's
    arrays from the previous block (steps must come in order from 0).

    order: dims outermost first (0 = m, 1 = n, 2 = k). a_load_bytes[mi, ki]: bytes an A
    tile moves from off chip (a conv's window, or m*k elements), a_sram_bytes[mi, ki]
    the bytes it takes in its buffer (B likewise, indexed [ki, ni]). spill: k is not
    innermost and the live C tiles exceed the output slots, so every step stores partial
    sums and the next k step reloads them. epilogue: one row per fused vector operator
    (numerator, denominator of its elements over the C tile's, cycles per element times
    passes, bytes per element of a second operand streamed in per C tile); the finished
    tile stores out_bytes per element of the C tile (the last member's tensor, scaled by
    the last row's fraction when there are members). a_vector, b_vector: vector cycles
    per element of work applied to each A (B) tile as it loads (0: none): a prologue
    norm on A's rows, or the transpose of a stationary tile loaded transposed.
    count arrays of rows x cols share the step's folds; fold_model: timing's code;
    speed: the array's rate in the dtype run (times a sparsity speedup).
    """
    counts = np.array([(m + tm - 1) // tm, (n + tn - 1) // tn, (k + tk - 1) // tk])
    nk, nn = counts[2], counts[1]
    a_size, b_size = sizes[0:1], sizes[1:2]
    nm = counts[0]
    index = np.zeros(3, dtype=np.int64)
    rest = begin  # mixed-radix digits of the first step, innermost dim fastest
    for level in range(2, -1, -1):
        dim = order[level]
        index[dim] = rest % counts[dim]
        rest //= counts[dim]
    # Per tile shape (whether mi, ni, ki is the last, edge, tile: 8 shapes) the folds,
    # and per shape and fold continuation (16) the array cycles and their split, each
    # worked out on first use: the same values as per step, without its divisions.
    folds = np.full((8, 2), -1, dtype=np.int64)
    cycles = np.full(16, -1, dtype=np.int64)
    split = np.zeros((16, 5), dtype=np.float64)
    prev_stationary = prev[0]
    for local in range(length):
        s = begin + local
        load_bytes[local] = 0
        vector[local] = 0
        acquire[local] = False
        release[local] = False
        store_bytes[local] = 0
        reload_of[local] = -1
        mi, ni, ki = index[0], index[1], index[2]
        for level in range(2, -1, -1):  # the next step's digits
            dim = order[level]
            index[dim] += 1
            if index[dim] < counts[dim]:
                break
            index[dim] = 0
        ms = min(tm, m - mi * tm)
        ns = min(tn, n - ni * tn)
        ks = min(tk, k - ki * tk)
        # Loads: A and B tiles not resident, and partial sums spilled by the last visit.
        a_key, b_key, c_key = mi * nk + ki, ki * nn + ni, mi * nn + ni
        if not _lru_touch(a_lru, a_key, a_slots, a_size):
            ints[A_MISSES] += 1
            ints[A_SRAM_WRITE] += a_sram_bytes[mi, ki]
            if a_vector > 0:  # the vector work runs on the tile as it arrives
                vector[local] += vector_cycles(ms * ks, lanes, a_vector, 1)
                ints[A_VECTOR_ELEMS] += ms * ks
            if a_offchip:
                load_bytes[local] += a_load_bytes[mi, ki]
                ints[A_OFFCHIP] += a_load_bytes[mi, ki]
        if not _lru_touch(b_lru, b_key, b_slots, b_size):
            ints[B_MISSES] += 1
            ints[B_SRAM_WRITE] += b_sram_bytes[ki, ni]
            if b_vector > 0:
                vector[local] += vector_cycles(ks * ns, lanes, b_vector, 1)
                ints[B_VECTOR_ELEMS] += ks * ns
            if b_offchip:
                load_bytes[local] += b_load_bytes[ki, ni]
                ints[B_OFFCHIP] += b_load_bytes[ki, ni]
        first_k, last_k = ki == 0, ki == nk - 1
        partial = ms * ns * acc_bytes
        if spill and not first_k:
            reload_of[local] = last_visit[c_key]
            if c_offchip:
                load_bytes[local] += partial
                ints[C_RELOAD_OFFCHIP] += partial
        last_visit[c_key] = s
        # Compute: one fold continues when the stationary operand is unchanged.
        stationary = stationary_key(dataflow, mi, ni, ki, nn, nk)
        shape = (4 if mi == nm - 1 else 0) + (2 if ni == nn - 1 else 0) + \
            (1 if last_k else 0)
        if folds[shape, 0] < 0:
            sr, sc, _ = fold_shape(ms, ns, ks, dataflow)
            folds[shape, 0] = (sr + rows - 1) // rows
            folds[shape, 1] = (sc + cols - 1) // cols
        row_folds, col_folds = folds[shape, 0], folds[shape, 1]
        continues = row_folds * col_folds == 1 and stationary == prev_stationary
        prev_stationary = stationary
        case = 2 * shape + (1 if continues else 0)
        if cycles[case] < 0:
            cycles[case] = array_cycles(ms, ns, ks, rows, cols, count, dataflow,
                                        fold_model, continues, speed)
            useful, padding, fill, load, skew = array_split(
                ms, ns, ks, rows, cols, count, dataflow, fold_model, continues, speed)
            split[case, 0] = useful
            split[case, 1] = padding
            split[case, 2] = fill
            split[case, 3] = load
            split[case, 4] = skew
        compute[local] = cycles[case]
        floats[USEFUL] += split[case, 0]
        floats[PADDING] += split[case, 1]
        floats[ARRAY_FILL] += split[case, 2]
        floats[STATIONARY_LOAD] += split[case, 3]
        floats[SKEW] += split[case, 4]
        # SRAM reads of the array, SCALE-Sim's per-fold counting, in elements.
        ints[A_SRAM_READ_ELEMS] += ms * ks * read_multiplier(A_READS[dataflow], row_folds,
                                                             col_folds)
        ints[B_SRAM_READ_ELEMS] += ks * ns * read_multiplier(B_READS[dataflow], row_folds,
                                                             col_folds)
        # Output buffer: accumulate into the C tile; read back what was there before.
        ints[C_SRAM_WRITE] += partial
        if not first_k:
            ints[C_SRAM_READ] += partial
        # Residency and store of the C tile.
        if spill or first_k:
            acquire[local] = True
        if spill or last_k:
            release[local] = True
            if last_k:
                ints[C_SRAM_READ] += partial
                done = ms * ns
                for row in range(epilogue.shape[0]):
                    share = done * epilogue[row, 0] // epilogue[row, 1]
                    vector[local] += vector_cycles(share, lanes, epilogue[row, 2], 1)
                    if c_offchip and epilogue[row, 3] > 0:
                        load_bytes[local] += share * epilogue[row, 3]
                        ints[EPILOGUE_OFFCHIP] += share * epilogue[row, 3]
                    if row == epilogue.shape[0] - 1:
                        done = share
                if c_offchip:
                    store_bytes[local] = done * out_bytes
            elif c_offchip:
                store_bytes[local] = partial
            ints[C_STORE_OFFCHIP] += store_bytes[local]
    prev[0] = prev_stationary


def step_tile_sizes(m: int, n: int, k: int, tm: int, tn: int, tk: int,
                    order: tuple[int, ...], begin: int = 0,
                    length: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ms, ns, ks) of every step in loop order (or of steps begin .. begin + length - 1):
    `order` names the dims outermost first (0 = m, 1 = n, 2 = k), the innermost running
    fastest, as gemm_block."""
    counts = [-(-m // tm), -(-n // tn), -(-k // tk)]
    end = counts[0] * counts[1] * counts[2] if length is None else begin + length
    rest = np.arange(begin, end, dtype=np.int64)
    index = [None, None, None]
    for dim in reversed(order):
        index[dim] = rest % counts[dim]
        rest = rest // counts[dim]
    return (np.minimum(tm, m - index[0] * tm), np.minimum(tn, n - index[1] * tn),
            np.minimum(tk, k - index[2] * tk))


def evacuation_steps(platform: Platform, m: int, n: int, k: int, tm: int, tn: int,
                     tk: int, order: tuple[int, ...], dataflow: int,
                     release: np.ndarray, begin: int = 0) -> np.ndarray | None:
    """Vector-unit cycles per step of the reference's program copying the output tile
    out of the accumulators, on every releasing step (a finished C tile or spilled
    partial sums: both leave the accumulators); None on a direct output path. With transpose_stationary, the step's
    stationary input tile (ws: its k x n weight tile, is: its m x k input tile; os keeps
    the output stationary, nothing to transpose) passes through the vector unit too.
    `release` may be one block of the program, starting at step `begin`."""
    array = platform.systolic_array
    if array.output_path == "direct":
        return None
    evac = array.evacuation
    ms, ns, ks = step_tile_sizes(m, n, k, tm, tn, tk, order, begin, release.shape[0])
    transposed = np.zeros_like(ms)
    if evac.transpose_stationary:
        transposed = transposed + stationary_input_elements(ms, ns, ks, dataflow)
    cycles = evacuation_array(ms * ns, transposed, evac.elements_per_cycle,
                              evac.tile_cycles)
    return np.where(release, cycles, 0).astype(np.int64)


def reference_program(args: GemmArgs, platform: Platform, *, depth: int, slots: int,
                      overhead_cycles: int) -> tuple[TileProgram, np.ndarray, np.ndarray]:
    """The whole program of one GEMM instance by the LRU model, with its float and
    integer counters: what lowering built before the loop nest's generator."""
    (load_b, compute, vector, acquire, release, store_b, reload_of, floats,
     ints) = gemm_steps(*args)
    evacuation = evacuation_steps(platform, args.m, args.n, args.k, args.tm, args.tn,
                                  args.tk, tuple(int(d) for d in args.order),
                                  args.dataflow, release)
    program = TileProgram(load_b, compute, vector, acquire, release, store_b, reload_of,
                          depth=depth, slots=slots, overhead_cycles=overhead_cycles,
                          evacuation_cycles=evacuation)
    return program, floats, ints
