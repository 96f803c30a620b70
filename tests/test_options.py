"""Options declared once (issue 40 item 4) and the Python API checked by the same rules
(issue 47 item 1): every parser's shared flags come from simulator.options.catalog, the
docs' flag table is generated from it, an old spelling still works with a note, and
every public function of simulator.api answers a wrong type or an out-of-range value
with ValueError or TypeError naming the argument."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

import pytest

import simulator.api as accsim
from simulator.cli import VERBS, build_parser
from simulator.options.catalog import OPTIONS
from simulator.options.table import flag_table

ROOT = Path(__file__).resolve().parents[1]
# A flag one verb declares for itself though a shared option has its name: ONNX's
# --batch sets the first dimension of every graph input (no LLM step).
OWN = {("import onnx", "--batch")}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every verb's parser, nested verbs as "sweep run", "import hf"."""
    found = {}

    def walk(name, parser):
        found[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, sub_parser in action.choices.items():
                    walk(f"{name} {sub}", sub_parser)

    top = build_parser()
    verbs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for verb, parser in verbs.choices.items():
        walk(verb, parser)
    return found


def test_every_shared_flag_is_built_from_its_declaration():
    seen = set()
    for verb, parser in parsers().items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in OPTIONS or (verb, flag) in OWN:
                    continue
                option = OPTIONS[flag]
                assert verb in option.uses, f"{verb} declares {flag} itself"
                assert action.help == option.help_for(verb), (verb, flag)
                seen.add((verb, flag))
    declared = {(verb, flag) for flag, option in OPTIONS.items() for verb in option.uses}
    assert declared == seen, sorted(declared - seen)


def test_a_flag_names_one_option():
    spellings: dict[str, str] = {}
    for option in OPTIONS.values():
        for use in option.uses.values():
            for flag in (option.flag, *use.aliases, *use.deprecated):
                assert spellings.setdefault(flag, option.flag) == option.flag, flag


def test_the_conventions_page_holds_the_generated_table():
    page = (ROOT / "docs" / "reference" / "conventions.md").read_text()
    assert flag_table() in page
    done = subprocess.run([sys.executable, str(ROOT / "experiments" / "flag_table.py"),
                           "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_an_arrival_trace_is_one_flag_and_the_old_spelling_still_works(capsys):
    argv = ["plan-deployment", "--arch", "tpu_v5e_like", "--model", "gpt2",
            "--sla", "ttft_p99_ms=1"]
    new = build_parser(["plan-deployment"]).parse_args(argv + ["--arrival-trace", "t"])
    assert "deprecated" not in capsys.readouterr().err
    old = build_parser(["plan-deployment"]).parse_args(argv + ["--trace", "t"])
    assert new.arrival_trace == old.arrival_trace == "t"
    assert capsys.readouterr().err == ("accsim: note: --trace is deprecated; use "
                                       "--arrival-trace\n")
    serve = build_parser(["serve"]).parse_args(["serve", "--arrival-trace", "t"])
    assert serve.arrival_trace == "t"
    run = build_parser(["run"]).parse_args(["run", "--trace", "t.json"])
    assert run.trace == "t.json" and not hasattr(run, "arrival_trace")
    assert set(VERBS)  # every verb's parser builds (parsers() above walks them)


def _zero_rows():
    platform = accsim.load_platform("tpu_v1")
    array = platform.systolic_array.model_copy(update={"rows": 0})
    return platform.model_copy(update={"systolic_array": array})


# (call, the error class, the argument its message names)
HOSTILE = [
    (lambda: accsim.load_platform(3), TypeError, "name_or_path"),
    (lambda: accsim.load_platform(""), ValueError, "name_or_path"),
    (lambda: accsim.load_workload(None), TypeError, "name_or_path"),
    (lambda: accsim.load_mapping(1.5), TypeError, "name_or_path"),
    (lambda: accsim.from_hf(5, phase="decode", context=8), TypeError, "config"),
    (lambda: accsim.from_hf("gpt2", phase="middle", seq=8), ValueError, "phase"),
    (lambda: accsim.from_hf("gpt2", phase=3, seq=8), TypeError, "phase"),
    (lambda: accsim.from_hf("gpt2", phase="prefill", seq=True), TypeError, "seq"),
    (lambda: accsim.from_hf("gpt2", phase="prefill", seq=0), ValueError, "seq"),
    (lambda: accsim.from_hf("gpt2", phase="prefill", seq=8.0), TypeError, "seq"),
    (lambda: accsim.from_hf("gpt2", phase="decode", context=2**40), ValueError,
     "context"),
    (lambda: accsim.from_hf("gpt2", phase="decode", context=8, batch=-1), ValueError,
     "batch"),
    (lambda: accsim.from_hf("gpt2", phase="decode", context=8, dtype="int7"), ValueError,
     "dtype"),
    (lambda: accsim.from_hf("gpt2", phase="decode", context=8, kv_dtype=8), TypeError,
     "kv_dtype"),
    (lambda: accsim.from_hf("gpt2", phase="decode", context=8, imbalance=math.nan),
     ValueError, "imbalance"),
    (lambda: accsim.from_hf("gpt2", phase="decode", context=8, all_logits="yes"),
     TypeError, "all_logits"),
    (lambda: accsim.from_hf("gpt2", phase="decode", context=8, all_logits=True),
     ValueError, "all_logits"),
    (lambda: accsim.simulate(3), TypeError, "platform"),
    (lambda: accsim.simulate(_zero_rows()), ValueError, "platform.systolic_array.rows"),
    (lambda: accsim.simulate("tpu_v1", ["gemm_4096"]), TypeError, "workload"),
    (lambda: accsim.simulate("tpu_v1", "gemm_4096", 3), TypeError, "mapping"),
    (lambda: accsim.simulate("tpu_v1", "gemm_4096", fusion="bogus"), ValueError,
     "fusion"),
    (lambda: accsim.simulate("tpu_v1", "gemm_4096", engine="warp"), ValueError,
     "engine"),
    (lambda: accsim.simulate("tpu_v1", "gemm_4096", heuristic=7), TypeError, "heuristic"),
    (lambda: accsim.simulate("tpu_v1", "gemm_4096", heuristic="no_such"), ValueError,
     "heuristic"),
    (lambda: accsim.simulate("tpu_v1", "gemm_4096", ignore_capacity=1), TypeError,
     "ignore_capacity"),
    (lambda: accsim.compare([]), ValueError, "platforms"),
    (lambda: accsim.compare("tpu_v1"), TypeError, "platforms"),
    (lambda: accsim.compare(["tpu_v1", 3]), TypeError, "platforms"),
    (lambda: accsim.compare(["tpu_v1"], fusion="most"), ValueError, "fusion"),
    (lambda: accsim.serve(workload="gemm_4096", requests=True), TypeError, "requests"),
    (lambda: accsim.serve(workload="gemm_4096", rate=-1), ValueError, "rate"),
    (lambda: accsim.serve(workload="gemm_4096", rate="fast"), TypeError, "rate"),
    (lambda: accsim.serve(workload="gemm_4096", batching="greedy"), ValueError,
     "batching"),
    (lambda: accsim.serve(workload="gemm_4096", bogus=1), ValueError, "bogus"),
    (lambda: accsim.sweep(3, "s.sqlite"), TypeError, "spec"),
    (lambda: accsim.sweep("s.yaml", 3), TypeError, "store"),
    (lambda: accsim.sweep("s.yaml", "s.sqlite", workers=0), ValueError, "workers"),
    (lambda: accsim.sweep("s.yaml", "s.sqlite", workers=True), TypeError, "workers"),
    (lambda: accsim.sweep("s.yaml", "s.sqlite", scheduler=5), TypeError, "scheduler"),
]


def test_hostile_cases_cover_every_public_function():
    called = {name for name in accsim.__all__ if callable(getattr(accsim, name))
              and not isinstance(getattr(accsim, name), type)}
    named = set()
    for call, _, _ in HOSTILE:
        named |= set(call.__code__.co_names) & called
    assert named == called, sorted(called - named)


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_a_wrong_argument_is_a_value_or_type_error_naming_it(index, tmp_path,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    call, kind, argument = HOSTILE[index]
    with pytest.raises(kind) as raised:
        call()
    assert isinstance(raised.value, (ValueError, TypeError))
    assert argument in str(raised.value), str(raised.value)
    assert not (tmp_path / "s.sqlite").exists()


def test_serve_fields_take_what_the_spec_takes():
    """An SLA is text on the command line and a dict in the API: both pass the field
    check, which leaves its ranges to the spec."""
    from simulator.options.arguments import check_fields
    check_fields("serve", {"sla": {"ttft_p99_ms": 500.0}, "dtype": "int4", "tp": 2,
                           "mapping_plan": "plan.yaml", "rate": 10})
    with pytest.raises(TypeError, match="tp"):
        check_fields("serve", {"tp": 2.0})
