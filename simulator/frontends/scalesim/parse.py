"""Parsing SCALE-Sim v3 files: topology CSVs (conv and GEMM) and `.cfg` configs.

Each is read as SCALE-Sim 3.0.0's own loaders read it (facts in
shared/reference/scalesim.md), with its sharp edges filed off: header spaces, trailing
commas, blank rows and rows of empty cells are accepted; a malformed row is an error
naming the file, the line and the column; a config missing sections is accepted with
the defaults reported. Nothing is dropped silently: every cell or field that does not
reach the model is listed in the import's notes.

Topology lowering, as SCALE-Sim's code does it:
- conv row `name, IFMAP H, IFMAP W, Filter H, Filter W, Channels, Num Filter, Stride`:
  ofmap = ceil((H - Fh + S) / S) per side, no padding, the one stride column for both
  sides, batch 1. GEMM view: M = ofmap_h * ofmap_w, N = Num Filter, K = Fh * Fw * C.
  accsim's Conv2d uses floor (DESIGN.md section 2), so the input is taken as
  H' = (ofmap_h - 1) * S + Fh (likewise W'), which is H itself when (H - Fh) % S == 0
  and otherwise H plus the S - (H - Fh) % S zero rows that SCALE-Sim's partial last
  window reaches past the input (it reads them as invalid addresses). floor on H' gives
  exactly SCALE-Sim's ofmap size, so M, N, K are SCALE-Sim's. Each such layer is named
  in the notes.
- a layer whose name contains `DP` is depthwise: SCALE-Sim expands it into `Channels`
  layers of one channel each that keep Num Filter; accsim imports one one-channel conv
  with `repeat: Channels` (identical layers are simulated once).
- GEMM row `name, M, N, K`: SCALE-Sim runs it as the conv [H=M, W=K, Fh=1, Fw=K, C=1,
  Num Filter=N, S=1], whose im2col matrix is the M x K input itself; accsim imports a
  gemm with the same M, N, K (same array cycles, same SRAM read counts, same M * K
  distinct input elements).
"""

from __future__ import annotations

import configparser
import math
import re
from dataclasses import dataclass, field

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import excerpt, validate_model
from simulator.inputs.workload import Workload
from simulator.numbers import decimal_float, decimal_int

CONV_COLUMNS = ("Layer name", "IFMAP Height", "IFMAP Width", "Filter Height",
                "Filter Width", "Channels", "Num Filter", "Strides")
GEMM_COLUMNS = ("Layer", "M", "N", "K")
_SPARSITY = re.compile(r"^\d+:\d+$")
HEADER_CELLS_SHOWN = 9  # of a header that is neither kind, quoted in the message


def _cells(line: str) -> list[str]:
    """Cells of a CSV line, stripped, without the trailing empty cells (trailing commas)."""
    cells = [cell.strip() for cell in line.split(",")]
    while cells and cells[-1] == "":
        cells.pop()
    return cells


def sniff_topology_kind(text: str, *, file: str) -> str:
    """'gemm' when the header reads Layer, M, N, K; 'conv' when it has the 8 conv
    columns; otherwise an error asking for --format."""
    lines = text.splitlines()
    header = _cells(lines[0]) if lines else []
    names = [cell.lower() for cell in header]
    if names[1:4] == ["m", "n", "k"]:
        return "gemm"
    if len(header) >= len(CONV_COLUMNS) and "ifmap" in " ".join(names[1:3]):
        return "conv"
    shown = ", ".join(excerpt(cell, 40) for cell in header[:HEADER_CELLS_SHOWN])
    more = f" and {len(header) - HEADER_CELLS_SHOWN:,} more" \
        if len(header) > HEADER_CELLS_SHOWN else ""
    raise AccsimError("cannot tell a SCALE-Sim conv topology (Layer name, IFMAP Height, "
                      "IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, "
                      "Strides) from a GEMM one (Layer, M, N, K) by its header "
                      f"{shown + more or '(empty)'}; pass --format scalesim-conv or "
                      "--format scalesim-gemm", file=file, field="line 1")


@dataclass(frozen=True)
class Row:
    """One topology row: its line, name and integer columns (in file order)."""

    line: int
    name: str
    values: tuple[int, ...]


