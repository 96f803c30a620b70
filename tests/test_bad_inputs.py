"""Bad input, table-driven, across every reader and command (DESIGN.md section 7): each
case is one command line on files made for it, and must end in a non-zero exit with a
message naming the file and the field or option, within 10 s, with no traceback and
nothing accepted.

Each row: (id, argv, {file name: content}, fragments the output must contain). Content
is text, bytes, or one of the special kinds in SPECIAL_FILES.
"""

from __future__ import annotations

import copy
import json
import os
import re

import pytest
import yaml

from platforms import BASE as PLATFORM
from timed_cli import run_main

GEMM = {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 64, "n": 64, "k": 64}
CONV = {"name": "c", "layer_type": "conv", "kind": "conv2d", "h": 8, "w": 8, "cin": 4,
        "cout": 4, "kh": 3, "kw": 3}
WORKLOAD = {"name": "w", "operators": [GEMM]}
SECONDS = 10


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def changed(base: dict, dotted: str, value) -> dict:
    """A deep copy of `base` with the field at a dotted path set (or deleted: ...)."""
    out = copy.deepcopy(base)
    node = out
    *parents, last = dotted.split(".")
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    else:
        node[int(last) if isinstance(node, list) else last] = value
    return out


def raw_yaml(base: dict, dotted: str, token: str) -> str:
    """YAML of `base` with the field's value written as the raw token (unquoted)."""
    marker = "__MARK__"
    text = dump(changed(base, dotted, marker))
    return text.replace(marker, token)


