"""accsim against SCALE-Sim v3, side by side: compute cycles and SRAM reads exactly,
stalls as a trend, and wall time.

Runs in the environment of the `validate` extra, which has both accsim and SCALE-Sim
(scalesim==3.0.0 needs numpy<2.4, so it lives apart from accsim's own venv):

    bash experiments/scalesim_env.sh                    # once: builds .venv-scalesim/
    .venv-scalesim/bin/python experiments/validate_scalesim.py            # everything
    .venv-scalesim/bin/python -m simulator.cli compile  # the kernel library, once
    .venv-scalesim/bin/python experiments/validate_scalesim.py --only alexnet \\
        --arrays 32x32 --full alexnet:scale.cfg --scalesim-command
    # SCALE-Sim's stalls in USER mode (it is CALC in scale.cfg): ~18 CPU minutes
    .venv-scalesim/bin/python experiments/validate_scalesim.py --no-compute \\
        --full alexnet:scale.cfg:USER

Two parts:
1. Compute check, every layer of every topology x dataflow x array: accsim in
   `--validate scalesim` mode (one tile per GEMM, unbounded buffers) against SCALE-Sim's
   own compute modules (operand_matrix + systolic_compute_{os,ws,is}): its demand rows
   D = Total Cycles - Stall Cycles + 1, and its ifmap / filter SRAM read counters. Its
   per-cycle memory loop is skipped. Its classes are run unchanged except that the three
   demand matrices are kept as their shapes only (`ShapeOnly` below): os and is build them
   by concatenating every fold onto the running matrix, O(folds^2) copying (terabytes
   for yolo_tiny at 32x32), and only the row count D is read. `--shim-check-mb` reruns the
   unmodified classes on layers small enough and asserts the same D and counts. A layer
   whose matrices would not fit `--memory-gb` is listed as skipped with its size.
2. Full runs (`--full TOPOLOGY:CONFIG`, small topologies or the first N layers): the whole
   SCALE-Sim (its scalesim API, traces off) in a separate process, timed per layer and
   whole; its COMPUTE_REPORT and DETAILED_ACCESS_REPORT against accsim's validate mode
   (exact), and its Stall Cycles against accsim's stalls under its default tiler on the
   same config (a trend; see STALL_REASONS). Then `accsim run` on the same files as a
   whole process, with the kernel library (`accsim compile`) and with the JIT; with one
   tiling per layer as SCALE-Sim runs one (FIXED_TILING_RUNS), where the default run
   searches dozens; and with --scalesim-command SCALE-Sim's own command too (it saves
   traces).

SCALE-Sim's loader fails on the shipped Resnet50.csv (a row of empty cells, extra
columns) and on rows without a trailing comma: it gets a cleaned copy written from the
rows accsim parsed; accsim reads the original file. Writes compute.csv, full.csv,
summary.txt and stalls.png under --out.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.mapping.plan import Mapping  # noqa: E402
from simulator.frontends.scalesim import (load_config, load_topology, scalesim_rows,  # noqa: E402
                                validate_mapping, validate_platform)
from simulator.search.default import MAX_SIMULATED, SEEDS  # noqa: E402
from simulator.simulate import Inputs, simulate  # noqa: E402
from simulator.inputs.workload import Workload  # noqa: E402

# SCALE-Sim's configs and topologies as copied into this repository (MIT, see its
# README); point --topologies / --configs at SCALE-Sim's own folders for its full set.
DATA = ROOT / "tests" / "data" / "scalesim"
DATAFLOWS = ("os", "ws", "is")
# `accsim run` with one tiling per layer, as SCALE-Sim runs one (name: options).
FIXED_TILING_RUNS = {"validate scalesim": ("--validate", "scalesim"),
                     "heuristic array_aligned": ("--heuristic", "array_aligned")}
DEFAULT_ARRAYS = ("32x32", "256x256", "64x16")
STALL_REASONS = [
    "SCALE-Sim prefetches the first half of each buffer before cycle 0 and does not count "
    "it; accsim starts every operator with empty buffers and counts the first load as "
    "fill (google.cfg's 6 MB buffers hold alexnet's operands: 0 stalls there, while "
    "accsim's stalls are about its off-chip bytes / Bandwidth)",
    "in CALC mode (scale.cfg, eyeriss.cfg) SCALE-Sim's reads never stall, only ofmap "
    "writes can; accsim always serves reads and writes at Bandwidth on one server",
    "in USER mode SCALE-Sim reads at the [layout] bank bandwidths and adds a positive wait "
    "twice in its stall accounting; accsim has one server at Bandwidth",
    "SCALE-Sim fetches the im2col stream (an input element once per window that uses it) "
    "fold by fold into half-buffers, refetching what they evicted, and in ws writes the "
    "ofmap once per K fold (partial sums); accsim moves the tiles of its default tiler "
    "with LRU reuse, counts a conv's real input window, and keeps partial sums in the "
    "output buffer (see the dram columns of full.csv)",
    "SCALE-Sim's Total Cycles ends at the last ofmap SRAM write; accsim's total includes "
    "the final store to off-chip memory (the store tail)",
]


# --- SCALE-Sim side --------------------------------------------------------------------

def _require_scalesim():
    try:
        importlib.import_module("scalesim.compute.systolic_compute_os")
    except ImportError:
        sys.exit("scalesim is not importable here: run this script with the validate "
                 "extra's environment (bash experiments/scalesim_env.sh, then "
                 ".venv-scalesim/bin/python experiments/validate_scalesim.py)")


class Rows:
    """A demand matrix kept as its shape: concatenating onto it adds rows, no copy."""

    def __init__(self, rows: int, cols: int):
        self.shape = (rows, cols)

    def __array_function__(self, func, types, args, kwargs):
        import numpy as np
        if func is not np.concatenate:
            return NotImplemented
        axis = kwargs.get("axis", args[1] if len(args) > 1 else 0)
        assert axis == 0, "only row concatenation is expected"
        arrays = args[0]
        return Rows(sum(a.shape[0] for a in arrays), arrays[-1].shape[1])


def shape_only(cls):
    """A subclass of a SCALE-Sim compute class whose three demand matrices keep only
    their shapes; every line of its own code runs unchanged."""
    class ShapeOnly(cls):
        pass

    for attr in ("ifmap_demand_matrix", "filter_demand_matrix", "ofmap_demand_matrix"):
        private = f"_{attr}_shape"

        def getter(self, private=private):
            return getattr(self, private)

        def setter(self, value, private=private):
            setattr(self, private, value if isinstance(value, Rows)
                    else Rows(*value.shape))

        setattr(ShapeOnly, attr, property(getter, setter))
    ShapeOnly.__name__ = f"ShapeOnly_{cls.__name__}"
    return ShapeOnly


def scalesim_config(rows: int, cols: int, dataflow: str):
    from scalesim.scale_config import scale_config
    config = scale_config()
    config.set_arr_dims(rows=rows, cols=cols)
    config.set_dataflow(dataflow)
    config.force_valid()
    return config


def scalesim_topology(clean_path: Path, gemm: bool):
    from scalesim.topology_utils import topologies
    topo = topologies()
    topo.load_arrays(topofile=str(clean_path), mnk_inputs=gemm)
    return topo


def compute_module(config, topo, layer_id: int, unmodified: bool = False) -> dict:
    """D and SRAM counters of one layer from SCALE-Sim's compute modules, as its
    single_layer_sim.run() sets them up, without the prefetch matrices or memory loop."""
    from scalesim.compute.operand_matrix import operand_matrix
    from scalesim.compute.systolic_compute_is import systolic_compute_is
    from scalesim.compute.systolic_compute_os import systolic_compute_os
    from scalesim.compute.systolic_compute_ws import systolic_compute_ws
    from scalesim.layout_utils import layouts
    started = time.perf_counter()
    op_mat = operand_matrix()
    op_mat.set_params(config_obj=config, topoutil_obj=topo, layoututil_obj=layouts(),
                      layer_id=layer_id)
    _, ifmap = op_mat.get_ifmap_matrix()
    _, filt = op_mat.get_filter_matrix()
    _, ofmap = op_mat.get_ofmap_matrix()
    dataflow = config.get_dataflow()
    cls = {"os": systolic_compute_os, "ws": systolic_compute_ws,
           "is": systolic_compute_is}[dataflow]
    compute = cls() if unmodified else shape_only(cls)()
    if dataflow == "ws":
        compute.set_params(config_obj=config, ifmap_op_mat=ifmap, filter_op_mat=filt,
                           ofmap_op_mat=ofmap,
                           ifmap_op_mat_original=op_mat.ifmap_addr_matrix_original,
                           sparsity_filter_array=op_mat.sparse_filter_array)
    else:
        compute.set_params(config_obj=config, ifmap_op_mat=ifmap, filter_op_mat=filt,
                           ofmap_op_mat=ofmap)
    compute.create_demand_matrices()
    return {"D": int(compute.ifmap_demand_matrix.shape[0]),
            "ifmap_reads": int(compute.get_ifmap_requests()),
            "filter_reads": int(compute.get_filter_requests()),
            "ofmap_writes": int(compute.get_ofmap_requests()),
            "seconds": time.perf_counter() - started}


def estimate_bytes(m: int, n: int, k: int, rows: int, cols: int, dataflow: str,
                   unmodified: bool = False) -> tuple[int, int]:
    """(peak bytes, bytes copied) of SCALE-Sim's compute module on one layer, roughly:
    operand matrices and their temporaries, per-fold arrays, and the demand matrices
    that ws keeps whole (os and is too when unmodified)."""
    sr, sc, t = {"os": (m, n, k), "ws": (k, n, m), "is": (k, m, n)}[dataflow]
    folds = math.ceil(sr / rows) * math.ceil(sc / cols)
    fill = rows + cols - 2 if dataflow == "os" else 2 * rows + cols - 2
    d = folds * (t + fill)
    width = rows + 2 * cols
    operands = 8 * (12 * m * k + 2 * k * n + 2 * m * n)
    per_fold = 8 * 6 * (t + 2 * rows + cols) * max(rows, cols)
    whole = 8 * d * width                  # all three demand matrices
    largest = 8 * d * max(rows, cols)      # the largest one
    if dataflow == "ws":                   # each built from a list of folds, then joined
        peak = operands + per_fold + 2 * largest
    elif unmodified:                       # all kept; each fold copies the running one
        peak = operands + per_fold + whole + largest
    else:                                  # shapes only (ShapeOnly)
        peak = operands + per_fold
    copied = folds * whole // 2 if unmodified and dataflow != "ws" else 2 * whole
    return peak, copied


def clean_copy(parsed, path: Path, first: int | None = None) -> Path:
    """The rows accsim parsed, as SCALE-Sim's loader wants them: its header, the known
    columns only, a trailing comma on every row, no empty rows."""
    if parsed.kind == "gemm":
        header = "Layer, M, N, K,"
    else:
        header = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
                  "Channels, Num Filter, Strides,")
    rows = parsed.rows[:first] if first else parsed.rows
    lines = [header] + [",".join([row.name, *map(str, row.values)]) + "," for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def expand_layers(workload: Workload) -> list:
    """accsim operators in SCALE-Sim's layer order (a DP layer once per channel)."""
    out = []
    for op in workload.operators:
        out += [op] * (op.repeat if op.layer_type == "conv.depthwise" else 1)
    return out


