"""Tiling heuristics (DESIGN.md section 2, Mapping): the registry users extend with
`@register`, the shipped heuristics, the candidate tile sizes searches try, and the
tiling a heuristic gives a plan entry. Every size a heuristic checks against a buffer
comes from mapping.footprint."""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.mapping.footprint import (array_speed, attention_element_bytes,
                                         attention_rows, offchip_by_order, operand_bytes,
                                         operand_fits, weight_element_bytes)
from simulator.model.loop_nest import least_busy_cycles
from simulator.mapping.plan import (ATTENTION_FIELDS, DEFAULT_DEPTH, DEFAULT_HEURISTIC,
                                    LOOP_ORDERS, PLAN, SEARCH, Tiling, TilingSpec)
from simulator.program.tile_program import MAX_DEPTH
from simulator.model.dataflow import DATAFLOW_CODES, OPERAND_DIMS, fold_dims
from simulator.model.timing import ceil_div
from simulator.inputs.workload import is_attention, is_compute

# Largest score tile (query rows x keys) the attention tiling aims for: big enough to
# amortise each tile's fill, small enough that its accumulators fit an output buffer.
SCORE_TILE_ELEMENTS = 1 << 20

# Tilings a search (the min_offchip heuristic, the mapper) may lay out as arrays at once:
# about a dozen int64 arrays per candidate, so 2**25 candidates take some 3 GiB. The
# largest shipped case (gemm_4096 on edge_32x32) has 14,115,822.
MAX_CANDIDATES = 2**25


def check_candidates(count: int, op, searcher: str) -> None:
    """Refuse a tiling search whose candidate grid could not be held in memory."""
    if count > MAX_CANDIDATES:
        raise AccsimError(f"{searcher} would lay out {count:,} candidate tilings (more "
                          f"than {MAX_CANDIDATES:,}: the array is small for operator "
                          "dims this large); give tm/tn/tk in the plan or another "
                          "heuristic", field=f"operators.{op.name}")


Heuristic = Callable[..., Tiling]
_HEURISTICS: dict[str, Heuristic] = {}


def register(name: str) -> Callable[[Heuristic], Heuristic]:
    """Decorator adding a heuristic (operator, platform, depth, dataflow) -> Tiling."""
    def add(func: Heuristic) -> Heuristic:
        if _HEURISTICS.setdefault(name, func) is not func:
            raise ValueError(f"a heuristic named {name!r} is already registered")
        return func
    return add


def known_heuristics() -> list[str]:
    """Names a plan may give as `heuristic`: the built-ins and those registered by the
    plugins loaded in this process."""
    return sorted(_HEURISTICS)


