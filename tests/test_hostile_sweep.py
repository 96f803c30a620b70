"""Hostile input to `accsim sweep run` and `accsim sweep report` (issue 23, items 3 and
4): sweep specs that ask for unbounded work, stores that are corrupt, foreign,
truncated, read-only, forged or of another MODEL_VERSION, and bad flags. Table-driven
as tests/test_bad_inputs_verbs.py: each case ends in a non-zero exit with one error line
naming the file or the option, within SECONDS, with no traceback, and writes no file
but the output it names (the --store of `sweep run`, the export of `sweep report`).

Each row: (id, argv, {file name: content or a function making it}, fragments).
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
from pathlib import Path

import pytest
import yaml

import simulator
from simulator.cli import main
from timed_cli import assert_one_clear_error, cpu_seconds, run_main
from simulator.sweep.executors import max_workers
from simulator.sweep.rows import ROW_COLUMNS, stored_key
from simulator.sweep.store import Store
from test_bad_inputs import _make, dump

SECONDS = 5
VERSION = simulator.MODEL_VERSION
GEMM = "name: g\noperators:\n  - {name: g, layer_type: fc, kind: gemm, m: 8, n: 8, k: 8}\n"
GEMM2 = GEMM.replace("name: g\n", "name: g2\n", 1)
SWEEP = {"name": "s", "platform": "edge_32x32", "workloads": ["w.yaml"],
         "axes": {"systolic_array.rows": [16, 32]}, "objectives": {"time_s": "min"}}
RUN = ["sweep", "run", "s.yaml", "--store", "r.sqlite", "--scheduler", "serial"]
REPORT = ["sweep", "report", "r.sqlite"]
CASES: list[tuple[str, list[str], dict, list[str]]] = []


def case(name: str, argv: list[str], files: dict, *fragments: str) -> None:
    CASES.append((name, argv, files, list(fragments)))


def spec(**fields) -> str:
    """SWEEP with top-level fields replaced (None deletes one)."""
    data = {**SWEEP, **fields}
    return dump({k: v for k, v in data.items() if v is not None})


def sampled(**sampling) -> str:
    return spec(sampling=sampling)


def axes(**by_path) -> str:
    return spec(axes={path.replace("__", "."): values for path, values in by_path.items()})


def constrained(*texts) -> str:
    return spec(constraints=list(texts))


# --- stores, made by the store itself and then damaged.
def row(index: int, version: int = VERSION, **columns) -> dict:
    """A well-formed ok row of `version` whose key is the hash of its inputs."""
    inputs = {"platform": {"name": "p", "systolic_array": {"rows": index}},
              "workload": {"name": "g", "sha256": "0" * 64}, "mapping": "default",
              "model_version": version}
    metrics = {"cycles": 1000 + index, "time_s": 1e-3 * (1 + index % 3), "mfu": 0.5,
               "memory_stall_fraction": 0.1, "energy_j": 1e-3 * (3 - index % 3),
               "avg_power_w": 1.0, "tops_per_w": 2.0, "area_mm2": None}
    return {"key": stored_key(inputs), "status": "ok", "error": None, "sweep": "s",
            "workload": "g", "point": json.dumps({"systolic_array.rows": index}),
            "inputs": json.dumps(inputs, sort_keys=True, separators=(",", ":")),
            **metrics, "bottleneck": "compute", "engine": "fast", **columns}


def good_store(path: Path, versions=(VERSION,), rows: int = 4) -> None:
    """A store of `rows` rows per version, written in one transaction."""
    with Store(path) as store:
        store.record_sweep("s", {"objectives": {"time_s": "min", "energy_j": "min"}})
        with store.db:
            store.db.executemany(
                f"INSERT INTO results ({', '.join(ROW_COLUMNS)}) VALUES "
                f"({', '.join('?' * len(ROW_COLUMNS))})",
                [[row(index, version)[c] for c in ROW_COLUMNS]
                 for version in versions for index in range(rows)])


def store_of(versions=(VERSION,), rows: int = 4):
    return lambda path: good_store(path, versions, rows)


def edited_store(sql: str, *args):
    """A good store with one statement run on it, CHECK constraints off (as a forger
    with the sqlite3 shell could)."""
    def make(path: Path) -> None:
        good_store(path)
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA ignore_check_constraints = 1")
            db.execute(sql, args)
        db.close()
    return make


def forged(column: str, value):
    return edited_store(f"UPDATE results SET {column} = ? WHERE rowid = 1", value)


def foreign(*statements: str):
    def make(path: Path) -> None:
        db = sqlite3.connect(path)
        for statement in statements:
            db.execute(statement)
        db.commit()
        db.close()
    return make


def damaged(how: str, wal: bool = False):
    """A store of many pages, then truncated or overwritten (and an empty WAL file
    beside it, as a sweep still writing has)."""
    def make(path: Path) -> None:
        good_store(path, rows=400)
        data = bytearray(path.read_bytes())
        page = int.from_bytes(data[16:18], "big")
        if how == "half":
            data = data[:len(data) // 2 + 100]
        elif how == "pages":
            data = data[:page * 2]
        elif how == "header":
            data = data[:60]
        elif how == "page size":
            data[16:18] = (3).to_bytes(2, "big")
        else:  # every page after the first overwritten
            data[page:] = bytes((i * 97 + 13) % 256 for i in range(len(data) - page))
        path.write_bytes(bytes(data))
        if wal:
            Path(f"{path}-wal").write_bytes(b"")
    return make


def read_only(path: Path) -> None:
    good_store(path)
    path.chmod(0o444)


# --- specs: sizes bounded before any work.
for label, text, *fragments in (
        ("seed negative", sampled(method="random", n=1, seed=-1), "sampling.seed"),
        ("seed above 2**64", sampled(method="lhs", n=1, seed=2**64), "sampling.seed"),
        ("seed a fraction", sampled(method="lhs", n=1, seed=1.5), "sampling.seed"),
        ("seed a string", sampled(method="lhs", n=1, seed="x"), "sampling.seed"),
        ("seed a boolean", sampled(method="lhs", n=1, seed=True), "sampling.seed"),
        ("seed huge", sampled(method="random", n=1, seed=10**40), "sampling.seed"),
        ("n zero", sampled(method="random", n=0), "sampling.n"),
        ("lhs of a million", sampled(method="lhs", n=10**6), "100000"),
        ("random of 2**70", sampled(method="random", n=2**70), "sampling.n"),
        ("n with grid", sampled(method="grid", n=2), "sampling"),
        ("lhs without n", sampled(method="lhs"), "sampling"),
        ("method unknown", sampled(method="sobol", n=2), "sampling.method"),
        ("million-point grid", axes(systolic_array__rows={"range": [1, 1000, 1]},
                                    systolic_array__cols={"range": [1, 1000, 1]}),
         "sampling", "100,000"),
        ("grid of three 100-value axes", axes(
            systolic_array__rows={"range": [1, 100, 1]},
            systolic_array__cols={"range": [1, 100, 1]},
            offchip__bandwidth_gbps={"range": [1, 100, 1]}), "sampling", "1,000,000"),
        ("grid times workloads", spec(workloads=["w.yaml", "w2.yaml"], axes={
            "systolic_array.rows": {"range": [1, 300, 1]},
            "systolic_array.cols": {"range": [1, 300, 1]}}), "2 workloads", "100,000"),
        ("random n times workloads", spec(
            workloads=["w.yaml", "w2.yaml"], sampling={"method": "random", "n": 60000},
            axes={"systolic_array.rows": {"range": [1, 300, 1]},
                  "systolic_array.cols": {"range": [1, 300, 1]}}), "sampling", "lower n"),
        ("int range of 10**30", axes(systolic_array__rows={"range": [1, 10**30, 1]}),
         "axes.systolic_array.rows.range", "10,000"),
        ("float range of tiny steps", axes(clock_ghz={"range": [0.1, 1e308, 1e-300]}),
         "axes.clock_ghz.range"),
        ("float range beyond floats", axes(clock_ghz={"range": [0, 10**400, 0.5]}),
         "axes.clock_ghz.range"),
        ("list of 10,001 values", axes(offchip__bandwidth_gbps=list(range(1, 10_002))),
         "axes.offchip.bandwidth_gbps", "10,000"),
        ("12,000 values over two axes", axes(
            offchip__bandwidth_gbps=list(range(1, 6001)),
            clock_ghz=[1 + i / 1000 for i in range(6000)]), "over all axes"),
        ("33 axes", axes(**{f"a{i}": [1] for i in range(33)}), "axes", "at most 32"),
        ("log2 range of 13,000 powers", axes(systolic_array__rows={
            "log2_range": [1, 2**13000]}), "axes.systolic_array.rows"),
        ("range step zero", axes(clock_ghz={"range": [1, 2, 0]}), "axes.clock_ghz.range"),
        ("range NaN", axes(clock_ghz={"range": [1, float("nan"), 0.1]}), "axes",
         "finite"),
        ("range of words", axes(clock_ghz={"range": ["a", "b", "c"]}),
         "axes.clock_ghz.range"),
        ("range of booleans", axes(clock_ghz={"range": [False, True, True]}),
         "axes.clock_ghz.range"),
        ("range of two", axes(clock_ghz={"range": [1, 2]}), "axes.clock_ghz.range"),
        ("range and log2_range", axes(clock_ghz={"range": [1, 2, 1], "log2_range": [1, 2]}),
         "axes.clock_ghz"),
        ("axis an empty list", axes(clock_ghz=[]), "axes.clock_ghz"),
        ("axis value beyond int64", axes(systolic_array__rows=[2**64]),
         "axes.systolic_array.rows[0]", "int64"),
        ("system axis zero", axes(system__tp=[0]), "axes.system.tp[0]"),
        ("system axis unknown", axes(system__dp=[2]), "axes.system.dp"),
        ("axis path empty", axes(**{"": [1]}), "no such platform field"),
        ("axis path double dot", axes(systolic_array____rows=[8]), "no such platform field"),
        ("axis path with escape", axes(**{"x\x1b[2J": [1]}), "x\\x1b[2J"),
        ("link unknown axis", axes(clock_ghz=[1.0], link=["clock_ghz", "nope"]),
         "axes.link", "'nope'"),
        ("link of one axis", axes(clock_ghz=[1.0], link=["clock_ghz"]), "axes.link"),
        ("link a number", axes(clock_ghz=[1.0], link=3), "axes.link"),
        ("link lengths differ", axes(clock_ghz=[1.0], systolic_array__rows=[8, 16],
                                     link=["clock_ghz", "systolic_array.rows"]), "axes.link"),
        ("axes a list", spec(axes=[1, 2]), "axes"),
        ("30,000-term constraint", constrained(
            "systolic_array.rows" + " + systolic_array.rows" * 30000 + " > 0"),
         "constraints[0]", "2,000"),
        ("constraint of 600 terms", constrained("1" + "+1" * 600 + " > 0"),
         "constraints[0]", "terms"),
        ("constraint nested 100 deep", constrained("-" * 100 + "systolic_array.rows < 0"),
         "constraints[0]", "deep"),
        ("constraint of 300 parentheses", constrained("(" * 300 + "1" + ")" * 300 + " > 0"),
         "constraints[0]"),
        ("constraint text times a number", constrained("'a' * 10**10 == 'b'"),
         "constraints[0]", "arithmetic on str"),
        ("constraint power tower", constrained(
            "((systolic_array.rows ** 64) ** 64) ** 64 > 1"), "constraints[0]", "4096 bits"),
        ("constraint huge exponent", constrained("2 ** 65 > 1"), "constraints[0]"),
        ("101 constraints", constrained(*["systolic_array.rows > 0"] * 101), "constraints",
         "100"),
        ("constraint a number", constrained(5), "constraints[0]"),
        ("constraint a lambda", constrained("(lambda: 1)() > 0"), "constraints[0]"),
        ("constraint a comprehension", constrained("[x for x in (1, 2)] == 1"),
         "constraints[0]"),
        ("constraint walrus", constrained("(x := 1) > 0"), "constraints[0]"),
        ("constraint subscript", constrained("systolic_array.rows[0] > 1"),
         "constraints[0]"),
        ("constraint f-string", constrained("f'{1}' == '1'"), "constraints[0]"),
        ("constraint NUL byte", constrained("1 > 0\x00"), "constraints[0]"),
        ("constraint text against number", constrained("systolic_array.rows < 'a'"),
         "constraints[0]"),
        ("constraint dunder", constrained("systolic_array.__class__ == 1"),
         "constraints[0]"),
        ("101 workloads", spec(workloads=["w.yaml"] * 101), "workloads", "100"),
        ("two workloads of one name", spec(workloads=["w.yaml", "w.yaml"]), "workloads"),
        ("no workloads", spec(workloads=[]), "workloads"),
        ("name empty", spec(name=""), "name"),
        ("objectives empty", spec(objectives={}), "objectives"),
        ("objective sense up", spec(objectives={"time_s": "up"}), "objectives"),
        ("YAML nested 100 deep", spec() + "extra: " + "[" * 100 + "]" * 100 + "\n",
         "nested deeper than 64"),
        ("JSON nested 3,000 deep", '{"name": ' + "[" * 3000 + "]" * 3000 + "}", "nested"),
        ("integer of 5,000 digits", spec().replace("- 16", "- " + "9" * 5000), "s.yaml"),
        ("billion laughs", "a: &a [1, 1]\nb: &b [*a, *a]\nc: [*b, *b]\n", "alias"),
        ("not UTF-8", b"name: \xff\xfe\n", "UTF-8"),
        ("over 64 MiB", "sparse:70000000", "bytes"),
        ("a directory", "directory", "directory"),
        ("a FIFO", "fifo", "FIFO"),
        ("empty", "", "mapping")):
    case(f"spec {label}", RUN, {"s.yaml": text, "w.yaml": GEMM, "w2.yaml": GEMM2},
         "s.yaml", *fragments)
case("spec platform missing", RUN, {"s.yaml": spec(platform="nope.yaml"), "w.yaml": GEMM},
     "nope.yaml")
case("spec platform a directory", RUN, {"s.yaml": spec(platform="p.yaml"), "w.yaml": GEMM,
     "p.yaml": "directory"}, "p.yaml", "directory")
case("spec workload a FIFO", RUN, {"s.yaml": spec(), "w.yaml": "fifo"}, "w.yaml", "FIFO")
case("spec missing", RUN, {}, "s.yaml", "not found")

# --- sweep run flags.
GOOD = {"s.yaml": spec(), "w.yaml": GEMM}
RUN_POOL = RUN[:-2]
for flag, value, fragment in (
        ("--workers", "100000", "4 x the"),
        ("--workers", str(max_workers() + 1), f"more than {max_workers()}"),
        ("--workers", str(2**70), "--workers"), ("--workers", "-1", "--workers"),
        ("--workers", "1e3", "--workers"), ("--workers", "", "--workers"),
        ("--scheduler", "dask://", "--scheduler"), ("--scheduler", "", "--scheduler"),
        ("--scheduler", "processes ", "--scheduler"),
        ("--heuristic", "../../etc/passwd", "--heuristic"),
        ("--store", "no/such/r.sqlite", "--store"), ("--store", "", "--store")):
    case(f"run {flag} {value!r}", RUN_POOL + [flag, value], GOOD, fragment)
case("run --workers with serial", RUN + ["--workers", "2"], GOOD, "--workers")
case("run store a FIFO", RUN, {**GOOD, "r.sqlite": "fifo"}, "r.sqlite", "FIFO")
case("run store a directory", RUN, {**GOOD, "r.sqlite": "directory"}, "r.sqlite",
     "directory")

# --- stores: the same damage read by `sweep report` and resumed by `sweep run`.
STORES = (
    ("random bytes", bytes((i * 31 + 7) % 256 for i in range(8192)), "SQLite"),
    ("text", "key,status\n1,ok\n", "SQLite"),
    ("header only", damaged("header"), "truncated"),
    ("truncated mid-page", damaged("half"), "truncated"),
    ("truncated to two pages", damaged("pages"), "truncated"),
    ("truncated beside a WAL file", damaged("pages", wal=True), "SQLite"),
    ("page size corrupt", damaged("page size"), "corrupt"),
    ("pages overwritten", damaged("garbage"), "SQLite"),
    ("foreign with other tables", foreign("CREATE TABLE photos (id, blob)"), "sweep store"),
    ("foreign of user_version 1", foreign("CREATE TABLE results (x)",
                                          "PRAGMA user_version = 1"), "sweep store"),
    ("foreign without tables", foreign("PRAGMA user_version = 7"), "without tables"),
    ("layout 2", edited_store("PRAGMA user_version = 2"), "layout 1"),
    ("key not primary", foreign(
        "CREATE TABLE results (key, status, error, sweep, workload, point, inputs, "
        "cycles, time_s, mfu, memory_stall_fraction, energy_j, avg_power_w, tops_per_w, "
        "area_mm2, bottleneck, engine)", "CREATE TABLE sweeps (name, spec)",
        "PRAGMA user_version = 1"), "sweep store"),
    ("inputs without model_version", forged("inputs", '{"a": 1}'), "results[1].inputs"),
    ("model_version a string", forged("inputs", '{"model_version": "3"}'),
     "results[1].inputs"),
    ("inputs not JSON", forged("inputs", "{"), "results[1].inputs"),
    ("inputs a blob", forged("inputs", b"\x00\x01"), "results[1].inputs"),
)
for label, content, fragment in STORES:
    case(f"report store {label}", REPORT, {"r.sqlite": content}, "r.sqlite", fragment)
    case(f"run store {label}", RUN, {**GOOD, "r.sqlite": content}, "r.sqlite", fragment)
for label, content, *fragments in (
        ("empty file", "", "empty"),
        ("missing", None, "not found"),
        ("key forged", forged("key", "0" * 64), "results[1].key"),
        ("time_s negative", forged("time_s", -1.0), "results[1].time_s"),
        ("time_s text", forged("time_s", "fast"), "results[1].time_s"),
        ("time_s infinite", forged("time_s", math.inf), "results[1].time_s"),
        ("cycles a fraction", forged("cycles", 1.5), "results[1].cycles"),
        ("energy missing on an ok row", forged("energy_j", None), "results[1].energy_j"),
        ("status unknown", forged("status", "maybe"), "results[1].status"),
        ("point not JSON", forged("point", "{"), "results[1].point"),
        ("point a list", forged("point", "[1]"), "results[1].point"),
        ("point NaN", forged("point", '{"a": NaN}'), "results[1].point"),
        ("point nested 100 deep", forged("point", '{"a":' + "[" * 100 + "]" * 100 + "}"),
         "results[1].point"),
        ("workload empty", forged("workload", ""), "results[1].workload"),
        ("error a blob", forged("error", b"\x1b[2J"), "results[1].error"),
        ("workload not UTF-8", edited_store(
            "UPDATE results SET workload = CAST(X'FFFE41' AS TEXT) WHERE rowid = 1"),
         "UTF-8"),
        ("10,000 bytes not UTF-8", edited_store(
            "UPDATE results SET error = CAST(? AS TEXT) WHERE rowid = 1", b"\xfe" * 10000),
         "UTF-8", "..."),
        ("spec not JSON", edited_store("UPDATE sweeps SET spec = '{'"), "sweeps['s']"),
        ("spec a list", edited_store("UPDATE sweeps SET spec = '[]'"), "sweeps['s']"),
        ("spec objective unknown", edited_store(
            "UPDATE sweeps SET spec = '{\"objectives\": {\"speed\": \"min\"}}'"),
         "objectives"),
        ("rows of two model versions", store_of((VERSION - 1, VERSION)),
         f"MODEL_VERSION {VERSION - 1} (4 rows)", f"MODEL_VERSION {VERSION} (4 rows)",
         "--model-version")):
    files = {} if content is None else {"r.sqlite": content}
    case(f"report store {label}", REPORT, files, "r.sqlite", *fragments)
case("run into a store of another model version", RUN,
     {**GOOD, "r.sqlite": store_of((VERSION - 1,))}, "r.sqlite", "--store",
     f"MODEL_VERSION {VERSION - 1}", f"MODEL_VERSION {VERSION}")
case("run into a store of two model versions", RUN,
     {**GOOD, "r.sqlite": store_of((VERSION, VERSION + 1))}, "r.sqlite",
     f"MODEL_VERSION {VERSION + 1}")
case("run into a read-only store", RUN, {**GOOD, "r.sqlite": read_only}, "r.sqlite",
     "read-only")

# --- sweep report flags, on a good store.
for flags, fragment in (
        (["--model-version", "99"], "no rows of MODEL_VERSION 99"),
        (["--model-version", "three"], "--model-version"),
        (["--pareto", ""], "--pareto"), (["--pareto", "time_s,time_s"], "twice"),
        (["--pareto", "time_s:min:max"], "--pareto"),
        (["--pareto", "time_s\x1b[2J"], "--pareto"),
        (["--best-by", "time_s,mfu"], "--best-by"),
        (["--plot", "p.png", "--pareto", "time_s"], "--plot"),
        (["--workload", "nope"], "--workload"), (["--top", "0"], "--top"),
        (["--top", "x"], "--top"), (["--csv", "r.txt"], "--csv"),
        (["--csv", "sub"], "--csv"), (["--parquet", "r.csv"], "--parquet"),
        (["--plot", "p.jpg"], "--plot"), (["--csv", "no/such/r.csv"], "--csv")):
    case(f"report {' '.join(flags)!r}", REPORT + flags, {"r.sqlite": store_of(),
                                                         "sub": "directory"}, fragment)


def make(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if callable(content):
        content(path)
    else:
        _make(path, content)


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every file under a folder: its kind, size and modification time."""
    found = {}
    for path in folder.rglob("*"):
        info = path.lstat()
        found[str(path.relative_to(folder))] = (info.st_mode, info.st_size,
                                                info.st_mtime_ns)
    return found


