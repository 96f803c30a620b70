"""Checking a tiling plan against the platform's buffers (the mapping issue): per
operator, whether `depth` tiles of each operand fit their buffer (bytes needed against
bytes available, with the slots the buffer holds), the partial-sum spills the loop order
forces, and every other error the lowering would raise, all listed rather than stopping
at the first."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.table import Table

from simulator.config import DTYPE_BYTES, Platform
from simulator.errors import AccsimError
from simulator.lowering import lower_attention, lower_compute, lower_vector
from simulator.lowering.windows import window_table
from simulator.mapping import (Tiling, attention_rows, merged_spec, operand_bytes,
                               resolve_tiling, weight_element_bytes)
from simulator.simulate import Inputs
from simulator.timing import ceil_div
from simulator.workload import Conv2d, is_attention, is_collective, is_compute

@dataclass(frozen=True)
class BufferFit:
    """One operand's tiles against its buffer."""

    operand: str       # A, B, C (array operators) or input, output (vector operators)
    buffer: str        # ifmap, weight, output
    dims: str          # e.g. "tm 256 x tk 576"
    tile_bytes: int    # the largest tile (a conv's A tile: its window with halo)
    tiles: int         # distinct tiles of the operand
    capacity: int
    depth: int

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
        """The lowering's overflow message, with the same numbers."""
        return (f"{self.operand} tiles ({self.dims}) of {self.tile_bytes} bytes: the "
                f"{self.buffer} buffer of {self.capacity} bytes holds {self.slots}, the "
                f"plan needs {self.depth} (depth {self.depth}); overflow "
                f"{self.depth * self.tile_bytes - self.capacity} bytes")


def _tile_errors(op, tiling: Tiling) -> list[str]:
    if not is_compute(op):
        rows = op.vector().rows
        return ([f"rows_per_tile {tiling.tm} is larger than the operator's {rows} rows"]
                if tiling.tm > rows else [])
    g = op.gemm()
    return [f"{dim} {tile} is larger than the operator's {dim[1].upper()} {size}"
            for dim, tile, size in (("tm", tiling.tm, g.m), ("tn", tiling.tn, g.n),
                                    ("tk", tiling.tk, g.k)) if tile > size]


