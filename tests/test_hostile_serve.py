"""Bad and hostile input to `accsim serve` (flags, serving spec files, arrival trace
CSVs) and to `accsim verify` of a forged serve result, table-driven in the style of
tests/test_bad_inputs_verbs.py.

Each refused case: a non-zero exit within SECONDS, one error line on stderr naming the
file or flag and the field, no traceback, no escape sequence, a bounded message, and
no file written. Each accepted case (input that is odd but valid: CR line endings, a
byte-order mark, blank lines) exits 0 with the figures asserted and writes nothing but
the output it names.

Each row: (id, argv, {file name: content}, fragments the output must contain, accepted).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from timed_cli import run_main
from simulator.serving.spec import MAX_BATCH, MAX_REQUESTS
from test_bad_inputs import WORKLOAD_FILE, _make

SECONDS = 5
MAX_MESSAGE_CHARS = 1200  # a message quotes at most a short excerpt of the input
REPO = Path(__file__).resolve().parent.parent
GPT2 = json.loads((REPO / "workloads/hf/gpt2.json").read_text())
# A one-layer GPT-2 of 64 positions: LLM cases run in well under a second.
TINY = json.dumps(GPT2 | {"n_layer": 1, "n_embd": 64, "n_head": 2, "n_inner": 128,
                          "vocab_size": 256, "n_positions": 64})
HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens"
TRACE = f"{HEADER}\n0.0,16,4\n0.5,16,4\n"
CASES: list[tuple[str, list[str], dict, list[str], bool]] = []


def case(name: str, argv: list[str], files: dict, *fragments: str,
         accepted: bool = False) -> None:
    CASES.append((name, argv, files, list(fragments), accepted))


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False)


# --- flags, on a plain workload (refused before anything is simulated).
PLAIN = ["serve", "--workload", "w.yaml", "--arch", "edge_32x32"]
PLAIN_FILES = {"w.yaml": WORKLOAD_FILE}
RATED = PLAIN + ["--rate", "10", "--requests", "4"]
for label, extra, fragments in (
        ("rate above the bound", ["--rate", "1e10"], ["--rate", "1000000000"]),
        ("rate 1e300", ["--rate", "1e300"], ["--rate"]),
        ("rate subnormal", ["--rate", "5e-324"], ["--rate", "1e+09 s"]),
        ("rate too low for the requests", ["--rate", "1e-7", "--requests", "1000"],
         ["--rate", "1e+10 s"]),
        ("rate -inf", ["--rate", "-inf"], ["--rate"]),
        ("rate a word", ["--rate", "fast"], ["--rate", "invalid float"]),
        ("rate and duration overflowing", ["--rate", "1e300", "--duration", "1e300"],
         ["--rate"]),
        ("duration beyond the horizon", ["--rate", "1", "--duration", "1e12"],
         ["--duration", "1000000000"]),
        ("duration with too many arrivals", ["--rate", "1e8", "--duration", "100"],
         ["--duration", "1,000,000"]),
        ("duration subnormal, no arrival", ["--rate", "10", "--duration", "5e-324"],
         ["duration_s", "no request arrives"]),
        ("requests over the bound", ["--rate", "10", "--requests", str(MAX_REQUESTS + 1)],
         ["--requests", "1000000"]),
        ("requests ten million", ["--rate", "10", "--requests", "10000000"],
         ["--requests"]),
        ("requests 2^63", ["--rate", "10", "--requests", str(2**63)], ["--requests"]),
        ("requests 10^400", ["--rate", "10", "--requests", "1" + "0" * 400],
         ["--requests"]),
        ("requests negative", ["--rate", "10", "--requests", "-4"], ["--requests"]),
        ("requests in float notation", ["--rate", "10", "--requests", "1e3"],
         ["--requests", "invalid int"]),
        ("cv 1e200", ["--arrival", "gamma", "--rate", "10", "--cv", "1e200"], ["--cv"]),
        ("cv 1e-200", ["--arrival", "gamma", "--rate", "10", "--cv", "1e-200"], ["--cv"]),
        ("cv 1000", ["--arrival", "gamma", "--rate", "10", "--cv", "1000"],
         ["--cv", "100"]),
        ("cv 0.001", ["--arrival", "gamma", "--rate", "10", "--cv", "0.001"],
         ["--cv", "0.01"]),
        ("cv negative", ["--arrival", "gamma", "--rate", "10", "--cv", "-2"], ["--cv"]),
        ("cv inf", ["--arrival", "gamma", "--rate", "10", "--cv", "inf"], ["--cv"]),
        ("seed negative", ["--rate", "10", "--seed", "-5"], ["--seed"]),
        ("seed 2^64", ["--rate", "10", "--seed", str(2**64)], ["--seed"]),
        ("max-batch over the bound", ["--rate", "10", "--max-batch", str(MAX_BATCH + 1)],
         ["--max-batch", "16384"]),
        ("max-batch a million, static", ["--rate", "10", "--batching", "static",
                                         "--max-batch", "1000000"], ["--max-batch"]),
        ("replicas 100000", ["--rate", "10", "--replicas", "100000"], ["--replicas"]),
        ("chips 100000", ["--rate", "10", "--chips", "100000"], ["--chips"]),
        ("tp 2^40", ["--rate", "10", "--tp", str(2**40)], ["--tp"]),
        ("bucket-bits 21", ["--rate", "10", "--bucket-bits", "21"], ["--bucket-bits"]),
        ("max-tokens 2^25", ["--rate", "10", "--max-tokens", str(2**25)],
         ["--max-tokens"]),
        ("block-tokens 2^25", ["--rate", "10", "--block-tokens", str(2**25)],
         ["--block-tokens"]),
        ("prompt-tokens 2^25", ["--rate", "10", "--prompt-tokens", str(2**25)],
         ["--prompt-tokens"]),
        ("max-wait-ms inf", ["--rate", "10", "--max-wait-ms", "inf"], ["--max-wait-ms"]),
        ("sweep from zero", ["--sweep-rate", "0:1:3"], ["--sweep-rate"]),
        ("sweep to 1e300", ["--sweep-rate", "1:1e300:3"], ["--sweep-rate"]),
        ("sweep from 1e-12", ["--sweep-rate", "1e-12:1:3"], ["--sweep-rate", "1e+09 s"]),
        ("sweep of 1001 points", ["--sweep-rate", "1:2:1001"], ["--sweep-rate"]),
        ("sweep with four parts", ["--sweep-rate", "1:2:3:4"], ["--sweep-rate"]),
        ("find-max-rate and sweep", ["--sla", "latency_p99_ms=5", "--find-max-rate",
                                     "--sweep-rate", "1:2:3"], ["find_max_rate"]),
        ("arrival poisson with a trace", ["--rate", "10", "--arrival", "poisson",
                                          "--arrival-trace", "t.csv"],
         ["--arrival", "conflicts", "arrival_trace"]),
        ("arrival gamma with a trace", ["--rate", "10", "--arrival", "gamma",
                                        "--arrival-trace", "t.csv"],
         ["--arrival", "conflicts"]),
        ("arrival trace without one", ["--arrival", "trace"], ["arrival_trace"]),
        ("arrival unknown", ["--rate", "10", "--arrival", "weibull"], ["--arrival"]),
        ("workload and model", ["--rate", "10", "--model", "tiny.json"], ["model"]),
        ("continuous batching of a plain workload", ["--rate", "10", "--batching",
                                                     "continuous"], ["batching"]),
        ("micro-batches without pipeline", ["--rate", "10", "--micro-batches", "2"],
         ["--micro-batches"]),
        ("multi-chip plain workload", ["--rate", "10", "--chips", "4"], ["--chips"]),
        ("plot with a bad suffix", ["--rate", "10", "--plot", "p.exe"], ["--plot"]),
        ("json into a missing folder", ["--rate", "10", "--json", "no/r.json"],
         ["--json", "no/r.json"]),
        ("json a directory", ["--rate", "10", "--json", "."], ["--json", "directory"]),
        ("csv without a sweep", ["--rate", "10", "--csv", "c.csv"], ["--csv"])):
    argv = PLAIN + extra + ([] if "--requests" in extra or "--sweep-rate" in extra
                            or "--duration" in extra or "--arrival" in extra
                            and "trace" in extra else ["--requests", "4"])
    case(f"flag {label}", argv, {**PLAIN_FILES, "t.csv": TRACE}, *fragments)
for label, files, fragments in (
        ("workload a directory", {"w.yaml": "directory"}, ["w.yaml", "directory"]),
        ("workload a FIFO", {"w.yaml": "fifo"}, ["w.yaml", "FIFO"]),
        ("workload missing", {}, ["w.yaml", "not found"]),
        ("workload not UTF-8", {"w.yaml": b"name: \xff\xfe\n"}, ["w.yaml", "UTF-8"]),
        ("workload over 64 MiB", {"w.yaml": "sparse:70000000"}, ["w.yaml", "larger"])):
    case(f"file {label}", RATED, files, *fragments)

# --- LLM flags: positions and chips.
LLM = ["serve", "--model", "tiny.json", "--arch", "tpu_v5e_like"]
LLM_FILES = {"tiny.json": TINY}
case("llm prompt and output beyond max_position_embeddings", LLM + [
     "--rate", "1", "--requests", "2", "--prompt-tokens", "60", "--output-tokens", "8"],
     LLM_FILES, "tiny.json", "max_position_embeddings 64", "68")
case("llm default lengths beyond max_position_embeddings", LLM + ["--rate", "1",
     "--requests", "2"], LLM_FILES, "tiny.json", "max_position_embeddings", "640")
case("llm chips not T x P", LLM + ["--rate", "1", "--requests", "2", "--chips", "65536"],
     LLM_FILES, "--chips")
case("llm replicas times chips beyond a system", LLM + ["--rate", "1", "--requests",
     "2", "--tp", "4", "--replicas", "65536"], LLM_FILES, "--replicas", "262,144")
case("llm config NaN", LLM + ["--rate", "1", "--requests", "2"],
     {"tiny.json": TINY.replace('"n_embd": 64', '"n_embd": NaN')}, "tiny.json", "NaN")
case("llm config positions zero", LLM + ["--rate", "1", "--requests", "2"],
     {"tiny.json": TINY.replace('"n_positions": 64', '"n_positions": 0')}, "tiny.json",
     "n_positions")
case("llm config a FIFO", LLM + ["--rate", "1", "--requests", "2"],
     {"tiny.json": "fifo"}, "tiny.json", "FIFO")

# --- arrival trace CSVs, read for the tiny model (token columns required).
TRACED = LLM + ["--arrival-trace", "t.csv"]
LONG = "7" * 200_000
for label, text, fragments in (
        ("empty", "", ["empty"]),
        ("only newlines", "\n\n\n", ["missing column"]),
        ("header only", HEADER + "\r\n", ["no requests"]),
        ("over-long unused field", f"{HEADER},note\n0,16,4,{LONG}\n", ["line 2", "CSV"]),
        ("over-long time", f"{HEADER}\n{'7' * 100},16,4\n", ["line 2", "arrived_at",
                                                         "characters"]),
        ("over-long token count", f"{HEADER}\n0,{'1' * 5000},4\n",
         ["line 2", "num_prefill_tokens", "characters"]),
        ("a million columns, none wanted", ",".join(f"c{i}" for i in range(10**6))
         + "\n1\n", ["missing column", "more"]),
        ("time NaN", TRACE.replace("0.5,", "nan,"), ["line 3", "finite"]),
        ("time inf", TRACE.replace("0.5,", "inf,"), ["line 3", "finite"]),
        ("time -inf", TRACE.replace("0.5,", "-inf,"), ["line 3"]),
        ("time negative", TRACE.replace("0.0,", "-1,"), ["line 2", ">= 0"]),
        ("time 1e300", TRACE.replace("0.5,", "1e300,"), ["line 3", "1e+09"]),
        ("time beyond the horizon", TRACE.replace("0.5,", "2e9,"), ["line 3"]),
        ("time hexadecimal", TRACE.replace("0.5,", "0x10,"), ["line 3", "not a number"]),
        ("time empty", TRACE.replace("0.5,", ","), ["line 3", "not a number"]),
        ("subnormal gap", f"{HEADER}\n0,16,4\n5e-324,16,4\n1e-323,16,4\n",
         ["line 3", "1e-09 s apart"]),
        ("picosecond gap", f"{HEADER}\n1,16,4\n1.000000000001,16,4\n", ["line 3"]),
        ("times unsorted", f"{HEADER}\n0,16,4\n2,16,4\n1,16,4\n", ["line 4", "decrease"]),
        ("tokens NaN", TRACE.replace("0.5,16", "0.5,nan"), ["line 3", "integer"]),
        ("tokens inf", TRACE.replace("0.5,16", "0.5,inf"), ["line 3", "integer"]),
        ("tokens negative", TRACE.replace("0.5,16", "0.5,-16"), ["line 3", ">= 1"]),
        ("tokens zero", TRACE.replace(",4\n0.5", ",0\n0.5"), ["line 2", ">= 1"]),
        ("tokens fraction", TRACE.replace("0.5,16", "0.5,1.5"), ["line 3", "integer"]),
        ("tokens in float notation", TRACE.replace("0.5,16", "0.5,1e3"), ["line 3"]),
        ("tokens 2^70", TRACE.replace("0.5,16", f"0.5,{2**70}"), ["line 3", "16,777,216"]),
        ("tokens subnormal", TRACE.replace("0.5,16", "0.5,5e-324"), ["line 3"]),
        ("context beyond the model's positions", TRACE.replace("0.5,16,4", "0.5,60,8"),
         ["line 3", "max_position_embeddings 64"]),
        ("context beyond the positions after blank lines",
         TRACE.replace("\n0.5,16,4", "\n\n\n0.5,60,8"), ["line 5", "68 tokens"]),
        ("header duplicated", "arrived_at,arrived_at,num_prefill_tokens,"
         "num_decode_tokens\n0,0,16,4\n", ["header", "more than one column"]),
        ("two spellings of the time", "arrived_at,arrival_s,prompt_tokens,output_tokens"
         "\n0,0,16,4\n", ["header", "arrived_at, arrival_s"]),
        ("token columns missing", "arrived_at\n0\n1\n", ["missing column", "prompt"]),
        ("short row", TRACE + "1.0\n", ["line 4"]),
        ("unterminated quote", TRACE + '"1.0,16,4\n', ["line"]),
        ("NUL bytes", b"arrived_at\x00\n0\n", ["binary"]),
        ("not UTF-8", f"{HEADER}\n0,16,4\n".encode() + b"\xff\xfe,1,1\n", ["UTF-8"]),
        ("latin-1 header", "arriv\xe9e,x\n0,1\n".encode("latin-1"), ["UTF-8"]),
        ("escape sequence in a field", TRACE.replace("0.5,", "\x1b[2J,"),
         ["line 3", "\\x1b"]),
        ("escape sequence in the header", "\x1b]0;pwned\x07,b\n1,2\n", ["missing column"]),
        ("more rows than requests allowed", "arrived_at\n" + "0\n" * (MAX_REQUESTS + 2),
         ["1,000,000", "lines"]),
        ("over 64 MiB", "sparse:70000000", ["larger"]),
        ("a directory", "directory", ["directory"]),
        ("a FIFO", "fifo", ["FIFO"])):
    case(f"trace {label}", TRACED, {**LLM_FILES, "t.csv": text}, "t.csv", *fragments)
case("trace missing", TRACED, LLM_FILES, "t.csv", "not found")
case("trace unknown shipped name", LLM + ["--arrival-trace", "no_such_trace"], LLM_FILES,
     "no_such_trace", "shipped: splitwise_conv")
case("trace a character device", LLM + ["--arrival-trace", "/dev/zero"], LLM_FILES,
     "/dev/zero", "character device")
case("trace with one arrival scaled to a rate", TRACED + ["--rate", "5"],
     {**LLM_FILES, "t.csv": f"{HEADER}\n0,16,4\n"}, "t.csv", "rate", "two distinct")
case("trace scaled beyond the horizon", TRACED + ["--rate", "1e-10"],
     {**LLM_FILES, "t.csv": TRACE}, "t.csv", "rate", "1e+09 s")
case("trace tiled beyond the horizon", TRACED + ["--requests", "1000"],
     {**LLM_FILES, "t.csv": f"{HEADER}\n0,16,4\n1e9,16,4\n"}, "t.csv", "1e+09 s")

# --- odd but valid traces: served, figures asserted.
for label, text in (
        ("CR line endings", TRACE.replace("\n", "\r")),
        ("CR LF line endings", TRACE.replace("\n", "\r\n")),
        ("mixed line endings", f"{HEADER}\r\n0.0,16,4\r0.5,16,4\n"),
        ("byte-order mark", "\ufeff" + TRACE),
        ("blank lines", TRACE.replace("\n0.5", "\n\n0.5") + "\n\n"),
        ("quoted fields and an extra column", f'{HEADER},note\n"0.0","16",4,"a, b"\n'
         '0.5,16,4,"line\nbreak"\n'),
        ("spaces around fields", " arrived_at , num_prefill_tokens,num_decode_tokens\n"
         " 0.0 , 16 ,4\n0.5,16, 4 \n"),
        ("equal times", f"{HEADER}\n0.5,16,4\n0.5,16,4\n")):
    case(f"trace accepted: {label}", TRACED + ["--json", "r.json"],
         {**LLM_FILES, "t.csv": text}, "simulated 2 requests", accepted=True)
case("trace accepted alone, without --arrival", LLM + ["--arrival-trace", "t.csv",
     "--json", "r.json"], {**LLM_FILES, "t.csv": TRACE}, "simulated 2 requests",
     accepted=True)

# --- the YAML spec.
SPEC = {"workload": "w.yaml", "arch": "edge_32x32", "rate": 10, "requests": 4}
SPECCED = ["serve", "--spec", "s.yaml"]
for label, text, fragments in (
        ("error_samples a million", dump(SPEC | {"error_samples": 10**6}),
         ["error_samples"]),
        ("error_samples negative", dump(SPEC | {"error_samples": -1}), ["error_samples"]),
        ("cv 1e300", dump(SPEC | {"arrival": "gamma", "cv": 1e300}), ["cv"]),
        ("rate .inf", dump(SPEC).replace("rate: 10", "rate: .inf"), ["rate"]),
        ("rate a list", dump(SPEC | {"rate": [1, 2]}), ["rate"]),
        ("rate a string", dump(SPEC | {"rate": "10"}), ["rate"]),
        ("rate too low", dump(SPEC | {"rate": 1e-12}), ["rate", "1e+09 s"]),
        ("requests ten million", dump(SPEC | {"requests": 10**7}), ["requests"]),
        ("requests 10^400", dump(SPEC).replace("requests: 4", "requests: 1" + "0" * 400),
         ["requests"]),
        ("requests a boolean", dump(SPEC | {"requests": True}), ["requests"]),
        ("seed negative", dump(SPEC | {"seed": -1}), ["seed"]),
        ("seed a fraction", dump(SPEC | {"seed": 1.5}), ["seed"]),
        ("arrival poisson with a trace", dump(SPEC | {"arrival": "poisson",
                                                      "arrival_trace": "t.csv"}),
         ["arrival", "conflicts"]),
        ("trace with a bad time", dump(SPEC | {"arrival_trace": "t.csv"}),
         ["t.csv", "line 3"]),
        ("duration negative", dump(SPEC | {"duration_s": -1}), ["duration_s"]),
        ("duration and rate too many", dump({k: v for k, v in SPEC.items()
                                             if k != "requests"}
                                            | {"rate": 1e9, "duration_s": 1e3}),
         ["duration_s", "1,000,000"]),
        ("sweep_rate with four parts", dump(SPEC | {"sweep_rate": "1:2:3:4"}),
         ["sweep_rate"]),
        ("sweep_rate a mapping too low", dump(SPEC | {"sweep_rate": {
            "low": 1e-12, "high": 1, "points": 3}}), ["sweep_rate"]),
        ("max_batch a million", dump(SPEC | {"max_batch": 10**6}), ["max_batch"]),
        ("replicas 10^6", dump(SPEC | {"replicas": 10**6}), ["replicas"]),
        ("nested deep", "a: " + "[" * 200 + "]" * 200 + "\n", ["nested"]),
        ("unknown key", dump(SPEC | {"requests_per_s": 5}), ["requests_per_s"]),
        ("duplicate key", dump(SPEC) + "rate: 3\n", ["duplicate key"]),
        ("CR line endings", dump(SPEC | {"rate": -1}).replace("\n", "\r"), ["rate"]),
        ("byte-order mark and a bad rate", "\ufeff" + dump(SPEC | {"rate": -1}),
         ["rate"]),
        ("top level list", "- 1\n", ["mapping"]),
        ("not UTF-8", b"rate: \xff\n", ["UTF-8"]),
        ("a FIFO", "fifo", ["FIFO"])):
    case(f"spec {label}", SPECCED, {"s.yaml": text, **PLAIN_FILES,
                                    "t.csv": TRACE.replace("0.5,", "soon,")},
         "s.yaml" if "trace with" not in label else "t.csv", *fragments)

# --- verify of forged serve results: refused before anything is served again.
FORGED_SPEC = {"workload": "gemm_4096", "arch": "edge_32x32", "rate": 50.0,
               "requests": 10_000_000}
for label, spec, fragments in (
        ("ten million requests", FORGED_SPEC, ["requests", "1000000"]),
        ("requests 2^70", FORGED_SPEC | {"requests": 2**70}, ["requests"]),
        ("rate too low for its requests", FORGED_SPEC | {"requests": 1000,
                                                         "rate": 1e-12}, ["rate"]),
        ("max_batch a million", FORGED_SPEC | {"requests": 10, "max_batch": 10**6},
         ["max_batch"]),
        ("a poisson trace", FORGED_SPEC | {"requests": 10, "arrival": "poisson",
                                           "arrival_trace": "t.csv"}, ["conflicts"])):
    forged = {"requests": spec["requests"], "manifest": {"serving": {"spec": spec}}}
    case(f"verify forged serve result: {label}", ["verify", "r.json"],
         {"r.json": json.dumps(forged)}, "r.json", "manifest.serving.spec", *fragments)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _run(argv: list[str], capsys) -> tuple[int, str, str, float]:
    """`accsim ARGV` in-process under SECONDS of CPU (timed_cli): exit code, stdout,
    stderr, CPU seconds taken."""
    return run_main(argv, capsys, SECONDS)


def test_there_are_enough_cases():
    assert len(CASES) >= 80
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, files, fragments, accepted", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_serve_input(name, argv, files, fragments, accepted, tmp_path,
                             monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        _make(tmp_path / file, content)
    before = _files(tmp_path)
    code, out, err, elapsed = _run(argv, capsys)
    assert elapsed < SECONDS
    assert "Traceback" not in out + err
    assert "\x1b" not in out + err  # input text reaches the terminal escaped
    for fragment in fragments:
        assert fragment in out + err, f"{fragment!r} not in {(out + err)[-600:]!r}"
    if accepted:
        assert code == 0, err
        assert not err.strip()
        assert _files(tmp_path) == before | {"r.json"}
        result = json.loads((tmp_path / "r.json").read_text())
        assert result["requests"] == result["completed"] == 2
        assert result["latency_ms"]["max"] > 0
        return
    assert code not in (0, None), f"accepted: {out[-400:]}"
    lines = err.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, err
    if code == 1:  # ours; argparse's (2) comes after its usage lines
        assert lines == errors
    assert len(errors[0]) < MAX_MESSAGE_CHARS
    assert _files(tmp_path) == before
    assert not os.path.exists(tmp_path / "pwned")