PLATFORM_FILE = dump(PLATFORM)
WORKLOAD_FILE = dump(WORKLOAD)
CASES: list[tuple[str, list[str], dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict, *fragments: str) -> None:
    CASES.append((name, argv, files, list(fragments)))


# --- platform fields: every physical value rejects NaN, infinities, negatives, and
# values that are not numbers (strings, booleans); integers reject fractions.
PHYSICAL_FLOATS = ["clock_ghz", "offchip.bandwidth_gbps", "energy.mac_pj.int8",
                   "energy.sram_read_pj_per_byte", "energy.sram_write_pj_per_byte",
                   "energy.offchip_pj_per_byte", "energy.vector_op_pj",
                   "energy.static_power.array_w", "energy.static_power.sram_w",
                   "energy.static_power.offchip_w", "energy.static_power.vector_w",
                   "energy.static_power.other_w"]
for field in PHYSICAL_FLOATS:
    for label, value in (("nan", float("nan")), ("inf", float("inf")),
                         ("-inf", float("-inf")), ("negative", -1.0),
                         ("string", "fast"), ("bool", True)):
        case(f"platform {field} {label}", ["check", "p.yaml"],
             {"p.yaml": dump(changed(PLATFORM, field, value))}, "p.yaml", field)
INTEGERS = ["systolic_array.rows", "systolic_array.cols", "buffers.ifmap_bytes",
            "buffers.weight_bytes", "buffers.output_bytes", "dma.setup_cycles",
            "offchip.latency_cycles", "vector_unit.lanes",
            "vector_unit.cycles_per_element.gelu"]
for field in INTEGERS:
    for label, value in (("negative", -1), ("fraction", 1.5), ("bool", True),
                         ("string", "8")):
        case(f"platform {field} {label}", ["check", "p.yaml"],
             {"p.yaml": dump(changed(PLATFORM, field, value))}, "p.yaml", field)
for field in ("name", "systolic_array", "offchip.bandwidth_gbps", "energy.static_power"):
    case(f"platform {field} missing", ["check", "p.yaml"],
         {"p.yaml": dump(changed(PLATFORM, field, ...))}, "p.yaml", field, "missing")
case("platform misspelt key", ["check", "p.yaml"],
     {"p.yaml": PLATFORM_FILE.replace("latency_cycles", "latency_cycle")}, "p.yaml",
     "offchip.latency_cycle", "unknown field")
case("platform unknown dataflow", ["check", "p.yaml"],
     {"p.yaml": dump(changed(PLATFORM, "systolic_array.dataflows", ["os", "xs"]))},
     "p.yaml", "systolic_array.dataflows")
case("platform name with escape", ["check", "p.yaml"],
     {"p.yaml": dump(changed(PLATFORM, "name", "edge\x1b[2J"))}, "p.yaml", "name",
     "control character")
case("platform mac energy missing a dtype", ["check", "p.yaml"],
     {"p.yaml": dump(changed(PLATFORM, "systolic_array.input_dtypes", ["int8", "bf16"]))},
     "p.yaml", "mac_pj")

# --- YAML 1.1 coercions, duplicates and structure.
for field, token in (("systolic_array.rows", "yes"), ("systolic_array.rows", "on"),
                     ("buffers.ifmap_bytes", "0100"), ("dma.setup_cycles", "off"),
                     ("clock_ghz", "no"), ("offchip.latency_cycles", "1_000")):
    case(f"platform {field} as YAML 1.1 {token}", ["check", "p.yaml"],
         {"p.yaml": raw_yaml(PLATFORM, field, token)}, "p.yaml")
case("workload name as YAML 1.1 boolean", ["check", "w.yaml"],
     {"w.yaml": raw_yaml(WORKLOAD, "operators.0.m", "yes")}, "w.yaml",
     "operators[0](g).m")
case("duplicate platform key", ["check", "p.yaml"],
     {"p.yaml": PLATFORM_FILE + "clock_ghz: 2.0\n"}, "p.yaml", "duplicate key 'clock_ghz'",
     "first at line")
case("duplicate nested key", ["check", "w.yaml"],
     {"w.yaml": "name: w\noperators:\n  - {name: g, layer_type: fc, kind: gemm, m: 4, "
      "m: 8, n: 4, k: 4}\n"}, "w.yaml", "duplicate key 'm'")
case("yaml alias", ["check", "w.yaml"],
     {"w.yaml": "name: &n w\nlabel: *n\noperators: []\n"}, "w.yaml", "alias")
case("yaml nested too deep", ["check", "w.yaml"],
     {"w.yaml": "name: " + "[" * 500 + "]" * 500 + "\n"}, "w.yaml", "nested deeper")
case("yaml malformed", ["check", "w.yaml"],
     {"w.yaml": "name: w\noperators:\n  - {name: g\n  - bad: [\n"}, "w.yaml", "line ")
case("yaml tab indentation", ["check", "w.yaml"],
     {"w.yaml": "name: w\n\toperators: []\n"}, "w.yaml", "line ")
for label, text in (("empty", ""), ("comment only", "# nothing\n"),
                    ("top-level list", "- 1\n- 2\n"), ("scalar", "42\n"),
                    ("string", "hello\n")):
    case(f"platform file {label}", ["check", "p.yaml", "--kind", "platform"],
         {"p.yaml": text}, "p.yaml", "expected a mapping")
case("binary garbage", ["check", "p.yaml"], {"p.yaml": bytes(range(256)) * 4}, "p.yaml",
     "binary")
case("invalid utf-8", ["check", "p.yaml"], {"p.yaml": b"name: \xff\xfe\n"}, "p.yaml",
     "UTF-8")
case("file too large", ["check", "p.yaml"], {"p.yaml": "sparse:100000000"}, "p.yaml",
     "larger than")
for kind in ("directory", "fifo"):
    said = {"directory": "a directory", "fifo": "a FIFO"}[kind]
    case(f"input is a {kind}", ["check", "x.yaml"], {"x.yaml": kind}, "x.yaml", said)
    case(f"run --arch is a {kind}", ["run", "--arch", "x.yaml", "--workload", "w.yaml"],
         {"x.yaml": kind, "w.yaml": WORKLOAD_FILE}, "x.yaml", said)
case("input is /dev/zero", ["check", "/dev/zero"], {}, "/dev/zero", "character device")
case("run --workload is /dev/zero", ["run", "--workload", "/dev/zero"], {}, "/dev/zero",
     "character device")
case("missing file", ["check", "nope.yaml"], {}, "nope.yaml", "not found")
case("unknown shipped name", ["run", "--arch", "tpu_v9"], {}, "tpu_v9", "shipped")
case("check --kind disagrees with content", ["check", "p.yaml", "--kind", "workload"],
     {"p.yaml": PLATFORM_FILE}, "p.yaml", "unknown field")

# --- workload fields.
for field, value in (("m", 0), ("m", -4), ("m", 1.5), ("m", "64"), ("m", True),
                     ("m", float("nan")), ("k", None), ("batch", 0), ("repeat", 0),
                     ("repeat", 2**60), ("kind", "matmul"), ("kind", ...),
                     ("dtype", "int7"), ("name", ""), ("layer_type", ""),
                     ("name", "g\x07"), ("layer_type", "fc\x1b[31m"), ("m", ...)):
    label = "missing" if value is ... else repr(value)
    case(f"workload {field} {label}", ["check", "w.yaml"],
         {"w.yaml": dump(changed(WORKLOAD, f"operators.0.{field}", value))}, "w.yaml",
         "operators[0]")
for field, value in (("groups", 3), ("kh", 20), ("stride", 0), ("padding", -1),
                     ("dilation", 0)):
    case(f"conv {field} {value}", ["check", "w.yaml"],
         {"w.yaml": dump({"name": "w", "operators": [{**CONV, field: value}]})}, "w.yaml",
         "operators[0](c)")
for label, data in (("no operators", {"name": "w", "operators": []}),
                    ("operators not a list", {"name": "w", "operators": {"g": GEMM}}),
                    ("duplicate operator names", {"name": "w",
                                                  "operators": [GEMM, dict(GEMM)]}),
                    ("unknown top-level key", {**WORKLOAD, "extra": 1}),
                    ("operator is a string", {"name": "w", "operators": ["gemm"]})):
    case(f"workload {label}", ["check", "w.yaml", "--kind", "workload"],
         {"w.yaml": dump(data)}, "w.yaml", "operators" if "operators" in label or
         "operator" in label else "extra")
case("workload run with dtype the platform lacks",
     ["run", "--arch", "p.yaml", "--workload", "w.yaml"],
     {"p.yaml": PLATFORM_FILE,
      "w.yaml": dump(changed(WORKLOAD, "operators.0.dtype", "bf16"))},
     "w.yaml", "operators.g.dtype")

# --- values that would overflow int64 cycles: refused before any kernel runs.
RUN = ["run", "--arch", "p.yaml", "--workload", "w.yaml"]
for field, value in (("systolic_array.rows", 2**63 - 1), ("offchip.latency_cycles", 10**19),
                     ("dma.setup_cycles", 2**63), ("vector_unit.cycles_per_element.add", 2**62),
                     ("buffers.ifmap_bytes", 2**70), ("vector_unit.lanes", 2**50)):
    case(f"run {field} {value:.3g}", RUN,
         {"p.yaml": dump(changed(PLATFORM, field, value)), "w.yaml": WORKLOAD_FILE},
         "p.yaml", field)
LARGE = {"name": "w", "operators": [{**GEMM, "m": 4096, "n": 4096, "k": 4096}]}
# An array of 7e7 x 7e7 ran its 4096^3 GEMM's float counters step by step for minutes.
for wide, narrow in (("rows", "cols"), ("cols", "rows")):
    case(f"run systolic_array.{wide} 7e7", RUN,
         {"p.yaml": dump(changed(changed(PLATFORM, f"systolic_array.{wide}", 7 * 10**7),
                                 f"systolic_array.{narrow}", 128)),
          "w.yaml": dump(LARGE)}, "p.yaml", f"systolic_array.{wide}", "65,536")
for label, bandwidth in (("bandwidth 1e-300", 1e-300), ("bandwidth 1e-16", 1e-16)):
    case(f"run {label}", RUN,
         {"p.yaml": dump(changed(PLATFORM, "offchip.bandwidth_gbps", bandwidth)),
          "w.yaml": WORKLOAD_FILE}, "p.yaml", "offchip.bandwidth_gbps", "int64")
for field in ("offchip.latency_cycles", "dma.setup_cycles"):
    for value in (2**33, 2**40, 2**47):
        case(f"run {field} {value:.3g} on many steps", RUN,
             {"p.yaml": dump(changed(PLATFORM, field, value)), "w.yaml": dump(LARGE)},
             "p.yaml", field, "2**32 cycles")
case("run repeat 2**20 of a large gemm on a slow memory", RUN,
     {"p.yaml": dump(changed(PLATFORM, "offchip.bandwidth_gbps", 1e-3)),
      "w.yaml": dump(changed(LARGE, "operators.0.repeat", 2**20))},
     "p.yaml", "operators.g", "runs", "int64")
case("workload repeat 2**40 of a large gemm", RUN,
     {"p.yaml": PLATFORM_FILE, "w.yaml": dump(changed(LARGE, "operators.0.repeat", 2**40))},
     "w.yaml", "operators[0](g)", "overflow int64")
case("run operand too large", RUN,
     {"p.yaml": PLATFORM_FILE,
      "w.yaml": dump({"name": "w", "operators": [{**GEMM, "m": 2**40, "n": 1,
                                                   "k": 2**20}]})},
     "w.yaml", "operators.g", "elements")
case("vector operator of 2**50 elements", RUN,
     {"p.yaml": PLATFORM_FILE,
      "w.yaml": dump({"name": "w", "operators": [
          {"name": "e", "layer_type": "act", "kind": "elementwise", "elements": 2**50,
           "op": "relu"}]})}, "w.yaml", "operators.e")

# --- plans.
PLAN_RUN = RUN + ["--mapping", "m.yaml"]


def plan_case(label: str, plan: dict, *fragments: str, argv=None, workload=WORKLOAD):
    case(f"plan {label}", argv or PLAN_RUN,
         {"p.yaml": PLATFORM_FILE, "w.yaml": dump(workload), "m.yaml": dump(plan)},
         "m.yaml", *fragments)


for field, value in (("tm", 0), ("tm", -1), ("tm", 2.5), ("tm", "8"), ("depth", 5),
                     ("depth", 0), ("loop_order", "mmk"), ("dataflow", "xs"),
                     ("rows_per_tile", 0), ("fuse", "")):
    plan_case(f"default {field} {value!r}", {"default": {field: value}}, "default")
plan_case("tile larger than the operator", {"operators": {"g": {"tm": 128}}},
          "operators.g", "larger than")
plan_case("unknown operator", {"operators": {"nope": {"tm": 8}}}, "operators.nope")
plan_case("buffer overflow", {"operators": {"g": {"tm": 64, "tn": 64, "tk": 64}}},
          "operators.g", "overflow")
plan_case("fuse names no following operator", {"operators": {"g": {"fuse": "relu"}}},
          "operators.g", "fuse")
plan_case("rows_per_tile on a gemm", {"operators": {"g": {"rows_per_tile": 4}}},
          "operators.g")
plan_case("unknown key", {"default": {"tile_m": 8}}, "default.tile_m", "unknown field")
plan_case("layer_types not a mapping", {"layer_types": ["fc"]}, "layer_types")
for label, name in (("module:function", "os:system"), ("file path", "evil.py:tile"),
                    ("dotted module", "simulator.cli:main"), ("unknown", "fastest")):
    case(f"plan heuristic {label}", PLAN_RUN,
         {"p.yaml": PLATFORM_FILE, "w.yaml": WORKLOAD_FILE,
          "m.yaml": dump({"default": {"heuristic": name}}),
          "evil.py": "raise SystemExit('executed')\n"}, "heuristic", "unknown heuristic")
plan_case("memory budget", {"operators": {"g": {"tm": 1, "tn": 1, "tk": 1}}},
          "operators.g", "steps", "--max-memory", "a tiling within it",
          argv=PLAN_RUN + ["--max-memory", "64K"],
          workload={"name": "w", "operators": [{**GEMM, "m": 256, "n": 256, "k": 256}]})
case("check plan against a platform", ["check", "m.yaml", "--arch", "p.yaml",
                                       "--workload", "w.yaml"],
     {"p.yaml": PLATFORM_FILE, "w.yaml": WORKLOAD_FILE,
      "m.yaml": dump({"operators": {"g": {"tm": 64, "tn": 64, "tk": 64}}})},
     "m.yaml", "REJECTED")

# --- options, checked before any simulation.
OPTIONS = {"p.yaml": PLATFORM_FILE, "w.yaml": WORKLOAD_FILE}
for label, extra, fragments in (
        ("--plot suffix", ["--plot", "out.xyz"], ["out.xyz", "--plot"]),
        ("--sheet suffix", ["--sheet", "out.txt"], ["out.txt", "--sheet"]),
        ("--sheet-search without --sheet", ["--sheet-search"], ["--sheet-search"]),
        ("--sheet-best without --sheet", ["--sheet-best", "m.json"], ["--sheet-best"]),
        ("--sheet-best and --sheet-search", ["--sheet", "s.md", "--sheet-best", "m.json",
                                             "--sheet-search"], ["--sheet-search"]),
        ("--sheet-best missing", ["--sheet", "s.md", "--sheet-best", "nope.json"],
         ["nope.json", "not found"]),
        ("--sheet-best not JSON", ["--sheet", "s.md", "--sheet-best", "w.yaml"],
         ["w.yaml", "JSON"]),
        ("--json into a missing folder", ["--json", "no/r.json"], ["no/r.json", "--json"]),
        ("--json is a directory", ["--json", "."], ["--json", "directory"]),
        ("--csv into a missing folder", ["--csv", "no/r.csv"], ["no/r.csv", "--csv"]),
        ("--trace into a missing folder", ["--trace", "no/t.json"], ["--trace"]),
        ("--engine unknown", ["--engine", "gpu"], ["--engine"]),
        ("--validate unknown", ["--validate", "gem5"], ["--validate"]),
        ("--format unknown", ["--format", "onnx"], ["--format"]),
        ("--validate with --mapping", ["--validate", "scalesim", "--mapping", "w.yaml"],
         ["--mapping"]),
        ("--max-memory negative", ["--max-memory", "-1"], ["--max-memory"]),
        ("--max-memory words", ["--max-memory", "lots"], ["--max-memory"]),
        ("--max-memory nan", ["--max-memory", "nanG"], ["--max-memory"]),
        ("--plugin missing", ["--plugin", "nope.py"], ["nope.py", "--plugin"]),
        ("--plugin not python", ["--plugin", "w.yaml"], ["w.yaml", "--plugin"]),
        ("--plugin raises", ["--plugin", "bad.py"], ["bad.py", "--plugin", "boom"])):
    case(f"run {label}", RUN + extra, {**OPTIONS, "bad.py": "raise ValueError('boom')\n"},
         *fragments)
MAP = ["map", "--arch", "p.yaml", "--workload", "w.yaml"]
for label, extra, fragment in (("--workers 0", ["--workers", "0"], "--workers"),
                               ("--workers -2", ["--workers", "-2"], "--workers"),
                               ("--workers word", ["--workers", "many"], "--workers"),
                               ("--objective unknown", ["--objective", "speed"],
                                "--objective"),
                               ("--heuristic unknown", ["--heuristic", "os:system"],
                                "heuristic"),
                               ("--json missing folder", ["--json", "no/m.json"], "--json"),
                               ("--write-plan is a directory", ["--write-plan", "."],
                                "--write-plan")):
    case(f"map {label}", MAP + extra, OPTIONS, fragment)
SMALL_ARRAY = changed(changed(changed(PLATFORM, "systolic_array.rows", 1),
                              "systolic_array.cols", 1), "buffers.ifmap_bytes", 2**30)
for argv, fragment in ((RUN + ["--mapping", "m.yaml"], "m.yaml"), (MAP, "w.yaml")):
    case(f"{argv[0]} min_offchip grid too large for the memory", argv,
         {"p.yaml": dump(SMALL_ARRAY), "w.yaml": dump(LARGE),
          "m.yaml": dump({"default": {"heuristic": "min_offchip"}})}, fragment,
         "operators.g", "candidate tilings")
case("compare unknown arch", ["compare", "--arch", "p.yaml", "--arch", "nope.yaml",
                              "--workload", "w.yaml"], OPTIONS, "nope.yaml")
case("compare bad max-memory", ["compare", "--arch", "p.yaml", "--workload", "w.yaml",
                                "--max-memory", "0"], OPTIONS, "--max-memory")
case("schema unknown kind", ["schema", "result"], {}, "kind")
case("unknown command", ["simulate"], {}, "simulate")

# --- regress.
REGRESS = ["regress", "--arch", "p.yaml", "--workload", "w.yaml", "--baseline", "b.json"]
for option, value in (("--tolerance", "nan"), ("--tolerance", "-0.1"),
                      ("--tolerance", "inf"), ("--floor-cycles", "-5"),
                      ("--floor-cycles", "nan"), ("--floor-energy-pj", "-inf"),
                      ("--tolerance", "one")):
    case(f"regress {option} {value}", REGRESS + [f"{option}={value}"],
         {**OPTIONS, "b.json": "{}"}, option)
for label, text, fragment in (("missing", None, "not found"), ("not JSON", "{", "JSON"),
                              ("NaN", '{"manifest": NaN}', "NaN"),
                              ("a list", "[1, 2]", "not an accsim result"),
                              ("no operators", '{"manifest": {}}', "not an accsim result"),
                              ("deep", "[" * 5000 + "]" * 5000, "nested")):
    files = dict(OPTIONS) if text is None else {**OPTIONS, "b.json": text}
    case(f"regress baseline {label}", REGRESS, files, "b.json", fragment)
case("regress junit into a missing folder", REGRESS + ["--junit", "no/j.xml"],
     {**OPTIONS, "b.json": "{}"}, "--junit")

# --- result files (verify).
for label, text, fragment in (
        ("not JSON", "not json", "JSON"), ("empty", "", "JSON"),
        ("NaN", '{"manifest": {"x": NaN}}', "NaN"),
        ("Infinity", '{"a": Infinity}', "Infinity"),
        ("huge float", '{"a": 1e999}', "range"),
        ("duplicate key", '{"manifest": {}, "manifest": {}}', "duplicate key"),
        ("deeply nested", "[" * 100000 + "]" * 100000, "nested"),
        ("nested objects", '{"a":' * 3000 + "1" + "}" * 3000, "nested"),
        ("a list", "[]", "manifest"), ("no manifest", '{"operators": []}', "manifest"),
        ("manifest a string", '{"manifest": "x"}', "manifest"),
        ("no inputs", '{"manifest": {"engine": "fast", "engine_reason": "x"}}',
         "manifest.inputs"),
        ("inputs without platform", json.dumps(
            {"manifest": {"engine": "fast", "engine_reason": "x", "inputs": {}}}),
         "manifest.inputs.platform"),
        ("int too long", '{"a": ' + "9" * 5000 + "}", "digits"),
        ("binary", "\x00\x01", "binary")):
    case(f"verify {label}", ["verify", "r.json"], {"r.json": text}, "r.json", fragment)
case("verify is a directory", ["verify", "."], {}, ".", "directory")

# --- SCALE-Sim topology CSV and config.
CONV_HEADER = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
               "Channels, Num Filter, Strides,\n")
