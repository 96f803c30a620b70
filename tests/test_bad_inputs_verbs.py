"""Bad input to the verbs and readers merged after the first hardening pass (import,
run --model/--onnx/--kineto, serve, sweep, review, verify of packets and serving
results, the multi-chip flags), table-driven as tests/test_bad_inputs.py: each case
ends in a non-zero exit with one message naming the file and the field or option,
within 10 s, with no traceback and no escape sequence on stderr.

Each row: (id, argv, {file name: content}, fragments the output must contain).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
import yaml

from simulator.cli import main
from test_bad_inputs import WORKLOAD_FILE, _make, assert_refused, changed, dump

REPO = Path(__file__).resolve().parent.parent
GPT2 = json.loads((REPO / "workloads/hf/gpt2.json").read_text())
GPT2_FILE = json.dumps(GPT2)
TRACE = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,16,4\n0.5,16,4\n"
SWEEP = {"name": "s", "platform": "edge_32x32", "workloads": ["w.yaml"],
         "axes": {"systolic_array.rows": [16, 32]}, "sampling": {"method": "grid"},
         "objectives": {"time_s": "min"}}
STUDY = yaml.safe_load((REPO / "experiments/studies/resnet50_platforms.yaml").read_text())
KINETO = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0,
                           "dur": 5, "tid": 1, "pid": 1,
                           "args": {"Input Dims": [[4, 8], [8, 4]]}}]}
CASES: list[tuple[str, list[str], dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict, *fragments: str) -> None:
    CASES.append((name, argv, files, list(fragments)))


def edited(base: dict, dotted: str, value) -> str:
    return dump(changed(base, dotted, value))


# --- accsim import hf: the config.json reader and the step options.
HF = ["import", "hf", "c.json", "--phase", "prefill", "--seq", "8"]
for label, text, fragment in (
        ("not JSON", "{", "JSON"), ("empty", "", "JSON"),
        ("NaN", GPT2_FILE.replace('"n_embd": 768', '"n_embd": NaN'), "NaN"),
        ("duplicate key", GPT2_FILE[:-1] + ', "n_layer": 3}', "duplicate key"),
        ("a list", "[]", "JSON object"),
        ("nested deep", '{"a":' * 3000 + "1" + "}" * 3000, "nested"),
        ("binary", b"\x00\x01", "binary"),
        ("layers negative", json.dumps(GPT2 | {"n_layer": -2}), "n_layer"),
        ("layers a string", json.dumps(GPT2 | {"n_layer": "12"}), "n_layer"),
        ("layers a fraction", json.dumps(GPT2 | {"n_layer": 1.5}), "n_layer"),
        ("hidden boolean", json.dumps(GPT2 | {"n_embd": True}), "n_embd"),
        ("hidden huge", json.dumps(GPT2 | {"n_embd": 2**62}), "hidden size"),
        ("heads missing", json.dumps({k: v for k, v in GPT2.items() if k != "n_head"}),
         "n_head")):
    case(f"import hf {label}", HF, {"c.json": text}, "c.json", fragment)
for kind in ("directory", "fifo"):
    case(f"import hf config a {kind}", HF, {"c.json": kind}, "c.json", kind[:3].upper()
         if kind == "fifo" else kind)
case("import hf missing file", HF, {}, "c.json", "not found")
for flag, value in (("--batch", "0"), ("--batch", "-3"), ("--seq", "0"),
                    ("--batch", str(2**70)), ("--imbalance", "nan"),
                    ("--imbalance", "0.5"), ("--imbalance", "inf")):
    case(f"import hf {flag} {value}", HF + [flag, value], {"c.json": GPT2_FILE}, flag)
case("import hf decode without context", ["import", "hf", "c.json", "--phase", "decode"],
     {"c.json": GPT2_FILE}, "--context")
for label, out, fragment in (("missing folder", "no/w.yaml", "no/w.yaml"),
                             ("a directory", ".", "directory")):
    case(f"import hf output {label}", HF + ["-o", out], {"c.json": GPT2_FILE}, "--output",
         fragment)

# --- accsim import onnx and kineto: binary and JSON readers.
for label, content, fragment in (
        ("garbage", b"\xff\xfe\x00garbage" * 10, "ONNX"), ("a directory", "directory",
                                                            "directory"),
        ("a FIFO", "fifo", "FIFO"), ("missing", None, "not found")):
    files = {} if content is None else {"m.onnx": content}
    case(f"import onnx {label}", ["import", "onnx", "m.onnx"], files, "m.onnx", fragment)
    case(f"run --onnx {label}", ["run", "--onnx", "m.onnx"], files, "m.onnx", fragment)
for flag, value in (("--batch", "0"), ("--input-shape", "x"), ("--input-shape", "in=0x3"),
                    ("--input-shape", "in=ax3")):
    case(f"import onnx {flag} {value}", ["import", "onnx", "m.onnx", flag, value],
         {"m.onnx": b"\x08\x07"}, flag)
case("import onnx output into a missing folder", ["import", "onnx", "m.onnx", "-o",
     "no/w.yaml"], {"m.onnx": b"\x08\x07"}, "--output")
for label, text, fragment in (
        ("not JSON", "{", "JSON"), ("empty", "", "JSON"),
        ("NaN", json.dumps(KINETO).replace('"dur": 5', '"dur": NaN'), "NaN"),
        ("Infinity", json.dumps(KINETO).replace('"dur": 5', '"dur": Infinity'),
         "Infinity"),
        ("duplicate key", '{"traceEvents": [], "traceEvents": []}', "duplicate key"),
        ("nested deep", '{"traceEvents":' + "[" * 5000 + "]" * 5000 + "}", "nested"),
        ("events not a list", '{"traceEvents": 3}', "traceEvents"),
        ("no operators", '{"traceEvents": []}', "cpu_op"),
        ("binary", b"\x00\x01", "binary"),
        ("gzip corrupt", b"\x1f\x8b\x08\x00garbage", "gzip"),
        ("a directory", "directory", "directory"), ("a FIFO", "fifo", "FIFO")):
    case(f"import kineto {label}", ["import", "kineto", "t.json"], {"t.json": text},
         "t.json", fragment)
case("run --kineto NaN", ["run", "--kineto", "t.json"],
     {"t.json": json.dumps(KINETO).replace('"dur": 5', '"dur": NaN')}, "t.json", "NaN")
case("import kineto output a directory", ["import", "kineto", "t.json", "-o", "."],
     {"t.json": json.dumps(KINETO)}, "--output", "directory")
case("run --model NaN config", ["run", "--model", "c.json", "--phase", "prefill",
     "--seq", "8"], {"c.json": GPT2_FILE.replace("768", "NaN")}, "c.json", "NaN")
case("run --model and --workload", ["run", "--model", "gpt2", "--phase", "prefill",
     "--seq", "8", "--workload", "w.yaml"], {"w.yaml": WORKLOAD_FILE}, "--workload")

# --- accsim serve: flags.
SERVE = ["serve", "--workload", "w.yaml", "--arch", "edge_32x32", "--requests", "4"]
SERVE_FILES = {"w.yaml": WORKLOAD_FILE}
for flag, value in (("--rate", "nan"), ("--rate", "inf"), ("--rate", "-1"), ("--rate", "0"),
                    ("--cv", "nan"), ("--cv", "0"), ("--duration", "inf"),
                    ("--duration", "-1"), ("--max-wait-ms", "-1"), ("--max-wait-ms", "nan"),
                    ("--requests", "0"), ("--max-batch", "0"), ("--max-batch", "-1"),
                    ("--seed", "-1"), ("--bucket-bits", "99"), ("--bucket-bits", "0"),
                    ("--replicas", "0"), ("--max-tokens", "0"), ("--block-tokens", "0"),
                    ("--prompt-tokens", "0"), ("--output-tokens", "-5"),
                    ("--sla", "garbage"), ("--sla", "latency_p99_ms=nan"),
                    ("--sla", "latency_p99_ms=-1"), ("--sla", "bogus_ms=5"),
                    ("--sweep-rate", "1:2"), ("--sweep-rate", "a:b:c"),
                    ("--sweep-rate", "5:1:3"), ("--sweep-rate", "1:2:100000"),
                    ("--sweep-rate", "nan:2:3"), ("--chips", "0"), ("--tp", "0"),
                    ("--pp", "-1"), ("--ep", "0"), ("--dtype", "int7"),
                    ("--requests", str(2**70)), ("--seed", str(2**70))):
    argv = SERVE + ([] if flag in ("--rate", "--sweep-rate") else ["--rate", "10"])
    case(f"serve {flag} {value}", argv + [flag, value], SERVE_FILES, flag)
case("serve multi-chip plain workload", SERVE + ["--rate", "10", "--tp", "2"],
     SERVE_FILES, "--chips")
case("serve find-max-rate without sla", SERVE + ["--find-max-rate"], SERVE_FILES,
     "find_max_rate")
case("serve csv without sweep", SERVE + ["--rate", "10", "--csv", "c.csv"], SERVE_FILES,
     "--csv")
case("serve without a rate or a spec", SERVE, SERVE_FILES, "--rate: ", "needs a rate")
for flag, path, fragment in (("--json", "no/r.json", "no/r.json"),
                             ("--json", ".", "directory"), ("--plot", "p.xyz", "p.xyz"),
                             ("--plot", "no/p.png", "no/p.png")):
    case(f"serve {flag} {path}", SERVE + ["--rate", "10", flag, path], SERVE_FILES, flag,
         fragment)
case("serve workload missing", SERVE + ["--rate", "10", "--workload", "nope.yaml"], {},
     "nope.yaml")
case("serve arch a directory", SERVE + ["--rate", "10", "--arch", "d.yaml"],
     {**SERVE_FILES, "d.yaml": "directory"}, "d.yaml", "directory")
case("serve model config NaN", ["serve", "--model", "c.json", "--rate", "1",
     "--requests", "2"], {"c.json": GPT2_FILE.replace("768", "NaN")}, "c.json", "NaN")

# --- serve: arrival trace CSVs.
TRACED = ["serve", "--model", "gpt2", "--arch", "tpu_v5e_like", "--arrival", "trace",
          "--arrival-trace", "t.csv"]
for label, text, fragment in (
        ("empty", "", "empty"), ("header only", TRACE.splitlines()[0] + "\n", "no requests"),
        ("time a word", TRACE.replace("0.5,", "soon,"), "line 3"),
        ("time NaN", TRACE.replace("0.5,", "nan,"), "line 3"),
        ("time inf", TRACE.replace("0.5,", "inf,"), "line 3"),
        ("time negative", TRACE.replace("0.0,", "-1.0,"), "line 2"),
        ("times decreasing", TRACE + "0.1,16,4\n", "decrease"),
        ("tokens zero", TRACE.replace("0.5,16", "0.5,0"), "line 3"),
        ("tokens fraction", TRACE.replace("0.5,16", "0.5,1.5"), "line 3"),
        ("tokens huge", TRACE.replace("0.5,16", f"0.5,{2**70}"), "line 3"),
        ("missing token column", "arrived_at\n0.0\n", "missing column"),
        ("short row", TRACE + "1.0\n", "line 4"),
        ("binary", b"\x00\x01", "binary"), ("a directory", "directory", "directory"),
        ("a FIFO", "fifo", "FIFO"), ("escape in header", "\x1b[2J,b\n1,2\n", "column")):
    case(f"serve trace {label}", TRACED, {"t.csv": text}, "t.csv", fragment)
case("serve trace missing", TRACED, {}, "t.csv", "not found")

# --- serve: the YAML spec.
SPEC = {"workload": "w.yaml", "arch": "edge_32x32", "rate": 10, "requests": 4}
SPECCED = ["serve", "--spec", "s.yaml"]
for label, text, fragment in (
        ("unknown key", edited(SPEC, "rates", 5), "rates"),
        ("duplicate key", dump(SPEC) + "rate: 3\n", "duplicate key"),
        ("rate NaN", dump(SPEC).replace("rate: 10", "rate: .nan"), "rate"),
        ("rate YAML 1.1 boolean", dump(SPEC).replace("rate: 10", "rate: yes"), "rate"),
        ("rate negative", edited(SPEC, "rate", -1), "rate"),
        ("requests octal", dump(SPEC).replace("requests: 4", "requests: 010"), "zero"),
        ("requests huge", edited(SPEC, "requests", 2**70), "requests"),
        ("sla a list", edited(SPEC, "sla", [1]), "sla"),
        ("sla NaN", edited(SPEC, "sla", {"latency_p99_ms": float("nan")}), "sla"),
        ("sweep_rate reversed", edited(SPEC, "sweep_rate", "5:1:3"), "sweep_rate"),
        ("tp zero", edited(SPEC, "tp", 0), "tp"),
        ("top level list", "- 1\n", "mapping"), ("empty", "", "mapping"),
        ("binary", b"\x00\x01", "binary"), ("a directory", "directory", "directory"),
        ("a FIFO", "fifo", "FIFO")):
    case(f"serve spec {label}", SPECCED, {"s.yaml": text, "w.yaml": WORKLOAD_FILE},
         "s.yaml", fragment)
case("serve spec arch with escape", SPECCED, {"s.yaml": edited(SPEC, "arch",
     "x\x1b[2J.yaml"), "w.yaml": WORKLOAD_FILE}, "x\\x1b[2J.yaml", "not found")

# --- accsim sweep run: spec, options, store.
SWEEP_RUN = ["sweep", "run", "s.yaml", "--store", "r.sqlite", "--scheduler", "serial"]
SWEEP_FILES = {"w.yaml": WORKLOAD_FILE}
for label, text, fragment in (
        ("unknown key", edited(SWEEP, "axis", {}), "axis"),
        ("duplicate key", dump(SWEEP) + "name: t\n", "duplicate key"),
        ("no axes", edited(SWEEP, "axes", {}), "axes"),
        ("axis unknown field", edited(SWEEP, "axes", {"systolic_array.rowz": [1]}),
         "rowz"),
        ("axis value NaN", edited(SWEEP, "axes", {"offchip.bandwidth_gbps":
                                                  [float("nan")]}), "finite"),
        ("axis value negative", edited(SWEEP, "axes", {"systolic_array.rows": [-8]}),
         "rows"),
        ("axis value huge", edited(SWEEP, "axes", {"systolic_array.rows": [2**70]}),
         "rows"),
        ("axis a string", edited(SWEEP, "axes", {"systolic_array.rows": "big"}), "rows"),
        ("log2 range reversed", edited(SWEEP, "axes", {"systolic_array.rows":
                                                       {"log2_range": [64, 8]}}), "rows"),
        ("range of a billion points", edited(SWEEP, "axes", {"clock_ghz":
                                       {"range": [0.1, 1e8, 0.1]}}), "clock_ghz"),
        ("constraint calls code", edited(SWEEP, "constraints",
                                         ["__import__('os').system('touch pwned')"]),
         "constraints"),
        ("constraint attribute", edited(SWEEP, "constraints", ["().__class__ == 1"]),
         "constraints"),
        ("constraint syntax", edited(SWEEP, "constraints", ["rows <="]), "constraints"),
        ("constraint huge power", edited(SWEEP, "constraints",
                                         ["systolic_array.rows ** 99999 > 1"]),
         "constraints"),
        ("objective unknown", edited(SWEEP, "objectives", {"speed": "min"}), "objectives"),
        ("sampling n NaN", edited(SWEEP, "sampling", {"method": "random", "n": "x"}),
         "sampling"),
        ("name with escape", edited(SWEEP, "name", "s\x1b[2J"), "name"),
        ("top level list", "- 1\n", "mapping"), ("binary", b"\x00", "binary"),
        ("a FIFO", "fifo", "FIFO")):
    case(f"sweep spec {label}", SWEEP_RUN, {**SWEEP_FILES, "s.yaml": text}, "s.yaml",
         fragment)
GOOD_SWEEP = {**SWEEP_FILES, "s.yaml": dump(SWEEP)}
case("sweep spec workload missing", SWEEP_RUN,
     {"s.yaml": edited(SWEEP, "workloads", ["nope.yaml"])}, "nope.yaml", "not found")
for flag, value in (("--workers", "0"), ("--workers", "-2"), ("--heuristic", "nope"),
                    ("--scheduler", "bogus"), ("--store", "no/r.sqlite"),
                    ("--store", ".")):
    argv = [a for a in SWEEP_RUN if a not in ("--scheduler", "serial")] + [flag, value]
    case(f"sweep run {flag} {value}", argv, GOOD_SWEEP, flag)
for label, content, fragment in (("garbage", b"not a database at all" * 100, "SQLite"),
                                 ("text", "hello\n", "SQLite"),
                                 ("a FIFO", "fifo", "FIFO"),
                                 ("other database", "sqlite:other", "sweep store")):
    case(f"sweep run store {label}", SWEEP_RUN, {**GOOD_SWEEP, "r.sqlite": content},
         "r.sqlite", fragment)
    case(f"sweep report store {label}", ["sweep", "report", "r.sqlite"],
         {"r.sqlite": content}, "r.sqlite", fragment)
case("sweep report store missing", ["sweep", "report", "r.sqlite"], {}, "r.sqlite",
     "not found")
case("sweep report store a directory", ["sweep", "report", "r.sqlite"],
     {"r.sqlite": "directory"}, "r.sqlite", "directory")
REPORT = ["sweep", "report", "r.sqlite"]
for flag, value, fragment in (("--pareto", "speed", "speed"),
                              ("--pareto", "time_s:sideways", "sideways"),
                              ("--best-by", "speed", "speed"), ("--top", "0", "--top"),
                              ("--top", "-1", "--top"), ("--csv", "no/x.csv", "no/x.csv"),
                              ("--plot", "p.xyz", "p.xyz"),
                              ("--parquet", "no/x.parquet", "no/x.parquet"),
                              ("--csv", ".", ".csv")):
    case(f"sweep report {flag} {value}", REPORT + [flag, value],
         {"r.sqlite": "sqlite:store"}, flag, fragment)

# --- accsim review: the study YAML and --out.
REVIEW = ["review", "s.yaml", "--out", "out", "--no-cache"]
for label, text, fragment in (
        ("unknown key", edited(STUDY, "titel", "x"), "titel"),
        ("duplicate key", dump(STUDY) + "title: again\n", "duplicate key"),
        ("title missing", edited(STUDY, "title", ...), "title"),
        ("rate NaN", edited(STUDY, "scope.serving.rate_per_s", float("nan")),
         "rate_per_s"),
        ("rate negative", edited(STUDY, "scope.serving.rate_per_s", -4), "rate_per_s"),
        ("sla NaN", edited(STUDY, "sla.latency_ms.p99", float("nan")), "p99"),
        ("power cap infinite", edited(STUDY, "sla.power_cap_w", float("inf")),
         "power_cap_w"),
        ("threshold a string", edited(STUDY, "rollback.threshold", "high"), "threshold"),
        ("baseline not a platform", edited(STUDY, "baseline", "nope"), "baseline"),
        ("platform missing", edited(STUDY, "scope.platforms", ["nope.yaml"]), "nope.yaml"),
        ("requests huge", edited(STUDY, "scope.serving.requests", 2**70), "requests"),
        ("title with escape", edited(STUDY, "title", "t\x1b[2J"), "title"),
        ("top level list", "- 1\n", "mapping"), ("binary", b"\x00", "binary"),
        ("a FIFO", "fifo", "FIFO")):
    case(f"review study {label}", REVIEW, {"s.yaml": text}, "s.yaml", fragment)
case("review out is a file", REVIEW, {"s.yaml": dump(STUDY), "out": "x"}, "out", "--out")
case("review out is not a packet", REVIEW, {"s.yaml": dump(STUDY), "out": "directory",
     "out/keep.txt": "mine"}, "out", "--out")

# --- accsim verify: review packets and serving results.
PACKET = {"packet": {"format": "accsim-review-packet", "version": 2},
          "study": {"path": "s.yaml", "sha256": "0" * 64},
          "options": {"fusion": None, "ignore_capacity": False},
          "results": [{"path": "r.json", "sha256": "0" * 64, "kind": "run"}],
          "sections": []}
for label, packet, fragment in (
        ("study missing", changed(PACKET, "study", ...), "study"),
        ("study a string", changed(PACKET, "study", "s.yaml"), "study"),
        ("study sha256 missing", changed(PACKET, "study.sha256", ...), "study.sha256"),
        ("study path a number", changed(PACKET, "study.path", 3), "study.path"),
        ("results missing", changed(PACKET, "results", ...), "results"),
        ("results a mapping", changed(PACKET, "results", {}), "results"),
        ("result without kind", changed(PACKET, "results", [{"path": "r.json",
                                        "sha256": "0" * 64}]), "results[0].kind"),
        ("result kind unknown", changed(PACKET, "results", [{"path": "r.json",
                                        "sha256": "0" * 64, "kind": "x"}]),
         "results[0].kind"),
        ("result path a list", changed(PACKET, "results", [{"path": [],
                                       "sha256": "0" * 64, "kind": "run"}]),
         "results[0].path"),
        ("results empty", changed(PACKET, "results", []), "results"),
        ("marker of another version", changed(PACKET, "packet.version", 3),
         "packet.version"),
        # the review options it is rebuilt under
        ("options missing", changed(PACKET, "options", ...), "options"),
        ("options fusion unknown", changed(PACKET, "options.fusion", "x"),
         "options.fusion"),
        ("options ignore_capacity a string", changed(PACKET, "options.ignore_capacity",
                                                     "yes"), "options.ignore_capacity"),
        ("sections missing", changed(PACKET, "sections", ...), "sections"),
        ("figure without file", changed(PACKET, "sections", [{"figures": [{}]}]),
         "sections[0].figures[0].file")):
    case(f"verify packet {label}", ["verify", "packet.json"],
         {"packet.json": json.dumps(packet), "s.yaml": "x: 1\n"}, "packet.json", fragment)
for label, content, fragment in (
        ("curve", {"curve": [{"offered_rps": 1.0}]}, "serve --sweep-rate"),
        ("max rate", {"max_rate_rps": 3.0, "bracket_rps": [1, 2], "evaluations": []},
         "serve --find-max-rate"),
        ("spec mistyped", {"manifest": {"engine": "fast", "engine_reason": "x",
                                        "serving": {"spec": {"rate": "fast"}}}},
         "manifest.serving.spec")):
    case(f"verify serving {label}", ["verify", "r.json"], {"r.json": json.dumps(content)},
         "r.json", fragment)

# --- multi-chip flags on run.
RUN = ["run", "--arch", "tpu_v5e_like", "--workload", "w.yaml"]
for flags, fragment in ((["--chips", "0"], "--chips"), (["--tp", "0"], "--tp"),
                        (["--tp", "3", "--chips", "2"], "--chips"),
                        (["--pp", "-1"], "--pp"), (["--ep", "0"], "--ep"),
                        (["--tp", str(2**70)], "--tp"), (["--tp", "two"], "--tp"),
                        (["--chips", "4", "--tp", "4", "--arch", "edge_32x32"], "links")):
    case(f"run multi-chip {' '.join(flags)}", RUN + flags, {"w.yaml": WORKLOAD_FILE},
         fragment)


# --- input files are data: a Python file named where an input goes is read as data,
# never imported or run (the runner checks that "pwned" was not created).
EVIL = "open('pwned', 'w').close()\n"
for label, argv, files in (
        ("serve arch", ["serve", "--arch", "evil.py", "--workload", "w.yaml", "--rate",
                        "1"], {"w.yaml": WORKLOAD_FILE}),
        ("serve model", ["serve", "--model", "evil.py", "--rate", "1"], {}),
        ("serve spec", ["serve", "--spec", "evil.py"], {}),
        ("sweep platform", SWEEP_RUN, {**SWEEP_FILES, "s.yaml": edited(SWEEP, "platform",
                                                                      "evil.py")}),
        ("review platform", REVIEW, {"s.yaml": edited(STUDY, "scope.platforms",
                                                      ["evil.py"])}),
        ("review sweep spec", REVIEW, {"s.yaml": edited(STUDY, "scope.sweep", "evil.py")}),
        ("import kineto", ["import", "kineto", "evil.py"], {}),
        ("import hf", ["import", "hf", "evil.py", "--phase", "prefill", "--seq", "8"], {}),
        ("verify packet result", ["verify", "packet.json"],
         {"packet.json": json.dumps(changed(PACKET, "results", [
             {"path": "evil.py", "sha256": "0" * 64, "kind": "run"}]))})):
    case(f"python file as {label}", argv, {**files, "evil.py": EVIL}, "evil.py")


def _make_file(path: Path, content) -> None:
    if isinstance(content, str) and content.startswith("sqlite:"):
        db = sqlite3.connect(path)
        if content == "sqlite:other":
            db.execute("create table t (x)")
        else:  # an empty, valid store made by the store itself
            db.close()
            from simulator.sweep.store import Store
            Store(str(path)).close()
            return
        db.commit()
        db.close()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        _make(path, content)


def test_there_are_enough_cases():
    assert len(CASES) >= 100
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, files, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_bad_input_is_one_clear_error(name, argv, files, fragments, tmp_path,
                                      monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        _make_file(tmp_path / file, content)
    assert_refused(argv, fragments, capsys)
    assert not (tmp_path / "pwned").exists()


def test_verify_serves_a_serve_result_again(tmp_path, monkeypatch, capsys):
    """verify reruns a `serve --json` result from its recorded spec: identical figures
    verify, an edited figure does not."""
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--arch", "edge_32x32", "--workload", "gemm_4096", "--rate",
                 "50", "--requests", "10", "--json", "s.json"]) == 0
    assert main(["verify", "s.json"]) == 0
    assert "s.json: verified" in capsys.readouterr().out
    forged = json.loads(Path("s.json").read_text())
    forged["completed"] += 1
    Path("f.json").write_text(json.dumps(forged))
    assert main(["verify", "f.json"]) == 1
    assert ".completed: 11 != 10" in capsys.readouterr().out