def with_array(platform, rows: int, cols: int, dataflow: str):
    data = platform.model_dump()
    data["systolic_array"].update(rows=rows, cols=cols, dataflows=[
        dataflow, *[d for d in DATAFLOWS if d != dataflow]])
    return type(platform).model_validate(data)


# --- part 1: compute modules -----------------------------------------------------------

def accsim_validate(platform, workload, dataflow: str) -> tuple[dict, float]:
    vp = validate_platform(platform, workload)
    started = time.perf_counter()
    result = simulate(Inputs(vp, workload, validate_mapping(workload, vp, dataflow)))
    return {row["name"]: row for row in scalesim_rows(result)}, \
        time.perf_counter() - started


def compute_check(args, tmp: Path) -> list[dict]:
    base, _, _ = load_config(str(args.configs / "scale.cfg"))
    records = []
    for topo_path in sorted(args.topologies.glob("*.csv")):
        if args.only and topo_path.stem not in args.only:
            continue
        workload, _, parsed = load_topology(str(topo_path))
        if args.first:
            workload = Workload(name=workload.name,
                                operators=workload.operators[:args.first])
        clean = clean_copy(parsed, tmp / f"{topo_path.stem}.clean.csv", args.first)
        topo = scalesim_topology(clean, parsed.kind == "gemm")
        layers = expand_layers(workload)
        assert len(layers) == topo.get_num_layers(), "layer lists differ"
        for array in args.arrays:
            rows, cols = map(int, array.split("x"))
            for dataflow in args.dataflows:
                platform = with_array(base, rows, cols, dataflow)
                ours, ours_s = accsim_validate(platform, workload, dataflow)
                config = scalesim_config(rows, cols, dataflow)
                for layer_id, op in enumerate(layers):
                    g = op.gemm()
                    mine = ours[op.name]
                    record = {"topology": topo_path.stem, "array": array,
                              "dataflow": dataflow, "layer": topo.topo_arrays[layer_id][0],
                              "M": g.m, "N": g.n, "K": g.k,
                              "ours_compute": mine["compute_cycles"],
                              "ours_ifmap_reads": mine["ifmap_sram_reads"],
                              "ours_filter_reads": mine["filter_sram_reads"],
                              "ours_s": ours_s / len(layers)}
                    peak, _ = estimate_bytes(g.m, g.n, g.k, rows, cols, dataflow)
                    if peak > args.memory_gb * 2**30:
                        record["status"] = (f"skipped: SCALE-Sim's compute module needs "
                                            f"~{peak / 2**30:.1f} GiB > {args.memory_gb} "
                                            f"GiB (M={g.m} N={g.n} K={g.k})")
                        records.append(record)
                        print(f"{record['topology']} {array} {dataflow} "
                              f"{record['layer']}: {record['status']}", flush=True)
                        continue
                    theirs = compute_module(config, topo, layer_id)
                    _, copied = estimate_bytes(g.m, g.n, g.k, rows, cols, dataflow, True)
                    if copied <= args.shim_check_mb * 2**20:
                        plain = compute_module(config, topo, layer_id, unmodified=True)
                        assert {k: v for k, v in plain.items() if k != "seconds"} == \
                            {k: v for k, v in theirs.items() if k != "seconds"}, \
                            f"shape-only and unmodified modules differ: {plain} {theirs}"
                        record["shim_checked"] = 1
                    record.update(theirs_D=theirs["D"],
                                  theirs_ifmap_reads=theirs["ifmap_reads"],
                                  theirs_filter_reads=theirs["filter_reads"],
                                  theirs_s=theirs["seconds"])
                    matched = (mine["compute_cycles"] == theirs["D"]
                               and mine["ifmap_sram_reads"] == theirs["ifmap_reads"]
                               and mine["filter_sram_reads"] == theirs["filter_reads"])
                    record["status"] = "match" if matched else "MISMATCH"
                    records.append(record)
                    if not matched:
                        print(f"MISMATCH {record}", flush=True)
                print(f"{topo_path.stem} {array} {dataflow}: "
                      f"{sum(r['status'] == 'match' for r in records[-len(layers):])}"
                      f"/{len(layers)} layers matched", flush=True)
    return records