def refused_in(folder: Path, files: dict, argv: list[str], capsys, seconds: float,
               fragments) -> tuple[str, set[str]]:
    """`argv` run in `folder` (the working folder) holding `files` (make), asserted one
    clear error within `seconds` naming `fragments`; its stderr and the files under
    `folder` it changed, for the caller to hold to its own rule."""
    for file, content in files.items():
        make(folder / file, content)
    capsys.readouterr()  # what making the files printed
    before = snapshot(folder)
    code, out, err, elapsed = run_main(argv, capsys, seconds)
    assert_one_clear_error(code, out, err, elapsed, seconds, fragments)
    after = snapshot(folder)
    return err, {path for path in set(before) | set(after)
                 if before.get(path) != after.get(path)}


def named_output(argv: list[str]) -> set[str]:
    """The files a command may write: the store of `sweep run`, the exports of `sweep
    report`, and SQLite's journal files beside the store either reads."""
    names = set()
    for flag in ("--store", "--csv", "--parquet", "--plot"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            names.add(argv[argv.index(flag) + 1])
    stores = names | ({argv[2]} if argv[:2] == ["sweep", "report"] else set())
    return names | {f"{name}{suffix}" for name in stores for suffix in ("-wal", "-shm",
                                                                         "-journal")}


def test_there_are_enough_cases():
    assert len(CASES) >= 80
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("name, argv, files, fragments", CASES,
                         ids=[re.sub(r"\s+", "_", c[0]) for c in CASES])
def test_hostile_sweep_input_is_one_clear_error(name, argv, files, fragments, tmp_path,
                                               monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    err, changed = refused_in(tmp_path, files, argv, capsys, SECONDS, fragments)
    assert "\x1b" not in err
    allowed = named_output(argv)
    assert changed <= allowed, f"wrote {sorted(changed - allowed)}"


# --- what the refusals above must not break: the same stores read when they are fine.
def test_report_of_one_old_version_says_so(tmp_path, capsys):
    good_store(tmp_path / "r.sqlite", versions=(VERSION - 1,))
    assert main(["sweep", "report", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    assert f"rows of MODEL_VERSION {VERSION - 1}; this accsim is MODEL_VERSION {VERSION}" \
        in out
    assert "Pareto front" in out


def test_report_of_two_versions_takes_the_one_named(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    good_store(path, versions=(VERSION - 1, VERSION))
    csv = tmp_path / "r.csv"
    assert main(["sweep", "report", str(path), "--model-version", str(VERSION),
                 "--csv", str(csv)]) == 0
    lines = csv.read_text().splitlines()
    assert len(lines) == 1 + 4  # the four rows of this version, not the other four
    with Store(path, create=False) as store:
        current = {r["key"] for r in store.rows()
                   if r["inputs"]["model_version"] == VERSION}
    assert {line.split(",")[0] for line in lines[1:]} == current


def test_report_reads_a_read_only_store_without_writing_it(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    read_only(path)
    before = snapshot(tmp_path)
    assert main(["sweep", "report", str(path)]) == 0
    assert "Pareto front" in capsys.readouterr().out
    assert snapshot(tmp_path) == before


def test_a_full_store_is_one_error_and_keeps_every_row(tmp_path, monkeypatch, capsys):
    """A store that cannot grow (max_page_count at its size, as a full disk) fails the
    first write with one error naming the file; the rows stored before are intact."""
    path = tmp_path / "r.sqlite"
    good_store(path)
    connect = sqlite3.connect

    def full(*args, **kwargs):
        db = connect(*args, **kwargs)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
        return db

    monkeypatch.setattr(sqlite3, "connect", full)
    with Store(path) as store:
        with pytest.raises(simulator.errors.AccsimError) as caught:
            for index in range(4, 200):
                store.put(row(index))
    assert "disk is full" in caught.value.message()
    assert caught.value.file == str(path)
    monkeypatch.setattr(sqlite3, "connect", connect)
    with Store(path, create=False) as store:
        rows = store.rows()
    assert len(rows) >= 4 and {r["key"] for r in rows} >= {row(i)["key"] for i in range(4)}


def test_a_full_store_during_sweep_run_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(spec())
    Path("w.yaml").write_text(GEMM)
    good_store(tmp_path / "r.sqlite")
    connect = sqlite3.connect

    def full(*args, **kwargs):
        db = connect(*args, **kwargs)
        db.execute(f"PRAGMA max_page_count = "
                   f"{db.execute('PRAGMA page_count').fetchone()[0]}")
        return db

    monkeypatch.setattr(sqlite3, "connect", full)
    code = main(RUN[:-2] + ["--scheduler", "serial"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith("accsim: error: r.sqlite: the disk is full")
    assert len(err.splitlines()) == 1


def test_model_versions_are_counted_per_row(tmp_path):
    path = tmp_path / "r.sqlite"
    good_store(path, versions=(VERSION - 1, VERSION), rows=3)
    with Store(path, create=False) as store:
        assert store.model_versions() == {VERSION - 1: 3, VERSION: 3}


def test_size_refusals_are_fast(tmp_path, monkeypatch, capsys):
    """The million-point grid and LHS are refused in under a CPU second, before any
    point is drawn."""
    monkeypatch.chdir(tmp_path)
    Path("w.yaml").write_text(GEMM)
    for text in (axes(systolic_array__rows={"range": [1, 1000, 1]},
                      systolic_array__cols={"range": [1, 1000, 1]}),
                 sampled(method="lhs", n=10**6)):
        Path("s.yaml").write_text(text)
        code, seconds = cpu_seconds(lambda: main(RUN))
        assert code == 1 and seconds < 1.0
        assert "100,000" in capsys.readouterr().err.replace("100000", "100,000")
    assert not Path("r.sqlite").exists()


def test_spec_yaml_of_many_workloads_is_counted_before_reading(tmp_path, monkeypatch):
    """101 workload names are refused by count, none of them read."""
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(yaml.safe_dump({**SWEEP, "workloads": ["absent.yaml"] * 101}))
    assert main(RUN) == 1
    assert not os.path.exists("r.sqlite")
