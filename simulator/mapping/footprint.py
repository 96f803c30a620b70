"""THE one home of what a tiling occupies and moves (DESIGN.md section 3, Lowering):
bytes per element of each operand, the bytes of each operand's largest tile and the
slots its buffer holds, the output tiles live at once, whether an operator's tensors
live in the on-chip activation memory, the loop tables, and the closed-form estimates
(array busy cycles, off-chip bytes) that lowering, plan checks, limits, the heuristics
and the search all call, so the rule is written once."""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np

from simulator.inputs.platform import DTYPE_BYTES, Platform
from simulator.model.formats import ceil_element_bytes, packed_bytes
from simulator.model.sparsity import (BANDWIDTH_ONLY, DECOMPRESSED, STRUCTURED,
                                default_metadata_bits, parse_pattern, structured_bytes,
                                unstructured_bytes)
from simulator.mapping.plan import LOOP_ORDERS, EpilogueMember, Tiling
from simulator.mapping.windows import window_table
from simulator.model.loop_nest import INSIDE_TABLE, oriented, order_traffic
from simulator.model.dataflow import A, B, DATAFLOW_CODES, STATIONARY
from simulator.model.timing import ceil_div
from simulator.inputs.workload import Conv2d, is_attention, is_compute


# Row tiles whose shares are worked out at once where a maximum over every tile is
# needed (a vector operator of 1.5e10 elements has tens of millions of tiles).
SHARE_BLOCK = 1 << 18


def operator_dtype(op, platform: Platform) -> str:
    """The operator's input dtype: its own, else the array's default."""
    return op.dtype or platform.systolic_array.input_dtypes[0]


def operand_bytes(op, platform: Platform) -> tuple[int, int, int]:
    """Bytes per element of (input operands, accumulators, outputs) for an operator; a
    packed input format rounded up to whole bytes (for sizing tiles: byte counts of a
    gemm's or conv's A operand use `activation_bytes`)."""
    dtype = operator_dtype(op, platform)
    e = ceil_element_bytes(dtype)
    if not (is_compute(op) or is_attention(op)):  # vector operators: one dtype
        return e, e, e
    array = platform.systolic_array
    return (e, DTYPE_BYTES[array.accumulator(dtype)], DTYPE_BYTES[array.output_dtype])


def activation_bytes(op, platform: Platform, elements):
    """Bytes of `elements` activations of an operator's A operand (an int or an int64
    array, e.g. one entry per tile), packed in its input dtype (simulator.model.formats)."""
    return packed_bytes(operator_dtype(op, platform), elements)


def weight_dtype(op, platform: Platform) -> str:
    """A compute operator's weight (B) dtype: its `weight_dtype`, else its input dtype."""
    return getattr(op, "weight_dtype", None) or operator_dtype(op, platform)


def weight_element_bytes(op, platform: Platform) -> int:
    """Whole bytes per weight element, rounded up (exact for byte-sized formats): what
    tile sizing divides by; byte counts use `weight_bytes`."""
    return ceil_element_bytes(weight_dtype(op, platform))


def sparsity_mode(op, platform: Platform) -> str | None:
    """How an operator's sparse weights run (simulator.model.sparsity): None when dense."""
    sparsity = getattr(op, "sparsity", None)
    if sparsity is None:
        return None
    if isinstance(sparsity, float):
        return BANDWIDTH_ONLY
    supported = platform.systolic_array.sparse_support(sparsity) is not None
    return STRUCTURED if supported else DECOMPRESSED


def weight_bytes(op, platform: Platform, elements, *, offchip: bool):
    """Bytes of `elements` dense weights (an int or an int64 array) packed in the weight
    dtype: compressed off chip wherever the operator is sparse, and in SRAM only where
    the array runs its pattern sparse (elsewhere they are decompressed on load)."""
    dtype = weight_dtype(op, platform)
    mode = sparsity_mode(op, platform)
    if mode is None or (not offchip and mode != STRUCTURED):
        return packed_bytes(dtype, elements)
    if mode == BANDWIDTH_ONLY:
        return unstructured_bytes(dtype, elements, op.sparsity)
    n, m = parse_pattern(op.sparsity)
    support = platform.systolic_array.sparse_support(op.sparsity)
    group_bits = n * support.metadata_bits if support and support.metadata_bits is not None \
        else default_metadata_bits(n, m)
    return structured_bytes(dtype, elements, n, m, group_bits)