GEMM_HEADER = "Layer, M, N, K,\n"
for label, text, fragment in (
        ("empty", "", "empty"), ("header only", CONV_HEADER, "no layer rows"),
        ("word for a number", CONV_HEADER + "c1, 8, 8, 3, 3, x, 4, 1,\n", "column 6"),
        ("zero stride", CONV_HEADER + "c1, 8, 8, 3, 3, 4, 4, 0,\n", "column 8"),
        ("negative", GEMM_HEADER + "g, -4, 4, 4,\n", "column 2"),
        ("fraction", GEMM_HEADER + "g, 4.5, 4, 4,\n", "column 2"),
        ("missing column", GEMM_HEADER + "g, 4, 4,\n", "missing value"),
        ("filter larger than ifmap", CONV_HEADER + "c1, 4, 4, 5, 5, 4, 4, 1,\n",
         "larger than"),
        ("unknown header", "a, b, c\n1, 2, 3\n", "cannot tell"),
        ("layer name with escape", GEMM_HEADER + "g\x1b[2J, 4, 4, 4,\n",
         "control character"),
        ("letters in a gemm row", GEMM_HEADER + "g, 4, 4, 4k,\n", "column 4"),
        ("binary", b"\x00\x01\x02", "binary")):
    case(f"topology {label}", ["run", "--workload", "t.csv"], {"t.csv": text}, "t.csv",
         fragment)
