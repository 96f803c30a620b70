"""The operator-to-kernel mapping sheet (`accsim run --sheet PATH.md|.csv`): per
operator of a run, the tiling, loop order, dataflow, operand orientation and depth it
ran with, how full each operand's buffer is, fusion, off-chip bytes and refetch, the bottleneck class with the
measured values that decided it, the fusion plan (each group, its members, the
off-chip bytes and cycles it saves against unfused, what capacity gave back), and the gap to the mapper's best tiling when a mapper
result is given (`--sheet-best MAP.json`, from `accsim map --json`) or computed
(`--sheet-search`). The sheet says which.

Buffer occupancy of an operand = resident tiles x its largest tile, over the buffer's
capacity, where resident = min(slots the buffer holds, distinct tiles of the operand):
what the LRU can keep at once. Nothing here changes a number.
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import simulator
from simulator.engines.fast import run_fast
from simulator.search.fusion_plan import FusionGroup
from simulator.errors import AccsimError
from simulator.output.files import write_file
from simulator.lowering.attention import lower_attention_as
from simulator.search.fusion import fusion_mode
from simulator.search.workload_search import MapResult
from simulator.mapping.plan import ATTENTION_FUSIONS
from simulator.mapping.footprint import BufferFit, buffer_fits
from simulator.metrics.totals import OperatorResult
from simulator.program.tile_program import memory_params
from simulator.simulate import RunResult

SUFFIXES = (".md", ".csv")
# A producer row's fusion group (DESIGN.md section 15); empty on every other row.
FUSION_COLUMNS = ("fusion_members", "fusion_dropped", "fusion_bytes_saved",
                  "fusion_cycles_saved")


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes:,.0f} B"


def _occupancy(fit: BufferFit | None) -> str:
    if fit is None:
        return "-"
    return (f"{fit.resident} x {_size(fit.tile_bytes)} of {_size(fit.capacity)} "
            f"({100 * fit.occupancy:.1f}%)")


def check_mapper_result(best: MapResult, result: RunResult, *, file: str | None) -> None:
    """A mapper result must be for this run's platform, workload and model version."""
    check_mapper_inputs(best, result.platform.name, result.inputs.workload.name,
                        file=file)


def check_mapper_inputs(best: MapResult, platform: str, workload: str, *,
                        file: str | None) -> None:
    """check_mapper_result before the run: by the platform's and workload's names."""
    if (best.platform, best.workload) != (platform, workload):
        raise AccsimError(f"mapper result is for {best.workload} on {best.platform}, this "
                          f"run is {workload} on {platform}", file=file)
    if best.model_version != simulator.MODEL_VERSION:
        raise AccsimError(f"mapper result has MODEL_VERSION {best.model_version}, this "
                          f"accsim {simulator.MODEL_VERSION}; rerun `accsim map`",
                          file=file)


def _objective(op: OperatorResult, objective: str) -> float:
    totals = op.totals
    if objective == "cycles":
        return float(totals.cycles)
    if objective == "energy":
        return totals.energy_pj
    return totals.energy_pj * totals.cycles


def attention_choice(op, lowered, platform) -> str:
    """Which lowering an attention operator ran, on which unit and in which orientation,
    and why: each lowering's off-chip bytes and cycles per run at the tiling used."""
    memory = memory_params(platform)
    tiling = lowered.tiling
    parts = []
    for fusion in ATTENTION_FUSIONS:
        other = lower_attention_as(op, replace(tiling, fuse=fusion), fusion, platform,
                                   orientation=tiling.orientation or "normal",
                                   unit=tiling.unit or "array")
        cycles = run_fast(other.program, memory).breakdown.total_cycles
        moved = int(other.program.load_bytes.sum() + other.program.store_bytes.sum())
        parts.append(f"{fusion}: {moved / 1e6:,.2f} MB, {cycles:,} cycles")
    where = "on the vector unit" if tiling.unit == "vector" else \
        f"{tiling.orientation or 'normal'} on the array"
    return f"{lowered.fused} ({'; '.join(parts)}; per run; {where})"


