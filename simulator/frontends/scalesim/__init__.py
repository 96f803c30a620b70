"""SCALE-Sim v3 compatibility: its topology CSVs and `.cfg` files read unchanged, and the
`--validate scalesim` mode whose compute cycles and SRAM reads equal SCALE-Sim's.

Facts about SCALE-Sim used here are read from its source (shared/reference/scalesim.md);
none of its code is copied. File parsing lives in `simulator.frontends.scalesim.parse`; this
module turns parsed files into accsim inputs and builds the validation mode.

Validation mode (DESIGN.md section 8): unbounded buffers and one tile per GEMM
(tm = M, tn = N, tk = K) in the platform's dataflow, so that the array cycles of each
operator equal SCALE-Sim's demand rows D, and the ifmap / filter SRAM read counts equal
its per-fold counts. SCALE-Sim's COMPUTE_REPORT "Total Cycles" is D - 1 + stall cycles,
so compare accsim's compute (busy) cycles with SCALE-Sim's Total Cycles - Stall Cycles
+ 1. Its os ofmap write counter adds R + C per fold too many (a counting bug in
systolic_compute_os); accsim counts M * N ofmap writes and does not reproduce it.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import Source, locate, read_source
from simulator.inputs.platform_file import load_platform
from simulator.mapping.footprint import operand_bytes
from simulator.mapping.plan import DEFAULT_HEURISTIC, Mapping, TilingSpec
from simulator.frontends.scalesim.parse import (ConfigImport, TopologyImport, parse_config,
                                       parse_topology, sniff_topology_kind)
from simulator.inputs.workload import Conv2d, Workload, is_compute

VALIDATE_MODES = ("scalesim",)
WORKLOAD_FORMATS = ("scalesim-conv", "scalesim-gemm")
VALIDATE_MAPPING_NAME = "validate-scalesim"
# Buffers in validation mode hold this many copies of the largest operand of any
# operator, so that one tile per GEMM fits at any depth up to 2.
VALIDATE_BUFFER_SLOTS = 2
# Everything a SCALE-Sim config does not describe comes from this shipped platform,
# which is SCALE-Sim's own example architecture (scale.cfg) with cited assumptions.
TEMPLATE_PLATFORM = "edge_32x32"


def is_scalesim_config(path: str) -> bool:
    return Path(path).suffix.lower() == ".cfg"


def is_scalesim_topology(path: str) -> bool:
    return Path(path).suffix.lower() == ".csv"


def template_platform() -> Platform:
    platform, _ = load_platform(locate(TEMPLATE_PLATFORM, "platform"))
    return platform


def load_config(path: str) -> tuple[Platform, Source, ConfigImport]:
    """A SCALE-Sim `.cfg` file as a Platform; the import lists every field's fate."""
    source = read_source(path)
    parsed = parse_config(source.text, file=source.path)
    return parsed.platform(template_platform()), source, parsed


def load_topology(path: str, workload_format: str | None = None
                  ) -> tuple[Workload, Source, TopologyImport]:
    """A SCALE-Sim topology CSV (conv or GEMM) as a Workload.

    The kind comes from `workload_format` (scalesim-conv, scalesim-gemm) or, when None,
    from the header (Layer, M, N, K: gemm; otherwise conv with its 8 columns).
    """
    source = read_source(path)
    if workload_format is None:
        kind = sniff_topology_kind(source.text, file=source.path)
    elif workload_format in WORKLOAD_FORMATS:
        kind = workload_format.removeprefix("scalesim-")
    else:
        raise AccsimError(f"unknown format {workload_format!r} (known: "
                          f"{', '.join(WORKLOAD_FORMATS)})", field="--format")
    parsed = parse_topology(source.text, kind, file=source.path)
    return parsed.workload(Path(path).stem), source, parsed


