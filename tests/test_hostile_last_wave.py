"""Hostile input to the surfaces of the last wave (issue 47, items 2-8): plan-deployment,
calibrate, sensitivity, compare --robust, precision samples, kernel folders and their
environment, deployment stores. Table-driven like tests/test_hostile_sweep.py and run
by the shared timed runner (tests/timed_cli.py): each case ends in a non-zero exit with
one error line naming the option, field, variable or file, within SECONDS, with no
traceback, and writes no file.

Each row: (id, argv, {file name: content or a function making it}, {environment
variable: value}, fragments the error line holds).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.inputs.loader import locate
from test_bad_inputs import dump
from test_hostile_sweep import refused_in

SECONDS = 20
MODEL = json.dumps(TINY_LLAMA)
GEMM = dump({"name": "w", "operators": [
    {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 8, "n": 8, "k": 8}]})
SERVE = ["--model", "config.json", "--prompt-tokens", "64", "--output-tokens", "8",
         "--requests", "24"]
PD = ["plan-deployment", "--arch", "tpu_v5e_like", *SERVE, "--sla", "ttft_p99_ms=500",
      "--budget-chips", "2", "--replicas", "1", "--max-batch", "4", "--scheduler", "serial"]
MEASURED_HEAD = "operator,shape,dtype,measured_s\n"
MEASURED_ROWS = ["gemm,m=8 n=1024 k=2048,bf16,1e-5", "gemm,m=8 n=2048 k=2048,bf16,2e-5",
                 "softmax,rows=256 cols=512,bf16,1e-6", "softmax,rows=512 cols=512,bf16,2e-6"]
MEASURED = MEASURED_HEAD + "\n".join(MEASURED_ROWS) + "\n"
CAL = ["calibrate", "--arch", "tpu_v5e_like", "--measured", "m.csv", "-o", "out.yaml",
       "--fit", "offchip.efficiency", "--folds", "2"]
SENS = ["sensitivity", "--arch", "tpu_v1", "--workload", "w.yaml"]
BASE = {"config.json": MODEL, "m.csv": MEASURED, "w.yaml": GEMM}
CASES: list[tuple[str, list[str], dict, dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict | None = None, env: dict | None = None,
         *fragments: str) -> None:
    CASES.append((name, argv, {**BASE, **(files or {})}, env or {}, list(fragments)))


def shipped(name: str) -> dict:
    return yaml.safe_load(locate(name, "platform").read_text())


def platform(base: str = "tpu_v1", **changes) -> str:
    """A shipped platform with dotted fields set (a value None deletes the field)."""
    raw = shipped(base)
    raw["name"] = "hostile"
    for dotted, value in changes.items():
        node = raw
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return dump(raw)


def assumed(field: str, low, high, base: str = "tpu_v1") -> str:
    """A shipped platform with one field's assumed range set."""
    raw = shipped(base)
    raw["name"] = "hostile"
    raw.setdefault("provenance", {})[field] = {"kind": "assumed", "range": [low, high]}
    return dump(raw)


# --- 2. options accepted without meaning: plan-deployment -------------------------
def pd(flag: str, value: str) -> list[str]:
    """PD with one option's value replaced (or added)."""
    argv = list(PD)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


for value in ("0", "-1", "65537", "1000000", "99999999999999999999", "٣", "1_0"):
    case(f"pd --budget-chips {value}", pd("--budget-chips", value), None, None,
         "--budget-chips")
for flag in ("--max-batch", "--chips-per-replica", "--replicas"):
    for value in ("0", "-1", "99999999999999999999", "1,,2", ",", "٣", "1_000", "4,x", "",
                  " ", "+", "0x10"):
        case(f"pd {flag} {value!r}", pd(flag, value), None, None, flag)
case("pd --max-batch past MAX_BATCH", pd("--max-batch", "16385"), None, None,
     "--max-batch", "16,384")
case("pd --chips-per-replica past MAX_CHIPS", pd("--chips-per-replica", "65537"), None,
     None, "--chips-per-replica")
case("pd --max-batch of 65 values", pd("--max-batch", ",".join(map(str, range(1, 66)))),
     None, None, "--max-batch", "at most 64")
case("pd a grid past 10,000 deployments",
     pd("--budget-chips", "65536")[:-6] + ["--max-batch", ",".join(map(str, range(1, 41))),
                                           "--scheduler", "serial"],
     None, None, "--budget-chips", "10,000")
