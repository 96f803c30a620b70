"""Hostile inputs of issue 42, table-driven under the shared timed runner
(tests/timed_cli.py): JSON crafted to make a parser super-linear, ONNX graphs of
repeated names, result files that name a FIFO or a device, serve options that
contradict each other, numbers written with `_` or in non-ASCII digits, absurd Kineto
durations, a KV block larger than the cache, SCALE-Sim files whose content an error
could echo, an empty SCALE-Sim config.

Each refused case exits non-zero within SECONDS of CPU time with one error line that
names the file or flag, holds the fragments given, no traceback, no escape sequence,
no more than a bounded excerpt of the input (never SECRET 20 times in a row: 120
characters), and writes nothing.

Each row: (id, argv, {file name: content}, fragments the output must contain).
Content is as tests/test_bad_inputs.py's _make takes it, or a callable returning it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from kineto_traces import transformer_trace
from test_bad_inputs import WORKLOAD_FILE, _make
from timed_cli import run_main

SECONDS = 2  # CPU seconds a refusal may take (issue 42's bound)
MAX_LINE = 800
SECRET = "SECRET"
REPO = Path(__file__).resolve().parent.parent
GPT2 = json.loads((REPO / "workloads/hf/gpt2.json").read_text())
TINY = json.dumps(GPT2 | {"n_layer": 1, "n_embd": 64, "n_head": 2, "n_inner": 128,
                          "vocab_size": 256, "n_positions": 64})
CASES: list[tuple[str, list[str], dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict, *fragments: str) -> None:
    CASES.append((name, argv, files, list(fragments)))


# --- JSON a parser (or a pre-scan of it) would read in super-linear time: every JSON
# reader, each payload a few MiB.
MIB = 2**20
SUPER_LINEAR = {
    "escaped quotes, unterminated": lambda: '"' + '\\"' * (2 * MIB),
    "escaped quotes in an object": lambda: '{"a": "' + '\\"' * (2 * MIB),
    "quote-backslash pairs": lambda: '"\\' * (2 * MIB),
    "backslash runs before quotes": lambda: ('\\\\\\"' * MIB)[1:],
    "escaped quotes then brackets": lambda: '["' + '\\"[' * MIB,
    "a duplicate key after 200k keys": lambda: "{" + ",".join(
        f'"k{i}": 1' for i in range(200_000)) + ', "k0": 2}',
    "a duplicate key nested 60 deep": lambda: '{"a":' * 60 + '{"x": 1, "x": 2}' +
    "}" * 60,
    "quotes and newlines unterminated": lambda: '"\\\n' * MIB,
}
JSON_READERS = {
    "hf": (["import", "hf", "c.json", "--phase", "prefill", "--seq", "8"], "c.json"),
    "run --model": (["run", "--model", "c.json", "--phase", "decode", "--context", "8"],
                    "c.json"),
    "kineto": (["import", "kineto", "t.json"], "t.json"),
    "run --kineto": (["run", "--kineto", "t.json"], "t.json"),
    "verify": (["verify", "r.json"], "r.json"),
    "serve --model": (["serve", "--model", "c.json", "--arch", "edge_32x32", "--rate",
                       "1", "--requests", "2"], "c.json"),
}
for reader, (argv, file) in JSON_READERS.items():
    for label, content in SUPER_LINEAR.items():
        case(f"{reader}: {label}", argv, {file: content}, file)
HF_READERS = {k: v for k, v in JSON_READERS.items() if "c.json" in v[0]}
for reader, (argv, file) in HF_READERS.items():
    for label, content in (
            ("a list of two million numbers", lambda: '{"a": [' + "1," * 2 * 10**6 +
             "1]}"),
            ("1,200,000 keys", lambda: "{" + ",".join(f'"k{i}": 1'
                                                      for i in range(1_200_000)) + "}"),
            ("two million empty lists", lambda: '{"a": [' + "[]," * 2 * 10**6 + "[]]}")):
        case(f"{reader}: {label}", argv, {file: content}, file, "1,000,000 this file")

# --- ONNX graphs whose names repeat: read in linear time (suffixes _2, _3, ...).


def onnx_chain(nodes: int, name: str = "same", *, broken: bool = False) -> bytes:
    """A chain of `nodes` Relu nodes all named `name`; `broken`: the last reads a
    tensor nothing makes (so the import is refused after the names are made unique)."""
    made = [helper.make_node("Relu", ["x" if i == 0 else f"t{i - 1}"], [f"t{i}"],
                             name=name) for i in range(nodes)]
    if broken:
        made.append(helper.make_node("Relu", ["ghost"], ["y"], name=name))
    graph = helper.make_graph(
        made, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info(f"t{nodes - 1}", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
        .SerializeToString()


for label, argv in (("import", ["import", "onnx", "m.onnx"]),
                    ("run", ["run", "--onnx", "m.onnx"])):
    case(f"onnx {label}: 60,000 duplicate names, one dangling input", argv,
         {"m.onnx": lambda: onnx_chain(60_000, broken=True)}, "m.onnx", "ghost")
    case(f"onnx {label}: 60,000 duplicates named like their suffixes", argv,
         {"m.onnx": lambda: onnx_chain(60_000, "n_2", broken=True)}, "m.onnx", "ghost")

# --- accsim verify: a result naming files that are not regular or are too large.
# (Made by the verify_result fixture: the test rewrites the named path.)
VERIFY_TARGETS = {
    "a FIFO": ("fifo", "FIFO"),
    "/dev/zero": ("/dev/zero", "character device"),
    "a link to /dev/zero": ("link:/dev/zero", "character device"),
    "a directory": ("directory", "directory"),
    "a 3 GB sparse file": ("sparse:3000000000", "larger than"),
    "/dev/urandom": ("/dev/urandom", "character device"),
}

# --- serve: options the run would ignore (contradictions) are refused, not dropped.
LLM = ["serve", "--model", "c.json", "--arch", "edge_32x32", "--requests", "2"]
PLAIN = ["serve", "--workload", "w.yaml", "--arch", "edge_32x32", "--requests", "2"]
TRACE = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,16,4\n0.5,16,4\n"
SERVE_FILES = {"c.json": TINY, "w.yaml": WORKLOAD_FILE, "t.csv": TRACE}
for label, argv, fragments in (
        ("cv with poisson", LLM + ["--rate", "1", "--cv", "2"], ["--cv", "gamma"]),
        ("cv with poisson, explicit", LLM + ["--arrival", "poisson", "--rate", "1",
                                             "--cv", "0.5"], ["--cv", "poisson"]),
        ("cv with a trace", LLM + ["--arrival-trace", "t.csv", "--cv", "3"],
         ["--cv", "trace"]),
        ("poisson with a trace", LLM + ["--arrival", "poisson", "--rate", "1",
                                        "--arrival-trace", "t.csv"], ["conflicts"]),
        ("gamma with a trace", LLM + ["--arrival", "gamma", "--rate", "1",
                                      "--arrival-trace", "t.csv"], ["conflicts"]),
        ("prompt tokens with a trace", LLM + ["--arrival-trace", "t.csv",
                                              "--prompt-tokens", "32"],
         ["--prompt-tokens", "trace"]),
        ("output tokens with a trace", LLM + ["--arrival-trace", "t.csv",
                                              "--output-tokens", "32"],
         ["--output-tokens", "trace"]),
        ("prompt tokens with a plain workload", PLAIN + ["--rate", "1",
                                                         "--prompt-tokens", "32"],
         ["--prompt-tokens", "LLM"]),
        ("output tokens with a plain workload", PLAIN + ["--rate", "1",
                                                         "--output-tokens", "3"],
         ["--output-tokens", "LLM"]),
        ("block tokens with a plain workload", PLAIN + ["--rate", "1", "--block-tokens",
                                                        "32"], ["--block-tokens"]),
        ("max tokens with dynamic batching", PLAIN + ["--rate", "1", "--max-tokens",
                                                      "64"], ["--max-tokens", "dynamic"]),
        ("max tokens with static batching", LLM + ["--rate", "1", "--batching", "static",
                                                   "--max-tokens", "64"],
         ["--max-tokens", "static"]),
        ("max wait with continuous batching", LLM + ["--rate", "1", "--max-wait-ms",
                                                     "5"], ["--max-wait-ms"]),
        ("max wait with explicit continuous", LLM + ["--rate", "1", "--batching",
                                                     "continuous", "--max-wait-ms", "0"],
         ["--max-wait-ms"]),
        ("a KV block larger than the cache", LLM + ["--arch", "tpu_v5e_like", "--model",
                                                    "llama_3_1_8b", "--rate", "1",
                                                    "--block-tokens",
                                                    "1000000", "--prompt-tokens", "16",
                                                    "--output-tokens", "4"],
         ["block_tokens", "larger than"]),
        ("sla with underscores", LLM + ["--rate", "1", "--sla", "ttft_p99_ms=1_000"],
         ["--sla", "not a number"]),
        ("sla in Arabic-Indic digits", LLM + ["--rate", "1", "--sla",
                                              "ttft_p99_ms=\u0661\u0662"],
         ["--sla", "not a number"]),
        ("sla in full-width digits", LLM + ["--rate", "1", "--sla",
                                            "ttft_p99_ms=\uff15\uff10"],
         ["--sla", "not a number"])):
    case(f"serve {label}", argv, SERVE_FILES, *fragments)

# --- arrival traces: numbers are ASCII decimal, nothing else Python would parse.
HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens"
TRACED = LLM + ["--arrival-trace", "t.csv"]
for column, row in (("arrived_at", "{},16,4"), ("num_prefill_tokens", "0.5,{},4"),
                    ("num_decode_tokens", "0.5,16,{}")):
    for label, text in (("underscores", "1_000"), ("Arabic-Indic digits", "\u0661\u0662"),
                        ("full-width digits", "\uff11\uff12"),
                        ("Devanagari digits", "\u0967\u0968"),
                        ("superscript digits", "\u00b9\u00b2"),
                        ("hexadecimal", "0x10"), ("a leading underscore", "_1")):
        trace = f"{HEADER}\n0.0,16,4\n{row.format(text)}\n"
        case(f"trace {column} in {label}", TRACED, {**SERVE_FILES, "t.csv": trace},
             "t.csv", "line 3", column)

# --- Kineto: times written as text the same way, and durations no profile records.


def kineto(**fields) -> str:
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
             "ts": 0, "dur": 5, "args": {"Input Dims": [[4, 8], [8, 4]]}}
    return json.dumps({"traceEvents": [event | fields]})


for label, fields, fragment in (
        ("dur 1e300", {"dur": 1e300}, "traceEvents[0].dur"),
        ("dur 1e300 as text", {"dur": "1e300"}, "traceEvents[0].dur"),
        ("dur 1e13 us", {"dur": 1e13}, "traceEvents[0].dur"),
        ("dur with underscores", {"dur": "1_000"}, "traceEvents[0].dur"),
        ("dur in Arabic-Indic digits", {"dur": "\u0661\u0662"}, "traceEvents[0].dur"),
        ("dur in full-width digits", {"dur": "\uff15"}, "traceEvents[0].dur"),
        ("dur hexadecimal", {"dur": "0x10"}, "traceEvents[0].dur"),
        ("dur padded with spaces", {"dur": " 5 "}, "traceEvents[0].dur"),
        ("ts with underscores", {"ts": "1_000"}, "traceEvents[0].ts"),
        ("ts in Devanagari digits", {"ts": "\u0967"}, "traceEvents[0].ts"),
        ("ts 1e300", {"ts": 1e300}, "traceEvents[0].ts"),
        ("ts past 2**53 us", {"ts": 2.0**60}, "traceEvents[0].ts"),
        ("ts infinity as text", {"ts": "infinity"}, "traceEvents[0].ts")):
    for verb, argv in (("import", ["import", "kineto", "t.json"]),
                       ("run", ["run", "--kineto", "t.json"])):
        case(f"kineto {verb} {label}", argv, {"t.json": kineto(**fields)}, "t.json",
             fragment)

# --- SCALE-Sim: no error echoes the file's content; an empty config is refused.
TOPOLOGY = ["run", "--arch", "edge_32x32", "--workload", "t.csv"]
CONFIG = ["run", "--arch", "a.cfg", "--workload", "w.yaml"]
for label, text in (
        ("a header of one long secret", SECRET * 10_000 + "\nx,1,2,3\n"),
        ("a header of many secret cells", ",".join([SECRET * 20] * 2000) + "\n"),
        ("a secret first line, no commas", f"{SECRET * 50}\n" * 3)):
    case(f"scalesim topology {label}", TOPOLOGY, {"t.csv": text}, "t.csv", "header")
for label, text, fragment in (
        ("empty", "", "empty config"),
        ("only comments", "# a comment\n; another\n", "empty config"),
        ("only blank lines", "\n\n   \n", "empty config"),
        ("a secret width", "[architecture_presets]\nArrayWidth = " + SECRET * 5000 + "\n",
         "ArrayWidth"),
        ("a secret dataflow", "[architecture_presets]\nArrayHeight = 8\nArrayWidth = 8\n"
         "IfmapSramSzkB = 8\nFilterSramSzkB = 8\nOfmapSramSzkB = 8\nDataflow = "
         + SECRET * 5000 + "\n", "Dataflow"),
        ("a secret bandwidth", "[architecture_presets]\nArrayHeight = 8\nArrayWidth = 8\n"
         "IfmapSramSzkB = 8\nFilterSramSzkB = 8\nOfmapSramSzkB = 8\nDataflow = os\n"
         "Bandwidth = " + SECRET * 5000 + "\n", "Bandwidth"),
        ("a secret line without a section", SECRET * 5000 + "\n", "section"),
        ("a secret duplicate option", "[general]\n" + (SECRET * 2000 + " = 1\n") * 2,
         "malformed")):
    case(f"scalesim config {label}", CONFIG, {"a.cfg": text, "w.yaml": WORKLOAD_FILE},
         "a.cfg", fragment)


# --- the runner.

def _build(path: Path, content) -> None:
    _make(path, content() if callable(content) else content)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _assert_refused(argv, fragments, tmp_path, capsys) -> None:
    before = _files(tmp_path)
    capsys.readouterr()
    code, out, err, seconds = run_main(argv, capsys, SECONDS)
    assert code not in (0, None), f"accepted: {out[-400:]}"
    assert seconds < SECONDS
    assert "Traceback" not in out + err
    assert "\x1b" not in out + err
    assert SECRET * 20 not in out + err, "the file's content is echoed"
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err[-800:]
    assert len(errors[0]) <= MAX_LINE, f"{len(errors[0])} characters: {errors[0][:300]}"
    for fragment in fragments:
        assert fragment in out + err, f"{fragment!r} not in {(out + err)[-600:]!r}"
    assert _files(tmp_path) == before, "a refused run wrote a file"


def test_there_are_enough_distinct_cases():
    names = [name for name, *_ in CASES] + [f"verify {n}" for n in VERIFY_TARGETS]
    assert len(names) >= 100
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("name, argv, files, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_input_is_refused_fast_in_one_line(name, argv, files, fragments,
                                                   tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        _build(tmp_path / file, content)
    _assert_refused(argv, fragments, tmp_path, capsys)


@pytest.fixture(scope="module")
def verify_result(tmp_path_factory) -> dict:
    """A plain run's result, whose manifest names its inputs' files."""
    folder = tmp_path_factory.mktemp("verify")
    (folder / "w.yaml").write_text(WORKLOAD_FILE)
    from simulator.cli import main
    assert main(["run", "--arch", "edge_32x32", "--workload", str(folder / "w.yaml"),
                 "--json", str(folder / "r.json")]) == 0
    return json.loads((folder / "r.json").read_text())


@pytest.mark.parametrize("source", ["workload", "platform"])
@pytest.mark.parametrize("label", list(VERIFY_TARGETS))
def test_verify_reads_only_regular_files_under_a_bound(label, source, verify_result,
                                                       tmp_path, monkeypatch, capsys):
    """A result naming a FIFO, a device, a folder or a huge file as its input: that
    input is "no longer readable" (the result NOT verified), nothing is read from it."""
    monkeypatch.chdir(tmp_path)
    content, fragment = VERIFY_TARGETS[label]
    if content.startswith("/dev/"):
        target = content
    else:
        target = str(tmp_path / "named")
        _make(Path(target), content)
    result = json.loads(json.dumps(verify_result))
    result["manifest"]["inputs"][source]["path"] = target
    (tmp_path / "r.json").write_text(json.dumps(result))
    before = _files(tmp_path)
    capsys.readouterr()
    code, out, err, seconds = run_main(["verify", "r.json"], capsys, SECONDS)
    assert code == 1 and seconds < SECONDS
    assert "Traceback" not in out + err
    assert f"{source}: {target} (no longer readable" in out + err
    assert fragment in out + err
    assert "NOT verified" in out + err
    assert _files(tmp_path) == before


def test_an_import_of_60000_duplicate_names_is_linear(tmp_path, monkeypatch, capsys):
    """The 60,000 repeated names get distinct suffixes, in order, quickly."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes(onnx_chain(60_000))
    code, out, err, seconds = run_main(["import", "onnx", "m.onnx", "-o", "w.yaml"],
                                       capsys, 4 * SECONDS)
    assert code == 0, err
    text = (tmp_path / "w.yaml").read_text()
    assert "{name: same," in text and "{name: same_2," in text
    assert "{name: same_60000," in text and "same_60001" not in text


