"""Fuzzing the sweep readers (issue 23): the spec reader (load_sweep, then make_plan of
what it accepts) on random YAML/JSON structures and on mutated valid specs, and the
store reader (open, rows, specs, model versions, report) on random bytes, mutated
valid store files and random rows written into a valid store's tables. 1,000 inputs
each; every one is either accepted or refused with AccsimError, never another
exception. An accepted store's rows hold what a report relies on.
"""

from __future__ import annotations

import json
import math
import sqlite3
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from simulator.errors import AccsimError
from simulator.sweep.jobs import make_plan
from simulator.sweep.report import build_report, parse_objectives
from simulator.sweep.rows import ROW_COLUMNS
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store
from simulator.sweep.task import METRICS
from test_fuzz_readers import HOSTILE, mutated, yaml_text
from test_hostile_sweep import GEMM, good_store

EXAMPLES = 1000
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])
# Accepted specs are planned when they are this small (planning is ~1 ms a job).
PLAN_JOBS = 64

SPEC = {"name": "s", "platform": "edge_32x32", "workloads": ["w.yaml"],
        "axes": {"systolic_array.rows": [8, 16], "systolic_array.cols": {"range": [8, 24, 8]},
                 "offchip.bandwidth_gbps": {"range": [5.0, 10.0, 2.5]},
                 "buffers.ifmap_bytes": {"log2_range": [4096, 16384]},
                 "link": [["systolic_array.cols", "offchip.bandwidth_gbps"]],
                 "system.tp": [1]},
        "sampling": {"method": "lhs", "n": 5, "seed": 7},
        "constraints": ["systolic_array.rows * systolic_array.cols <= 2**9",
                        "not offchip.bandwidth_gbps == 7.5 or buffers.ifmap_bytes > 0"],
        "objectives": {"time_s": "min", "energy_j": "min"}}
KEYS = [*SPEC, "range", "log2_range", "link", "method", "n", "seed",
        *SPEC["axes"], "system.chips", "clock_ghz"]
SCALAR = st.one_of(HOSTILE, st.sampled_from(["grid", "random", "lhs", "min", "max",
                                             "edge_32x32", "w.yaml", "time_s"]))
STRUCTURE = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), inner,
                    max_size=5)), max_leaves=20)


def read_spec(text: str | bytes) -> str:
    """Write a spec beside a small workload and read it; plan it when it is small.
    What happened, in words."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        (Path(folder) / "w.yaml").write_text(GEMM)
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8",
                                                                           "surrogatepass"))
        try:
            sweep = load_sweep(path)
        except AccsimError:
            return "refused"
        sampling = sweep.spec.sampling
        points = math.prod(len(d[0].values) for d in sweep.dimensions) \
            if sampling.method == "grid" else sampling.n
        if points * len(sweep.workloads) > PLAN_JOBS:
            return "accepted, not planned"
        try:
            plan = make_plan(sweep)
        except AccsimError:
            return "accepted, refused when planned"
        assert len({job.key for job in plan.jobs}) == len(plan.jobs)
        return "accepted and planned"


def test_the_fuzzed_spec_is_valid():
    assert read_spec(yaml.safe_dump(SPEC)) == "accepted and planned"
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "w.yaml").write_text(GEMM)
        (Path(folder) / "s.yaml").write_text(yaml.safe_dump(SPEC))
        assert make_plan(load_sweep(Path(folder) / "s.yaml")).samples == 5


@FUZZ
@given(st.one_of(STRUCTURE, st.dictionaries(st.sampled_from(KEYS), STRUCTURE, max_size=8)),
       st.sampled_from(["yaml", "json", "flow"]))
def test_spec_reader_on_random_structures(data, form):
    if form == "yaml":
        text = yaml.safe_dump(data, allow_unicode=True)
    elif form == "json":
        text = json.dumps(data)  # NaN and Infinity included, as a careless writer would
    else:
        text = yaml.safe_dump(data, default_flow_style=True)
    event(read_spec(text))


@FUZZ
@given(st.one_of(yaml_text(SPEC, SCALAR), mutated(SPEC, STRUCTURE).map(json.dumps),
                 st.binary(max_size=64).map(lambda b: yaml.safe_dump(SPEC).encode() + b)))
def test_spec_reader_on_mutated_specs(text):
    event(read_spec(text))


# --- the store reader.
def template_store() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.sqlite"
        good_store(path, rows=12)
        return path.read_bytes()


TEMPLATE = template_store()
PAGE = int.from_bytes(TEMPLATE[16:18], "big")


def read_store(data: bytes | None = None, edit=None) -> str:
    """Write a store file (bytes, or the template then `edit` on a connection) and
    read it as `sweep report` and `sweep run` do; whether it was accepted."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.sqlite"
        path.write_bytes(TEMPLATE if data is None else data)
        if edit is not None:
            db = sqlite3.connect(path)
            db.execute("PRAGMA synchronous = OFF")  # a test file: no fsync per edit
            db.execute("PRAGMA ignore_check_constraints = 1")
            with db:
                edit(db)
            db.close()
        try:
            with Store(path, create=False) as store:
                versions = store.model_versions()
                report = build_report(store, parse_objectives(None, store),
                                      model_version=min(versions) if versions else None)
            with Store(path) as store:
                store.keys()
        except AccsimError:
            return "refused"
        for row in report.rows:
            for name in METRICS:
                value = row[name]
                assert value is None or math.isfinite(value) and value >= 0
        return "accepted"