@dataclass
class TopologyImport:
    kind: str                      # "conv" or "gemm"
    file: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)

    def workload(self, name: str) -> Workload:
        operators = []
        seen: dict[str, int] = {}
        extended = []
        for row in self.rows:
            op_name = row.name
            if op_name in seen:
                seen[op_name] += 1
                op_name = f"{row.name}#{seen[row.name]}"
                self.notes.append(f"line {row.line}: layer name {row.name!r} repeats an "
                                  f"earlier one; named {op_name!r}")
            else:
                seen[op_name] = 1
            if self.kind == "gemm":
                m, n, k = row.values
                operators.append(dict(name=op_name, layer_type="gemm", kind="gemm",
                                      m=m, n=n, k=k))
                continue
            h, w, fh, fw, c, nf, s = row.values
            ho, wo = -(-(h - fh + s) // s), -(-(w - fw + s) // s)
            h2, w2 = (ho - 1) * s + fh, (wo - 1) * s + fw
            if (h2, w2) != (h, w):
                extended.append(f"{op_name} {h}x{w}->{h2}x{w2}")
            depthwise = "DP" in row.name
            operators.append(dict(
                name=op_name, layer_type="conv.depthwise" if depthwise else "conv",
                kind="conv2d", h=h2, w=w2, cin=1 if depthwise else c, cout=nf, kh=fh,
                kw=fw, stride=s, padding=0, repeat=c if depthwise else 1))
            if depthwise:
                self.notes.append(f"line {row.line}: {op_name} contains 'DP': depthwise, "
                                  f"{c} one-channel layers of {nf} filters (repeat {c})")
        if extended:
            self.notes.append(
                "ceil output size (SCALE-Sim): input extended by the partial last "
                "window's rows/cols so accsim's floor gives the same ofmap, for "
                + ", ".join(extended))
        description = (f"SCALE-Sim {self.kind} topology {self.file}, imported by accsim "
                       "(simulator/frontends/scalesim/parse.py)")
        # Validated as a file would be: a bad layer is named, never a raw library error.
        return validate_model({"name": name, "description": description,
                               "operators": operators}, Workload, file=self.file)


def parse_topology(text: str, kind: str, *, file: str) -> TopologyImport:
    """Rows of a conv or GEMM topology; the first line is the header, as in SCALE-Sim."""
    columns = CONV_COLUMNS if kind == "conv" else GEMM_COLUMNS
    lines = text.splitlines()
    if not lines or not _cells(lines[0]):
        raise AccsimError("empty file: a SCALE-Sim topology starts with a header line",
                          file=file, field="line 1")
    header = [cell.strip() for cell in lines[0].split(",")]
    result = TopologyImport(kind, file, [])
    ignored: dict[int, str] = {}
    empty_rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = _cells(line)
        if not cells:
            if line.strip():
                empty_rows.append(str(number))
            continue
        if len(cells) < len(columns):
            column = len(cells) + 1
            raise AccsimError(
                f"missing value for {columns[column - 1]}: a {kind} row has "
                f"{len(columns)} columns ({', '.join(columns)}), this one {len(cells)}",
                file=file, field=f"line {number}, column {column}")
        if not cells[0]:
            raise AccsimError("empty layer name", file=file,
                              field=f"line {number}, column 1 ({columns[0]})")
        values = []
        for index in range(1, len(columns)):
            cell = cells[index]
            where = f"line {number}, column {index + 1} ({columns[index]})"
            try:  # ASCII digits only: int() also reads 4_0 as 40 and other scripts' digits
                value = decimal_int(cell)
            except ValueError:
                raise AccsimError(f"{cell!r} is not a whole number", file=file,
                                  field=where) from None
            if value <= 0:
                raise AccsimError(f"{value} must be positive", file=file, field=where)
            values.append(value)
        if kind == "conv":
            for dim, (size, filt) in (("Height", (values[0], values[2])),
                                      ("Width", (values[1], values[3]))):
                if filt > size:
                    raise AccsimError(f"Filter {dim} {filt} is larger than IFMAP {dim} "
                                      f"{size}", file=file,
                                      field=f"line {number}, column "
                                      f"{4 if dim == 'Height' else 5} (Filter {dim})")
        for index in range(len(columns), len(cells)):
            if cells[index]:
                name = header[index] if index < len(header) and header[index] else None
                if index == len(columns) and _SPARSITY.match(cells[index]):
                    name = "sparsity ratio N:M"
                ignored.setdefault(index + 1, name or "(no header)")
        result.rows.append(Row(number, cells[0], tuple(values)))
    if not result.rows:
        raise AccsimError(f"no layer rows after the header (a {kind} topology has rows "
                          f"of {', '.join(columns)})", file=file)
    if empty_rows:
        result.notes.append(f"rows of empty cells skipped: line {', '.join(empty_rows)} "
                            "(SCALE-Sim's own loader fails on them)")
    if ignored:
        listed = ", ".join(f"{column} ({name})" for column, name in sorted(ignored.items()))
        result.notes.append(f"not honoured: columns {listed}: accsim reads only the "
                            f"{len(columns)} {kind} columns (dense compute)")
    return result


# --- configs ---------------------------------------------------------------------------

# Each field of a SCALE-Sim 3.0.0 config: (section, key, default when absent, what accsim
# does with it). Defaults are SCALE-Sim's own (scale_config.__init__) except where noted.
# "->" fields are honoured; the others are listed as not honoured in every import.
CONFIG_FIELDS: list[tuple[str, str, str | None, str]] = [
    ("general", "run_name", None, "-> platform name (default: the file's name)"),
    ("architecture_presets", "ArrayHeight", "4", "-> systolic_array.rows"),
    ("architecture_presets", "ArrayWidth", "4", "-> systolic_array.cols"),
    ("architecture_presets", "IfmapSramSzkB", "256",
     "-> buffers.ifmap_bytes = value * 1024 (KiB of 1-byte words)"),
    ("architecture_presets", "FilterSramSzkB", "256",
     "-> buffers.weight_bytes = value * 1024"),
    ("architecture_presets", "OfmapSramSzkB", "128",
     "-> buffers.output_bytes = value * 1024"),
    ("architecture_presets", "Dataflow", "ws",
     "-> systolic_array.dataflows, this one first (the default), then the other two"),
    ("architecture_presets", "Bandwidth", "10",
     "-> offchip.bandwidth_gbps = words/cycle * 1 byte * 1 GHz, for reads and writes "
     "(first value of a list; SCALE-Sim uses it only for ofmap writes in USER mode, "
     "and not at all in CALC mode; default 10, the words/cycle SCALE-Sim's CALC mode "
     "assumes for ifmap and filter DRAM)"),
    ("architecture_presets", "IfmapOffset", "0", "trace addresses only"),
    ("architecture_presets", "FilterOffset", "10000000", "trace addresses only"),
    ("architecture_presets", "OfmapOffset", "20000000", "trace addresses only"),
    ("architecture_presets", "ReadRequestBuffer", "60",
     "SCALE-Sim's DRAM request queues; accsim has one off-chip server"),
    ("architecture_presets", "WriteRequestBuffer", "60",
     "SCALE-Sim's DRAM request queues; accsim has one off-chip server"),
    ("architecture_presets", "MemoryBanks", None, "not read by SCALE-Sim 3.0.0 either"),
    ("architecture_presets", "OnChipMemoryBanks", None,
     "not read by SCALE-Sim 3.0.0 either"),
    ("architecture_presets", "OnChipMemoryBankPorts", None,
     "not read by SCALE-Sim 3.0.0 either"),
    ("layout", "IfmapCustomLayout", "False", "SRAM bank layouts are not modelled"),
    ("layout", "FilterCustomLayout", "False", "SRAM bank layouts are not modelled"),
    ("layout", "IfmapSRAMBankBandwidth", "10",
     "SCALE-Sim's SRAM-fill bandwidths in USER mode; accsim has one off-chip server "
     "at Bandwidth"),
    ("layout", "IfmapSRAMBankNum", "10", "SRAM banks are not modelled"),
    ("layout", "IfmapSRAMBankPort", "2", "SRAM banks are not modelled"),
    ("layout", "FilterSRAMBankBandwidth", "10",
     "SCALE-Sim's SRAM-fill bandwidths in USER mode; accsim has one off-chip server "
     "at Bandwidth"),
    ("layout", "FilterSRAMBankNum", "10", "SRAM banks are not modelled"),
    ("layout", "FilterSRAMBankPort", "2", "SRAM banks are not modelled"),
    ("sparsity", "SparsitySupport", "false", "sparsity is not modelled"),
    ("sparsity", "SparseRep", None, "sparsity is not modelled"),
    ("sparsity", "OptimizedMapping", "false", "sparsity is not modelled"),
    ("sparsity", "BlockSize", "4", "sparsity is not modelled"),
    ("sparsity", "RandomNumberGeneratorSeed", "40", "sparsity is not modelled"),
    ("run_presets", "InterfaceBandwidth", "CALC",
     "accsim always models off-chip reads and writes at Bandwidth (SCALE-Sim's CALC "
     "mode lets reads never stall; USER mode stalls them at the [layout] bank "
     "bandwidths)"),
    ("run_presets", "UseRamulatorTrace", "False", "no DRAM simulator is attached"),
    ("network_presets", "TopologyCsvLoc", None, "pass the topology with --workload"),
]
_HONOURED = {(s, k.lower()) for s, k, _, what in CONFIG_FIELDS if what.startswith("->")}
_KNOWN = {(s, k.lower()): (k, d, w) for s, k, d, w in CONFIG_FIELDS}

# What a Platform needs that no SCALE-Sim config says (taken from the template platform,
# edge_32x32, SCALE-Sim's example architecture with cited assumptions).
ASSUMED = [
    "clock 1 GHz (SCALE-Sim counts cycles only; cycles equal ns, words/cycle equal GB/s)",
    "int8 input, accumulator and output words (SCALE-Sim's word size is 1 byte for "
    "every operand)",
    "DMA setup 0 cycles and off-chip latency 0 cycles (SCALE-Sim has neither)",
    "vector unit and energy table of edge_32x32 (SCALE-Sim has neither)",
    "one array with SCALE-Sim's fold model: every fold pays its fill (fold_model: "
    "scalesim, count: 1)",
]


@dataclass
class ConfigImport:
    file: str
    values: dict[tuple[str, str], str]          # (section, key lower) -> raw value
    name: str
    rows: int
    cols: int
    ifmap_kb: int
    filter_kb: int
    ofmap_kb: int
    dataflow: str
    bandwidth: float
    honoured: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    defaults: list[str] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        lines = [f"SCALE-Sim config {self.file} -> platform {self.name!r}"]
        lines += [f"  honoured: {text}" for text in self.honoured]
        reasons: dict[str, list[str]] = {}
        for text in self.ignored:
            what, _, why = text.partition(": ")
            reasons.setdefault(why, []).append(what)
        lines += [f"  not honoured ({why}): {', '.join(whats)}" if why else
                  f"  not honoured: {', '.join(whats)}" for why, whats in reasons.items()]
        lines += [f"  default (absent from the file): {text}" for text in self.defaults]
        lines += [f"  assumed (no SCALE-Sim field): {text}" for text in ASSUMED]
        return lines

    def platform(self, template: Platform) -> Platform:
        data = template.model_dump()
        others = [d for d in ("os", "ws", "is") if d != self.dataflow]
        data["name"] = self.name
        ignored = ", ".join(text.partition(": ")[0] for text in self.ignored) or "none"
        defaults = "; ".join(self.defaults) or "none"
        data["description"] = (f"Imported from SCALE-Sim config {self.file}. Not "
                               f"honoured: {ignored}. Defaults used: {defaults}.")
        data["clock_ghz"] = 1.0
        array = data["systolic_array"]
        array.update(rows=self.rows, cols=self.cols, dataflows=[self.dataflow, *others],
                     input_dtypes=["int8"], accumulator_dtype="int8", output_dtype="int8",
                     count=1, fold_model="scalesim")
        data["buffers"] = {"ifmap_bytes": self.ifmap_kb * 1024,
                           "weight_bytes": self.filter_kb * 1024,
                           "output_bytes": self.ofmap_kb * 1024}
        data["activation_memory_bytes"] = None
        data["dma"] = {"setup_cycles": 0}
        data["offchip"] = {"bandwidth_gbps": float(self.bandwidth), "latency_cycles": 0}
        return validate_model(data, Platform, file=self.file)


def _config_error(exc: configparser.Error, file: str) -> AccsimError:
    line = getattr(exc, "lineno", None)
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return AccsimError(f"malformed SCALE-Sim config: {excerpt(text, 160)}", file=file,
                       field=f"line {line}" if line else None)


def parse_config(text: str, *, file: str) -> ConfigImport:
    """Read a `.cfg` as SCALE-Sim's configparser does (keys case-insensitive, `:` or
    `=`), accepting missing sections and fields with the defaults reported."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=file)
    except configparser.Error as exc:
        raise _config_error(exc, file) from None
    if not parser.sections():
        raise AccsimError("no SCALE-Sim sections ([general], [architecture_presets], ...): "
                          "an empty config describes no accelerator", file=file)
    values = {(section, key): value.strip() for section in parser.sections()
              for key, value in parser.items(section)}
    stem = file.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    honoured, ignored, defaults = [], [], []
    for section in ("general", "architecture_presets", "layout", "sparsity",
                    "run_presets"):
        if not parser.has_section(section):
            defaults.append(f"[{section}] section absent")

    def get(section: str, key: str) -> str | None:
        raw = values.get((section, key.lower()))
        if raw is None:
            default = _KNOWN[(section, key.lower())][1]
            if default is not None and (section, key.lower()) in _HONOURED:
                defaults.append(f"{section}.{key} = {default}")
            return default
        return raw

    def positive(section: str, key: str):
        raw = get(section, key)
        try:
            value = decimal_int(raw)
        except (TypeError, ValueError):
            raise AccsimError(f"{excerpt(raw)} is not a whole number",
                              file=file, field=f"{section}.{key}") from None
        if not value > 0 or not math.isfinite(value):
            raise AccsimError(f"{excerpt(raw)} must be positive and finite", file=file,
                              field=f"{section}.{key}")
        return value

    name = values.get(("general", "run_name")) or stem
    rows = positive("architecture_presets", "ArrayHeight")
    cols = positive("architecture_presets", "ArrayWidth")
    sizes = [positive("architecture_presets", key)
             for key in ("IfmapSramSzkB", "FilterSramSzkB", "OfmapSramSzkB")]
    dataflow = (get("architecture_presets", "Dataflow") or "").strip().lower()
    if dataflow not in ("os", "ws", "is"):
        raise AccsimError(f"dataflow {excerpt(dataflow)} is not one of os, ws, is",
                          file=file,
                          field="architecture_presets.Dataflow")
    raw_bw = get("architecture_presets", "Bandwidth")
    first_bw = raw_bw.split(",")[0].strip()
    try:
        bandwidth = decimal_float(first_bw)
    except ValueError:
        raise AccsimError(f"{excerpt(raw_bw)} is not a number (words per cycle)",
                          file=file,
                          field="architecture_presets.Bandwidth") from None
    if not bandwidth > 0 or not math.isfinite(bandwidth):
        raise AccsimError(f"{excerpt(raw_bw)} must be positive and finite", file=file,
                          field="architecture_presets.Bandwidth")
    honoured += [f"ArrayHeight x ArrayWidth = {rows}x{cols} -> systolic_array rows x cols",
                 f"Ifmap/Filter/OfmapSramSzkB = {sizes[0]}/{sizes[1]}/{sizes[2]} KiB of "
                 "1-byte words -> buffers ifmap/weight/output_bytes = "
                 f"{sizes[0] * 1024}/{sizes[1] * 1024}/{sizes[2] * 1024}",
                 f"Dataflow = {dataflow} -> the default dataflow",
                 f"Bandwidth = {raw_bw} words/cycle -> offchip.bandwidth_gbps = "
                 f"{bandwidth:g} (1-byte words at 1 GHz), reads and writes"]
    if "," in raw_bw:
        ignored.append(f"architecture_presets.Bandwidth = {raw_bw} after the first "
                       "value: accsim has one off-chip server")
    for (section, key), raw in values.items():
        known = _KNOWN.get((section, key))
        if known is None:
            ignored.append(f"{section}.{key} = {raw}: unknown to SCALE-Sim 3.0.0")
        elif (section, key) not in _HONOURED:
            ignored.append(f"{section}.{known[0]} = {raw}: {known[2]}")
    if values.get(("sparsity", "sparsitysupport"), "false").lower() == "true":
        ignored.append("sparsity.SparsitySupport = true: SCALE-Sim would simulate sparse "
                       "filters, accsim's cycles are for the dense layer")
    return ConfigImport(file, values, name, rows, cols, *sizes, dataflow, bandwidth,
                        honoured, ignored, defaults)