def test_kineto_accepts_ascii_decimal_times_as_text(tmp_path, monkeypatch, capsys):
    """What the stricter number rule keeps: times written as ASCII decimal text."""
    monkeypatch.chdir(tmp_path)
    trace, _ = transformer_trace()
    for event in trace["traceEvents"]:
        if isinstance(event.get("dur"), (int, float)):
            event["dur"] = f"{event['dur']:.3f}"
    (tmp_path / "t.json").write_text(json.dumps(trace))
    code, out, err, _ = run_main(["import", "kineto", "t.json", "-o", "w.yaml"], capsys,
                                 4 * SECONDS)
    assert code == 0, err
    assert "operators" in out


@pytest.mark.parametrize("where, advised", [("tile programs", True),
                                            ("anywhere else", False)])
def test_out_of_memory_advises_max_memory_only_for_tile_programs(where, advised,
                                                                 monkeypatch, capsys):
    """"lower --max-memory" only where tile programs took the memory (the one case the
    option refuses up front): not for an input that ran the machine out of memory."""
    from simulator import simulate as simulate_module
    from simulator.inputs import named_inputs as inputs_module

    def exhausted(*args, **kwargs):
        raise MemoryError()

    if advised:
        monkeypatch.setattr(simulate_module, "lower_resolved", exhausted)
    else:
        monkeypatch.setattr(inputs_module, "load_inputs", exhausted)
        monkeypatch.setattr("simulator.commands.run.load_inputs", exhausted,
                            raising=False)
    code, out, err, _ = run_main(["run", "--arch", "edge_32x32", "--workload",
                                  "gemm_4096"], capsys, 4 * SECONDS)
    assert code == 1
    assert err.startswith("accsim: error: out of memory")
    assert ("--max-memory" in err) is advised


