"""Presenting a result: terminal tables, the full JSON file, and a CSV row per operator.

Nothing here changes a number; every figure comes from metrics.Totals.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from simulator.inputs.anchors import relocated
from simulator.output.escape import csv_text
from simulator.inputs.loader import dump_json
from simulator.output.files import write_file
from simulator.metrics.totals import OPTIONAL_TERMS, OperatorResult, Totals, dominant_bottleneck
from simulator.present.results import (CapacityRecord, LlmFigures, PrecisionRecord,
                               RunResultFile)
from simulator.simulate import RunResult, manifest
from simulator.output.terminal import Grouped

# (header, Totals-derived key, format) of the percentage columns shared by both tables.
PERCENT_COLUMNS = [
    ("MFU", "mfu"), ("stall", "memory_stall_fraction"), ("ovh", "overhead_fraction"),
    ("fill", "fill_fraction"), ("in", "input_stall_fraction"),
    ("out", "output_stall_fraction"), ("drain", "drain_fraction"),
    ("useful", "useful_fraction"), ("pad", "padding_fraction"),
    ("setup", "array_setup_fraction"), ("coll", "collective_fraction"),
]
# Columns of terms a run may lack (DESIGN.md section 15), shown only where it has them.
OPTIONAL_COLUMNS = [("evac", "evacuation_fraction"), ("inv", "invocation_fraction")]
LEGEND = ("% of cycles. stall: memory stalls (fill + in + memory-caused out + store "
          "tail); ovh: per-operator dispatch overhead; fill / in / out / drain: "
          "compute-unit idle split; useful / pad / setup: array busy split into useful, "
          "padding and setup (fold fill in the scalesim model; stationary-operand load + "
          "skew in the pipelined one; apart in --json and --csv); coll: chip-to-chip "
          "collectives (not overlapped with compute); MB: off-chip; refetch: off-chip / "
          "compulsory bytes; uJ: energy.")
OPTIONAL_LEGEND = {"evacuation_fraction": " evac: vector unit copying output tiles out "
                   "of the accumulators (output_path: vector; overlaps compute, what it "
                   "delays shows in drain and out).",
                   "invocation_fraction": " inv: the call's launch and host transfers "
                   "(runtime.invocation_overhead_us, host_link)."}


def percent_columns(result: RunResult) -> list[tuple[str, str]]:
    """The percentage columns of this result: the shared ones and the optional terms
    its workload has."""
    d = result.total.derived(result.platform)
    return PERCENT_COLUMNS + [(h, key) for h, key in OPTIONAL_COLUMNS if key in d]


def column_groups(result: RunResult) -> tuple[tuple[str, ...], ...]:
    """The runs of columns the operator and layer_type tables keep together when they
    are split to fit the terminal (simulator.output.terminal): time, percentages, traffic and
    energy."""
    return (("runs", "cycles", "us"), ("ops", "share%", "cycles", "us"),
            tuple(f"{h}%" for h, _ in percent_columns(result)),
            ("MB", "refetch", "uJ", "bottleneck"))


def legend(result: RunResult) -> str:
    return LEGEND + "".join(OPTIONAL_LEGEND[key] for _, key in percent_columns(result)
                            if key in OPTIONAL_LEGEND)


def _figures(totals: Totals, result: RunResult, columns: list[tuple[str, str]]
             ) -> list[str]:
    """A row's figures; `columns`: the result's percent_columns, worked out once per
    table (each working-out totals every operator)."""
    d = totals.derived(result.platform)
    cells = [f"{totals.cycles:,}", f"{d['time_s'] * 1e6:,.1f}"]
    cells += [f"{100 * d.get(key, 0.0):.1f}" for _, key in columns]
    cells += [f"{totals.offchip_bytes / 1e6:,.2f}",
              f"{d['refetch_ratio']:.2f}" if totals.compulsory_bytes else "-",
              f"{d['energy_j'] * 1e6:,.1f}"]
    return cells


def _table(title: str, first: list[str], columns: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for header in first:
        table.add_column(header, no_wrap=True)
    for header in ["cycles", "us"] + [f"{h}%" for h, _ in columns] + \
            ["MB", "refetch", "uJ"]:
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("bottleneck", no_wrap=True)
    return table


def measured_s(result: RunResult) -> dict[str, float]:
    """Seconds measured on hardware by operator name, for the operators that carry
    them (an imported profiler trace's)."""
    return {op.name: op.measured_s for op in result.inputs.workload.operators
            if op.measured_s is not None}


def operator_table(result: RunResult) -> Table:
    """One row per operator."""
    columns = percent_columns(result)
    table = _table("Operators", ["operator", "layer_type", "runs"], columns)
    for op in result.operators:
        table.add_row(op.lowered.name, op.lowered.layer_type,
                      str(op.lowered.runs), *_figures(op.totals, result, columns),
                      op.verdict.bottleneck)
    return table


def measured_table(result: RunResult) -> Table:
    """Simulated beside measured time for the operators that carry a measurement."""
    measured = measured_s(result)
    table = Table(title="Simulated vs measured (measured_s, e.g. from a profiler trace)",
                  title_justify="left", show_edge=False, pad_edge=False)
    for header in ("operator", "layer_type", "runs", "simulated us", "measured us",
                   "sim/meas"):
        table.add_column(header, justify="left" if header in ("operator", "layer_type")
                         else "right", no_wrap=True)
    for op in result.operators:
        seconds = measured.get(op.lowered.name)
        if seconds is None:
            continue
        simulated = op.totals.derived(result.platform)["time_s"]
        table.add_row(op.lowered.name, op.lowered.layer_type,
                      str(op.lowered.runs), f"{simulated * 1e6:,.1f}", f"{seconds * 1e6:,.1f}",
                      f"{simulated / seconds:.2f}" if seconds else "-")
    return table


def layer_type_table(result: RunResult) -> Table:
    """One row per layer_type and one for the workload, with the dominant class."""
    columns = percent_columns(result)
    table = _table("By layer_type (bottleneck: the class holding most cycles)",
                   ["layer_type", "ops", "share%"], columns)
    members = result.operators_by_layer_type
    total = result.total
    whole = max(total.cycles, 1)
    for name, totals in result.by_layer_type.items():
        table.add_row(name, str(len(members[name])),
                      f"{100 * totals.cycles / whole:.1f}",
                      *_figures(totals, result, columns),
                      dominant_bottleneck(members[name]))
    table.add_section()
    table.add_row("workload", str(len(result.operators)), "100.0",
                  *_figures(total, result, columns), dominant_bottleneck(result.operators),
                  style="bold")
    return table


def _peak_words(total, platform) -> str:
    """The peak MFU is relative to, naming its dtype where it is not the default's."""
    dtype, rate = total.peak(platform)
    array = platform.systolic_array
    named = "" if rate == array.rate(array.input_dtypes[0]) else f" ({dtype} peak)"
    return f"{platform.peak_flops_for(dtype) / 1e12:,.1f} TFLOP/s{named}"


def summary_lines(result: RunResult) -> list[str]:
    """The workload in three lines: time, MFU and traffic, energy."""
    total = result.total
    d = total.derived(result.platform)
    inputs = result.inputs
    return [
        f"{inputs.workload.name} on {inputs.platform.name} (engine "
        f"{result.engine}): "
        f"{total.cycles:,} cycles = {d['time_s'] * 1e3:,.3f} ms at "
        f"{inputs.platform.clock_ghz} GHz",
        f"MFU {100 * d['mfu']:.1f}% of {_peak_words(total, inputs.platform)}; "
        f"memory stalls {100 * d['memory_stall_fraction']:.1f}%; off-chip "
        f"{total.offchip_bytes / 1e6:,.1f} MB (refetch {d['refetch_ratio']:.2f}x of "
        f"{total.compulsory_bytes / 1e6:,.1f} MB compulsory)",
        f"energy {d['energy_j'] * 1e3:,.3f} mJ (static {total.energy_static_pj / 1e9:,.3f}"
        f" mJ), average power {d['average_power_w']:,.1f} W, "
        f"{d['flops_per_joule'] / 1e12:,.3f} TFLOP/J, "
        f"{d['energy_per_mac_pj']:,.2f} pJ per MAC"
        + (f", {d['flops_per_s_per_mm2'] / 1e12:,.3f} TFLOP/s per mm^2 of "
           f"{d['area_mm2']:,.1f} mm^2" if "area_mm2" in d else ""),
        f"mapping: {result.mapping_mode}",
    ] + ([f"collectives {100 * d['collective_fraction']:.1f}% of cycles, not overlapped "
          f"with compute; {total.collective_sent_bytes / 1e6:,.2f} MB sent per chip, "
          f"ICI energy {total.energy_ici_pj / 1e9:,.3f} mJ per chip"]
         if total.collective_cycles else []) + _fusion_lines(result) + _measured_line(result)


def _fusion_lines(result: RunResult) -> list[str]:
    """The fusion plan in a few lines: its groups with what they save, and every
    member a capacity check gave back, with why."""
    if not result.fusion:
        return []
    kept = [g for g in result.fusion if g.shown]
    how = "by adjacency (the workload names no inputs)" if result.fusion_adjacency \
        else "along the workload's edges"
    lines = [f"fusion: {len(kept)} groups {how}, saving "
             f"{sum(g.offchip_bytes_saved for g in kept) / 1e6:,.2f} MB off-chip and "
             f"{sum(g.cycles_saved for g in kept):,} cycles against unfused"]
    lines += [f"  {g.producer} + {', '.join(g.shown)}: {g.offchip_bytes_saved:,} B, "
              f"{g.cycles_saved:,} cycles saved" for g in kept]
    lines += [f"  {g.producer}: {name} not fused: {reason}"
              for g in result.fusion for name, reason in g.dropped]
    return lines


def _measured_line(result: RunResult) -> list[str]:
    """Measured against simulated time over the operators that carry a measurement."""
    measured = measured_s(result)
    if not measured:
        return []
    simulated = sum(op.totals.derived(result.platform)["time_s"] for op in result.operators
                    if op.lowered.name in measured)
    return [f"measured {sum(measured.values()) * 1e3:,.3f} ms on the traced hardware "
            f"for the {len(measured)} operators that carry a measurement; simulated "
            f"{simulated * 1e3:,.3f} ms for them"]


def print_report(result: RunResult, console: Console) -> None:
    """Both tables (and the measured one, where operators carry measurements), the
    legend and the summary."""
    groups = column_groups(result)
    console.print(Grouped(operator_table(result), key=2, groups=groups))
    console.print()
    if measured_s(result):
        console.print(Grouped(measured_table(result), key=2))
        console.print()
    console.print(Grouped(layer_type_table(result), key=1, groups=groups))
    console.print(legend(result))
    console.print()
    for line in summary_lines(result):
        console.print(line)


def _operator_record(op: OperatorResult, result: RunResult) -> dict:
    lowered = op.lowered
    counters = lowered.counters
    return {
        "name": lowered.name, "layer_type": lowered.layer_type, "kind": lowered.kind,
        "unit": lowered.unit, "runs": lowered.runs, "instances": lowered.instances,
        "repeat": lowered.repeat, "steps": lowered.program.steps,
        "tiling": lowered.tiling.record() if lowered.tiling else None,
        "fused": lowered.fused,
        "onchip_home": lowered.onchip_home,
        "buffers": {"slots": counters.slots, "live_c_tiles": counters.live_c_tiles,
                    "spills_partial_sums": counters.spills},
        "per_run": op.run.as_dict(),
        "bottleneck": op.verdict.as_dict(),
        "per_instance_bytes": {"offchip_read": counters.offchip_read,
                               "offchip_write": counters.offchip_write,
                               "compulsory": counters.compulsory,
                               "sram_read": counters.sram_read,
                               "sram_write": counters.sram_write,
                               "sram_read_elements": counters.sram_read_elements},
        "totals": op.totals.as_dict(result.platform),
        **({"collective": {**asdict(lowered.collective),
                           "bytes_per_link": lowered.collective.bytes_per_link}}
           if lowered.collective else {}),
        **({"precision": lowered.precision.as_dict()} if lowered.precision else {}),
    }


def result_model(result: RunResult) -> RunResultFile:
    """The full result as the result model (simulator.present.results): manifest, per-operator
    records, per-layer_type and workload totals. Contains no wall-clock figure, so equal
    inputs give an equal model."""
    platform = result.platform
    members = result.operators_by_layer_type
    fusion = {"fusion": {"by_adjacency": result.fusion_adjacency,
                         "groups": [g.as_dict() for g in result.fusion]}} \
        if result.fusion else {}
    return RunResultFile.model_validate({
        "manifest": manifest(result),
        "operators": [_operator_record(op, result) for op in result.operators],
        "layer_types": {name: {**totals.as_dict(platform),
                               "bottleneck": dominant_bottleneck(members[name])}
                        for name, totals in result.by_layer_type.items()},
        "workload": {**result.total.as_dict(platform),
                     "bottleneck": dominant_bottleneck(result.operators)},
        **fusion,
    })


# The optional blocks a result may carry after its totals, in file order, each checked
# against its model (a multi-chip `system` block is system.sharded_run's, read in part).
OPTIONAL_BLOCKS = {"system": None, "llm": LlmFigures, "capacity": CapacityRecord,
                   "precision": PrecisionRecord, "power_cap": None}


def result_dict(result: RunResult, **blocks: dict | None) -> dict:
    """The JSON document of the full result, dumped from its model (result_model), with
    the optional blocks given (OPTIONAL_BLOCKS: system, llm, capacity, precision,
    power_cap)
    after it; a block not given is not written, so a plain run's file stays as it was."""
    document = result_model(result).dump()
    for key, model in OPTIONAL_BLOCKS.items():
        block = blocks.pop(key, None)
        if block is not None:
            document[key] = block if model is None else \
                model.model_validate(block).model_dump()
    if blocks:
        raise TypeError(f"no such result block: {', '.join(blocks)}")
    return document


def write_json(result: RunResult, path: str | Path, **blocks: dict | None) -> None:
    """The full result (result_dict) as indented JSON."""
    content = relocated(result_dict(result, **blocks), Path(path).parent)
    write_file(path, dump_json(content, indent=1) + "\n")


# Fractions are 0..1 and say so in their names (the tables print the same as percent).
CSV_FIELDS = ["name", "layer_type", "kind", "runs", "cycles", "time_s", "mfu_fraction",
              "memory_stall_fraction", "overhead_cycles", "fill_cycles",
              "input_stall_cycles", "output_stall_cycles", "drain_cycles",
              "useful_array_cycles", "padding_array_cycles", "fill_array_cycles",
              "stationary_load_array_cycles", "skew_array_cycles", "collective_cycles",
              "collective_sent_bytes", "offchip_read_bytes",
              "offchip_write_bytes", "compulsory_bytes", "refetch_ratio", "energy_j",
              "average_power_w", "bottleneck_class"]


def write_csv(result: RunResult, path: str | Path) -> None:
    """One row per operator with the CSV_FIELDS columns, and the optional terms'
    cycles where the workload has them."""
    total = result.total
    fields = CSV_FIELDS[:-1] + [term for term in OPTIONAL_TERMS if getattr(total, term)] \
        + CSV_FIELDS[-1:]
    rows = []
    for op in result.operators:
        record = _operator_record(op, result)
        rows.append({**record, **record["totals"], "mfu_fraction": record["totals"]["mfu"],
                     "bottleneck_class": op.verdict.bottleneck})
    write_file(path, csv_text(fields, rows, extrasaction="ignore"))


def _ratio(value: float, base: float) -> str:
    """value / base to two places; "-" against a zero base (a platform with no energy
    figures, say)."""
    return f"{value / base:.2f}" if base else "-"


# The runs of compare_table's columns kept together when it is split to fit.
COMPARE_GROUPS = (("latency ms", "x", "throughput /s"), ("MFU%", "stall%"),
                  ("energy mJ", "x", "avg W"), ("TFLOP/J", "x", "bottleneck"))


def compare_table(results: list[RunResult], labels: list[str] | None = None) -> Table:
    """Platforms side by side on one workload, with ratios to the first platform;
    `labels` name the rows (default: the platforms' names)."""
    labels = labels or [result.platform.name for result in results]
    table = Table(title=f"{results[0].inputs.workload.name}: platforms compared "
                  f"(x: ratio to {labels[0]})", title_justify="left",
                  show_edge=False, pad_edge=False)
    for header in ("platform", "latency ms", "x", "throughput /s", "MFU%", "stall%",
                   "energy mJ", "x", "avg W", "TFLOP/J", "x", "bottleneck"):
        table.add_column(header, justify="left" if header in ("platform", "bottleneck")
                         else "right", no_wrap=True)
    base = results[0].total.derived(results[0].platform)
    for label, result in zip(labels, results):
        d = result.total.derived(result.platform)
        table.add_row(
            label, f"{d['time_s'] * 1e3:,.3f}",
            _ratio(d['time_s'], base['time_s']), f"{1 / d['time_s']:,.1f}",
            f"{100 * d['mfu']:.1f}", f"{100 * d['memory_stall_fraction']:.1f}",
            f"{d['energy_j'] * 1e3:,.3f}", _ratio(d['energy_j'], base['energy_j']),
            f"{d['average_power_w']:,.1f}", f"{d['flops_per_joule'] / 1e12:,.3f}",
            _ratio(d['flops_per_joule'], base['flops_per_joule']),
            dominant_bottleneck(result.operators))
    return table
