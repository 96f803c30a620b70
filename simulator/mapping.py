"""Tiling plans: the mapping schema, its resolution per operator, and the heuristics
registry that fills in whatever a plan leaves open (DESIGN.md section 2, Mapping)."""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import permutations
from pathlib import Path

import numpy as np
from pydantic import Field, field_validator

from simulator.config import DTYPE_BYTES, Dataflow, Name, Platform, Strict
from simulator.errors import AccsimError
from simulator.limits import check_candidates
from simulator.program import MAX_DEPTH
from simulator.timing import ceil_div
from simulator.workload import Workload, is_attention, is_compute

LOOP_ORDERS = tuple("".join(p) for p in permutations("mnk"))
# What fills the fields a plan leaves open when it names no heuristic: the mapper's best
# tiling of the operator (simulator.default_search). A plan that sets every field of an
# operator is taken as it is (its tilings are labelled PLAN).
SEARCH = "search"
PLAN = "plan"
DEFAULT_HEURISTIC = "array_aligned"  # the heuristic a fully set plan entry is built on
DEFAULT_DEPTH = 2
DIMS = "mnk"


class TilingSpec(Strict):
    """Any subset of a tiling; unset fields come from the heuristic.

    Compute operators use tm, tn, tk, loop_order, dataflow, fuse; vector operators use
    rows_per_tile. Both use depth (1 = no prefetch, 2 = double buffering, up to 4).
    """

    heuristic: Name | None = None
    tm: int | None = Field(default=None, gt=0)
    tn: int | None = Field(default=None, gt=0)
    tk: int | None = Field(default=None, gt=0)
    loop_order: str | None = Field(default=None, description="outermost first, e.g. mnk")
    dataflow: Dataflow | None = None
    depth: int | None = Field(default=None, ge=1, le=MAX_DEPTH)
    rows_per_tile: int | None = Field(default=None, gt=0)
    fuse: Name | None = Field(default=None, description="following vector op to absorb")

    @field_validator("loop_order")
    @classmethod
    def _is_permutation(cls, value: str | None) -> str | None:
        if value is not None and value not in LOOP_ORDERS:
            raise ValueError(f"{value!r} is not a permutation of m, n, k "
                             f"(one of {', '.join(LOOP_ORDERS)})")
        return value


COMPUTE_FIELDS = ("tm", "tn", "tk", "loop_order", "dataflow", "fuse")
VECTOR_FIELDS = ("rows_per_tile",)
# Attention: tm query rows (of the group's heads x q_len) and tn keys per tile; fuse is
# `flash` or `unfused` (unset: lowering keeps the faster, lowering.attention).
ATTENTION_FIELDS = ("tm", "tn", "dataflow", "fuse")
ATTENTION_FUSIONS = ("flash", "unfused")
# Largest score tile (query rows x keys) the attention tiling aims for: big enough to
# amortise each tile's fill, small enough that its accumulators fit an output buffer.
SCORE_TILE_ELEMENTS = 1 << 20


class Mapping(Strict):
    """Tilings by operator name, by layer_type, and a default, most specific winning;
    and how a multi-chip run (--tp) splits the GEMMs it names (DESIGN.md section 14)."""

    name: Name = "default"
    default: TilingSpec = TilingSpec()
    layer_types: dict[Name, TilingSpec] = {}
    operators: dict[Name, TilingSpec] = {}
    row_parallel: list[Name] = Field(
        default=[], description="GEMMs split by rows (K) under --tp, each followed by "
        "an all-reduce of its output; the others are column-parallel (N)")

    @field_validator("row_parallel")
    @classmethod
    def _once_each(cls, names: list[str]) -> list[str]:
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"names {', '.join(repeated)} more than once")
        return names