for value, fragment in (("ttft_p99_ms=500,ttft_p99_ms=400", "given twice"),
                        ("ttft_p99_ms=５00", "not a number"),
                        ("ttft_p99_ms=٥", "not a number"),
                        ("ttft_p99_ms=1_000", "not a number"),
                        ("ttft_p99_ms=inf", "finite number > 0"),
                        ("ttft_p99_ms=nan", "finite number > 0"),
                        ("ttft_p99_ms=1e400", "finite"),
                        ("ttft_p99_ms=-1", "> 0"), ("ttft_p99_ms=0", "> 0"),
                        ("ttft_p99_ms", "KEY=VALUE"), ("ttft_p99=5", "unknown SLA key"),
                        ("ttft_p99_ms=0x10", "not a number"),
                        ("ttft_p99_ms= 5 5", "not a number")):
    case(f"pd --sla {value!r}", pd("--sla", value), None, None, "--sla", fragment)
for flag, value in (("--json", ""), ("--json", "out/"), ("--json", "."), ("--json", ".."),
                    ("--json", "sub/"), ("--json", "sub/."), ("--csv", ""),
                    ("--csv", "x.csv/"), ("--csv", "x.txt"), ("--plot", ""),
                    ("--plot", "p.png/"), ("--plot", "p.jpg"), ("--store", ""),
                    ("--json", "no/such/out.json")):
    case(f"pd {flag} {value!r}", pd(flag, value), {"sub": "directory"}, None, flag)
for value in ("", ",", "fifo", "static,,dynamic"):
    case(f"pd --batching {value!r}", pd("--batching", value), None, None, "--batching")
for flag, value in (("--rate", "0"), ("--rate", "-1"), ("--rate", "nan"), ("--rate", "inf"),
                    ("--rate", "1e10"), ("--requests", "0"), ("--prompt-tokens", "0"),
                    ("--seed", "-1")):
    case(f"pd {flag} {value}", pd(flag, value), None, None, flag)
case("pd --no-baseline alone", PD + ["--no-baseline"], None, None, "--no-baseline")
case("pd --precision a FIFO", PD + ["--precision", "p.yaml"], {"p.yaml": "fifo"}, None,
     "p.yaml", "FIFO")
case("pd cost lifetime makes the chip-hour infinite",
     ["plan-deployment", "--arch", "c.yaml", *PD[3:], "--objective", "cost_per_mtok"],
     {"c.yaml": platform("tpu_v5e_like", cost={"capital_per_chip": 1e4,
                                               "lifetime_years": 1e-320,
                                               "power_price_per_kwh": 0.1})},
     None, "c.yaml", "cost", "lifetime_years")
case("pd cost capital makes the chip-hour infinite",
     ["plan-deployment", "--arch", "c.yaml", *PD[3:], "--objective", "cost_per_mtok"],
     {"c.yaml": platform("tpu_v5e_like", cost={"capital_per_chip": 1e308,
                                               "lifetime_years": 1e-10,
                                               "power_price_per_kwh": 0.1})},
     None, "c.yaml", "cost")

def priced(price: float) -> str:
    raw = shipped("tpu_v5e_like")
    raw["name"] = "priced"
    raw["cost"] = {"price_per_chip_hour": price}
    raw["provenance"]["cost.price_per_chip_hour"] = {"kind": "assumed",
                                                     "range": [0.5, price]}
    return dump(raw)


for price in (1e308, 1.7e308):
    case(f"pd a price of {price:g} per chip-hour",
         ["plan-deployment", "--arch", "c.yaml", *PD[3:5], *SERVE[2:], "--sla",
          "ttft_p99_ms=0.15,tpot_p99_ms=0.06", "--budget-chips", "2", "--replicas", "1",
          "--max-batch", "4", "--scheduler", "serial", "--objective", "cost_per_mtok"],
         {"c.yaml": priced(price)}, None, "cost")

# --- 2 and 3. calibrate: options and measurements ---------------------------------
for value in ("0", "-1", "1", "101", "5"):
    case(f"calibrate --folds {value}", CAL[:-1] + [value], None, None, "--folds")
for value in (",", "a,,b", " ", "offchip.efficiency,"):
    case(f"calibrate --fit {value!r}", CAL[:-4] + ["--fit", value, "--folds", "2"], None,
         None, "--fit")
case("calibrate --fit unknown", CAL[:-4] + ["--fit", "clock_ghz.x", "--folds", "2"],
     None, None, "--fit")