def validate_platform(platform: Platform, workload: Workload) -> Platform:
    """The platform with buffers that hold every compute operator's whole operands
    (A, B and C of its one tile, twice over), no on-chip activation memory, and
    SCALE-Sim's fold model on one array (whatever the platform file says).

    "Unbounded" in effect: nothing is evicted and no one-tile plan overflows. (The
    buffers are sized to the workload rather than made huge, because the engines keep
    one record per output-buffer slot.)
    """
    need = {"ifmap_bytes": 1, "weight_bytes": 1, "output_bytes": 1}
    for op in workload.operators:
        if not is_compute(op):
            continue
        e, acc, out = operand_bytes(op, platform)
        g = op.gemm()
        a_elements = g.m * g.k
        if isinstance(op, Conv2d):
            a_elements = max(a_elements, op.batch * op.h * op.w * op.cin)
        need["ifmap_bytes"] = max(need["ifmap_bytes"], a_elements * e)
        need["weight_bytes"] = max(need["weight_bytes"], g.k * g.n * e)
        need["output_bytes"] = max(need["output_bytes"], g.m * g.n * max(acc, out))
    data = platform.model_dump()
    data["name"] = f"{platform.name} (validate scalesim)"
    data["description"] = (
        f"{platform.description} [validate scalesim: buffers hold every operator's "
        "whole operands (unbounded in effect), one tile per GEMM]").strip()
    data["buffers"] = {key: VALIDATE_BUFFER_SLOTS * value for key, value in need.items()}
    data["activation_memory_bytes"] = None
    data["systolic_array"].update(fold_model="scalesim", count=1)
    return Platform.model_validate(data)


def validate_mapping(workload: Workload, platform: Platform,
                     dataflow: str | None = None) -> Mapping:
    """One tile per GEMM: tm = M, tn = N, tk = K for every compute operator, depth 1,
    in `dataflow` (default: the platform's default dataflow); vector operators get the
    array_aligned heuristic, never the search. Fusion is off: SCALE-Sim runs operator
    at a time."""
    dataflow = dataflow or platform.systolic_array.default_dataflow
    specs = {}
    for op in workload.operators:
        if is_compute(op):
            g = op.gemm()
            specs[op.name] = TilingSpec(tm=g.m, tn=g.n, tk=g.k, loop_order="mnk",
                                        dataflow=dataflow, depth=1)
    # Vector operators (SCALE-Sim has none) keep array_aligned's row tiles: the searched
    # default never leaks into validation.
    return Mapping(name=VALIDATE_MAPPING_NAME,
                   default=TilingSpec(heuristic=DEFAULT_HEURISTIC), operators=specs,
                   fusion="none")


def validate_notes(platform: Platform) -> list[str]:
    array = platform.systolic_array
    return [
        f"validate scalesim: buffers unbounded, one tile per GEMM, dataflow "
        f"{array.default_dataflow} on one {array.rows}x{array.cols} array with "
        "SCALE-Sim's fold model (every fold fills); each operator's compute "
        "(busy) cycles equal SCALE-Sim's demand rows D = its Total Cycles - Stall Cycles "
        "+ 1 (its Total Cycles count from 0), and SRAM ifmap / filter reads "
        "(--json per_instance_bytes.sram_read_elements) equal its access report; "
        "stalls, fill and drain here are accsim's own memory model, not SCALE-Sim's",
    ]


def scalesim_rows(result) -> list[dict]:
    """Per operator, the figures SCALE-Sim reports, from an accsim result (one run of
    each operator: a depthwise layer's per-channel layer, a repeated layer once)."""
    rows = []
    for op in result.operators:
        lowered = op.lowered
        if lowered.unit != "array":
            continue
        busy = op.run.busy_cycles
        reads = lowered.counters.sram_read_elements
        rows.append({"name": lowered.name, "runs": lowered.runs,
                     "compute_cycles": busy, "scalesim_total_cycles_if_no_stall": busy - 1,
                     "ifmap_sram_reads": reads.get("ifmap", 0),
                     "filter_sram_reads": reads.get("weight", 0),
                     "stall_cycles": op.run.total_cycles - busy})
    return rows


def scalesim_table(result) -> Table:
    """scalesim_rows as a table, in SCALE-Sim's terms (its Total Cycles is D - 1 + stalls)."""
    table = Table(title="SCALE-Sim view (validate mode: compute cycles = demand rows D; "
                  "SCALE-Sim's Total Cycles = D - 1 + its stalls)", title_justify="left",
                  show_edge=False, pad_edge=False)
    for header in ("layer", "runs", "compute cycles D", "Total Cycles if no stall",
                   "ifmap SRAM reads", "filter SRAM reads"):
        table.add_column(header, justify="left" if header == "layer" else "right",
                         no_wrap=True)
    for row in scalesim_rows(result):
        table.add_row(row["name"], str(row["runs"]), f"{row['compute_cycles']:,}",
                      f"{row['scalesim_total_cycles_if_no_stall']:,}",
                      f"{row['ifmap_sram_reads']:,}", f"{row['filter_sram_reads']:,}")
    return table