# --- part 2: full SCALE-Sim runs -------------------------------------------------------

WORKER = r"""
import json, sys, time
from scalesim.scale_sim import scalesim
from scalesim.single_layer_sim import single_layer_sim
times = []
plain_run = single_layer_sim.run
def timed_run(self):
    started = time.perf_counter()
    plain_run(self)
    times.append(time.perf_counter() - started)
single_layer_sim.run = timed_run  # measures, changes nothing
config, topology, layout, out, gemm = sys.argv[1:6]
sim = scalesim(save_disk_space=True, verbose=False, config=config, topology=topology,
               layout=layout, input_type_gemm=gemm == "gemm")
sim.run_scale(top_path=out)
json.dump({"layer_seconds": times, "run_name": sim.config.get_run_name()},
          open(out + "/times.json", "w"))
"""


def scalesim_cfg_text(imp, rows=None, cols=None, dataflow=None, mode=None) -> str:
    """A config SCALE-Sim 3.0.0 parses, with every section present: the imported
    values, and the file's own for everything accsim does not honour (InterfaceBandwidth
    replaced by `mode` when given)."""
    v = imp.values

    def raw(section, key, default):
        return v.get((section, key.lower()), default)

    mode = mode or raw("run_presets", "InterfaceBandwidth", "CALC")
    return f"""[general]
run_name = {imp.name.replace(' ', '_')}

[architecture_presets]
ArrayHeight: {rows or imp.rows}
ArrayWidth: {cols or imp.cols}
IfmapSramSzkB: {imp.ifmap_kb}
FilterSramSzkB: {imp.filter_kb}
OfmapSramSzkB: {imp.ofmap_kb}
IfmapOffset: {raw('architecture_presets', 'IfmapOffset', 0)}
FilterOffset: {raw('architecture_presets', 'FilterOffset', 10000000)}
OfmapOffset: {raw('architecture_presets', 'OfmapOffset', 20000000)}
Bandwidth : {raw('architecture_presets', 'Bandwidth', 10)}
Dataflow : {dataflow or imp.dataflow}
ReadRequestBuffer: {raw('architecture_presets', 'ReadRequestBuffer', 60)}
WriteRequestBuffer: {raw('architecture_presets', 'WriteRequestBuffer', 60)}

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {raw('layout', 'IfmapSRAMBankBandwidth', 10)}
IfmapSRAMBankNum: {raw('layout', 'IfmapSRAMBankNum', 10)}
IfmapSRAMBankPort: {raw('layout', 'IfmapSRAMBankPort', 2)}
FilterCustomLayout: False
FilterSRAMBankBandwidth: {raw('layout', 'FilterSRAMBankBandwidth', 10)}
FilterSRAMBankNum: {raw('layout', 'FilterSRAMBankNum', 10)}
FilterSRAMBankPort: {raw('layout', 'FilterSRAMBankPort', 2)}

[sparsity]
SparsitySupport : false

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""


def read_report(path: Path) -> list[list[str]]:
    lines = path.read_text().splitlines()[1:]
    return [[cell.strip() for cell in line.split(",")] for line in lines if line.strip()]


def empty_layout(tmp: Path) -> Path:
    """A layout file of no layers: SCALE-Sim needs one even with layouts off."""
    layout = tmp / "layout.csv"
    layout.write_text("Layer name,\n")
    return layout


def run_scalesim_full(cfg: Path, topo: Path, gemm: bool, tmp: Path) -> dict:
    """The whole SCALE-Sim in its own process: per-layer reports and times, wall time."""
    layout = empty_layout(tmp)
    out = Path(tempfile.mkdtemp(dir=tmp))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", WORKER, str(cfg), str(topo), str(layout),
                    str(out), "gemm" if gemm else "conv"], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    info = json.loads((out / "times.json").read_text())
    report_dir = out / info["run_name"]
    compute = read_report(report_dir / "COMPUTE_REPORT.csv")
    detail = read_report(report_dir / "DETAILED_ACCESS_REPORT.csv")
    layers = []
    for c_row, d_row, seconds in zip(compute, detail, info["layer_seconds"]):
        layers.append({"total": int(c_row[2]), "stall": int(c_row[3]),
                       "ifmap_reads": int(d_row[3]), "filter_reads": int(d_row[6]),
                       "ofmap_writes": int(d_row[9]),
                       "dram_reads": int(d_row[12]) + int(d_row[15]),
                       "dram_writes": int(d_row[18]), "seconds": seconds})
    return {"layers": layers, "wall": wall}


def accsim_run_seconds(cfg: Path, topo: Path, tmp: Path, library: bool,
                       options: tuple[str, ...] = ()) -> float:
    """`accsim run` on SCALE-Sim's files (and `options`) as a whole process, best of 3,
    with the kernel library (when current; `accsim compile` builds it) or with the
    JIT."""
    env = {**os.environ, "ACCSIM_KERNEL_LIBRARY": "1" if library else "0"}
    return best_of(lambda: subprocess.run(
        [sys.executable, "-m", "simulator.cli", "run", "--arch", str(cfg), "--workload",
         str(topo), *options], check=True, stdout=subprocess.DEVNULL, cwd=tmp, env=env), 3)


def library_current() -> bool:
    return subprocess.run([sys.executable, "-m", "simulator.cli", "compile", "--check"],
                          stdout=subprocess.DEVNULL).returncode == 0


def run_scalesim_command(cfg: Path, topo: Path, gemm: bool, tmp: Path) -> float:
    """Wall seconds of SCALE-Sim as its README runs it, `python -m scalesim.scale`: it
    always saves its per-cycle traces (its -s flag is read but not used)."""
    layout = empty_layout(tmp)
    out = Path(tempfile.mkdtemp(dir=tmp))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "scalesim.scale", "-c", str(cfg), "-t",
                    str(topo), "-l", str(layout), "-p", str(out), "-i",
                    "gemm" if gemm else "conv"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def rank_correlation(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rho (ties averaged); None when either side is constant."""
    def ranks(values):
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def full_runs(args, tmp: Path) -> tuple[list[dict], list[str]]:
    records, lines = [], []
    for spec in args.full:
        topo_name, cfg_name, *mode = spec.split(":")
        label = ":".join([cfg_name, *mode])
        topo_path = args.topologies / f"{topo_name}.csv"
        cfg_path = args.configs / cfg_name
        platform, _, imp = load_config(str(cfg_path))
        workload, _, parsed = load_topology(str(topo_path))
        if args.first:
            workload = Workload(name=workload.name,
                                operators=workload.operators[:args.first])
        clean = clean_copy(parsed, tmp / f"{topo_name}.full.csv", args.first)
        cfg = tmp / f"{cfg_path.stem}.complete.cfg"
        cfg.write_text(scalesim_cfg_text(imp, mode=mode[0] if mode else None))
        print(f"full SCALE-Sim run: {topo_name} on {label} ...", flush=True)
        theirs = run_scalesim_full(cfg, clean, parsed.kind == "gemm", tmp)
        dataflow = imp.dataflow
        ours, _ = accsim_validate(platform, workload, dataflow)
        tiled = simulate(Inputs(platform, workload, Mapping()))
        tiled_rows = {row["name"]: row for row in scalesim_rows(tiled)}
        tiled_totals = {op.lowered.name: op.totals for op in tiled.operators}
        layers = expand_layers(workload)
        for op, their in zip(layers, theirs["layers"]):
            single = Workload(name=op.name, operators=[op])
            vp = validate_platform(platform, single)
            vm = validate_mapping(single, vp, dataflow)
            simulate(Inputs(platform, single, Mapping()))  # warm
            ours_s = max(best_of(lambda: simulate(Inputs(platform, single, Mapping())), 5),
                         best_of(lambda: simulate(Inputs(vp, single, vm)), 5))
            mine = ours[op.name]
            match = (mine["compute_cycles"] == their["total"] - their["stall"] + 1
                     and mine["ifmap_sram_reads"] == their["ifmap_reads"]
                     and mine["filter_sram_reads"] == their["filter_reads"])
            tiled_row = tiled_rows[op.name]
            records.append({
                "topology": topo_name, "config": label, "dataflow": dataflow,
                "layer": op.name, "ours_compute": mine["compute_cycles"],
                "theirs_total_minus_stall_plus_1": their["total"] - their["stall"] + 1,
                "ours_ifmap_reads": mine["ifmap_sram_reads"],
                "theirs_ifmap_reads": their["ifmap_reads"],
                "ours_filter_reads": mine["filter_sram_reads"],
                "theirs_filter_reads": their["filter_reads"],
                "theirs_ofmap_writes": their["ofmap_writes"],
                "ours_stall_default_tiler": tiled_row["stall_cycles"],
                "theirs_stall": their["stall"],
                "ours_total_default_tiler": tiled_row["compute_cycles"]
                + tiled_row["stall_cycles"],
                "theirs_total_plus_1": their["total"] + 1,
                # words are 1 byte on both sides; accsim's figures are per run
                "ours_offchip_read_bytes": tiled_totals[op.name].offchip_read_bytes
                // op.repeat,
                "theirs_dram_reads": their["dram_reads"],
                "ours_offchip_write_bytes": tiled_totals[op.name].offchip_write_bytes
                // op.repeat,
                "theirs_dram_writes": their["dram_writes"],
                "ours_s": ours_s, "theirs_s": their["seconds"],
                "speedup": their["seconds"] / ours_s,
                "status": "match" if match else "MISMATCH"})
        ours_proc = {library: accsim_run_seconds(cfg_path, topo_path, tmp, library)
                     for library in (True, False)}
        current = library_current()
        # One tiling per layer, as SCALE-Sim runs one: its own (validate mode), or the
        # array_aligned heuristic's on the config's buffers; the default run searches.
        fixed = {name: accsim_run_seconds(cfg_path, topo_path, tmp, current, options)
                 for name, options in FIXED_TILING_RUNS.items()}
        mine = [r for r in records if r["topology"] == topo_name and r["config"] == label]
        per_layer = min(r["speedup"] for r in mine)
        ours_best = ours_proc[current]
        lines.append(
            f"full run {topo_name} on {label} ({dataflow}, {imp.rows}x{imp.cols}): "
            f"{sum(r['status'] == 'match' for r in mine)}/{len(mine)} layers matched; "
            f"per layer accsim (in process, warm) is {per_layer:,.0f}x faster at least "
            f"(median {statistics.median(r['speedup'] for r in mine):,.0f}x); whole "
            f"processes: SCALE-Sim {theirs['wall']:.1f} s (traces off) vs accsim run "
            f"{ours_best:.3f} s = {theirs['wall'] / ours_best:,.0f}x")
        lines.append(
            f"  accsim run, best of 3: {ours_proc[True]:.3f} s with the kernel library "
            f"({'current' if current else 'absent or stale: the JIT ran'}), "
            f"{ours_proc[False]:.3f} s with the JIT (warm cache); the default mapping "
            f"searches up to {len(SEEDS) + MAX_SIMULATED} tilings per layer")
        for name, options in FIXED_TILING_RUNS.items():
            lines.append(
                f"  accsim run {' '.join(options)}: {fixed[name]:.3f} s = "
                f"{theirs['wall'] / fixed[name]:,.0f}x")
        shown = 2 + len(fixed)
        if args.scalesim_command:
            command_s = run_scalesim_command(cfg, clean, parsed.kind == "gemm", tmp)
            runs = {"accsim run": ours_best} | {
                f"--{name}": seconds for name, seconds in fixed.items()}
            lines.append(
                f"  SCALE-Sim's own command (scalesim.scale, which saves traces): "
                f"{command_s:.1f} s = " + ", ".join(
                    f"{command_s / seconds:,.0f}x {what}" for what, seconds in runs.items()))
            shown += 1
        print("\n".join(lines[-shown:]), flush=True)
        rho = rank_correlation([r["theirs_stall"] for r in mine],
                               [r["ours_stall_default_tiler"] for r in mine])
        lines.append(
            f"  stalls {topo_name} on {label}: SCALE-Sim {sum(r['theirs_stall'] for r in mine):,}"
            f" cycles, accsim (default tiler) "
            f"{sum(r['ours_stall_default_tiler'] for r in mine):,}; rank correlation over "
            f"layers {'n/a (one side constant)' if rho is None else f'{rho:.2f}'}")
        print(lines[-1], flush=True)
    return records, lines