@dataclass(frozen=True)
class Tiling:
    """A complete tiling of one operator. Vector operators use tm as rows per tile."""

    tm: int
    tn: int
    tk: int
    loop_order: str
    dataflow: str
    depth: int
    fuse: str | None = None
    heuristic: str = DEFAULT_HEURISTIC

    def sort_key(self) -> tuple:
        """The canonical order of tilings (the mapper's last tie-break): tile sizes,
        then loop order, dataflow, depth and fusion; the heuristic name is not part of
        a tiling's identity."""
        return (self.tm, self.tn, self.tk, self.loop_order, self.dataflow, self.depth,
                self.fuse or "")

    def spec(self, *, vector: bool = False, attention: bool = False) -> TilingSpec:
        """This tiling as a plan entry (every field the operator's kind takes)."""
        if vector:
            return TilingSpec(rows_per_tile=self.tm, depth=self.depth)
        if attention:
            return TilingSpec(tm=self.tm, tn=self.tn, dataflow=self.dataflow,
                              depth=self.depth, fuse=self.fuse)
        return TilingSpec(tm=self.tm, tn=self.tn, tk=self.tk, loop_order=self.loop_order,
                          dataflow=self.dataflow, depth=self.depth, fuse=self.fuse)

    def describe(self, *, vector: bool = False) -> str:
        """One short line, e.g. `256x64x576 mnk ws d2`."""
        if vector:
            return f"{self.tm} rows d{self.depth}"
        fused = f" +{self.fuse}" if self.fuse else ""
        return (f"{self.tm}x{self.tn}x{self.tk} {self.loop_order} {self.dataflow} "
                f"d{self.depth}{fused}")


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


def operator_dtype(op, platform: Platform) -> str:
    """The operator's input dtype: its own, else the array's default."""
    return op.dtype or platform.systolic_array.input_dtypes[0]


def operand_bytes(op, platform: Platform) -> tuple[int, int, int]:
    """Bytes per element of (input operands, accumulators, outputs) for an operator."""
    dtype = operator_dtype(op, platform)
    if not (is_compute(op) or is_attention(op)):  # vector operators: one dtype
        return DTYPE_BYTES[dtype], DTYPE_BYTES[dtype], DTYPE_BYTES[dtype]
    array = platform.systolic_array
    return (DTYPE_BYTES[dtype], DTYPE_BYTES[array.accumulator_dtype],
            DTYPE_BYTES[array.output_dtype])


def weight_element_bytes(op, platform: Platform) -> int:
    """Bytes per element of a compute operator's weight operand (B): its
    `weight_dtype`, else its input dtype."""
    dtype = getattr(op, "weight_dtype", None) or operator_dtype(op, platform)
    return DTYPE_BYTES[dtype]


def a_tile_bound(op, tm, tk):
    """Elements an A tile of tm x tk can move at most: its im2col size, widened for a
    conv by the bounding-rectangle rule of lowering.windows (a channel's partial k range
    counts whole kernel rows: at most kw - 1 positions more at each of its ends, and a
    tile has at most two partial channels), so it may exceed the im2col size."""
    if hasattr(op, "kw"):
        return tm * (tk + 4 * (op.kw - 1))
    return tm * tk


def _balanced(total: int, cap: int) -> int:
    """The smallest tile size with the same tile count as `cap`, so edge tiles are not
    slivers."""
    cap = max(1, min(total, cap))
    return ceil_div(total, ceil_div(total, cap))