def test_the_store_template_reads():
    assert read_store() == "accepted"


@FUZZ
@given(st.one_of(st.binary(max_size=2048),
                 st.binary(max_size=2048).map(lambda b: b"SQLite format 3\x00" + b),
                 st.binary(min_size=84, max_size=84).map(
                     lambda b: TEMPLATE[:16] + b + TEMPLATE[100:PAGE * 2])))
def test_store_reader_on_random_bytes(data):
    event(read_store(data))


@st.composite
def mutated_store(draw) -> bytes:
    """The template with bytes overwritten, flipped, or cut off."""
    data = bytearray(TEMPLATE)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "flip", "overwrite", "truncate"]))
        at = draw(st.integers(0, len(data) - 1))
        if action == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif action == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=64))
            data[at:at + len(chunk)] = chunk
        else:
            del data[at:]
            if not data:
                break
    return bytes(data)


@FUZZ
@given(mutated_store())
def test_store_reader_on_mutated_store_files(data):
    event(read_store(data))


VALUE = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.floats(),
                  st.text(max_size=12), st.binary(max_size=8),
                  st.sampled_from(["ok", "failed", "{}", "[]", '{"model_version": 3}',
                                   "{", "NaN", '{"a": NaN}', "0" * 64]))


@st.composite
def row_edit(draw):
    """A function writing random rows or values into the template's tables."""
    table = draw(st.sampled_from(["results", "results", "sweeps"]))
    columns = list(ROW_COLUMNS) if table == "results" else ["name", "spec"]
    action = draw(st.sampled_from(["insert", "update"]))
    if action == "insert":
        values = [draw(VALUE) for _ in columns]
        sql = (f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES "
               f"({', '.join('?' * len(columns))})")
    else:
        column = draw(st.sampled_from(columns))
        values = [draw(VALUE)]
        sql = f"UPDATE {table} SET {column} = ? WHERE rowid = {draw(st.integers(1, 13))}"
    event(f"{action} {table}")

    def edit(db) -> None:
        try:
            db.execute(sql, values)
        except sqlite3.IntegrityError:  # NOT NULL: not a row SQLite would hold
            pass
    return edit


@FUZZ
@given(st.lists(row_edit(), min_size=1, max_size=3))
def test_store_reader_on_random_rows(edits):
    event(read_store(edit=lambda db: [edit(db) for edit in edits]))


def test_a_system_axis_past_the_chips_a_plan_may_have_is_refused():
    """The case the mutated-spec search found: `system.tp: [2**31]` was a pydantic
    traceback when the point's plan was built; one axis value past MAX_CHIPS is refused
    by the spec, and axes whose product is (tp x pp) when the point is planned."""
    one = {**SPEC, "axes": {**SPEC["axes"], "system.tp": [2**31]}}
    assert read_spec(yaml.safe_dump(one)) == "refused"
    both = {**SPEC, "axes": {**SPEC["axes"], "system.tp": [2**15], "system.pp": [4]}}
    assert read_spec(yaml.safe_dump(both)) == "accepted, refused when planned"