for flag, value in (("-o", ""), ("-o", "x.yaml/"), ("-o", "sub"), ("-o", "x.txt"),
                    ("-o", "."), ("--json", ""), ("--json", "j.json/"),
                    ("--json", "j.txt")):
    argv = list(CAL)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    case(f"calibrate {flag} {value!r}", argv, {"sub": "directory"}, None,
         "--output" if flag == "-o" else flag)
for value in ("1_000e-8", "٣e-5", "５e-5", "inf", "nan", "-inf", "0x10", "1e400", "1e-320",
              "1e-13", "1.5.2", "1e", "", " "):
    rows = list(MEASURED_ROWS)
    rows[0] = rows[0].rsplit(",", 1)[0] + "," + value
    case(f"calibrate measured_s {value!r}", CAL, {"m.csv": MEASURED_HEAD + "\n".join(rows)
                                                 + "\n"}, None, "m.csv")
case("calibrate a shape of other digits", CAL, {"m.csv": MEASURED.replace("n=1024",
                                                                          "n=١٠٢٤")},
     None, "m.csv", "line 2")
for name, content in (("FIFO", "fifo"), ("directory", "directory"),
                      ("dangling link", "link:nowhere.csv"), ("/dev/zero", "link:/dev/zero"),
                      ("empty file", ""), ("header only", MEASURED_HEAD)):
    case(f"calibrate measured {name}", CAL, {"m.csv": content}, None, "m.csv")
case("calibrate measured missing", CAL[:4] + ["gone.csv"] + CAL[5:], None, None, "gone.csv")
case("calibrate --max-memory 0", CAL + ["--max-memory", "0"], None, None, "--max-memory")

# --- 2 and 3. sensitivity and compare --robust -----------------------------------
for flag, value in (("--json", ""), ("--json", "s.json/"), ("--csv", ""),
                    ("--csv", "x.csv/"), ("--csv", "x.txt"), ("--plot", ""),
                    ("--plot", "t.jpg"), ("--plot", "t.png/")):
    case(f"sensitivity {flag} {value!r}", SENS + [flag, value], None, None, flag)
case("sensitivity --field unknown", SENS + ["--field", "no.such"], None, None, "--field")
for field, low, high, metric in (
        ("energy.mac_pj.int8", 0.1, 1e308, "energy_j"),
        ("energy.static_power.other_w", 0, 1e308, "edp_js"),
        ("offchip.bandwidth_gbps", 1e-300, 1e308, "time_s"),
        ("clock_ghz", 1e-300, 1e308, "time_s"),
        ("energy.sram_read_pj_per_byte", 0, 1e308, "energy_j")):
    case(f"sensitivity range end {field} {high:g} ({metric})",
         ["sensitivity", "--arch", "r.yaml", "--workload", "w.yaml", "--metric", metric,
          "--field", field, "--csv", "t.csv"], {"r.yaml": assumed(field, low, high)}, None,
         "r.yaml", f"provenance.{field}.range")
COMPARE = ["compare", "--arch", "tpu_v1", "--arch", "edge_32x32", "--workload", "w.yaml"]
case("compare --robust-json without --robust", COMPARE + ["--robust-json", "r.json"],
     None, None, "--robust-json", "--robust")
case("compare --robust-json - without --robust", COMPARE + ["--robust-json", "-"],
     None, None, "--robust-json", "--robust")
case("compare --robust --robust-json ''", COMPARE + ["--robust", "--robust-json", ""],
     None, None, "--robust-json")
case("compare --robust --robust-json r.json/", COMPARE + ["--robust", "--robust-json",
                                                          "r.json/"], None, None,
     "--robust-json")
case("compare --robust --robust-json r.txt", COMPARE + ["--robust", "--robust-json",
                                                        "r.txt"], None, None, "--robust-json")
case("compare --json ''", COMPARE + ["--json", ""], None, None, "--json")
case("compare --metric without --robust", COMPARE + ["--metric", "energy_j"], None, None,
     "--metric", "--robust")
case("pd --cv without gamma arrivals", PD + ["--cv", "2"], None, None, "--cv", "gamma")
case("pd --cv with poisson arrivals", PD + ["--arrival", "poisson", "--cv", "2"], None,
     None, "--cv", "gamma")

# --- 3. numbers: a host link so slow one call's cycles pass int64 -----------------
for bandwidth in (1e-300, 1e-200, 1e-30):
    case(f"run host link {bandwidth:g} GB/s",
         ["run", "--arch", "h.yaml", "--workload", "w.yaml"],
         {"h.yaml": platform(runtime={"host_link": {"bandwidth_gbps": bandwidth,
                                                    "latency_us": 1.0}})},
         None, "h.yaml", "runtime.host_link")