def sheet_rows(result: RunResult, best: MapResult | None = None) -> list[dict]:
    """One record per operator of the run, numbers unformatted."""
    ops = {op.name: op for op in result.inputs.workload.operators}
    fused_by = {}
    for op in result.operators:
        if op.lowered.fused:
            fused_by[op.lowered.fused] = op.lowered.name
    groups = {group.producer: group for group in result.fusion}
    rows = []
    for op in result.operators:
        lowered = op.lowered
        vector = lowered.unit == "vector"
        tiling = lowered.tiling
        if tiling is None:  # a collective: on the links, no tiling, no buffers
            rows.append(_collective_row(op))
            continue
        fits = {fit.operand: fit for fit in buffer_fits(ops[lowered.name], tiling,
                                                         result.platform)}
        derived = op.totals.derived(result.platform)
        searched = best.operator(lowered.name) if best is not None else None
        gap = best_value = None
        if searched is not None and searched.best is not None:
            best_value = searched.best.objective(best.objective)
            gap = 100.0 * (_objective(op, best.objective) / best_value - 1.0) \
                if best_value else 0.0
        record = {
            "operator": lowered.name, "layer_type": lowered.layer_type,
            "kind": lowered.kind, "runs": lowered.runs,
            "tm": tiling.tm if not vector else None,
            "tn": tiling.tn if not vector else None,
            "tk": tiling.tk if not vector else None,
            "rows_per_tile": tiling.tm if vector else None,
            "loop_order": tiling.loop_order if not vector else None,
            "dataflow": tiling.dataflow if not vector else None,
            "orientation": tiling.orientation if not vector else None,
            "depth": tiling.depth, "heuristic": tiling.heuristic,
            "fused": attention_choice(ops[lowered.name], lowered, result.platform)
            if lowered.kind == "attention" else lowered.fused,
            "onchip_home": lowered.onchip_home,
            "spills_partial_sums": lowered.counters.spills,
            "offchip_bytes": op.totals.offchip_bytes,
            "compulsory_bytes": op.totals.compulsory_bytes,
            "refetch_ratio": derived["refetch_ratio"] if op.totals.compulsory_bytes
            else None,
            "cycles": op.totals.cycles, "energy_pj": op.totals.energy_pj,
            "bottleneck": op.verdict.bottleneck, "evidence": op.verdict.reason(),
            "best_tiling": searched.best.tiling.describe(vector=vector)
            if searched is not None and searched.best is not None else None,
            "best_objective": best_value, "gap_percent": gap,
            **_group_fields(groups.get(lowered.name)),
        }
        for operand, buffer_name in (("A", "ifmap"), ("B", "weight"), ("C", "output")):
            fit = fits.get(operand) or (fits.get("input") if operand == "A" else
                                         fits.get("output") if operand == "C" else None)
            record[f"{operand}_buffer"] = buffer_name
            record[f"{operand}_tile_bytes"] = fit.tile_bytes if fit else None
            record[f"{operand}_resident_tiles"] = fit.resident if fit else None
            record[f"{operand}_capacity_bytes"] = fit.capacity if fit else None
            record[f"{operand}_occupancy"] = fit.occupancy if fit else None
            record[f"_{operand}_fit"] = fit
        rows.append(record)
    return rows


def _group_fields(group: FusionGroup | None) -> dict:
    """The fusion plan's columns of a producer's row (empty for any other)."""
    if group is None:
        return dict.fromkeys(FUSION_COLUMNS)
    return {"fusion_members": " ".join(group.members),
            "fusion_dropped": "; ".join(f"{n}: {r}" for n, r in group.dropped),
            "fusion_bytes_saved": group.offchip_bytes_saved,
            "fusion_cycles_saved": group.cycles_saved}


def fusion_plan_lines(result: RunResult) -> list[str]:
    """The fusion plan section of the Markdown sheet: one line per group."""
    mode = fusion_mode(result.inputs.mapping)
    lines = ["", f"## Fusion plan (--fusion {mode})", ""]
    if not result.fusion:
        return lines + ["No groups: every operator makes its own off-chip round trip."]
    how = " by adjacency (the workload names no inputs)" if result.fusion_adjacency \
        else ""
    # A list, not a table: its lines must not read as the operator table's rows.
    lines += [f"Groups{how}; saved = unfused (each member lowered alone) - fused.", ""]
    for group in result.fusion:
        dropped = "; ".join(f"{n}: {r}" for n, r in group.dropped) or "none"
        lines.append(f"- {group.producer} + {', '.join(group.shown) or '-'}: "
                     f"{group.offchip_bytes_saved:,} off-chip bytes and "
                     f"{group.cycles_saved:,} cycles saved; given back (capacity): "
                     f"{dropped}")
    return lines


def _collective_row(op: OperatorResult) -> dict:
    """A collective's sheet record: no tiling or buffer columns, its link figures."""
    lowered = op.lowered
    record = dict.fromkeys(["tm", "tn", "tk", "rows_per_tile", "loop_order", "dataflow",
                            "orientation", "depth", "heuristic", "fused", "refetch_ratio", "best_tiling",
                            "best_objective", "gap_percent", *FUSION_COLUMNS])
    record.update({
        "operator": lowered.name, "layer_type": lowered.layer_type, "kind": lowered.kind,
        "runs": lowered.runs, "onchip_home": False, "spills_partial_sums": False,
        "offchip_bytes": 0, "compulsory_bytes": 0, "cycles": op.totals.cycles,
        "energy_pj": op.totals.energy_pj, "bottleneck": op.verdict.bottleneck,
        "evidence": f"{lowered.collective.kind} over {lowered.collective.chips} chips "
                    f"({lowered.collective.group}): {lowered.collective.algorithm}, "
                    f"{lowered.collective.hops} hops, "
                    f"{lowered.collective.bytes_per_link:,.0f} bytes per link"})
    for operand in "ABC":
        record.update({f"{operand}_buffer": None, f"{operand}_tile_bytes": None,
                       f"{operand}_resident_tiles": None, f"{operand}_capacity_bytes": None,
                       f"{operand}_occupancy": None, f"_{operand}_fit": None})
    return record