def weights_alike(op, platform: Platform) -> bool:
    """Whether `weight_bytes` counts the same bytes off chip as in SRAM: dense weights,
    or a pattern the array runs sparse (compressed in both), so one table serves both."""
    return sparsity_mode(op, platform) in (None, STRUCTURED)


def run_dtype(op, platform: Platform) -> str:
    """The input dtype whose MAC rate an array operator runs at: the slower of its
    activation and weight (or KV) dtypes, ties to the activation dtype (section 17)."""
    array = platform.systolic_array
    dtype = operator_dtype(op, platform)
    other = getattr(op, "weight_dtype", None) or getattr(op, "kv_dtype", None)
    return other if other is not None and array.rate(other) < array.rate(dtype) else dtype


def sparse_speedup(op, platform: Platform) -> float:
    """The platform's speedup where it runs the operator's sparsity pattern sparse (the
    array streams that much faster and does that fraction of the MACs), else 1."""
    if sparsity_mode(op, platform) != STRUCTURED:
        return 1.0
    return platform.systolic_array.sparse_support(op.sparsity).speedup


def array_speed(op, platform: Platform) -> float:
    """The array's streaming speed for an operator: the MAC rate of its run dtype times
    its sparse speedup."""
    return platform.systolic_array.rate(run_dtype(op, platform)) * sparse_speedup(op, platform)


def a_tile_bound(op, tm, tk):
    """Elements an A tile of tm x tk can move at most: its im2col size, widened for a
    conv by the bounding-rectangle rule of mapping.windows (a channel's partial k range
    counts whole kernel rows: at most kw - 1 positions more at each of its ends, and a
    tile has at most two partial channels), so it may exceed the im2col size."""
    if hasattr(op, "kw"):
        return tm * (tk + 4 * (op.kw - 1))
    return tm * tk



def attention_rows(op) -> int:
    """Query rows one attention instance (a batch item's K/V head group) computes: the
    group's heads x q_len, ordered position-major so causal tiles are contiguous."""
    return op.group * op.q_len




def a_tile_bytes(op, platform: Platform, tm, tk, rule: str):
    """Bytes of A's largest tile of tm x tk (`activation_bytes`: packed formats round
    up to whole units per tile), by one of three rules: `im2col` (the matrix tile: a
    conv's halo ignored, as the estimates count it), `bound` (an upper bound of a conv's
    window, `a_tile_bound`: what fit checks over many tilings use), `exact` (a conv's
    largest window, `mapping.windows`; scalar tilings only)."""
    if rule == "exact" and isinstance(op, Conv2d):
        elements = int(window_table(op, tm, tk).max())
    elif rule == "bound":
        elements = a_tile_bound(op, tm, tk)
    else:
        elements = tm * tk
    return activation_bytes(op, platform, elements)


def b_tile_bytes(op, platform: Platform, tk, tn):
    """Bytes of one B (weight) tile of tk x tn in the weight buffer (`weight_bytes`)."""
    return weight_bytes(op, platform, tk * tn, offchip=False)


def c_tile_bytes(op, platform: Platform, tm, tn):
    """Bytes of one C tile of tm x tn, in the accumulator dtype (partial sums)."""
    return tm * tn * operand_bytes(op, platform)[1]


def operand_fits(op, platform: Platform, tm, tn, tk, depth: int) -> tuple:
    """Whether `depth` tiles of A (its `bound` size), of B and of C fit their buffers
    (tile sizes broadcast: a check over many tilings at once)."""
    buffers = platform.buffers
    return (depth * a_tile_bytes(op, platform, tm, tk, "bound") <= buffers.ifmap_bytes,
            depth * b_tile_bytes(op, platform, tk, tn) <= buffers.weight_bytes,
            depth * c_tile_bytes(op, platform, tm, tn) <= buffers.output_bytes)