case("topology check", ["check", "t.csv"], {"t.csv": GEMM_HEADER + "g, 0, 4, 4,\n"},
     "t.csv", "column 2")
case("topology of huge sizes", ["run", "--workload", "t.csv"],
     {"t.csv": GEMM_HEADER + f"g, {2**40}, {2**40}, 4,\n"}, "t.csv", "g")
CFG = ("[general]\nrun_name = t\n[architecture_presets]\nArrayHeight: 8\nArrayWidth: 8\n"
       "IfmapSramSzkB: 64\nFilterSramSzkB: 64\nOfmapSramSzkB: 64\nDataflow: os\n"
       "Bandwidth: 10\n")
for label, old, new, fragment in (
        ("rows word", "ArrayHeight: 8", "ArrayHeight: eight", "ArrayHeight"),
        ("rows zero", "ArrayHeight: 8", "ArrayHeight: 0", "ArrayHeight"),
        ("rows huge", "ArrayHeight: 8", f"ArrayHeight: {2**63}", "rows"),
        ("bandwidth nan", "Bandwidth: 10", "Bandwidth: nan", "Bandwidth"),
        ("bandwidth inf", "Bandwidth: 10", "Bandwidth: inf", "Bandwidth"),
        ("bandwidth negative", "Bandwidth: 10", "Bandwidth: -1", "Bandwidth"),
        ("sram nan", "IfmapSramSzkB: 64", "IfmapSramSzkB: nan", "IfmapSramSzkB"),
        ("dataflow", "Dataflow: os", "Dataflow: xs", "Dataflow"),
        ("run name with escape", "run_name = t", "run_name = t\x1b[2J", "name"),
        ("malformed", "[general]", "general]", "malformed"),
        ("duplicate key", "ArrayWidth: 8", "ArrayWidth: 8\nArrayWidth: 16", "malformed")):
    case(f"config {label}", ["run", "--arch", "c.cfg", "--workload", "w.yaml"],
         {"c.cfg": CFG.replace(old, new), "w.yaml": WORKLOAD_FILE}, "c.cfg", fragment)