def _how(best: MapResult | None, source: str | None) -> str:
    if best is None:
        return ("not computed: pass `--sheet-best MAP.json` (written by `accsim map "
                "--json`) or `--sheet-search` to compute it")
    where = (f"read from `{source}`" if source else
             "computed for this run by the mapper (`--sheet-search`)")
    return (f"to the mapper's best tiling by {best.objective} "
            f"({'exhaustive' if best.exhaustive else 'pruned'} search), {where}; gap = "
            f"this run's {best.objective} / the best's - 1")


def markdown(result: RunResult, best: MapResult | None = None, *,
             source: str | None = None) -> str:
    """The sheet as a Markdown document."""
    inputs = result.inputs
    plan = (f"{inputs.mapping.name} ({inputs.mapping_source.path})"
            if inputs.mapping_source else f"{inputs.mapping.name} (no file)")
    lines = [f"# Mapping sheet: {inputs.workload.name} on {result.platform.name}", "",
             f"- plan: {plan}; engine {result.engine}; "
             f"accsim {simulator.__version__}, MODEL_VERSION {simulator.MODEL_VERSION}",
             f"- gap: {_how(best, source)}",
             "- buffers: resident tiles x largest tile of capacity (occupancy); resident "
             "= min(slots, distinct tiles). Vector operators: A is the input, C the "
             "output.",
             "- off-chip MB and refetch (off-chip / compulsory bytes) over all runs; "
             "evidence: the measured values of the rule that decided the class", ""]
    header = ["operator", "layer_type", "tiling", "loop", "dataflow", "orientation",
              "depth",
              "A (ifmap)", "B (weight)", "C (output)", "fused", "off-chip MB", "refetch",
              "cycles", "gap %", "best tiling", "bottleneck", "evidence"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---:" if h in ("depth", "off-chip MB", "refetch",
                                                "cycles", "gap %") else "---"
                                for h in header) + "|")
    for row in sheet_rows(result, best):
        vector = row["rows_per_tile"] is not None
        tiling = (f"{row['rows_per_tile']} rows" if vector
                  else "links (collective)" if row["tm"] is None
                  else f"{row['tm']} x {row['tn']} x {row['tk']}")
        cells = [row["operator"], row["layer_type"], tiling, row["loop_order"] or "-",
                 row["dataflow"] or "-", row["orientation"] or "-",
                 str(row["depth"] or "-"),
                 _occupancy(row["_A_fit"]), _occupancy(row["_B_fit"]),
                 _occupancy(row["_C_fit"]),
                 row["fused"] or "-", f"{row['offchip_bytes'] / 1e6:,.2f}",
                 f"{row['refetch_ratio']:.2f}" if row["refetch_ratio"] is not None else "-",
                 f"{row['cycles']:,}",
                 f"{row['gap_percent']:.1f}" if row["gap_percent"] is not None else "-",
                 row["best_tiling"] or "-", row["bottleneck"], row["evidence"]]
        if row["spills_partial_sums"]:
            cells[3] += " (spills)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + fusion_plan_lines(result)) + "\n"


CSV_COLUMNS = ["operator", "layer_type", "kind", "runs", "tm", "tn", "tk",
               "rows_per_tile", "loop_order", "dataflow", "orientation", "depth",
               "heuristic",
               "A_buffer", "A_tile_bytes", "A_resident_tiles", "A_capacity_bytes",
               "A_occupancy", "B_buffer", "B_tile_bytes", "B_resident_tiles",
               "B_capacity_bytes", "B_occupancy", "C_buffer", "C_tile_bytes",
               "C_resident_tiles", "C_capacity_bytes", "C_occupancy", "fused",
               "onchip_home", "spills_partial_sums", "offchip_bytes", "compulsory_bytes",
               "refetch_ratio", "cycles", "energy_pj", "bottleneck", "evidence",
               "best_tiling", "best_objective", "gap_percent", *FUSION_COLUMNS,
               "gap_basis"]


def csv_text(result: RunResult, best: MapResult | None = None, *,
             source: str | None = None) -> str:
    """The sheet as CSV, one row per operator; `gap_basis` says how the gap was
    obtained."""
    out = io.StringIO()
    how = _how(best, source)
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in sheet_rows(result, best):
        writer.writerow({**{k: "" if v is None else v for k, v in row.items()},
                         "gap_basis": how})
    return out.getvalue()


def write_sheet(result: RunResult, path: str, best: MapResult | None = None, *,
                source: str | None = None) -> None:
    """Write the sheet as Markdown (.md) or CSV (.csv), by the path's suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise AccsimError(f"a sheet is .md or .csv, not {suffix or 'no suffix'!r}",
                          file=path, field="--sheet")
    text = markdown(result, best, source=source) if suffix == ".md" else \
        csv_text(result, best, source=source)
    write_file(path, text, field="--sheet")