def huge_energy(field: str) -> str:
    """tpu_v1 with one energy coefficient at the largest double, its range widened to
    hold it (a valid file whose run's energy overflows)."""
    raw = shipped("tpu_v1")
    raw["name"] = "hostile"
    node = raw
    *parents, leaf = field.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = 1.7e308
    raw.setdefault("provenance", {})[field] = {"kind": "assumed", "range": [0, 1.7e308]}
    return dump(raw)


for field in ("energy.mac_pj.int8", "energy.static_power.other_w",
              "energy.offchip_pj_per_byte"):
    case(f"run energy {field} at the largest double",
         ["run", "--arch", "e.yaml", "--workload", "w.yaml", "--json", "o.json"],
         {"e.yaml": huge_energy(field)}, None, "e.yaml", "energy")

# --- 3 and 4. precision plans: samples that overflow, sample files that are not files
PLAN = {"default": {"weight": ["int8"], "activation": ["int8"],
                    "guardrail": {"min_sqnr_db": 10}}}
RUN_PLAN = ["run", "--arch", "tpu_v1", "--workload", "w.yaml", "--precision", "plan.yaml"]


def tensors_plan(a: str = "a.npy") -> str:
    return dump({**PLAN, "operators": {"g": {"tensors": {"a": a}}}})


def npy(array: np.ndarray):
    def make(path: Path) -> None:
        np.save(path, array)
    return make


case("precision outlier scale overflowing fp32",
     RUN_PLAN, {"plan.yaml": dump({**PLAN, "samples": {"outlier_scale": 1e38,
                                                       "outlier_fraction": 1.0}})},
     None, "plan.yaml", "samples")
case("precision sample product overflowing fp32", RUN_PLAN,
     {"plan.yaml": dump({**PLAN, "operators": {"g": {"tensors": {"a": "a.npy",
                                                                  "b": "b.npy"}}}}),
      "a.npy": npy(np.full((8, 8), 3e38, np.float32)),
      "b.npy": npy(np.ones((8, 8), np.float32))},
     None, "plan.yaml", "operators.g.tensors", "overflows fp32")
for name, content in (("FIFO", "fifo"), ("directory", "directory"),
                      ("dangling link", "link:nowhere.npy"), ("/dev/zero", "link:/dev/zero"),
                      ("empty", b""), ("text", "1 2 3\n")):
    case(f"precision sample .npy {name}", RUN_PLAN,
         {"plan.yaml": tensors_plan(), "a.npy": content}, None, "a.npy",
         "operators.g.tensors.a")
case("precision sample missing", RUN_PLAN, {"plan.yaml": tensors_plan()}, None, "a.npy")
case("precision sample not .npy", RUN_PLAN, {"plan.yaml": tensors_plan("a.txt"),
                                             "a.txt": "1\n"}, None, "a.txt")
case("precision sample with inf", RUN_PLAN,
     {"plan.yaml": tensors_plan(), "a.npy": npy(np.full((8, 8), np.inf, np.float32))},
     None, "a.npy")

# --- 4. the kernel library's folder and switches ----------------------------------
for name, value in (("a file", "m.csv"), ("a path under a file", "m.csv/x"),
                    ("/dev/null", "/dev/null"), ("a FIFO", "pipe"),
                    ("a dangling link", "dangling")):
    for verb in (["compile", "--check"], ["compile"]):
        case(f"ACCSIM_KERNEL_DIR {name} ({' '.join(verb)})", verb,
             {"pipe": "fifo", "dangling": "link:nowhere"},
             {"ACCSIM_KERNEL_DIR": value}, "ACCSIM_KERNEL_DIR")
# XDG_CACHE_HOME is used only when absolute (the XDG spec): {cwd} is the case's folder.
for name, value in (("a file", "{cwd}/m.csv"), ("/dev/null", "/dev/null"),
                    ("a dangling link", "{cwd}/dangling")):
    case(f"XDG_CACHE_HOME {name} (compile)", ["compile"], {"dangling": "link:nowhere"},
         {"XDG_CACHE_HOME": value, "ACCSIM_KERNEL_DIR": ""}, "XDG_CACHE_HOME")
for value in ("yes", "2", "true", "off"):
    case(f"ACCSIM_KERNEL_LIBRARY={value}", ["compile", "--check"], None,
         {"ACCSIM_KERNEL_LIBRARY": value}, "ACCSIM_KERNEL_LIBRARY")