def vector_rows_tiling(op, platform: Platform, depth: int) -> Tiling:
    """A vector operator's tiling: as many rows per tile as let `depth` tiles of its
    input and of its output fit their buffers, balanced so the last tile is no sliver."""
    buffers = platform.buffers
    e = operand_bytes(op, platform)[0]
    shape = op.vector()
    per_row = max(ceil_div(shape.input_elements, shape.rows),
                  ceil_div(shape.output_elements, shape.rows)) * e
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
    g = op.gemm()
    array = platform.systolic_array
    rows, cols = array.rows, array.cols * array.count
    if dataflow == "os":
        tm, tn = min(g.m, rows), min(g.n, cols)
        tk = min(buffers.ifmap_bytes // (depth * tm * e), buffers.weight_bytes // (depth * tn * e))
        return Tiling(tm, tn, _balanced(g.k, tk), "mnk", dataflow, depth)
    tk = min(g.k, rows)
    if dataflow == "ws":
        tn = min(g.n, cols)
        tm = min(buffers.ifmap_bytes // (depth * tk * e), buffers.output_bytes // (depth * tn * acc))
        return Tiling(_balanced(g.m, tm), tn, tk, "mnk", dataflow, depth)
    tm = min(g.m, cols)
    tn = min(buffers.weight_bytes // (depth * tk * e), buffers.output_bytes // (depth * tm * acc))
    return Tiling(tm, _balanced(g.n, tn), tk, "mnk", dataflow, depth)


def attention_rows(op) -> int:
    """Query rows one attention instance (a batch item's K/V head group) computes: the
    group's heads x q_len, ordered position-major so causal tiles are contiguous."""
    return op.group * op.q_len


def attention_tiling(op, platform: Platform, depth: int, dataflow: str) -> Tiling:
    """Attention's one tiling rule (the GEMM heuristics do not apply): tm query rows up
    to 2048, then the most keys tn, up to a score tile of SCORE_TILE_ELEMENTS (at least
    one array width), with which `depth` tiles of Q or probabilities (ifmap), of K and V
    (weight) and of score plus output accumulators (output) fit; tm halves while no tn
    fits. fuse is left open."""
    buffers = platform.buffers
    e, acc, _ = operand_bytes(op, platform)
    kv = DTYPE_BYTES[op.kv_dtype or operator_dtype(op, platform)]
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
                          depth)
        tm = _balanced(rows, tm // 2)


def _largest_fitting(total: int, unit: int, fits: Callable[[int], bool]) -> int:
    """The largest tile size that fits: a multiple of `unit` below `total` or `total`
    itself, balanced so the edge tile is no sliver; 1 if even `unit` does not fit."""
    best = 0
    for size in [total] + list(range(unit * (total // unit), 0, -unit)):
        if size <= total and fits(size):
            best = size
            break
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
    buffers = platform.buffers
    e, acc, _ = operand_bytes(op, platform)
    g = op.gemm()
    tm, tn = min(g.m, array.rows), min(g.n, array.cols)

    def a_fits(tm_: int, tk_: int) -> bool:
        return depth * a_tile_bound(op, tm_, tk_) * e <= buffers.ifmap_bytes

    def b_fits(tk_: int, tn_: int) -> bool:
        return depth * tk_ * tn_ * e <= buffers.weight_bytes

    def c_fits(tm_: int, tn_: int) -> bool:
        return depth * tm_ * tn_ * acc <= buffers.output_bytes

    tk = _largest_fitting(g.k, array.rows, lambda t: a_fits(tm, t) and b_fits(t, tn))
    tn = _largest_fitting(g.n, array.cols, lambda t: b_fits(tk, t) and c_fits(tm, t)
                          or t <= min(g.n, array.cols))
    tm = _largest_fitting(g.m, array.rows, lambda t: a_fits(t, tk) and c_fits(t, tn)
                          or t <= min(g.m, array.rows))
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
    traffic (`offchip_estimate`: LRU reuse by loop order and slots, partial-sum spills)
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


@functools.lru_cache(maxsize=4096)
def _min_offchip(query: _MinOffchipQuery, depth: int, dataflow: str) -> Tiling:
    op, platform = query.op, query.platform
    array = platform.systolic_array
    g = op.gemm()
    e, acc, out = operand_bytes(op, platform)
    units = (array.rows, array.cols)
    vm, vn, vk = (np.asarray(dim_candidates(size, units), dtype=np.int64)
                  for size in (g.m, g.n, g.k))
    orders = len(LOOP_ORDERS)
    check_candidates(len(vm) * len(vn) * len(vk) * orders, op, "min_offchip")
    # Fit on the (m tile, n tile, k tile) axes (it does not depend on the loop order),
    # then the fitting tiles x every loop order, in the grid's order (order fastest).
    tm, tn, tk = vm[:, None, None], vn[None, :, None], vk[None, None, :]
    buffers = platform.buffers
    fits = ((depth * a_tile_bound(op, tm, tk) * e <= buffers.ifmap_bytes)
            & (depth * tk * tn * e <= buffers.weight_bytes)
            & (depth * tm * tn * acc <= buffers.output_bytes))
    if not fits.any():  # nothing fits: let lowering report array_aligned's overflow
        return array_aligned(op, platform, depth, dataflow)
    mi, ni, ki = np.nonzero(fits)
    tm, tn, tk = vm[mi][:, None], vn[ni][:, None], vk[ki][:, None]
    order = np.arange(orders, dtype=np.int64)[None, :]
    # Axes (fitting tile, loop order): the busy cycles depend on the order only through
    # its innermost dim, so they are computed on the tiles and broadcast.
    traffic = offchip_estimate(op, platform, tm, tn, tk, order)
    busy = array_busy_cycles(g.m, g.n, g.k, tm, tn, tk, order, dataflow, array.rows,
                             array.cols, array.count, array.fold_model).ravel()
    tm, tn, tk, order = (np.broadcast_to(values, (len(mi), orders)).ravel()
                         for values in (tm, tn, tk, order))
    # Traffic is the first key: the later ones matter only among its least.
    least = traffic == traffic.min()
    tm, tn, tk, order, traffic, busy = (values[least] for values in
                                        (tm, tn, tk, order, traffic, busy))
    steps = -(-g.m // tm) * -(-g.n // tn) * -(-g.k // tk)
    order_rank = np.argsort(np.argsort(np.array(LOOP_ORDERS)))[order]
    pick = np.lexsort((order_rank, tk, tn, tm, steps, busy, traffic))[0]
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


def _axis_tiles(size: int, tile: np.ndarray, unit: int) -> tuple[np.ndarray, ...]:
    """The tiles of one dim in two kinds, full and edge: (full tiles, folds of a full
    tile along `unit`, edge tiles (0 or 1), folds of the edge tile)."""
    full, rem = size // tile, size % tile
    return full, -(-tile // unit), (rem > 0).astype(np.int64), -(-rem // unit)


def _loop_tables() -> tuple[np.ndarray, np.ndarray]:
    """Indexed [order, m has >1 tile, n has >1 tile, k has >1 tile]: the innermost dim
    with more than one tile (DIMS index, -1 if none), and a code of the loop order over
    those dims alone (equal codes: the same sequence of steps)."""
    inner = np.full((len(LOOP_ORDERS), 2, 2, 2), -1, dtype=np.int64)
    code = np.zeros((len(LOOP_ORDERS), 2, 2, 2), dtype=np.int64)
    for index, name in enumerate(LOOP_ORDERS):
        for flags in np.ndindex(2, 2, 2):
            kept = [DIMS.index(d) for d in name if flags[DIMS.index(d)]]
            inner[(index, *flags)] = kept[-1] if kept else -1
            for dim in kept:
                code[(index, *flags)] = code[(index, *flags)] * 4 + dim + 1
    return inner, code


INNERMOST, EFFECTIVE_ORDER = _loop_tables()


def loop_tables_index(m: int, n: int, k: int, tm, tn, tk, order) -> tuple:
    """Index into INNERMOST / EFFECTIVE_ORDER for (broadcastable) tilings."""
    tm, tn, tk, order = (np.asarray(x, dtype=np.int64) for x in (tm, tn, tk, order))
    return (order, (-(-m // tm) > 1).astype(np.int64), (-(-n // tn) > 1).astype(np.int64),
            (-(-k // tk) > 1).astype(np.int64))


def array_busy_cycles(m: int, n: int, k: int, tm, tn, tk, order, dataflow: str,
                      rows: int, cols: int, count: int, fold_model: str) -> np.ndarray:
    """The array's busy cycles of one GEMM instance under tilings, in closed form: the
    sum of the compute cycles the lowering emits (tests check equality). tm, tn, tk and
    order (indices into LOOP_ORDERS) broadcast against each other.

    The stationary operand's tile fixes the folds F (os: C, ws: B, is: A), run in
    rounds F' = ceil(F / count); each dim's tiles come in two kinds (full, edge), so the
    stationary tiles in four. A step pays F' x (T + fill) (scalesim) or
    F' x max(T, R) + skew (pipelined), unless it is single-fold and continues the
    previous step's stationary tile, when it pays T. Consecutive steps share that tile
    only while the streamed dim's loop is the innermost one with more than one tile;
    then each single-fold stationary tile starts once, on its first streamed tile (a
    full one), else every step starts anew.
    """
    tm, tn, tk = (np.asarray(x, dtype=np.int64) for x in (tm, tn, tk))
    if dataflow == "os":
        row, col, streamed = (m, tm), (n, tn), (k, tk, "k")
        fill = rows + cols - 2
    elif dataflow == "ws":
        row, col, streamed = (k, tk), (n, tn), (m, tm, "m")
        fill = 2 * rows + cols - 2
    else:
        row, col, streamed = (k, tk), (m, tm), (n, tn, "n")
        fill = 2 * rows + cols - 2
    r_full, r_folds, r_edge, r_edge_folds = _axis_tiles(*row, rows)
    c_full, c_folds, c_edge, c_edge_folds = _axis_tiles(*col, cols)
    rounds = 0          # sum of F' over stationary tiles
    singles = 0         # stationary tiles of one fold
    tiles = 0
    for r_count, r_f in ((r_full, r_folds), (r_edge, r_edge_folds)):
        for c_count, c_f in ((c_full, c_folds), (c_edge, c_edge_folds)):
            pairs = r_count * c_count
            folds = r_f * c_f
            rounds = rounds + pairs * -(-folds // count)
            singles = singles + pairs * (folds == 1)
            tiles = tiles + pairs
    total, tile, name = streamed
    s_full, _, s_edge, _ = _axis_tiles(total, tile, 1)
    rem = total % tile
    n_streamed = s_full + s_edge
    inner = INNERMOST[loop_tables_index(m, n, k, tm, tn, tk, order)]
    starts_once = (inner == DIMS.index(name)) | (inner < 0)
    if fold_model == "scalesim":
        runs = np.where(starts_once, 1, n_streamed)
        return rounds * total + fill * ((rounds - singles) * n_streamed + singles * runs)
    skew = rows + cols - 2
    paced = s_full * np.maximum(tile, rows) + s_edge * np.maximum(rem, rows)  # sum max(T, R)
    multi = (rounds - singles) * paced + skew * n_streamed * (tiles - singles)
    single = np.where(starts_once, np.maximum(tile, rows) + skew + total - tile,
                      paced + skew * n_streamed)
    return multi + singles * single


# Indexed [reuse dim][dim][loop order]: whether `dim`'s loop is inside `reuse`'s.
_INSIDE = {reuse: {dim: np.array([dim in name[name.index(reuse) + 1:]
                                  for name in LOOP_ORDERS]) for dim in DIMS}
           for reuse in DIMS}


def offchip_estimate(op, platform: Platform, tm, tn, tk, order) -> np.ndarray:
    """Estimated off-chip bytes of one instance under tilings (the min_offchip model).

    Each operand's tiles are indexed by two dims; the third is its reuse dim (A: n,
    B: m, C: k). A tile is fetched once if its reuse dim has one tile, or if the tiles
    of its own dims inside the reuse loop fit its buffer's slots (LRU keeps them between
    uses); otherwise once per tile of the reuse dim. C moves once as outputs unless the
    live C tiles exceed its slots with k not innermost, when partial sums spill and
    reload on every k step. A conv's A is counted as its input tensor (halos ignored).
    Operands that live in the on-chip activation memory move nothing. Tilings
    broadcast against each other (order: indices into LOOP_ORDERS); the answer is flat,
    one entry per element of their broadcast shape, in C order.
    """
    g = op.gemm()
    e, acc, out = operand_bytes(op, platform)
    buffers = platform.buffers
    tm, tn, tk, order = (np.asarray(x, dtype=np.int64) for x in (tm, tn, tk, order))
    shape = np.broadcast_shapes(tm.shape, tn.shape, tk.shape, order.shape)
    counts = {"m": -(-g.m // tm), "n": -(-g.n // tn), "k": -(-g.k // tk)}
    if hasattr(op, "cin"):
        a_bytes = op.batch * op.h * op.w * (op.cin // op.groups) * e
        input_bytes = a_bytes * op.groups
    else:
        a_bytes = g.m * g.k * e
        input_bytes = a_bytes * g.instances
    capacity = platform.activation_memory_bytes
    output_bytes = g.m * g.n * out * g.instances
    onchip = capacity is not None and input_bytes + output_bytes <= capacity
    slots = {"a": buffers.ifmap_bytes // (tm * tk * e),
             "b": buffers.weight_bytes // (tk * tn * e),
             "c": buffers.output_bytes // (tm * tn * acc)}

    def inside(reuse: str) -> np.ndarray:
        """Product of the tile counts of the dims whose loops are inside `reuse`'s."""
        product = np.ones((), dtype=np.int64)
        for dim in DIMS:
            if dim != reuse:
                product = product * np.where(_INSIDE[reuse][dim][order], counts[dim], 1)
        return product

    total = np.zeros((), dtype=np.int64)
    for operand, reuse, base in (("a", "n", a_bytes), ("b", "m", g.k * g.n * e)):
        if operand == "a" and onchip:
            continue
        refetch = np.where((counts[reuse] == 1) | (inside(reuse) <= slots[operand]), 1,
                           counts[reuse])
        total = total + base * refetch
    if not onchip:
        spill = slots["c"] < inside("k")
        total = total + g.m * g.n * out + spill * 2 * g.m * g.n * acc * (counts["k"] - 1)
    return np.broadcast_to(total, shape).ravel()


def merged_spec(mapping: Mapping, op) -> TilingSpec:
    """Default, then the layer_type's spec, then the operator's own, field by field.

    Fields of the other operator family are dropped from the default and layer_type
    specs (a default tm is not a row count) but are an error on the operator's own spec.
    """
    if is_attention(op):
        own_fields = ATTENTION_FIELDS
    else:
        own_fields = COMPUTE_FIELDS if is_compute(op) else VECTOR_FIELDS
    foreign = tuple(f for f in COMPUTE_FIELDS + VECTOR_FIELDS if f not in own_fields)
    own = mapping.operators.get(op.name, TilingSpec())
    wrong = [f for f in foreign if getattr(own, f) is not None]
    if wrong:
        raise AccsimError(f"{', '.join(wrong)} do not apply to a {op.kind} operator "
                          f"(it takes {', '.join(own_fields)}, depth, heuristic)",
                          field=f"operators.{op.name}")
    merged: dict = {}
    for spec in (mapping.default, mapping.layer_types.get(op.layer_type), own):
        if spec is None:
            continue
        for key, value in spec.model_dump(exclude_none=True).items():
            if spec is own or key not in foreign:
                merged[key] = value
    return TilingSpec(**merged)


def fully_specified(op, spec: TilingSpec) -> bool:
    """Whether the spec sets every tiling field of the operator (a GEMM's fuse aside;
    attention's fuse, which picks its lowering, included)."""
    if is_attention(op):
        own = ATTENTION_FIELDS
    else:
        own = ("tm", "tn", "tk", "loop_order", "dataflow") if is_compute(op) \
            else ("rows_per_tile",)
    return spec.depth is not None and all(getattr(spec, f) is not None for f in own)


def attention_base(op, spec: TilingSpec, platform: Platform, label: str) -> Tiling:
    """Attention's tiling rule (`attention_tiling`) with the spec's fields laid over it."""
    depth = spec.depth or DEFAULT_DEPTH
    dataflow = spec.dataflow or platform.systolic_array.default_dataflow
    overrides = {k: v for k, v in spec.model_dump(exclude_none=True).items()
                 if k in ATTENTION_FIELDS}
    return replace(attention_tiling(op, platform, depth, dataflow), heuristic=label,
                   **overrides)


def resolve_tiling(op, spec: TilingSpec, platform: Platform, *, following=None) -> Tiling:
    """The heuristic's tiling with the spec's explicit fields laid over it. With no
    heuristic named, the open fields are the mapper's best (SEARCH, memoised per
    distinct operator; `following` is the operator a `fuse` absorbs). Attention has
    one tiling rule instead of the heuristics; its search also picks the lowering."""
    overrides = {k: v for k, v in spec.model_dump(exclude_none=True).items()
                 if k in ("tm", "tn", "tk", "loop_order", "dataflow", "fuse")}
    if spec.rows_per_tile is not None:
        overrides["tm"] = spec.rows_per_tile
    name = spec.heuristic or SEARCH
    if name == SEARCH and not fully_specified(op, spec):
        from simulator.default_search import searched_tiling  # the mapper uses this module
        found = searched_tiling(op, spec, platform, following)
        if found is not None:
            return replace(found, **overrides)
        name = DEFAULT_HEURISTIC  # nothing fits: lowering reports this tiling's overflow
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
    return replace(base, depth=depth, heuristic=label, **overrides)


def with_heuristic(mapping: Mapping, name: str | None) -> Mapping:
    """The plan with `name` as the heuristic of every field it leaves open (its
    default's heuristic; entries naming their own heuristic keep it)."""
    if name is None:
        return mapping
    return mapping.model_copy(update={
        "default": mapping.default.model_copy(update={"heuristic": name})})


def describe_mapping(mapping: Mapping, source: str | None = None) -> str:
    """Which mapping a run used, in a few words: the searched default, a heuristic, or
    a plan (whose open fields the search or its heuristic fills)."""
    default = mapping.default.heuristic
    entries = bool(mapping.operators or mapping.layer_types
                   or mapping.default.model_dump(exclude_none=True, exclude={"heuristic"}))
    fill = f"heuristic {default}" if default else \
        "searched default (the mapper's best tiling per distinct operator, by cycles)"
    if not entries:
        return fill
    return f"plan {mapping.name}" + (f" ({source})" if source else "") + \
        f"; open fields: {fill}"


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


def check_mapping_names(mapping: Mapping, workload: Workload, *, file: str | None) -> None:
    """Operator names in a plan must exist in the workload."""
    known = {op.name: op for op in workload.operators}
    for name in mapping.operators:
        if name not in known:
            raise AccsimError(f"no operator named {name!r} in workload {workload.name!r}",
                              file=file, field=f"operators.{name}")
    for name in mapping.row_parallel:
        if name not in known:
            raise AccsimError(f"no operator named {name!r} in workload {workload.name!r}",
                              file=file, field="row_parallel")
        if known[name].kind != "gemm":
            raise AccsimError(f"{name!r} is a {known[name].kind} operator; only a gemm "
                              "splits by rows", file=file, field="row_parallel")