def vector_tile_bytes(op, rows_per_tile: int, e: int) -> tuple[int, int, int]:
    """(largest input tile bytes, largest output tile bytes, tiles) of a vector
    operator split into tiles of `rows_per_tile` rows, as lowering splits it: each tile
    its share of the real input and output."""
    shape = op.vector()
    tiles = ceil_div(shape.rows, rows_per_tile)
    if shape.input_elements % shape.rows == 0 and shape.output_elements % shape.rows == 0:
        rows = min(rows_per_tile, shape.rows)  # every row holds the same elements
        return (shape.input_elements // shape.rows * rows * e,
                shape.output_elements // shape.rows * rows * e, tiles)
    in_max, out_max = 0, 0
    for first in range(0, tiles, SHARE_BLOCK):  # rows of unequal share (pool, scan)
        in_bytes, out_bytes = vector_tile_split(op, rows_per_tile, e,
                                                (first, min(first + SHARE_BLOCK, tiles)))
        in_max, out_max = max(in_max, int(in_bytes.max())), max(out_max,
                                                                int(out_bytes.max()))
    return in_max, out_max, tiles


def vector_run_tiles(op, members: tuple[EpilogueMember, ...], rows_per_tile: int,
                     platform: Platform, tiles: tuple[int, int] | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A vector run (DESIGN.md section 15 b) in the tiles of its first operator `op`:
    per tile, the elements each member works on (the share of op's output), the bytes
    loaded (op's input share plus each streamed second operand's) and the bytes stored
    (the last member's output share). `tiles`: only tiles first .. last - 1."""
    e = operand_bytes(op, platform)[0]
    in_bytes, out_bytes = vector_tile_split(op, rows_per_tile, e, tiles)
    if not members:
        return out_bytes // e, in_bytes, out_bytes
    shape = op.vector()
    edges = row_edges(shape.rows, rows_per_tile, tiles)
    elements = np.diff(row_shares(shape.output_elements, edges, shape.rows))
    loads = in_bytes + sum(elements * operand_bytes(m.op, platform)[0]
                           for m in members if m.streamed)
    return elements, loads, elements * operand_bytes(members[-1].op, platform)[0]


def row_edges(rows: int, rows_per_tile: int,
              tiles: tuple[int, int] | None = None) -> np.ndarray:
    """The first row of each of tiles first .. last - 1 and the row after the last
    (default: every tile of `rows` rows cut every `rows_per_tile`)."""
    first, last = tiles or (0, -(-rows // rows_per_tile))
    return np.minimum(np.arange(first, last + 1, dtype=np.int64) * rows_per_tile, rows)


def vector_tile_split(op, rows_per_tile: int, e: int,
                      tiles: tuple[int, int] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Input and output bytes of each row tile of a vector operator (`tiles`: only
    tiles first .. last - 1)."""
    shape = op.vector()
    edges = row_edges(shape.rows, rows_per_tile, tiles)
    return (np.diff(row_shares(shape.input_elements, edges, shape.rows)) * e,
            np.diff(row_shares(shape.output_elements, edges, shape.rows)) * e)


def row_shares(total: int, edges: np.ndarray, rows: int) -> np.ndarray:
    """floor(total * edge / rows) for each edge (0 <= edge <= rows < 2**60): the
    elements of `total` spread over `rows` that lie before each edge, exact in int64
    where total * edge passes it (a 2-billion-element elementwise operator: 4.5e9 input
    elements x 2.3e9 rows). total = q * rows + r; floor(r * edge / rows) < rows is
    estimated in float64 (off by at most one) and corrected with the remainder
    r * edge - estimate * rows, which is exact mod 2**64 and lies in (-rows, 2 rows)."""
    edges = np.asarray(edges, dtype=np.int64)
    q, r = divmod(int(total), int(rows))
    base = q * edges
    if r == 0:
        return base
    if r * int(edges.max(initial=0)) < 2**63:
        return base + r * edges // rows
    share = np.floor(np.float64(r) * edges.astype(np.float64) / np.float64(rows)) \
        .astype(np.int64)
    rem = (np.uint64(r) * edges.astype(np.uint64)
           - share.astype(np.uint64) * np.uint64(rows)).view(np.int64)
    share = share - (rem < 0) + (rem >= rows)
    return base + share


def attention_element_bytes(op, platform: Platform) -> tuple[int, int, int, int]:
    """Bytes per element of (Q and probabilities, K and V, accumulators, outputs); K and
    V rounded up to whole bytes (for sizing; byte counts use `kv_bytes`)."""
    e, acc, out = operand_bytes(op, platform)
    return e, ceil_element_bytes(op.kv_dtype) if op.kv_dtype else e, acc, out


def kv_bytes(op, platform: Platform, elements):
    """Bytes of `elements` K or V values of an attention operator, packed in its
    `kv_dtype` (default: its input dtype)."""
    return packed_bytes(op.kv_dtype or operator_dtype(op, platform), elements)


def kv_pair_bytes(op, platform: Platform, keys):
    """Bytes of the K and V of `keys` keys read together (a flash step, the cache):
    2 x keys x head_dim, or, where K and V are one cached latent (`kv_latent`, MLA),
    keys x kv_latent: one read serves both products."""
    if op.kv_latent:
        return kv_bytes(op, platform, keys * op.kv_latent)
    return kv_bytes(op, platform, 2 * keys * op.head_dim)


def attention_tile_bytes(op, platform: Platform, tm, tn) -> tuple:
    """Bytes of attention's three tiles: Q or probabilities (tm x max(d, tn), ifmap),
    K and V (`kv_pair_bytes` of tn keys, weight), score plus output accumulators
    (tm x (tn + d), output)."""
    e, _, acc, _ = attention_element_bytes(op, platform)
    d = op.head_dim
    return tm * np.maximum(d, tn) * e, kv_pair_bytes(op, platform, tn), \
        tm * (tn + d) * acc


# Most steps one attention program holds when the groups rule chains K/V head groups:
# a bound on the lowering's and the replay's work (as a GEMM's program block is), not a
# timing value; past a few hundred steps a program's fixed costs (dispatch, the first
# load, the last store) are under 1% of it.
PROGRAM_STEPS = 4096


def attention_instances(op) -> int:
    """K/V head groups of an attention operator: batch items x kv_heads."""
    return op.batch * op.kv_heads


def program_groups(op, group_steps: int, groups: int | None = None) -> int:
    """K/V head groups one attention program runs back to back, as a kernel walks the
    batch's sequences and heads in one launch: the plan's `groups`, else the most that
    divide the operator's groups with at most PROGRAM_STEPS steps (1 when one group
    alone has more)."""
    if groups is not None:
        return groups
    total, most = attention_instances(op), max(1, PROGRAM_STEPS // max(1, group_steps))
    return max(g for g in range(1, min(total, most) + 1) if total % g == 0)


@dataclass(frozen=True)
class BufferFit:
    """One operand's tiles against its buffer: the plan needs `depth` slots."""

    operand: str       # A, B, C (array operators) or input, output (vector operators)
    buffer: str        # ifmap, weight, output
    dims: str          # e.g. "tm 256 x tk 576"
    tile_bytes: int    # the largest tile (a conv's A tile: its window with halo)
    tiles: int         # distinct tiles of the operand
    capacity: int
    depth: int
    what: str = ""     # how an overflow names the tiles (default: operand and dims)

    @property
    def slots(self) -> int:
        return self.capacity // self.tile_bytes

    @property
    def needed(self) -> int:
        return self.depth * self.tile_bytes

    @property
    def fits(self) -> bool:
        return self.slots >= self.depth

    @property
    def resident(self) -> int:
        """Tiles the buffer can hold at once that the operator has."""
        return min(self.slots, self.tiles)

    @property
    def occupancy(self) -> float:
        return self.resident * self.tile_bytes / self.capacity

    def overflow(self) -> str:
        """Why the plan does not fit this buffer, with the numbers."""
        what = self.what or f"{self.operand} tiles ({self.dims})"
        return (f"{what} of {self.tile_bytes} bytes: the {self.buffer} buffer of "
                f"{self.capacity} bytes holds {self.slots}, the plan needs {self.depth} "
                f"(depth {self.depth}); overflow {self.depth * self.tile_bytes - self.capacity}"
                " bytes")


def split_members(members: tuple[EpilogueMember, ...]
                  ) -> tuple[tuple[EpilogueMember, ...], tuple[EpilogueMember, ...]]:
    """(prologue, epilogue) members of a group: norms applied to the A tiles as they
    load, and the operators run on each finished C tile."""
    return (tuple(m for m in members if m.prologue),
            tuple(m for m in members if not m.prologue))


def prologue_cycles(members: tuple[EpilogueMember, ...], platform: Platform) -> int:
    """Vector-unit cycles per A element (all passes) of a group's prologue norms: what
    the loop nest (lowering.nest) charges for each A tile it loads (0: no prologue)."""
    costs = platform.vector_unit.cycles_per_element
    return sum(getattr(costs, m.op.vector().cost_kind) * m.op.vector().passes
               for m in split_members(members)[0])


def transpose_work(platform: Platform, orientation: str,
                   dataflow: str) -> tuple[int, int, int]:
    """Vector cycles per element a run in `orientation` adds (DESIGN.md section 19):
    on the nest's A and on its B tiles as they load (its stationary input, where the
    array cannot load it transposed), and on each C tile as it is stored (where the
    output path does not transpose on store). None for a normal run."""
    if orientation == "normal":
        return 0, 0, 0
    costs = platform.systolic_array.transpose
    load = costs.pass_cycles if costs.stationary_load == "vector" else 0
    stationary = int(STATIONARY[DATAFLOW_CODES[dataflow]])
    return (load if stationary == A else 0, load if stationary == B else 0,
            costs.pass_cycles if costs.store == "vector" else 0)


def unsupported_orientation(orientation: str | None, platform: Platform) -> str:
    """The rule a tiling breaks when it runs in an orientation the array cannot."""
    return (f"orientation {orientation!r} is not supported by {platform.name} "
            f"({', '.join(platform.systolic_array.transpose.orientations)}: its array "
            f"holds only the B operand stationary)")


def epilogue_table(op, members: tuple[EpilogueMember, ...],
                   platform: Platform) -> np.ndarray:
    """The epilogue rows the loop nest (lowering.nest.GemmArgs) takes, one per fused
    member (the prologue left out): (numerator, denominator) of its elements over op's
    output elements, its cycles per element times passes, and the bytes per element of
    its streamed second operand."""
    members = split_members(members)[1]
    rows = np.zeros((len(members), 4), dtype=np.int64)
    if not members:   # unfused: most of the search's candidates
        return rows
    g = op.gemm()
    out = g.m * g.n * g.instances
    costs = platform.vector_unit.cycles_per_element
    for index, member in enumerate(members):
        shape = member.op.vector()
        elements = shape.rows * shape.cols
        common = gcd(elements, out)
        rows[index] = (elements // common, out // common,
                       getattr(costs, shape.cost_kind) * shape.passes,
                       operand_bytes(member.op, platform)[0] if member.streamed else 0)
    return rows


def epilogue_tile_bytes(op, members: tuple[EpilogueMember, ...], platform: Platform,
                        tm: int, tn: int) -> int:
    """Bytes the streamed second operands of one full C tile take in the output buffer
    beside it (they arrive with the tile's last k step)."""
    table = epilogue_table(op, members, platform)
    return int(sum(tm * tn * num // den * streamed for num, den, _, streamed in table))


def epilogue_store_bytes(op, members: tuple[EpilogueMember, ...],
                         platform: Platform) -> int:
    """Bytes per element of the tensor a finished C tile stores: the output dtype's
    without an epilogue, else the last member's (its elements are counted by the loop
    nest from the last row's fraction)."""
    members = split_members(members)[1]
    if not members:
        return operand_bytes(op, platform)[2]
    return operand_bytes(members[-1].op, platform)[0]


def buffer_fits(op, tiling: Tiling, platform: Platform, *,
                a_bytes: int | None = None,
                members: tuple[EpilogueMember, ...] = ()) -> list[BufferFit]:
    """Each operand's largest tile, tile count and slots under a tiling whose tiles are
    no larger than the operator (`a_bytes`: A's largest tile where the caller has
    counted it already; `members`: a fused epilogue whose streamed operands share the
    output buffer with their C tile)."""
    buffers = platform.buffers
    e = operand_bytes(op, platform)[0]
    depth = tiling.depth
    if is_attention(op):
        tm, tn, d = tiling.tm, tiling.tn, op.head_dim
        q, kv, scores = (int(b) for b in attention_tile_bytes(op, platform, tm, tn))
        q_tiles, k_tiles = ceil_div(attention_rows(op), tm), ceil_div(op.kv_len, tn)
        return [BufferFit("A", "ifmap", f"Q/P {tm} rows", q, q_tiles, buffers.ifmap_bytes,
                          depth, f"Q/P tiles ({tm} rows)"),
                BufferFit("B", "weight", f"K and V {tn} keys", kv, k_tiles,
                          buffers.weight_bytes, depth, f"K and V tiles ({tn} keys)"),
                BufferFit("C", "output", f"scores {tm} x {tn} + output", scores, q_tiles,
                          buffers.output_bytes, depth,
                          f"score and output tiles ({tm} x {tn} + {tm} x {d})")]
    if not is_compute(op):
        in_max, out_max, tiles = vector_tile_bytes(op, tiling.tm, e)
        if members:  # a vector run: streamed operands arrive with the tile's input
            in_max = out_max = 0
            for first in range(0, tiles, SHARE_BLOCK):
                _, loads, stores = vector_run_tiles(op, members, tiling.tm, platform,
                                                    (first, min(first + SHARE_BLOCK, tiles)))
                in_max, out_max = max(in_max, int(loads.max())), max(out_max,
                                                                     int(stores.max()))
        rows = f"{tiling.tm} rows"
        return [BufferFit("input", "ifmap", rows, in_max, tiles, buffers.ifmap_bytes,
                          depth),
                BufferFit("output", "output", rows, out_max, tiles, buffers.output_bytes,
                          depth)]
    g = op.gemm()
    tm, tn, tk = tiling.tm, tiling.tn, tiling.tk
    nm, nn, nk = -(-g.m // tm), -(-g.n // tn), -(-g.k // tk)   # not the ceil_div kernel
    if a_bytes is None:
        a_bytes = a_tile_bytes(op, platform, tm, tk, "exact")
    # The ifmap buffer feeds the nest's A, the weight buffer its B: run transposed,
    # the operator's B streams from the ifmap buffer and its A stays in the weight
    # buffer (model.loop_nest.ORIENTED_OPERANDS).
    first, second = oriented(((f"tm {tm} x tk {tk}", a_bytes, nm * nk, "A"),
                              (f"tk {tk} x tn {tn}", b_tile_bytes(op, platform, tk, tn),
                               nk * nn, "B")), tiling.orientation)
    return [
        BufferFit(first[3], "ifmap", first[0], first[1], first[2], buffers.ifmap_bytes,
                  depth),
        BufferFit(second[3], "weight", second[0], second[1], second[2],
                  buffers.weight_bytes, depth),
        BufferFit("C", "output", f"tm {tm} x tn {tn}", c_tile_bytes(op, platform, tm, tn)
                  + epilogue_tile_bytes(op, members, platform, tm, tn),
                  nm * nn, buffers.output_bytes, depth),
    ]


def onchip_home(platform: Platform, input_bytes: int, output_bytes: int) -> bool:
    """Whether an operator's input and output live in the on-chip activation memory
    (the platform has one and both fit it)."""
    capacity = platform.activation_memory_bytes
    return capacity is not None and input_bytes + output_bytes <= capacity


def tensor_bytes(op, platform: Platform) -> tuple[int, int]:
    """(input, output) bytes of an operator's activations over all its instances: a
    conv's input tensor, not its im2col matrix."""
    e, _, out = operand_bytes(op, platform)
    if not is_compute(op):
        shape = op.vector()
        return shape.input_elements * e, shape.output_elements * e
    g = op.gemm()
    if isinstance(op, Conv2d):
        return (activation_bytes(op, platform, op.batch * op.h * op.w * op.cin),
                g.m * g.n * out * g.instances)
    return (activation_bytes(op, platform, g.m * g.k) * g.instances,
            g.m * g.n * out * g.instances)


def operator_onchip(op, platform: Platform) -> bool:
    """Whether a gemm, conv or vector operator's activations live on chip."""
    return onchip_home(platform, *tensor_bytes(op, platform))


def offchip_by_order(op, platform: Platform, tm, tn, tk) -> np.ndarray:
    """Estimated off-chip bytes of one instance under tilings (the min_offchip model),
    one row per loop order: int64[len(LOOP_ORDERS), *the tilings' broadcast shape].

    Each operand's tiles are indexed by two dims; the third is its reuse dim (A: n,
    B: m, C: k). A tile is fetched once if its reuse dim has one tile, or if the tiles
    of its own dims inside the reuse loop fit its buffer's slots (LRU keeps them between
    uses); otherwise once per tile of the reuse dim. C moves once as outputs unless the
    live C tiles exceed its slots with k not innermost, when partial sums spill and
    reload on every k step. A conv's A is counted as its input tensor (halos ignored).
    Operands that live in the on-chip activation memory move nothing. Summed per
    tiling and loop order in one compiled pass (model.loop_nest.order_traffic).
    """
    g = op.gemm()
    _, acc, out = operand_bytes(op, platform)
    buffers = platform.buffers
    tm, tn, tk = (np.asarray(x, dtype=np.int64) for x in (tm, tn, tk))
    shape = np.broadcast_shapes(tm.shape, tn.shape, tk.shape)
    counts = {"m": -(-g.m // tm), "n": -(-g.n // tn), "k": -(-g.k // tk)}
    a_bytes = activation_bytes(op, platform, op.batch * op.h * op.w * (op.cin // op.groups)
                               if isinstance(op, Conv2d) else g.m * g.k)
    onchip = operator_onchip(op, platform)
    # By reuse dim: A (n), B (m), C (k).
    slots = {"n": buffers.ifmap_bytes // a_tile_bytes(op, platform, tm, tk, "im2col"),
             "m": buffers.weight_bytes // b_tile_bytes(op, platform, tk, tn),
             "k": buffers.output_bytes // c_tile_bytes(op, platform, tm, tn)}
    fetch_bytes = np.array([weight_bytes(op, platform, g.k * g.n, offchip=True), a_bytes,
                            0], dtype=np.int64)   # by reuse dim: B's, A's
    flat = [np.ascontiguousarray(np.broadcast_to(values, shape), dtype=np.int64).ravel()
            for values in (counts["m"], counts["n"], counts["k"], slots["m"], slots["n"],
                           slots["k"])]
    traffic = order_traffic(np.stack(flat[:3]), np.stack(flat[3:]), fetch_bytes,
                            np.array([True, not onchip, not onchip]),
                            np.array([g.m * g.n * out, 2 * g.m * g.n * acc], dtype=np.int64),
                            INSIDE_TABLE)
    return traffic.reshape((len(LOOP_ORDERS), *shape))