# --- goldens for tests/test_scalesim_goldens.py ------------------------------------------

GOLDEN_DIR = ROOT / "tests" / "data" / "scalesim"
GOLDEN_RUNS = [("small_conv.csv", (8, 8)), ("small_conv.csv", (6, 10)),
               ("test_mnk_input.csv", (32, 32)), ("test_mnk_input.csv", (16, 64))]


def record_goldens(tmp: Path) -> Path:
    """Full SCALE-Sim runs of the small test topologies, as tests/data/scalesim/goldens.json."""
    import numpy
    _, _, imp = load_config(str(GOLDEN_DIR / "scale.cfg"))
    runs = []
    for topo_name, (rows, cols) in GOLDEN_RUNS:
        _, _, parsed = load_topology(str(GOLDEN_DIR / topo_name))
        clean = clean_copy(parsed, tmp / f"golden_{topo_name}")
        for dataflow in DATAFLOWS:
            cfg = tmp / f"golden_{rows}x{cols}_{dataflow}.cfg"
            cfg.write_text(scalesim_cfg_text(imp, rows, cols, dataflow))
            full = run_scalesim_full(cfg, clean, parsed.kind == "gemm", tmp)
            topo = scalesim_topology(clean, parsed.kind == "gemm")
            layers = []
            for layer_id, layer in enumerate(full["layers"]):
                layers.append({"name": topo.topo_arrays[layer_id][0],
                               **{key: layer[key] for key in (
                                   "total", "stall", "ifmap_reads", "filter_reads",
                                   "ofmap_writes")}})
            runs.append({"topology": topo_name, "config": "scale.cfg", "rows": rows,
                         "cols": cols, "dataflow": dataflow, "layers": layers})
            print(f"recorded {topo_name} {rows}x{cols} {dataflow}", flush=True)
    path = GOLDEN_DIR / "goldens.json"
    path.write_text(json.dumps({
        "command": ".venv-scalesim/bin/python experiments/validate_scalesim.py "
                   "--record-goldens",
        "how": "full SCALE-Sim runs through its scalesim API (save_disk_space=True) on a "
               "complete copy of scale.cfg with ArrayHeight, ArrayWidth and Dataflow set "
               "per run; layer fields from COMPUTE_REPORT.csv (Total Cycles, Stall "
               "Cycles) and DETAILED_ACCESS_REPORT.csv (SRAM IFMAP Reads, SRAM Filter "
               "Reads, SRAM OFMAP Writes)",
        "scalesim": "3.0.0", "numpy": numpy.__version__, "runs": runs}, indent=1) + "\n")
    return path


