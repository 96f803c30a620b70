"""Checking a tiling plan against the platform's buffers (the mapping issue): per
operator, whether `depth` tiles of each operand fit their buffer (bytes needed against
bytes available, with the slots the buffer holds), the partial-sum spills the loop order
forces, and every other error the lowering would raise, all listed rather than stopping
at the first."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.table import Table

from simulator.errors import AccsimError
from simulator.inputs.run_inputs import Inputs
from simulator.lowering import lower_attention, lower_compute, lower_vector
from simulator.mapping.footprint import BufferFit, buffer_fits, unsupported_orientation
from simulator.model.loop_nest import live_c_tiles
from simulator.mapping.plan import Tiling, merged_spec
from simulator.search.default import SearchCache
from simulator.search.resolve import placed_operators, resolve_tiling
from simulator.inputs.workload import (is_attention, is_collective, is_compute,
                                       unmatched_layer_types)


def _tile_errors(op, tiling: Tiling) -> list[str]:
    if not is_compute(op):
        rows = op.vector().rows
        return ([f"rows_per_tile {tiling.tm} is larger than the operator's {rows} rows"]
                if tiling.tm > rows else [])
    g = op.gemm()
    return [f"{dim} {tile} is larger than the operator's {dim[1].upper()} {size}"
            for dim, tile, size in (("tm", tiling.tm, g.m), ("tn", tiling.tn, g.n),
                                    ("tk", tiling.tk, g.k)) if tile > size]


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
    warnings = unmatched_layer_types(mapping.layer_types, workload)
    checks: list[OperatorCheck] = []
    failed: set[str] = set()   # operators with errors absorb nothing: checked alone
    searches = SearchCache()   # equal operators searched once
    for placed in placed_operators(workload, mapping):
        op = placed.op
        if placed.absorbed_by is not None and placed.absorbed_by not in failed:
            checks.append(OperatorCheck(op.name, op.layer_type, op.kind, None, [],
                                        fused_into=placed.absorbed_by))
            continue
        if is_collective(op):  # runs on the links: no plan, no buffers to check
            continue
        checks.append(_check_operator(op, placed.following, inputs, searches))
        if checks[-1].errors:
            failed.add(op.name)
        errors += [(f"operators.{op.name}", rule) for rule in checks[-1].errors]
    return PlanCheck(platform.name, workload.name, mapping.name, checks, errors, warnings)


def _check_operator(op, following, inputs: Inputs, searches: SearchCache
                    ) -> OperatorCheck:
    platform = inputs.platform
    source = inputs.mapping_source.path if inputs.mapping_source else None
    try:
        tiling = resolve_tiling(op, merged_spec(inputs.mapping, op), platform,
                                following=following, searches=searches)
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
        if tiling.orientation not in array.transpose.orientations:
            errors.append(unsupported_orientation(tiling.orientation, platform))
        live = live_c_tiles(op.gemm().m, op.gemm().n, tiling)
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