# --- 5. stores: forged rows of a deployment store ---------------------------------
# A tight SLA: the template's points are searched (an SLA capacity each), not unbounded.
STORE_ARGS = pd("--sla", "ttft_p99_ms=0.15,tpot_p99_ms=0.06") + ["--store", "r.sqlite"]


@functools.cache
def template_store() -> Path:
    """A store plan-deployment wrote (made once per session, copied per case; its
    folder removed when the session's process ends)."""
    folder = Path(tempfile.mkdtemp(prefix="accsim-hostile-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / "config.json").write_text(MODEL)
    here = os.getcwd()
    os.chdir(folder)  # the relative model path of the cases: the same point keys
    try:
        assert main(STORE_ARGS) == 0
    finally:
        os.chdir(here)
    return folder / "r.sqlite"


def forged(edit, table: str = "deployments", status: str = "searched"):
    """The template store with one row's outcome edited by `edit(outcome)` (which may
    return a replacement), CHECK constraints off."""
    def make(path: Path) -> None:
        shutil.copy(template_store(), path)
        with sqlite3.connect(path) as db:
            key, text = db.execute(f"SELECT key, outcome FROM {table} WHERE outcome LIKE ?"
                                   f" LIMIT 1", (f'%"{status}"%' if table == "deployments"
                                                 else "%",)).fetchone()
            outcome = json.loads(text)
            replaced = edit(outcome)
            db.execute(f"UPDATE {table} SET outcome = ? WHERE key = ?",
                       (replaced if isinstance(replaced, str)
                        else json.dumps(outcome if replaced is None else replaced), key))
        db.close()
    return make


def setter(**fields):
    return lambda outcome: outcome.update(fields)


def dropper(name: str):
    return lambda outcome: outcome.pop(name)


for label, edit in (
        ("negative SLA rate", setter(sla_rate_rps=-5.0)),
        ("zero SLA rate", setter(sla_rate_rps=0)),
        ("text SLA rate", setter(sla_rate_rps="fast")),
        ("no tokens_per_s", dropper("tokens_per_s")),
        ("negative tokens_per_s_per_watt", setter(tokens_per_s_per_watt=-1.0)),
        ("huge cost", setter(cost_per_mtok=1e400)),
        ("bool max_batch", setter(max_batch=True)),
        ("unknown batching", setter(batching="fifo")),
        ("zero chips", setter(chips=0)),
        ("tp x pp not chips", setter(tp=7)),
        ("no above", dropper("above")),
        ("above without missed", lambda o: o["above"].pop("missed")),
        ("above with negative preemptions", lambda o: o["above"].update(preempted=-1)),
        ("above latency text", lambda o: o["above"].update(latency_ms="slow")),
        ("made-up status", setter(status="made up")),
        ("unbounded with a rate", setter(status="unbounded", note="x")),
        ("pruned without a reason", setter(status="pruned")),
        ("no arch", dropper("arch")),
        ("an array", lambda o: "[1, 2]"),
        ("not JSON", lambda o: "{not json")):
    case(f"store row {label}", STORE_ARGS, {"r.sqlite": forged(edit)}, None, "r.sqlite",
         "deployments[")
# Runs and bounds are read when a search needs them: one whose SLA changed.
RESEARCH = [arg.replace("ttft_p99_ms=0.15", "ttft_p99_ms=0.2") for arg in STORE_ARGS]
case("store run without figures", RESEARCH,
     {"r.sqlite": forged(dropper("figures"), "serving_runs")}, None, "r.sqlite",
     "serving_runs[")
case("store bound negative", RESEARCH,
     {"r.sqlite": forged(setter(bound_ms=-1.0), "iteration_bounds")}, None, "r.sqlite",
     "iteration_bounds[")
case("sweep report of a deployment store", ["sweep", "report", "r.sqlite"],
     {"r.sqlite": lambda path: shutil.copy(template_store(), path)}, None, "r.sqlite",
     "plan-deployment")


def test_there_are_enough_cases():
    assert len(CASES) >= 150
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, files, env, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_input_is_one_clear_error(name, argv, files, env, fragments, tmp_path,
                                         monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value.replace("{cwd}", str(tmp_path)))
    _, changed = refused_in(tmp_path, files, argv, capsys, SECONDS, fragments)
    allowed = {f"r.sqlite{suffix}" for suffix in ("", "-wal", "-shm", "-journal")}
    assert changed <= allowed, f"wrote {sorted(changed - allowed)}"