@pytest.mark.parametrize("argv, text, suggestion", [
    (["check", "p.yaml"], "platform", "systolic_array.rowz: unknown field (misspelt?); "
     "did you mean 'rows'?"),
    (["check", "w.yaml", "--kind", "workload"], "name: w\noperators:\n  - {name: g, kind: "
     "gemm, m: 4, n: 4, kk: 4}\n", "operators[0](g).kk: unknown field (misspelt?); did "
     "you mean 'k'?"),
    (["serve", "--spec", "s.yaml"], "arch: edge_32x32\nworkload: gemm_4096\nrat: 3\n",
     "rat: unknown field (misspelt?); did you mean 'rate'?"),
    (["check", "w.yaml", "--kind", "workload"], "name: w\nzzzz: 1\noperators: []\n",
     "zzzz: unknown field (misspelt?)"),
])
def test_an_unknown_field_names_the_closest_known_one(argv, text, suggestion, tmp_path,
                                                      monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if text == "platform":
        text = (REPO / "arch_configs/edge_32x32.yaml").read_text().replace("rows:",
                                                                             "rowz:")
    (tmp_path / argv[1 if argv[0] == "check" else 2]).write_text(text)
    code, out, err, _ = run_main(argv, capsys, 4 * SECONDS)
    assert code == 1
    assert suggestion in err
    if "zzzz" in suggestion:
        assert "did you mean" not in err


def test_a_graph_past_the_node_bound_is_refused_before_it_is_walked(tmp_path,
                                                                    monkeypatch, capsys):
    """The node count is checked before the wiring and the shapes (bound lowered here
    to 1,000 so the test builds a small graph)."""
    from simulator.frontends.onnx import graph
    monkeypatch.setattr(graph, "MAX_NODES", 1_000)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes(onnx_chain(1_001))
    _assert_refused(["import", "onnx", "m.onnx"], ["m.onnx", "1,001 nodes", "1,000"],
                    tmp_path, capsys)