case("config check", ["check", "c.cfg"],
     {"c.cfg": CFG.replace("ArrayWidth: 8", "ArrayWidth: -3")}, "c.cfg", "ArrayWidth")


def _make(path, content) -> None:
    """One input on disk: a directory, a FIFO, a sparse file ("sparse:BYTES"), a
    symbolic link ("link:TARGET"), bytes, or text."""
    if content == "directory":
        path.mkdir()
    elif content == "fifo":
        os.mkfifo(path)
    elif isinstance(content, str) and content.startswith("sparse:"):
        with open(path, "wb") as handle:
            handle.truncate(int(content.split(":")[1]))
    elif isinstance(content, str) and content.startswith("link:"):
        path.symlink_to(content.removeprefix("link:"))
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


def test_there_are_enough_cases():
    assert len(CASES) >= 150
    assert len({name for name, *_ in CASES}) == len(CASES)


def assert_refused(argv: list[str], fragments, capsys) -> None:
    """`accsim ARGV` run in-process under SECONDS of CPU (timed_cli) is refused: a
    non-zero exit, no traceback, a message on stderr, every fragment in the output,
    no ESC."""
    code, out, err, elapsed = run_main(argv, capsys, SECONDS)
    assert code not in (0, None), f"accepted: {out[-400:]}"
    assert "Traceback" not in out + err
    assert err.strip(), "no message on stderr"
    assert elapsed < SECONDS
    for fragment in fragments:
        assert fragment in out + err, f"{fragment!r} not in {err!r}"
    assert "\x1b" not in err  # input text reaches the terminal escaped


@pytest.mark.parametrize("name, argv, files, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_bad_input_is_one_clear_error(name, argv, files, fragments, tmp_path,
                                      monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        _make(tmp_path / file, content)
    assert_refused(argv, fragments, capsys)