@functools.lru_cache(maxsize=None)  # a plugin is executed once per process
def _execute_plugin(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"accsim_plugin_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def load_plugin(path: str | Path) -> list[str]:
    """Execute a user's Python file once (no sys.path change) so that its
    `@register(...)` heuristics join the registry; return the names it added.

    The only way user code loads (DESIGN.md section 7): a path the user gives on the
    command line (`--plugin`), never a name found in a plan or result file."""
    file = Path(path)
    if file.suffix != ".py" or not file.is_file():
        raise AccsimError("a plugin is a Python file (.py) that exists", file=str(path),
                          field="--plugin")
    before = set(_HEURISTICS)
    try:
        _execute_plugin(file.resolve())
    except Exception as exc:  # the user's code failed: say so, on one line
        raise AccsimError(f"plugin failed to load ({type(exc).__name__}: {exc})",
                          file=str(path), field="--plugin") from None
    return sorted(set(_HEURISTICS) - before)


def heuristic(name: str) -> Heuristic:
    """The registered heuristic of a name; an unknown name errors with the known ones.
    Nothing is imported here: user heuristics come from `load_plugin`."""
    found = _HEURISTICS.get(name)
    if found is None:
        raise AccsimError(f"unknown heuristic {name!r} (known: "
                          f"{', '.join(known_heuristics())}; a heuristic of your own "
                          "loads with --plugin FILE.py, whose @register adds it)",
                          field="heuristic")
    return found


def _balanced(total: int, cap: int) -> int:
    """The smallest tile size with the same tile count as `cap`, so edge tiles are not
    slivers."""
    cap = max(1, min(total, cap))
    # ceil_div in Python integers, not the kernel: each search calls this several
    # times, and a kernel call from Python costs more than the division.
    tiles = -(-total // cap)
    return int(-(-total // tiles))


def vector_rows_tiling(op, platform: Platform, depth: int) -> Tiling:
    """A vector operator's tiling: as many rows per tile as let `depth` tiles of its
    input and of its output fit their buffers, balanced so the last tile is no sliver."""
    buffers = platform.buffers
    e = operand_bytes(op, platform)[0]
    shape = op.vector()
    # ceil_div in Python integers, not the kernel (as in _balanced): a kernel call from
    # Python costs more than the division, and array_aligned calls this for every
    # vector operator it tiles.
    per_row = max(-(-shape.input_elements // shape.rows),
                  -(-shape.output_elements // shape.rows)) * e
    rows = min(buffers.ifmap_bytes, buffers.output_bytes) // (depth * per_row)
    return Tiling(_balanced(shape.rows, rows), 1, 1, "mnk", "os", depth)


@register("array_aligned")
def array_aligned(op, platform: Platform, depth: int, dataflow: str) -> Tiling:
    """Stationary dims one round of array folds (one fold per array: the column dim
    spans `count` arrays), the streamed dim as long as `depth` tiles of every operand
    fit their buffers; k innermost; the platform's default dataflow."""
    buffers = platform.buffers
    e, acc, _ = operand_bytes(op, platform)
    if not is_compute(op):
        return vector_rows_tiling(op, platform, depth)
    wb = weight_element_bytes(op, platform)
    g = op.gemm()
    array = platform.systolic_array
    rows, cols = array.rows, array.cols * array.count
    sizes = (g.m, g.n, g.k)
    row_dim, col_dim, time_dim = fold_dims(DATAFLOW_CODES[dataflow])
    tiles = [0, 0, 0]
    tiles[row_dim], tiles[col_dim] = min(sizes[row_dim], rows), min(sizes[col_dim], cols)
    # The streamed dim: as long as `depth` tiles of each operand it indexes fit.
    held = ((buffers.ifmap_bytes, e), (buffers.weight_bytes, wb), (buffers.output_bytes, acc))
    tiles[time_dim] = _balanced(sizes[time_dim], min(
        held[operand][0] // (depth * tiles[other] * held[operand][1])
        for operand, dims in enumerate(OPERAND_DIMS) if time_dim in dims
        for other in dims if other != time_dim))
    return Tiling(*tiles, "mnk", dataflow, depth)


def attention_tiling(op, platform: Platform, depth: int, dataflow: str) -> Tiling:
    """Attention's one tiling rule (the GEMM heuristics do not apply): tm query rows up
    to 2048, then the most keys tn, up to a score tile of SCORE_TILE_ELEMENTS (at least
    one array width), with which `depth` tiles of Q or probabilities (ifmap), of K and V
    (weight) and of score plus output accumulators (output) fit; tm halves while no tn
    fits. fuse, orientation (None) and unit are left open to the lowering."""
    buffers = platform.buffers
    e, kv, acc, _ = attention_element_bytes(op, platform)
    d, rows = op.head_dim, attention_rows(op)
    cols = platform.systolic_array.cols
    tm = _balanced(rows, 2048)
    while True:
        most = min(op.kv_len, max(cols, SCORE_TILE_ELEMENTS // tm),
                   buffers.weight_bytes // (depth * 2 * d * kv),
                   buffers.ifmap_bytes // (depth * tm * e),
                   buffers.output_bytes // (depth * tm * acc) - d)
        if (most >= 1 and depth * tm * d * e <= buffers.ifmap_bytes) or tm == 1:
            return Tiling(tm, _balanced(op.kv_len, max(1, most)), d, "mnk", dataflow,
                          depth, orientation=None)  # lowering.attention chooses it
        tm = _balanced(rows, tm // 2)


def _largest_fitting(total: int, unit: int, fits: Callable[[np.ndarray], np.ndarray]) -> int:
    """The largest tile size that fits: a multiple of `unit` below `total` or `total`
    itself, balanced so the edge tile is no sliver; 1 if even `unit` does not fit.
    `fits` checks many sizes at once (an int64 array of them)."""
    sizes = np.array([total] + list(range(unit * (total // unit), 0, -unit)),
                     dtype=np.int64)
    fitting = fits(sizes)
    best = int(sizes[np.argmax(fitting)]) if fitting.any() else 0
    if best == 0:
        best = max(1, min(total, unit))
        while best > 1 and not fits(best):
            best //= 2
    return _balanced(total, best)


@register("os_k_inner")
def os_k_inner(op, platform: Platform, depth: int, dataflow: str) -> Tiling:
    """Output stationary with k innermost: the C tile stays on the array while the whole
    reduction streams through it (tk = K when A and B tiles of one array fold allow),
    then the C tile grows in array multiples, n first, while `depth` tiles of every
    operand fit their buffers, so A and B are refetched fewer times. Ignores `dataflow`
    (it is always os); vector operators get array_aligned's row tiles."""
    if not is_compute(op):
        return vector_rows_tiling(op, platform, depth)
    array = platform.systolic_array
    if "os" not in array.dataflows:
        raise AccsimError(f"heuristic os_k_inner needs the os dataflow, which "
                          f"{platform.name} does not support "
                          f"({', '.join(array.dataflows)})", field="heuristic")
    g = op.gemm()
    tm, tn = min(g.m, array.rows), min(g.n, array.cols)

    def a_fits(tm_, tk_) -> np.ndarray:
        return operand_fits(op, platform, tm_, 1, tk_, depth)[0]

    def b_fits(tk_, tn_) -> np.ndarray:
        return operand_fits(op, platform, 1, tn_, tk_, depth)[1]

    def c_fits(tm_, tn_) -> np.ndarray:
        return operand_fits(op, platform, tm_, tn_, 1, depth)[2]

    tk = _largest_fitting(g.k, array.rows, lambda t: a_fits(tm, t) & b_fits(t, tn))
    tn = _largest_fitting(g.n, array.cols, lambda t: b_fits(tk, t) & c_fits(tm, t)
                          | (t <= min(g.n, array.cols)))
    tm = _largest_fitting(g.m, array.rows, lambda t: a_fits(t, tk) & c_fits(t, tn)
                          | (t <= min(g.m, array.rows)))
    return Tiling(tm, tn, tk, "mnk", "os", depth)


@dataclass(frozen=True)
class _MinOffchipQuery:
    """min_offchip's inputs, equal and hashed by the canonical text of exactly what it
    reads (the operator but its names, the array, the buffers, the activation memory,
    depth and dataflow): platforms that differ only elsewhere (off-chip bandwidth, say,
    in a sweep) share one answer."""

    text: str
    op: object = field(compare=False)
    platform: Platform = field(compare=False)


@register("min_offchip")
def min_offchip(op, platform: Platform, depth: int, dataflow: str) -> Tiling:
    """Minimum off-chip bytes under the buffer budget: over tile sizes from the array
    multiples and divisors of each dim (`dim_candidates`) and every loop order, the
    tiling whose `depth` tiles of each operand fit their buffers (a conv's A tile counted
    as `a_tile_bound`, an upper bound of its window) and whose estimated off-chip
    traffic (`offchip_by_order`: LRU reuse by loop order and slots, partial-sum spills)
    is least; ties go to fewer array cycles (`array_busy_cycles`), then fewer steps,
    then the canonical order. Vector operators get array_aligned's row tiles.
    Memoised within a process (a pure cache, `_MinOffchipQuery`)."""
    if not is_compute(op):
        return vector_rows_tiling(op, platform, depth)
    text = json.dumps([op.model_dump(mode="json", exclude={"name", "layer_type"}),
                       platform.systolic_array.model_dump(mode="json"),
                       platform.buffers.model_dump(mode="json"),
                       platform.activation_memory_bytes, depth, dataflow], sort_keys=True)
    return _min_offchip(_MinOffchipQuery(text, op, platform), depth, dataflow)


# Memoised per process, not by a caller-held object as the default search is
# (search.default.SearchCache): a sweep's points run as separate tasks on pool or Dask
# workers, where the worker process is the only holder that outlives a point, and
# points that differ only off chip share these answers (a TPU v1 variant's resnet50_b1
# point: 0.26 s with them, 0.34 s without, measured 2026-12-06). Pure by construction:
# the key is the canonical text of all that min_offchip reads and the value a frozen
# Tiling, so whether an answer was cached changes no result (tests/test_sweep_caches.py
# checks the sweep's golden points); at most 4096 answers are kept.
@functools.lru_cache(maxsize=4096)
def _min_offchip(query: _MinOffchipQuery, depth: int, dataflow: str) -> Tiling:
    op, platform = query.op, query.platform
    array = platform.systolic_array
    g = op.gemm()
    units = (array.rows, array.cols)
    vm, vn, vk = (np.asarray(dim_candidates(size, units), dtype=np.int64)
                  for size in (g.m, g.n, g.k))
    orders = len(LOOP_ORDERS)
    check_candidates(len(vm) * len(vn) * len(vk) * orders, op, "min_offchip")
    # Fit on the (m tile, n tile, k tile) axes (it does not depend on the loop order),
    # then every loop order x the fitting tiles.
    tm, tn, tk = vm[:, None, None], vn[None, :, None], vk[None, None, :]
    a_fits, b_fits, c_fits = operand_fits(op, platform, tm, tn, tk, depth)
    fits = a_fits & b_fits & c_fits
    if not fits.any():  # nothing fits: let lowering report array_aligned's overflow
        return array_aligned(op, platform, depth, dataflow)
    mi, ni, ki = np.nonzero(fits)
    # Axes (loop order, fitting tile). Each key narrows the candidates to its least,
    # so a later key is computed only on the earlier ones' ties: traffic, then busy
    # cycles (array_busy_cycles, compiled for the pairs of least traffic alone:
    # least_busy_cycles), then steps, then the smaller tile sizes and the canonical
    # order (one candidate: the lexicographic least).
    fitting = np.stack((vm[mi], vn[ni], vk[ki]))   # (tm, tn, tk) of each fitting tiling
    traffic = offchip_by_order(op, platform, *fitting)
    busy = least_busy_cycles(
        np.array([g.m, g.n, g.k], np.int64), fitting, traffic == traffic.min(),
        np.array([DATAFLOW_CODES[dataflow], array.rows, array.cols, array.count,
                  array.fold_model == "scalesim"], np.int64),
        float(array_speed(op, platform)))
    order, tile = np.nonzero(busy == busy.min())
    tm, tn, tk = fitting[:, tile]
    steps = -(-g.m // tm) * -(-g.n // tn) * -(-g.k // tk)
    tm, tn, tk, order = (values[steps == steps.min()] for values in (tm, tn, tk, order))
    order_rank = np.argsort(np.argsort(np.array(LOOP_ORDERS)))[order]
    pick = np.lexsort((order_rank, tk, tn, tm))[0]
    return Tiling(int(tm[pick]), int(tn[pick]), int(tk[pick]), LOOP_ORDERS[order[pick]],
                  dataflow, depth)


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def dim_candidates(size: int, units: Iterable[int]) -> list[int]:
    """Tile sizes worth trying for a dim of `size`: its divisors, the multiples of each
    array dimension in `units` below it, and the whole dim; ascending."""
    values = set(divisors(size))
    for unit in set(units):
        values.update(range(unit, size, unit))
    values.add(size)
    return sorted(values)


# Tile counts whose balanced tile sizes coarse_candidates adds.
COARSE_TILE_COUNTS = range(2, 9)


def coarse_candidates(size: int, units: Iterable[int]) -> list[int]:
    """A short list of tile sizes for the default mapping's search: the whole dim, each
    array dimension in `units` times a power of two below it, and the sizes that split
    the dim into 2 to 8 balanced tiles, rounded up to a multiple of the smallest unit
    when the dim exceeds it; ascending."""
    unit = min(units)
    values = {size}
    for u in set(units):
        scaled = u
        while scaled < size:
            values.add(scaled)
            scaled *= 2
    for count in COARSE_TILE_COUNTS:
        tile = ceil_div(size, count)
        if size > unit:
            tile = min(size, ceil_div(tile, unit) * unit)
        values.add(tile)
    return sorted(values)


def attention_base(op, spec: TilingSpec, platform: Platform, label: str) -> Tiling:
    """Attention's tiling rule (`attention_tiling`) with the spec's fields laid over it."""
    depth = spec.depth or DEFAULT_DEPTH
    dataflow = spec.dataflow or platform.systolic_array.default_dataflow
    overrides = {k: v for k, v in spec.model_dump(exclude_none=True).items()
                 if k in ATTENTION_FIELDS}
    return replace(attention_tiling(op, platform, depth, dataflow), heuristic=label,
                   **overrides)


def spec_overrides(spec: TilingSpec) -> dict:
    """The tiling fields a plan entry sets explicitly (rows_per_tile as tm)."""
    overrides = {k: v for k, v in spec.model_dump(exclude_none=True).items()
                 if k in ("tm", "tn", "tk", "loop_order", "dataflow", "fuse",
                          "orientation")}
    if spec.rows_per_tile is not None:
        overrides["tm"] = spec.rows_per_tile
    return overrides


def heuristic_tiling(op, spec: TilingSpec, platform: Platform, name: str) -> Tiling:
    """Heuristic `name`'s tiling with the spec's explicit fields laid over it. SEARCH
    names the plan's own entry (fully set, or nothing fit the search): DEFAULT_HEURISTIC
    under it, labelled PLAN. Attention has one tiling rule instead of the heuristics."""
    if is_attention(op):
        if name != SEARCH:
            heuristic(name)  # an unknown name errors, though attention has its own rule
        return attention_base(op, spec, platform, PLAN if name == SEARCH else name)
    depth = spec.depth or DEFAULT_DEPTH
    dataflow = spec.dataflow or platform.systolic_array.default_dataflow
    label = PLAN if name == SEARCH else name
    name = DEFAULT_HEURISTIC if name == SEARCH else name
    base = heuristic(name)(op, platform, depth, dataflow)
    _check_heuristic_tiling(name, op, base)
    return replace(base, depth=depth, heuristic=label, **spec_overrides(spec))

def _check_heuristic_tiling(name: str, op, tiling) -> None:
    """A heuristic (a user's, perhaps) must return a well-formed Tiling."""
    def bad(rule: str) -> AccsimError:
        return AccsimError(f"heuristic {name!r} {rule}", field=f"operators.{op.name}")

    if not isinstance(tiling, Tiling):
        raise bad(f"returned {type(tiling).__name__}, not a simulator.mapping.Tiling")
    for dim in ("tm", "tn", "tk", "depth"):
        value = getattr(tiling, dim)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise bad(f"returned {dim} {value!r}; it must be a positive integer")
    if not 1 <= tiling.depth <= MAX_DEPTH:
        raise bad(f"returned depth {tiling.depth}, outside 1..{MAX_DEPTH}")
    if tiling.loop_order not in LOOP_ORDERS:
        raise bad(f"returned loop_order {tiling.loop_order!r}, not a permutation of "
                  "m, n, k")
    if tiling.fuse is not None:
        raise bad(f"returned fuse {tiling.fuse!r}; fusion is the plan's choice "
                  "(its `fuse` field), not a heuristic's")


