"""Bad and hostile inputs to the readers of `accsim import kineto|onnx|hf` and `accsim
run --model/--kineto/--onnx` (DESIGN.md sections 7 and 13), table-driven: each case is
one command line on files made for it. A refused case exits non-zero with exactly one
line on stderr that names the file (and the field where there is one), echoes no more
of the file than a bounded excerpt, holds no traceback or escape sequence, and answers
within SECONDS. A case whose right answer is an import with counted unmodelled events
must succeed and say so.

Each row: (id, argv, {file name: content}, fragments the error line must contain).
Content is text, bytes, a callable returning either (built when the case runs), or a
special kind: "directory", "fifo", "sparse:N" (a file of N bytes, none written),
"link:TARGET" (a symlink).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from kineto_traces import conv_trace, transformer_trace
from test_bad_inputs import _make as make_input
from timed_cli import run_main

SECONDS = 5
# Longest error line accepted: a message plus bounded excerpts, never a file's content.
MAX_LINE = 800
REPO = Path(__file__).resolve().parent.parent
GPT2 = json.loads((REPO / "workloads/hf/gpt2.json").read_text())
LLAMA = json.loads((REPO / "workloads/hf/llama_3_1_8b.json").read_text())
MIXTRAL = json.loads((REPO / "workloads/hf/mixtral_8x7b.json").read_text())
CASES: list[tuple[str, list[str], dict, list[str]]] = []
ACCEPTED: list[tuple[str, list[str], dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict, *fragments: str) -> None:
    CASES.append((name, argv, files, list(fragments)))


def accepted(name: str, argv: list[str], files: dict, *fragments: str) -> None:
    ACCEPTED.append((name, argv, files, list(fragments)))


# --- every reader: files that are not regular, readable, bounded text.
READERS = {
    "kineto": (["import", "kineto", "t.json"], "t.json"),
    "run-kineto": (["run", "--kineto", "t.json"], "t.json"),
    "onnx": (["import", "onnx", "m.onnx"], "m.onnx"),
    "hf": (["import", "hf", "c.json", "--phase", "prefill", "--seq", "8"], "c.json"),
    "run-model": (["run", "--model", "c.json", "--phase", "decode", "--context", "8"],
                  "c.json"),
}
for reader, (argv, file) in READERS.items():
    for label, content, fragment in (
            ("a directory", "directory", "directory"),
            ("a FIFO", "fifo", "FIFO"),
            ("a link to /dev/zero", "link:/dev/zero", "character device"),
            ("a link to itself", f"link:{file}", "cannot read"),
            ("missing", None, "not found"),
            ("empty", "", ""),
            ("too large", "sparse:3000000000", "larger than")):
        files = {} if content is None else {file: content}
        case(f"{reader} {label}", argv, files, file, fragment)
JSON_READERS = {k: v for k, v in READERS.items() if k != "onnx"}
for reader, (argv, file) in JSON_READERS.items():
    for label, content, fragment in (
            ("truncated", '{"traceEvents": [{"ph": "X"', "not JSON"),
            ("garbage", "\x7fELF garbage }{", "not JSON"),
            ("not UTF-8", b'{"a": "\xff\xfe"}', "UTF-8"),
            ("NUL bytes", b'{"a": 1}\x00', "binary"),
            ("nested 100k deep", lambda: "[" * 100_000 + "]" * 100_000, "nested"),
            ("nested 100k deep objects", lambda: '{"a":' * 100_000 + "1" + "}" * 100_000,
             "nested"),
            ("NaN", '{"a": NaN}', "NaN"),
            ("Infinity", '{"a": -Infinity}', "Infinity"),
            ("float overflow", '{"a": 1e400}', "range"),
            ("an int of 5000 digits", lambda: '{"a": ' + "9" * 5000 + "}", "strict JSON"),
            ("duplicate key", '{"a": 1, "a": 2}', "duplicate key"),
            ("a huge single line", lambda: '{"a": "' + "x" * 20_000_000, "not JSON"),
            # read past its BOM (RFC 8259 allows it): refused for its content, as below
            ("a UTF-8 BOM", '\ufeff{"a": 1}', ""),
            ("a bare string", '"hello"', ""),
            ("null", "null", "")):
        case(f"{reader} {label}", argv, {file: content}, file, fragment)

# --- accsim import kineto: traces with missing, mistyped or impossible fields.
KINETO = ["import", "kineto", "t.json"]


def trace_of(*events: dict) -> str:
    return json.dumps({"traceEvents": list(events)})


def op(name: str = "aten::mm", dims=None, **fields) -> dict:
    event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0,
             "dur": 5, "args": {"Input Dims": [[4, 8], [8, 4]] if dims is None else dims}}
    event.update(fields)
    return event


GOOD_OP = op("aten::mm", [[4, 8], [8, 4]], ts=100)
for label, events, fragment in (
        ("traceEvents a number", '{"traceEvents": 3}', "traceEvents"),
        ("traceEvents null", '{"traceEvents": null}', "traceEvents"),
        ("traceEvents an object", '{"traceEvents": {"a": 1}}', "traceEvents"),
        ("events all numbers", "[1, 2, 3]", "no operator events"),
        ("no complete events", trace_of({**op(), "ph": "B"}), "no operator events"),
        ("category a list", trace_of(op(cat=["cpu_op"])), "no operator events"),
        ("ts missing", trace_of({k: v for k, v in op().items() if k != "ts"}), "ts"),
        ("ts a word", trace_of(op(ts="soon")), "traceEvents[0].ts"),
        ("ts nan as text", trace_of(op(ts="nan")), "traceEvents[0].ts"),
        ("ts inf as text", trace_of(op(ts="-inf")), "finite"),
        ("ts 10**400", trace_of(op(ts=10**400)), "traceEvents[0].ts"),
        ("ts a boolean", trace_of(op(ts=True)), "traceEvents[0].ts"),
        ("ts a list", trace_of(op(ts=[1])), "traceEvents[0].ts"),
        ("dur negative", trace_of(op(dur=-5)), "traceEvents[0].dur"),
        ("dur 10**400", trace_of(op(dur=10**400)), "traceEvents[0].dur"),
        ("dur an object", trace_of(op(dur={"us": 5})), "traceEvents[0].dur"),
        ("pid a list", trace_of(op(pid=[1, 2])), "traceEvents[0].pid"),
        ("tid an object", trace_of(op(tid={"a": 1})), "traceEvents[0].tid"),
        ("name a number", trace_of(op(name=42)), "traceEvents[0].name"),
        ("name null", trace_of(op(name=None)), "traceEvents[0].name"),
        ("Input Dims a string", trace_of(op(dims="[[4, 8], [8, 4]]")), "Input Dims"),
        ("Input Dims as strings", trace_of(op(dims=[["4", "8"], [8, 4]])), "Input Dims[0]"),
        ("Input Dims negative", trace_of(op(dims=[[-4, 8], [8, 4]])), "Input Dims[0]"),
        ("Input Dims fractions", trace_of(op(dims=[[4.5, 8], [8, 4]])), "Input Dims[0]"),
        ("Input Dims booleans", trace_of(op(dims=[[True, 8], [8, 4]])), "Input Dims[0]"),
        ("Input Dims 10**400", trace_of(op(dims=[[10**400, 8], [8, 4]])), "Input Dims[0]"),
        ("Input Dims past int64", trace_of(op(dims=[[2**63, 8], [8, 4]])), "Input Dims[0]"),
        ("Input Dims nested", trace_of(op(dims=[[[[4]]], [8, 4]])), "Input Dims[0]"),
        ("Input Dims an entry null", trace_of(op(dims=[None, [8, 4]])), "Input Dims[0]"),
        ("mm inner dimensions differ", trace_of(op(dims=[[4, 8], [9, 4]])),
         "inner dimensions differ"),
        ("linear disagrees on K", trace_of(op("aten::linear", [[4, 8], [16, 9], [16]])),
         "disagree on K"),
        ("args a string, no shapes", trace_of(op(args="Input Dims")), "record_shapes"),
        ("every op beyond accsim's limits",
         trace_of(op(dims=[[2**40, 2**40], [2**40, 2**40]])), "UNSUPPORTED"),
        ("only unsupported ops", trace_of(op("aten::cumsum", [[4, 8]])), "cumsum"),
        ("repeats overflow", trace_of(*[op(dims=[[2**30, 2**15], [2**15, 2**15]],
                                           ts=10 * i) for i in range(5)]),
         "overflow"),
        ("events nested 100k deep", lambda: trace_of(
            *[op("aten::foo", [[1]], ts=i, dur=1_000_000 - 2 * i) for i in range(100_000)]),
         "nested more than"),
        ("a huge name in the error", trace_of(op("aten::mm." + "x" * 100_000,
                                                 [["4"], [8]])), "Input Dims[0]"),
        ("a huge pid in the error", trace_of(op(pid="p" * 100_000, dims=[["a"]])),
         "Input Dims[0]"),
        ("huge shapes in the error", trace_of(op(dims=[[4, 8], [9] * 100_000])),
         "inner dimensions"),
        ("an escape sequence in the name", trace_of(op("aten::mm\x1b[2J", [["4"]])),
         "\\x1b"),
        ("gzip corrupt", b"\x1f\x8b\x08\x00garbage", "gzip"),
        ("gzip truncated", gzip.compress(b'{"traceEvents": []}' * 50)[:30], "gzip"),
        ("gzip of binary", gzip.compress(b"\x00\x01\x02"), "binary"),
        ("gzip of garbage", gzip.compress(b"}{ not json"), "not JSON"),
        ("gzip of a deep nest", lambda: gzip.compress(b"[" * 200_000 + b"]" * 200_000),
         "nested")):
    case(f"kineto {label}", KINETO, {"t.json": events}, "t.json", fragment)
case("run --kineto dims as strings", ["run", "--kineto", "t.json"],
     {"t.json": trace_of(op(dims=[["4", "8"], [8, 4]]))}, "t.json", "Input Dims[0]")
case("run --kineto only a zero-size sum", ["run", "--kineto", "t.json"],
     {"t.json": trace_of(op("aten::sum", [[0, 8], [], [], []]))}, "t.json",
     "zero-size dimension")
case("kineto strict on a zero-size sum", KINETO + ["--strict"],
     {"t.json": trace_of(GOOD_OP, op("aten::sum", [[0, 8], [], [], []]))}, "t.json",
     "--strict: sum (zero-size dimension")
case("kineto strict on an out= variant", KINETO + ["--strict"],
     {"t.json": trace_of(GOOD_OP, op("aten::pow.Tensor_Scalar_out", [[4, 8], [], [4, 8]]))},
     "t.json", "out= variant")

# The right answer for these is an import that counts what it left out, and why.
for label, event, fragment in (
        ("a zero-size sum", op("aten::sum", [[0, 128], [], [], []]),
         "1 sum (zero-size dimension)"),
        ("a pow out= variant", op("aten::pow.Tensor_Scalar_out", [[4, 8], [], [4, 8]]),
         "1 pow (out= variant"),
        ("an out tensor that does not broadcast", op("aten::add", [[4, 8], [4, 8], [3]]),
         "1 add (inputs do not broadcast"),
        ("a 0-d softmax", op("aten::softmax", [[], [], []]), "1 softmax (a 0-d tensor"),
        ("an addmm missing an input", op("aten::addmm", [[4], [4, 8]]),
         "1 addmm (fewer recorded inputs"),
        ("a conv stride that is text", op("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3],
                                                           [], [], [], [], []],
                                          args={"Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3],
                                                               [], [], [], [], []],
                                                "Concrete Inputs": ["", "", "", "[2, 'a']",
                                                                    "0", "1", "1"]}),
         "1 conv2d (recorded arguments of an unexpected form)"),
        ("a stride of 5000 digits", op("aten::conv2d", args={
            "Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []],
            "Concrete Inputs": ["", "", "", "9" * 5000, "0", "1", "1"]}),
         "1 conv2d (recorded arguments of an unexpected form)"),
        ("an mm beyond accsim's limits", op(dims=[[2**40, 2**40], [2**40, 2**40]]),
         "1 mm (not an accsim gemm"),
        ("a correlation that is a list", {"ph": "X", "cat": "kernel", "name": "k",
                                          "pid": 0, "tid": 7, "ts": 1, "dur": 2,
                                          "args": {"correlation": [1]}},
         "1 operator")):
    accepted(f"kineto counts {label}", KINETO + ["-o", "w.yaml"],
             {"t.json": trace_of(GOOD_OP, event)}, fragment)
accepted("kineto reads a gzip trace", ["import", "kineto", "t.json.gz", "-o", "w.yaml"],
         {"t.json.gz": lambda: gzip.compress(json.dumps(conv_trace()[0]).encode())},
         "5 operators")
accepted("kineto counts cumsum in a real-looking trace", KINETO + ["-o", "w.yaml"],
         {"t.json": lambda: json.dumps(transformer_trace()[0])}, "1 cumsum")

# --- accsim import onnx: files that are not ONNX models, or damaged ones.


def onnx_model(*, dims=(1, 8), weight=(8, 4), op_type="MatMul", domain="",
               opset=17) -> bytes:
    graph = helper.make_graph(
        [helper.make_node(op_type, ["x", "w"], ["y"], name="n", domain=domain)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims)),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, list(weight))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


GOOD_ONNX = onnx_model()
ONNX = ["import", "onnx", "m.onnx"]
for label, content, fragment in (
        ("garbage", b"\xff\xfe\x00garbage" * 10, "ONNX"),
        ("JSON text", b'{"graph": {}}', "ONNX"),
        ("a gzip file", gzip.compress(GOOD_ONNX), "ONNX"),
        ("truncated in half", GOOD_ONNX[:len(GOOD_ONNX) // 2], "ONNX"),
        ("truncated by one byte", GOOD_ONNX[:-1], "ONNX"),
        ("one byte", b"\x08", "ONNX"),
        ("only an ir_version", b"\x08\x07", "opset"),
        ("random protobuf varints", bytes(range(1, 120)), "ONNX"),
        ("no nodes", helper.make_model(helper.make_graph([], "g", [], [])).
         SerializeToString(), "no nodes"),
        ("a node reading nothing", onnx.helper.make_model(helper.make_graph(
            [helper.make_node("Relu", ["ghost"], ["y"], name="r")], "g", [],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])).
         SerializeToString(), "ghost"),
        ("shapes that disagree", onnx_model(weight=(9, 4)), "shape inference"),
        ("symbolic input dims", onnx_model(dims=("batch", 8)), "--batch"),
        ("a negative dim", onnx_model(dims=(-3, 8)), "unknown dimensions"),
        ("an unknown domain only", onnx_model(op_type="Frob", domain="evil.ops"),
         "evil.ops"),
        ("an unknown op only", onnx_model(op_type="Frobnicate"), "1 Frobnicate"),
        ("an opset from the future", onnx_model(opset=999), "opset 999"),
        ("opset zero", onnx_model(opset=0), "opset 0"),
        ("a huge dim", onnx_model(dims=(2**62, 8), weight=(8, 2**62)), "gemm")):
    case(f"onnx {label}", ONNX, {"m.onnx": content}, "m.onnx", fragment)
for flag, value, fragment in (("--input-shape", "ghost=1x8", "no input 'ghost'"),
                              ("--input-shape", "x=1x8x3", "dimensions"),
                              ("--batch", "4", "--batch")):
    case(f"onnx {flag} {value}", ONNX + [flag, value], {"m.onnx": GOOD_ONNX}, "m.onnx",
         fragment)
case("run --onnx truncated", ["run", "--onnx", "m.onnx"],
     {"m.onnx": GOOD_ONNX[:-3]}, "m.onnx", "ONNX")
accepted("onnx reads a good model", ONNX + ["-o", "w.yaml"], {"m.onnx": GOOD_ONNX},
         "1 operator")

# --- accsim import hf and run --model: config.json values of the wrong type or size.
HF = ["import", "hf", "c.json", "--phase", "prefill", "--seq", "8"]


def config(base: dict, **changes) -> str:
    out = dict(base)
    for key, value in changes.items():
        if value is ...:
            out.pop(key, None)
        else:
            out[key] = value
    return json.dumps(out)


for label, text, fragment in (
        ("model_type a list", config(LLAMA, model_type=["llama"]), "model_type"),
        ("model_type an object", config(LLAMA, model_type={"a": 1}), "model_type"),
        ("model_type a number", config(LLAMA, model_type=7), "model_type"),
        ("model_type missing", config(LLAMA, model_type=...), "model_type"),
        ("model_type unknown", config(LLAMA, model_type="bert"), "model_type"),
        ("model_type huge", config(LLAMA, model_type="x" * 1_000_000), "model_type"),
        ("architectures huge", config(LLAMA, model_type="t5",
                                      architectures=["A" * 10] * 100_000), "model_type"),
        ("hidden a string", config(LLAMA, hidden_size="4096"), "hidden_size"),
        ("hidden a huge string", config(LLAMA, hidden_size="9" * 1_000_000),
         "hidden_size"),
        ("hidden zero", config(LLAMA, hidden_size=0), "hidden_size"),
        ("hidden negative", config(LLAMA, hidden_size=-4096), "hidden_size"),
        ("hidden a fraction", config(LLAMA, hidden_size=4096.5), "hidden_size"),
        ("hidden a whole float", config(LLAMA, hidden_size=4096.0), "hidden_size"),
        ("hidden 10**400", config(LLAMA, hidden_size=10**400), "hidden_size"),
        ("hidden 2**62", config(LLAMA, hidden_size=2**62), "hidden_size"),
        ("hidden a list", config(LLAMA, hidden_size=[4096]), "hidden_size"),
        ("hidden missing", config(LLAMA, hidden_size=...), "hidden_size"),
        ("heads not dividing hidden", config(LLAMA, num_attention_heads=30,
                                             head_dim=...), "num_attention_heads"),
        ("heads zero", config(LLAMA, num_attention_heads=0), "num_attention_heads"),
        ("kv heads not dividing heads", config(LLAMA, num_key_value_heads=5),
         "num_key_value_heads"),
        ("kv heads above heads", config(LLAMA, num_key_value_heads=64),
         "num_key_value_heads"),
        ("head_dim zero", config(LLAMA, head_dim=0), "head_dim"),
        ("layers 10**400", config(LLAMA, num_hidden_layers=10**400), "num_hidden_layers"),
        ("layers 2**40", config(LLAMA, num_hidden_layers=2**40), "num_hidden_layers"),
        ("layers a boolean", config(LLAMA, num_hidden_layers=True), "num_hidden_layers"),
        ("vocab 10**30", config(LLAMA, vocab_size=10**30), "vocab_size"),
        ("vocab null", config(LLAMA, vocab_size=None), "vocab_size"),
        ("intermediate a string", config(LLAMA, intermediate_size="big"),
         "intermediate_size"),
        ("intermediate 2**50", config(LLAMA, intermediate_size=2**50),
         "intermediate_size"),
        ("intermediate missing", config(LLAMA, intermediate_size=...),
         "intermediate_size"),
        ("max positions below the prompt", config(LLAMA, max_position_embeddings=4),
         "max_position_embeddings"),
        ("max positions negative", config(LLAMA, max_position_embeddings=-1),
         "max_position_embeddings"),
        ("max positions a string", config(LLAMA, max_position_embeddings="128k"),
         "max_position_embeddings"),
        ("n_positions below the prompt", config(GPT2, n_positions=7), "n_positions"),
        ("tie embeddings a string", config(LLAMA, tie_word_embeddings="yes"),
         "tie_word_embeddings"),
        ("sliding window zero", config(LLAMA, sliding_window=0), "sliding_window"),
        ("experts without top-k", config(MIXTRAL, num_experts_per_tok=...),
         "num_experts_per_tok"),
        ("top-k above experts", config(MIXTRAL, num_experts_per_tok=9),
         "num_experts_per_tok"),
        ("experts 10**12", config(MIXTRAL, num_local_experts=10**12),
         "num_local_experts"),
        ("dense layers among MoE", config(MIXTRAL, mlp_only_layers=[0]),
         "mlp_only_layers"),
        ("sparse step a string", config(MIXTRAL, decoder_sparse_step="2"),
         "decoder_sparse_step"),
        ("top level a list", json.dumps([LLAMA]), "JSON object"),
        ("top level a number", "4096", "JSON object")):
    case(f"hf {label}", HF, {"c.json": text}, "c.json", fragment)
for phase, length in (("prefill", "--seq"), ("decode", "--context")):
    case(f"run --model {phase} beyond max positions",
         ["run", "--model", "c.json", "--phase", phase, length, "2048"],
         {"c.json": config(GPT2)}, "c.json", "n_positions", "2,048")
case("run --model hidden 10**400",
     ["run", "--model", "c.json", "--phase", "prefill", "--seq", "8"],
     {"c.json": config(LLAMA, hidden_size=10**400)}, "c.json", "hidden_size")
accepted("hf imports a good config", HF + ["-o", "w.yaml"], {"c.json": config(LLAMA)},
         "operators")


# --- the runner.

def _make(path: Path, content) -> None:
    make_input(path, content() if callable(content) else content)


def _run(argv: list[str], capsys) -> tuple[int, str, str, float]:
    """`accsim ARGV` in-process under SECONDS of CPU (timed_cli): (exit code, out,
    err, CPU seconds)."""
    capsys.readouterr()
    return run_main(argv, capsys, SECONDS)


def _ids(cases) -> list[str]:
    return [re.sub(r"\s+", "_", c[0]) for c in cases]


def test_there_are_enough_distinct_cases():
    names = [name for name, *_ in CASES + ACCEPTED]
    assert len(names) >= 100
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("name, argv, files, fragments", CASES, ids=_ids(CASES))
def test_hostile_input_is_refused_in_one_line(name, argv, files, fragments, tmp_path,
                                              monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        _make(tmp_path / file, content)
    code, out, err, seconds = _run(argv, capsys)
    assert code not in (0, None), f"accepted: {out[-400:]}"
    assert seconds < SECONDS
    assert "Traceback" not in out + err
    assert err.startswith("accsim: error: ") and err.endswith("\n")
    assert err.count("\n") == 1, f"more than one line: {err[:400]!r}"
    assert len(err) <= MAX_LINE, f"{len(err)} characters: {err[:400]!r}"
    assert "\x1b" not in err
    file = next(iter(files), None) or argv[2]
    assert file in err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


@pytest.mark.parametrize("name, argv, files, fragments", ACCEPTED, ids=_ids(ACCEPTED))
def test_what_is_only_unmodelled_is_imported_and_counted(name, argv, files, fragments,
                                                         tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        _make(tmp_path / file, content)
    code, out, err, seconds = _run(argv, capsys)
    assert code == 0, err
    assert seconds < SECONDS
    assert err == ""
    assert (tmp_path / "w.yaml").is_file()
    for fragment in fragments:
        assert fragment in out, f"{fragment!r} not in {out!r}"