# --- output ----------------------------------------------------------------------------

def write_csv(path: Path, records: list[dict]) -> None:
    if not records:
        return
    fields = list(dict.fromkeys(key for record in records for key in record))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(records)


def stall_figure(path: Path, records: list[dict]) -> None:
    """Stall cycles per layer as a fraction of its compute cycles, both simulators."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    labels = [f"{r['config']}\n{r['topology']} {r['layer']}" for r in records]
    x = range(len(records))
    ours = [r["ours_stall_default_tiler"] / r["ours_compute"] for r in records]
    theirs = [r["theirs_stall"] / r["ours_compute"] for r in records]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(records)), 4))
    ax.bar([i - 0.2 for i in x], theirs, 0.4, label="SCALE-Sim Stall Cycles")
    ax.bar([i + 0.2 for i in x], ours, 0.4, label="accsim stalls (default tiler)")
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_xticks(list(x), labels, rotation=90, fontsize=7)
    ax.set_ylabel("stall cycles / compute cycles")
    ax.set_title("Stalls per layer: a trend, not a match")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topologies", type=Path, default=DATA,
                        help="folder of SCALE-Sim topology CSVs (default: the copies in "
                        "tests/data/scalesim)")
    parser.add_argument("--configs", type=Path, default=DATA,
                        help="folder of SCALE-Sim .cfg files (default: tests/data/scalesim)")
    parser.add_argument("--only", type=lambda s: s.split(","), default=None,
                        help="topology names (file stems), comma-separated")
    parser.add_argument("--arrays", type=lambda s: s.split(","), default=list(DEFAULT_ARRAYS))
    parser.add_argument("--dataflows", type=lambda s: s.split(","), default=list(DATAFLOWS))
    parser.add_argument("--first", type=int, default=None, help="only the first N layers")
    parser.add_argument("--memory-gb", type=float, default=10.0,
                        help="skip layers whose SCALE-Sim compute module needs more "
                        "(its largest, gpt2 Linear1 ws at 64x16, peaks at 9 GB)")
    parser.add_argument("--shim-check-mb", type=float, default=256.0,
                        help="also run the unmodified compute classes when they would "
                        "copy at most this many MB, and assert the same results")
    parser.add_argument("--full", type=lambda s: s.split(","),
                        default=["alexnet:scale.cfg", "alexnet:google.cfg",
                                 "test_mnk_input:scale.cfg"],
                        help="TOPOLOGY:CONFIG[:USER|:CALC] for full SCALE-Sim runs, the "
                        "mode overriding the config's InterfaceBandwidth ('' for none)")
    parser.add_argument("--no-compute", action="store_true", help="skip part 1")
    parser.add_argument("--scalesim-command", action="store_true",
                        help="also time each --full run with SCALE-Sim's own command "
                        "(python -m scalesim.scale), which saves traces")
    parser.add_argument("--record-goldens", action="store_true",
                        help="only rerun the full SCALE-Sim runs behind "
                        "tests/data/scalesim/goldens.json and rewrite it")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "validate_scalesim")
    args = parser.parse_args(argv)
    args.full = [spec for spec in args.full if spec]
    # Absolute, so that relative paths given from any folder survive the subprocesses'
    # own working directories.
    args.topologies, args.configs, args.out = (path.resolve() for path in
                                               (args.topologies, args.configs, args.out))
    for option, folder in (("--topologies", args.topologies), ("--configs", args.configs)):
        if not folder.is_dir():
            parser.error(f"{option} {folder}: no such folder")
    _require_scalesim()
    if args.record_goldens:
        with tempfile.TemporaryDirectory() as tmp_name:
            print(f"wrote {record_goldens(Path(tmp_name))}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    summary = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if not args.no_compute:
            records = compute_check(args, tmp)
            write_csv(args.out / "compute.csv", records)
            checked = [r for r in records if not r["status"].startswith("skipped")]
            skipped = [r for r in records if r["status"].startswith("skipped")]
            groups = sorted({(r["topology"], r["array"], r["dataflow"]) for r in records})
            for group in groups:
                mine = [r for r in records if (r["topology"], r["array"],
                                               r["dataflow"]) == group]
                done = [r for r in mine if not r["status"].startswith("skipped")]
                summary.append(f"{group[0]} {group[1]} {group[2]}: "
                               f"{sum(r['status'] == 'match' for r in done)}/{len(done)} "
                               f"layers matched" + (f", {len(mine) - len(done)} skipped"
                                                    if len(done) < len(mine) else ""))
            ours_s = sum(r["ours_s"] for r in checked)
            theirs_s = sum(r["theirs_s"] for r in checked)
            summary.append(
                f"compute check: {sum(r['status'] == 'match' for r in checked)}/"
                f"{len(checked)} layers matched (compute cycles = D, ifmap and filter "
                f"SRAM reads), {len(skipped)} skipped for memory, "
                f"{sum(r.get('shim_checked', 0) for r in checked)} also checked against "
                f"the unmodified compute classes; time: SCALE-Sim compute modules "
                f"{theirs_s:.1f} s vs accsim validate mode {ours_s:.2f} s = "
                f"{theirs_s / max(ours_s, 1e-9):,.0f}x")
            for r in skipped:
                summary.append(f"skipped {r['topology']} {r['array']} {r['dataflow']} "
                               f"{r['layer']}: {r['status'].removeprefix('skipped: ')}")
        if args.full:
            records, lines = full_runs(args, tmp)
            write_csv(args.out / "full.csv", records)
            stall_figure(args.out / "stalls.png", records)
            summary += lines
            summary.append("stalls differ (compared as a trend, full.csv and stalls.png) "
                           "because: " + " | ".join(STALL_REASONS))
    (args.out / "summary.txt").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))
    print(f"wrote {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