def _vector_tile_bytes(op, rows_per_tile: int, e: int) -> tuple[int, int, int]:
    """(largest input tile bytes, largest output tile bytes, tiles) as lower_vector
    splits a vector operator into row tiles."""
    shape = op.vector()
    tiles = ceil_div(shape.rows, rows_per_tile)
    if shape.input_elements % shape.rows == 0 and shape.output_elements % shape.rows == 0:
        rows = min(rows_per_tile, shape.rows)  # every row holds the same elements
        return (shape.input_elements // shape.rows * rows * e,
                shape.output_elements // shape.rows * rows * e, tiles)
    edges = np.append(np.arange(0, shape.rows, rows_per_tile), shape.rows)
    in_bytes = np.diff(shape.input_elements * edges // shape.rows) * e
    out_bytes = np.diff(shape.output_elements * edges // shape.rows) * e
    return int(in_bytes.max()), int(out_bytes.max()), tiles


def buffer_fits(op, tiling: Tiling, platform: Platform) -> list[BufferFit]:
    """Each operand's largest tile, tile count and slots under a tiling whose tiles are
    no larger than the operator."""
    buffers = platform.buffers
    e, acc, _ = operand_bytes(op, platform)
    depth = tiling.depth
    if is_attention(op):  # the tiles lowering.attention sizes its slots by
        kv = DTYPE_BYTES[op.kv_dtype] if op.kv_dtype else e
        tm, tn, d = tiling.tm, tiling.tn, op.head_dim
        q_tiles, k_tiles = ceil_div(attention_rows(op), tm), ceil_div(op.kv_len, tn)
        return [BufferFit("A", "ifmap", f"Q/P {tm} rows", tm * max(d, tn) * e, q_tiles,
                          buffers.ifmap_bytes, depth),
                BufferFit("B", "weight", f"K and V {tn} keys", 2 * tn * d * kv, k_tiles,
                          buffers.weight_bytes, depth),
                BufferFit("C", "output", f"scores {tm} x {tn} + output", tm * (tn + d) * acc,
                          q_tiles, buffers.output_bytes, depth)]
    if not is_compute(op):
        in_max, out_max, tiles = _vector_tile_bytes(op, tiling.tm, e)
        rows = f"{tiling.tm} rows"
        return [BufferFit("input", "ifmap", rows, in_max, tiles, buffers.ifmap_bytes,
                          depth),
                BufferFit("output", "output", rows, out_max, tiles, buffers.output_bytes,
                          depth)]
    g = op.gemm()
    wb = weight_element_bytes(op, platform)
    tm, tn, tk = tiling.tm, tiling.tn, tiling.tk
    nm, nn, nk = ceil_div(g.m, tm), ceil_div(g.n, tn), ceil_div(g.k, tk)
    a_bytes = (int(window_table(op, tm, tk).max()) * e if isinstance(op, Conv2d)
               else tm * tk * e)
    return [
        BufferFit("A", "ifmap", f"tm {tm} x tk {tk}", a_bytes, nm * nk,
                  buffers.ifmap_bytes, depth),
        BufferFit("B", "weight", f"tk {tk} x tn {tn}", tk * tn * wb, nk * nn,
                  buffers.weight_bytes, depth),
        BufferFit("C", "output", f"tm {tm} x tn {tn}", tm * tn * acc, nm * nn,
                  buffers.output_bytes, depth),
    ]


def live_c_tiles(op, tiling: Tiling) -> int:
    """C tiles live at once: the tile counts of the C dims inside the k loop."""
    g = op.gemm()
    counts = {"m": ceil_div(g.m, tiling.tm), "n": ceil_div(g.n, tiling.tn)}
    order = tiling.loop_order
    live = 1
    for dim in order[order.index("k") + 1:]:
        live *= counts.get(dim, 1)
    return live


@dataclass(frozen=True)
class OperatorCheck:
    """The plan's verdict on one operator."""

    name: str
    layer_type: str
    kind: str
    tiling: Tiling | None
    fits: list[BufferFit]
    live_c_tiles: int = 1
    spills: bool = False
    fused_into: str | None = None      # absorbed as another operator's epilogue
    errors: list[str] = field(default_factory=list)

    @property
    def vector(self) -> bool:
        return self.kind not in ("gemm", "conv2d", "attention")

    def partial_sums(self) -> str:
        """The spills the loop order forces, in a few words."""
        if self.tiling is None or self.vector or len(self.fits) < 3:
            return "-"
        if self.live_c_tiles == 1:
            return "none (1 live C tile)"
        slots = self.fits[2].slots
        if self.spills:
            return f"SPILL ({self.live_c_tiles:,} live C > {slots:,} slots)"
        return f"none ({self.live_c_tiles:,} live C <= {slots:,} slots)"


@dataclass(frozen=True)
class PlanCheck:
    """The plan's verdict on a workload and platform."""

    platform: str
    workload: str
    mapping: str
    operators: list[OperatorCheck]
    errors: list[tuple[str, str]]       # (field, rule), plan-wide and per operator
    warnings: list[str]

    @property
    def ok(self) -> bool:
        return not self.errors


def check_plan(inputs: Inputs) -> PlanCheck:
    """Every operator's buffer fit, spills and lowering errors under the plan, plus the
    plan's operator names that the workload lacks (errors) and layer_types it lacks
    (warnings)."""
    platform, workload, mapping = inputs.platform, inputs.workload, inputs.mapping
    errors: list[tuple[str, str]] = []
    known = {op.name for op in workload.operators}
    for name in mapping.operators:
        if name not in known:
            errors.append((f"operators.{name}",
                           f"no operator named {name!r} in workload {workload.name!r}"))
    layer_types = {op.layer_type for op in workload.operators}
    warnings = [f"layer_types.{name}: no operator of layer_type {name!r} in workload "
                f"{workload.name!r}" for name in mapping.layer_types
                if name not in layer_types]
    checks: list[OperatorCheck] = []
    absorbed: tuple[str, str] | None = None
    ops = workload.operators
    for index, op in enumerate(ops):
        following = ops[index + 1] if index + 1 < len(ops) else None
        if absorbed is not None and op.name == absorbed[0]:
            checks.append(OperatorCheck(op.name, op.layer_type, op.kind, None, [],
                                        fused_into=absorbed[1]))
            absorbed = None
            continue
        absorbed = None
        if is_collective(op):  # runs on the links: no plan, no buffers to check
            continue
        checks.append(_check_operator(op, following, inputs))
        tiling = checks[-1].tiling
        if tiling is not None and tiling.fuse is not None and not checks[-1].errors:
            absorbed = (tiling.fuse, op.name)
        errors += [(f"operators.{op.name}", rule) for rule in checks[-1].errors]
    return PlanCheck(platform.name, workload.name, mapping.name, checks, errors, warnings)


def _check_operator(op, following, inputs: Inputs) -> OperatorCheck:
    platform = inputs.platform
    source = inputs.mapping_source.path if inputs.mapping_source else None
    try:
        tiling = resolve_tiling(op, merged_spec(inputs.mapping, op), platform,
                                following=following)
    except AccsimError as exc:
        return OperatorCheck(op.name, op.layer_type, op.kind, None, [], errors=[exc.rule])
    if is_attention(op):  # its lowering checks tiles, buffers, dataflow and dtypes
        try:
            lower_attention(op, tiling, platform, source=source)
        except AccsimError as exc:
            return OperatorCheck(op.name, op.layer_type, op.kind, tiling, [],
                                 errors=[exc.rule])
        return OperatorCheck(op.name, op.layer_type, op.kind, tiling,
                             buffer_fits(op, tiling, platform))
    errors = _tile_errors(op, tiling)
    if errors:
        return OperatorCheck(op.name, op.layer_type, op.kind, tiling, [], errors=errors)
    fits = buffer_fits(op, tiling, platform)
    errors = [fit.overflow() for fit in fits if not fit.fits]
    live, spills = 1, False
    if is_compute(op):
        array = platform.systolic_array
        if tiling.dataflow not in array.dataflows:
            errors.append(f"dataflow {tiling.dataflow!r} is not supported by "
                          f"{platform.name} ({', '.join(array.dataflows)})")
        live = live_c_tiles(op, tiling)
        spills = fits[2].slots < live
    if not errors:  # what else the lowering checks: dtype, fusion
        try:
            if is_compute(op):
                lower_compute(op, tiling, platform, following=following, source=source)
            else:
                lower_vector(op, tiling, platform, source=source)
        except AccsimError as exc:
            errors.append(exc.rule)
    return OperatorCheck(op.name, op.layer_type, op.kind, tiling, fits, live, spills,
                         errors=errors)


def _kib(nbytes: int) -> str:
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes:,} B"


def plan_check_table(report: PlanCheck) -> Table:
    """Per operator: tiling, each buffer's need against its capacity with slots, the
    partial sums, and the verdict."""
    table = Table(title=f"Plan {report.mapping} on {report.workload} / {report.platform}: "
                  "per buffer, bytes needed (depth x largest tile) / available, and the "
                  "tiles it holds (slots)",
                  title_justify="left", show_edge=False, pad_edge=False)
    for header in ("operator", "kind", "tiling", "A|input: ifmap", "B: weight",
                   "C|output: output", "partial-sum spills", "status"):
        table.add_column(header, no_wrap=True)
    for op in report.operators:
        if op.fused_into is not None:
            table.add_row(op.name, op.kind, f"fused into {op.fused_into}", "-", "-", "-",
                          "-", "ok")
            continue
        tiling = op.tiling.describe(vector=op.vector) if op.tiling else "-"
        fits = {fit.buffer: fit for fit in op.fits}
        cells = []
        for buffer in ("ifmap", "weight", "output"):
            fit = fits.get(buffer)
            cells.append("-" if fit is None else
                         f"{_kib(fit.needed)} / {_kib(fit.capacity)}, {fit.slots:,} slots"
                         + ("" if fit.fits else " OVERFLOW"))
        status = "ok" if not op.errors else f"ERROR ({len(op.errors)})"
        table.add_row(op.name, op.kind, tiling, *cells, op.partial_sums(), status,
                      style=None if not op.errors else "bold")
    return table


