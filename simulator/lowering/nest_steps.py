"""The compiled part of a GEMM's loop nest in closed form (issue 26): the per tile shape
tables, and any run of steps generated from the step index alone.

Without state carried from step to step: which A and B tiles miss their buffer follows
from the loop order (lowering.nest derives the rule, a test holds it to the
step-by-step LRU model, tests/lru_steps.py), a partial-sum reload reads the step one k
stride back, and a fold continues when the stationary tile's key equals the previous
step's. So a block is filled from its first index, and the same steps come out
whatever the block sizes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simulator.kernels.jit import njit
from simulator.model.dataflow import (A_READS, B_READS, TIME_DIM, fold_shape,
                                      read_multiplier, stationary_key)
from simulator.model.timing import (TileProduct, product_cycles, product_split,
                                    vector_cycles)
from simulator.program.tile_program import StepArrays

# Entries of the int64 `params` array that describes a nest to the kernels.
(P_NM, P_NN, P_NK, P_ORDER0, P_ORDER1, P_ORDER2, P_DATAFLOW, P_A_OFFCHIP, P_B_OFFCHIP,
 P_C_OFFCHIP, P_SPILL, P_A_ALWAYS, P_B_ALWAYS, P_K_STRIDE, P_RELOADS, P_EVACUATION,
 N_PARAMS) = range(17)
# Columns of the (8, N_SHAPE) table per tile shape: shape = 4 * (last m tile) +
# 2 * (last n tile) + (last k tile).
(S_MS, S_NS, S_KS, S_ROW_FOLDS, S_COL_FOLDS, S_VECTOR, S_STORE_LAST, S_EPILOGUE_LOAD,
 S_PARTIAL, S_EVACUATION, S_A_VECTOR, S_B_VECTOR, S_A_READ, S_B_READ, N_SHAPE) = range(15)


# The argument types LoopNest calls shape_tables and fill_steps with, compiled ahead on
# a machine's first run (simulator.kernels.ahead).
_I, _B, _V, _M = "int64", "boolean", "int64[::1]", "int64[:, ::1]"
SHAPE_TABLES_TYPES = "(" + ", ".join([_I] * 11 + ["float64", _I, _I, _B, _M] + [_I] * 3) \
    + ")"
_TABLE = [_M, _V, _V]   # a TileTable's arrays: values, rows, cols
FILL_STEPS_TYPES = "(" + ", ".join([_I] * 3 + [_V] + _TABLE * 2 + [_M] + [_V] * 4 + [
    "boolean[::1]"] * 2 + [_V] * 3 + ["boolean[::1]"]) + ")"
FLOAT_SUMS_TYPES = f"({_V}, {_M}, float64[:, ::1])"


class NestTables(NamedTuple):
    """A loop nest as the kernels read it (lowering.nest.LoopNest's): `params` (the P_*
    entries), the A and B load tables with the inner loop's dim last (LoopNest.a_runs,
    b_runs, as TileTable arrays: values, rows, cols), the per tile shape table (S_*
    columns) and the array cycles per case (2 * shape + continues)."""

    params: np.ndarray
    a_runs: tuple[np.ndarray, np.ndarray, np.ndarray]
    b_runs: tuple[np.ndarray, np.ndarray, np.ndarray]
    shapes: np.ndarray
    cycles: np.ndarray


@njit(cache=True, ahead=(SHAPE_TABLES_TYPES,))
def shape_tables(m: int, n: int, k: int, tm: int, tn: int, tk: int, dataflow: int,
                 rows: int, cols: int, count: int, fold_model: int, speed: float,
                 acc_bytes: int, out_bytes: int, c_offchip: bool, epilogue: np.ndarray,
                 lanes: int, a_vector: int, b_vector: int):
    """Per tile shape (8) the sizes, folds, SRAM read elements, epilogue cycles, loads
    and stores of a finished tile and its partial sums, the load-time vector cycles on
    an A or B tile that misses; per case (shape x continues, 16) the array cycles and
    their split: what a step-by-step model works out per step."""
    nm, nn, nk = (m + tm - 1) // tm, (n + tn - 1) // tn, (k + tk - 1) // tk
    shapes = np.zeros((8, N_SHAPE), np.int64)
    cycles = np.zeros(16, np.int64)
    split = np.zeros((16, 5), np.float64)
    for shape in range(8):
        ms = m - (nm - 1) * tm if shape & 4 else tm
        ns = n - (nn - 1) * tn if shape & 2 else tn
        ks = k - (nk - 1) * tk if shape & 1 else tk
        sr, sc, _ = fold_shape(ms, ns, ks, dataflow)
        shapes[shape, S_MS] = ms
        shapes[shape, S_NS] = ns
        shapes[shape, S_KS] = ks
        shapes[shape, S_ROW_FOLDS] = (sr + rows - 1) // rows
        shapes[shape, S_COL_FOLDS] = (sc + cols - 1) // cols
        shapes[shape, S_PARTIAL] = ms * ns * acc_bytes
        # SRAM reads of the array, SCALE-Sim's per-fold counting, in elements.
        shapes[shape, S_A_READ] = ms * ks * read_multiplier(
            A_READS[dataflow], shapes[shape, S_ROW_FOLDS], shapes[shape, S_COL_FOLDS])
        shapes[shape, S_B_READ] = ks * ns * read_multiplier(
            B_READS[dataflow], shapes[shape, S_ROW_FOLDS], shapes[shape, S_COL_FOLDS])
        if a_vector > 0:
            shapes[shape, S_A_VECTOR] = vector_cycles(ms * ks, lanes, a_vector, 1)
        if b_vector > 0:
            shapes[shape, S_B_VECTOR] = vector_cycles(ks * ns, lanes, b_vector, 1)
        done = ms * ns
        for row in range(epilogue.shape[0]):
            share = done * epilogue[row, 0] // epilogue[row, 1]
            shapes[shape, S_VECTOR] += vector_cycles(share, lanes, epilogue[row, 2], 1)
            if c_offchip and epilogue[row, 3] > 0:
                shapes[shape, S_EPILOGUE_LOAD] += share * epilogue[row, 3]
            if row == epilogue.shape[0] - 1:
                done = share
        if c_offchip:
            shapes[shape, S_STORE_LAST] = done * out_bytes
        for continues in range(2):
            case = 2 * shape + continues
            product = TileProduct(m=ms, n=ns, k=ks, rows=rows, cols=cols, count=count,
                                  dataflow=dataflow, fold_model=fold_model,
                                  continues_fold=continues == 1, speed=speed)
            cycles[case] = product_cycles(product)
            useful, padding, fill, load, skew = product_split(product)
            split[case, 0] = useful
            split[case, 1] = padding
            split[case, 2] = fill
            split[case, 3] = load
            split[case, 4] = skew
    return shapes, cycles, split


def nest_shape_tables(nest) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """shape_tables of a nest named by its fields (lowering.nest.GemmArgs, or any
    record with those names): its positional arguments, scalars and arrays as the
    kernel library exports it, stay in this module."""
    return shape_tables(nest.m, nest.n, nest.k, nest.tm, nest.tn, nest.tk, nest.dataflow,
                        nest.rows, nest.cols, nest.count, nest.fold_model, nest.speed,
                        nest.acc_bytes, nest.out_bytes, nest.c_offchip, nest.epilogue,
                        nest.lanes, nest.a_vector, nest.b_vector)


@njit(cache=True, inline="always")
def _digits(step: int, params: np.ndarray, index: np.ndarray) -> None:
    """The (mi, ni, ki) of `step`, the innermost loop running fastest."""
    rest = step
    for level in range(2, -1, -1):
        dim = params[P_ORDER0 + level]
        index[dim] = rest % params[P_NM + dim]
        rest //= params[P_NM + dim]


@njit(cache=True, inline="always")
def _tile_entry(table, i: int, j: int) -> int:
    """Entry (i, j) of a lowering.tile_table.TileTable passed as its `arrays`."""
    values, rows, cols = table
    return values[rows[i], cols[j]]


@njit(cache=True)
def _segment(j0: int, j1: int, at: int, step: int, shape: int, m0: int, n0: int, k0: int,
             inner: int, params: np.ndarray, prev_key: int, a_runs, b_runs,
             shapes: np.ndarray, cycles: np.ndarray, load_bytes, compute, vector,
             acquire, release, store_bytes, reload_of, evacuation, reloaded) -> int:
    """Steps j0 .. j1 - 1 of a run of the innermost loop (entry at + j, step step + j),
    all of one tile shape, so that every figure but the loads, the reload source and
    the first step's fold continuation is one value: filled field by field in loops
    simple enough to vectorise. Returns the last step's stationary key. a_runs, b_runs:
    the A and B load tables with the inner loop's dim last (LoopNest.a_runs), as
    TileTable arrays, so a run reads one row of values, by column class."""
    nn, nk, dataflow = params[P_NN], params[P_NK], params[P_DATAFLOW]
    spill, c_offchip = params[P_SPILL] != 0, params[P_C_OFFCHIP] != 0
    um, un, uk = int(inner == 0), int(inner == 1), int(inner == 2)
    last_k = (shape & 1) != 0
    # Loads: the epilogue's operands on a last k step and a spilled partial sum on a
    # later k step (the B and A tiles that miss below, with their load-time vector
    # work, once the vector array holds the epilogue's).
    partial = shapes[shape, S_PARTIAL] if spill and c_offchip else 0
    epilogue = shapes[shape, S_EPILOGUE_LOAD] if last_k else 0
    source = step - params[P_K_STRIDE]
    for j in range(j0, j1):
        reloads = spill and k0 + uk * j > 0
        reload_of[at + j] = source + j if reloads else -1
        load_bytes[at + j] = epilogue + partial if reloads else epilogue
    # Compute: a single-fold tile continues when its stationary tile is the previous
    # step's: along the run, exactly when the inner loop is the streamed dim, the one
    # the stationary tile is free of (model.dataflow).
    single = shapes[shape, S_ROW_FOLDS] * shapes[shape, S_COL_FOLDS] == 1
    fresh, continued = cycles[2 * shape], cycles[2 * shape + 1]
    along = single and inner == TIME_DIM[dataflow]
    for j in range(j0, j1):
        compute[at + j] = continued if along else fresh
    key = stationary_key(dataflow, m0 + um * j0, n0 + un * j0, k0 + uk * j0, nn, nk)
    compute[at + j0] = continued if single and key == prev_key else fresh
    # Residency, epilogue, store, evacuation: one value along the segment.
    vec = shapes[shape, S_VECTOR] if last_k else 0
    store = shapes[shape, S_STORE_LAST] if last_k else \
        shapes[shape, S_PARTIAL] if spill and c_offchip else 0
    evac = shapes[shape, S_EVACUATION] if spill or last_k else 0
    for j in range(j0, j1):
        acquire[at + j] = spill or k0 + uk * j == 0
        release[at + j] = spill or last_k
        vector[at + j] = vec
        store_bytes[at + j] = store
    # The steps where B misses: its tile loads (when off chip) and its vector work.
    b_offchip, b_always = params[P_B_OFFCHIP] != 0, params[P_B_ALWAYS] != 0
    b_work = shapes[shape, S_B_VECTOR]
    if b_offchip or b_work > 0:
        if inner == 0:   # one B tile along the run, loaded on mi == 0
            for j in range(j0, j1):
                if b_always or j == 0:
                    load_bytes[at + j] += _tile_entry(b_runs, k0, n0) if b_offchip else 0
                    vector[at + j] += b_work
        elif b_always or m0 == 0:
            values, rows, cols = b_runs
            row = values[rows[k0 if inner == 1 else n0]]
            for j in range(j0, j1):
                load_bytes[at + j] += row[cols[j]] if b_offchip else 0
                vector[at + j] += b_work
    # The steps where A misses: its tile loads (when off chip) and its vector work (a
    # prologue norm, a transpose), if any, runs on it as it arrives.
    a_offchip, a_always = params[P_A_OFFCHIP] != 0, params[P_A_ALWAYS] != 0
    norm = shapes[shape, S_A_VECTOR]
    if a_offchip or norm > 0:
        if inner == 1:   # one A tile along the run, missing on ni == 0
            for j in range(j0, j1):
                if a_always or j == 0:
                    load_bytes[at + j] += _tile_entry(a_runs, m0, k0) if a_offchip else 0
                    vector[at + j] += norm
        elif a_always or n0 == 0:
            values, rows, cols = a_runs
            row = values[rows[m0 if inner == 2 else k0]]
            for j in range(j0, j1):
                load_bytes[at + j] += row[cols[j]] if a_offchip else 0
                vector[at + j] += norm
    if params[P_EVACUATION] != 0:
        for j in range(j0, j1):
            evacuation[at + j] = evac
    if params[P_RELOADS] != 0:
        for j in range(j0, j1):
            reloaded[at + j] = not last_k
    j = j1 - 1
    return stationary_key(dataflow, m0 + um * j, n0 + un * j, k0 + uk * j, nn, nk)


@njit(cache=True, ahead=(FILL_STEPS_TYPES,))
def fill_steps(begin: int, length: int, offset: int, params: np.ndarray, a_values,
               a_rows, a_cols, b_values, b_rows, b_cols, shapes: np.ndarray,
               cycles: np.ndarray, load_bytes, compute, vector, acquire, release,
               store_bytes, reload_of, evacuation, reloaded) -> None:
    """Steps begin .. begin + length - 1 into entries offset .. offset + length - 1 of
    the arrays; `evacuation` and `reloaded` are written only when the nest has them.
    Walked as runs of the innermost loop, each split where its tile shape changes (its
    last step: the inner dim's edge tile). a_values, a_rows, a_cols (B's likewise):
    the arrays of LoopNest.a_runs, one by one (the kernel library exports no tuple)."""
    a_runs, b_runs = (a_values, a_rows, a_cols), (b_values, b_rows, b_cols)
    nm, nn, nk = params[P_NM], params[P_NN], params[P_NK]
    outer, middle, inner = params[P_ORDER0], params[P_ORDER1], params[P_ORDER2]
    c_middle, c_inner = params[P_NM + middle], params[P_NM + inner]
    index = np.zeros(3, np.int64)
    prev_key = -1
    if begin > 0:
        _digits(begin - 1, params, index)
        prev_key = stationary_key(params[P_DATAFLOW], index[0], index[1], index[2], nn, nk)
    _digits(begin, params, index)
    i0, i1, first = index[outer], index[middle], index[inner]
    local = 0
    while local < length:
        index[outer] = i0
        index[middle] = i1
        index[inner] = 0
        m0, n0, k0 = index[0], index[1], index[2]
        end = first + min(c_inner - first, length - local)
        at = offset + local - first
        step = begin + local - first
        # The run's shape but for the inner dim, which is the edge tile at c_inner - 1.
        base = (4 if m0 == nm - 1 and inner != 0 else 0) + \
            (2 if n0 == nn - 1 and inner != 1 else 0) + \
            (1 if k0 == nk - 1 and inner != 2 else 0)
        edge = 4 if inner == 0 else 2 if inner == 1 else 1
        body_end = min(end, c_inner - 1)
        if first < body_end:
            prev_key = _segment(first, body_end, at, step, base, m0, n0, k0, inner, params,
                                prev_key, a_runs, b_runs, shapes, cycles,
                                load_bytes, compute, vector, acquire, release,
                                store_bytes, reload_of, evacuation, reloaded)
        if end == c_inner:
            prev_key = _segment(c_inner - 1, c_inner, at, step, base + edge, m0, n0, k0,
                                inner, params, prev_key, a_runs, b_runs,
                                shapes, cycles, load_bytes, compute, vector, acquire,
                                release, store_bytes, reload_of, evacuation, reloaded)
        local += end - first
        first = 0
        i1 += 1
        if i1 == c_middle:
            i1 = 0
            i0 += 1


def fill(tables: NestTables, begin: int, length: int, offset: int,
         steps: StepArrays) -> None:
    """fill_steps with its arguments named: steps begin .. begin + length - 1 of the
    nest `tables` into entries offset .. of the StepArrays `steps` (every field an
    array). The kernel takes arrays, as the kernel library exports it; this same body
    serves Python callers (the library's export) and compiled ones (fill_compiled)."""
    fill_steps(begin, length, offset, tables.params, tables.a_runs[0], tables.a_runs[1],
               tables.a_runs[2], tables.b_runs[0], tables.b_runs[1], tables.b_runs[2],
               tables.shapes, tables.cycles, steps.load_bytes, steps.compute_cycles,
               steps.vector_cycles, steps.acquire, steps.release, steps.store_bytes,
               steps.reload_of, steps.evacuation, steps.reloaded)


fill_compiled = njit(cache=True, inline="always")(fill)


@njit(cache=True)
def _run_origin(run: int, params: np.ndarray):
    """(m0, n0, k0) of the first step of run `run` of the innermost loop."""
    c_middle = params[P_NM + params[P_ORDER1]]
    at = np.zeros(3, np.int64)
    at[params[P_ORDER0]] = run // c_middle
    at[params[P_ORDER1]] = run % c_middle
    return at[0], at[1], at[2]


@njit(cache=True)
def _run_inputs(run: int, params: np.ndarray, shape_class: np.ndarray,
                a_ids: np.ndarray, b_ids: np.ndarray, a_runs, b_runs):
    """Everything the steps of a run of the innermost loop depend on besides their
    place in it (what `_segment` reads from m0, n0, k0 and the step before), so two
    runs with equal inputs have equal steps, a reload's source moved with them: the
    classes of its body's and last step's tile shapes, whether k0 == 0, its B and A
    loads (a table row's id, a tile's bytes, or -1: none) and whether its first step
    continues the stationary tile of the step before."""
    nm, nn, nk = params[P_NM], params[P_NN], params[P_NK]
    inner = params[P_ORDER2]
    m0, n0, k0 = _run_origin(run, params)
    base = (4 if m0 == nm - 1 and inner != 0 else 0) + \
        (2 if n0 == nn - 1 and inner != 1 else 0) + \
        (1 if k0 == nk - 1 and inner != 2 else 0)
    edge = 4 if inner == 0 else 2 if inner == 1 else 1
    b = -2
    if params[P_B_OFFCHIP] != 0:
        if inner == 0:
            b = _tile_entry(b_runs, k0, n0)
        elif params[P_B_ALWAYS] != 0 or m0 == 0:
            b = b_ids[k0 if inner == 1 else n0]
        else:
            b = -1
    elif params[P_B_ALWAYS] != 0 or m0 == 0 or inner == 0:
        b = 0   # B on chip: where its tiles miss still tells its vector work apart
    a = -2
    if inner == 1:
        a = _tile_entry(a_runs, m0, k0) if params[P_A_OFFCHIP] != 0 else 0
    elif params[P_A_ALWAYS] != 0 or n0 == 0:
        a = a_ids[m0 if inner == 2 else k0] if params[P_A_OFFCHIP] != 0 else 0
    continues = False
    if run > 0:
        pm, pn, pk = _run_origin(run - 1, params)
        last = params[P_NM + inner] - 1
        dataflow = params[P_DATAFLOW]
        continues = stationary_key(dataflow, m0, n0, k0, nn, nk) == stationary_key(
            dataflow, pm + last * (inner == 0), pn + last * (inner == 1),
            pk + last * (inner == 2), nn, nk)
    return shape_class[base], shape_class[base + edge], k0 == 0, b, a, continues


@njit(cache=True)
def repeating_runs(first: int, period: int, limit: int, tables: NestTables,
                   classes) -> int:
    """The first run r in first .. limit - 1 whose inputs differ from those of run
    r - period (limit when none does): from `first` on, the steps repeat with a period
    of `period` runs up to that run. classes: LoopNest.run_classes (a class per tile
    shape, an id per row of the A and B load tables)."""
    params, a_runs, b_runs = tables.params, tables.a_runs, tables.b_runs
    shape_class, a_ids, b_ids = classes
    for run in range(first, limit):
        if _run_inputs(run, params, shape_class, a_ids, b_ids, a_runs, b_runs) != \
                _run_inputs(run - period, params, shape_class, a_ids, b_ids, a_runs,
                            b_runs):
            return run
    return limit


@njit(cache=True, ahead=(FLOAT_SUMS_TYPES,))
def float_sums(params: np.ndarray, shapes: np.ndarray, split: np.ndarray) -> np.ndarray:
    """The split of array cycles summed step by step in loop order (for splits whose
    sum in closed form could round differently from a step-by-step sum)."""
    nm, nn, nk = params[P_NM], params[P_NN], params[P_NK]
    totals = np.zeros(5, np.float64)
    index = np.zeros(3, np.int64)
    prev_key = -1
    for _ in range(nm * nn * nk):
        mi, ni, ki = index[0], index[1], index[2]
        key = stationary_key(params[P_DATAFLOW], mi, ni, ki, nn, nk)
        for level in range(2, -1, -1):
            dim = params[P_ORDER0 + level]
            index[dim] += 1
            if index[dim] < params[P_NM + dim]:
                break
            index[dim] = 0
        shape = (4 if mi == nm - 1 else 0) + (2 if ni == nn - 1 else 0) + \
            (1 if ki == nk - 1 else 0)
        single = shapes[shape, S_ROW_FOLDS] * shapes[shape, S_COL_FOLDS] == 1
        case = 2 * shape + (1 if single and key == prev_key else 0)
        prev_key = key
        for field in range(5):
            totals[field] += split[case, field]
    return totals
