"""Fuzzing the readers (DESIGN.md section 7): platform, workload and plan YAML, result
JSON, SCALE-Sim .cfg and topology CSV, 1,000 examples each. Every input either raises
the project's AccsimError or is accepted; an accepted one that can run (within a small
memory budget) must keep the model's invariants: cycles >= the roofline bound, the
breakdown sums to the total, and both engines give identical breakdowns.

Inputs are a valid file with a few fields replaced by hostile values (NaN, infinities,
negatives, huge integers, booleans, strings, containers), or deleted, or an unknown key
added; a share of them also has random text spliced into the file itself.
"""

from __future__ import annotations

import copy
import io
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from platforms import BASE as PLATFORM
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.limits import MemoryBudget
from simulator.inputs.loader import parse_model
from simulator.mapping.plan import LOOP_ORDERS, Mapping
from simulator.engines.outcome import STALL_PARTS
from simulator.present.run_report import compare_table, print_report, result_dict
from simulator.present.sheet import markdown
from simulator.output.terminal import console
from simulator.frontends.scalesim import template_platform
from simulator.frontends.scalesim.parse import parse_config, parse_topology
from simulator.simulate import Inputs, simulate
from simulator.verification.rerun import read_result
from simulator.inputs.workload import Workload

EXAMPLES = 1000
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# Accepted inputs run only when their programs are small (about 4,000 SimPy steps).
BUDGET = MemoryBudget(4 * 2**20, bytes_per_step=1024)

HOSTILE = st.one_of(
    st.sampled_from([0, 1, -1, 2, 7, 64, 2**31, 2**48, 2**48 + 1, 2**62, 2**63, 2**64,
                     10**30, float("nan"), float("inf"), float("-inf"), -0.0, 1e-300,
                     1e300, 0.5, True, False, None, "", "yes", "on", "0100", "1e3",
                     "\x1b[2J", "[/]", [], {}, [1, 2], {"a": 1}]),
    st.integers(-2**70, 2**70), st.floats(), st.text(max_size=6))
SMALL = st.one_of(st.integers(1, 48), HOSTILE)

GEMM = {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 24, "n": 16, "k": 40}
RELU = {"name": "r", "layer_type": "act", "kind": "elementwise", "elements": 384,
        "op": "relu"}
CONV = {"name": "c", "layer_type": "conv", "kind": "conv2d", "h": 6, "w": 6, "cin": 4,
        "cout": 8, "kh": 3, "kw": 3, "padding": 1}
SOFTMAX = {"name": "s", "layer_type": "attn", "kind": "softmax", "rows": 4, "cols": 16}
POOL = {"name": "p", "layer_type": "pool", "kind": "pool", "h": 6, "w": 6,
        "channels": 4, "kh": 2, "kw": 2, "stride": 2}
WORKLOAD = {"name": "w", "operators": [GEMM, RELU, CONV, SOFTMAX]}
PLATFORM_MODEL = Platform.model_validate(PLATFORM)
WORKLOAD_MODEL = Workload.model_validate(WORKLOAD)
# Plans name a heuristic, so that what they leave open is filled without a search.
NO_SEARCH = Mapping.model_validate({"default": {"heuristic": "array_aligned"}})
# What an accepted platform runs: one array and one vector operator, fused.
SMALL_WORKLOAD = Workload.model_validate({"name": "w", "operators": [GEMM, RELU]})
FUSED = Mapping.model_validate({"default": {"heuristic": "array_aligned"},
                                "operators": {"g": {"fuse": "r"}}})


def leaf_paths(node, prefix=()) -> list[tuple]:
    """Every path to a value in a nested dict/list, containers included."""
    paths = [prefix] if prefix else []
    children = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        paths += leaf_paths(child, prefix + (key,))
    return paths


@st.composite
def mutated(draw, base: dict, values=HOSTILE) -> dict:
    """`base` with one to three fields replaced, deleted, or an unknown key added."""
    data = copy.deepcopy(base)
    paths = leaf_paths(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        node = data
        try:
            for key in path[:-1]:
                node = node[key]
            action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
            if action == "delete":
                del node[path[-1]]
            elif action == "add" and isinstance(node, dict):
                node[draw(st.text(min_size=1, max_size=5))] = draw(values)
            else:
                node[path[-1]] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    return data


@st.composite
def yaml_text(draw, base: dict, values=HOSTILE) -> str:
    """YAML of a mutated `base`; one time in five with random text spliced in."""
    text = yaml.safe_dump(draw(mutated(base, values)), sort_keys=False)
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(max_size=8)) + text[at:]
    return text


def run_invariants(platform: Platform, workload: Workload, mapping: Mapping) -> None:
    """Run an accepted input on both engines; AccsimError (it does not fit, or would
    overflow) is a clean refusal. Otherwise the invariants hold."""
    try:
        fast = simulate(Inputs(platform, workload, mapping), engine="fast", budget=BUDGET)
        des = simulate(Inputs(platform, workload, mapping), engine="simpy", budget=BUDGET)
    except AccsimError:
        event("accepted, refused by the run")
        return
    event("accepted and run on both engines")
    for a, b in zip(fast.operators, des.operators, strict=True):
        assert a.run == b.run, a.lowered.name
        totals = a.totals
        assert totals.cycles >= totals.roofline_bound_cycles, a.lowered.name
        assert sum(getattr(a.run, part) for part in STALL_PARTS) == a.run.total_cycles
    json.dumps(result_dict(fast), allow_nan=False)  # the result file is strict JSON
    # Every view of the result renders (no division by a zero figure, say).
    screen = console(wide=True)
    screen.file = io.StringIO()
    print_report(fast, screen)
    screen.print(compare_table([fast, des]))
    markdown(fast, None)


def accepted_or_refused(parse):
    """parse() returns the accepted value or raises AccsimError; nothing else."""
    try:
        return parse()
    except AccsimError as exc:
        assert exc.message() and "\n" not in exc.message()
        event("refused by the reader")
        return None


@FUZZ
@given(yaml_text(PLATFORM))
def test_platform_reader(text):
    platform = accepted_or_refused(lambda: parse_model(text, Platform, file="p.yaml"))
    if platform is not None:
        run_invariants(platform, SMALL_WORKLOAD, FUSED)


@FUZZ
@given(yaml_text({"name": "w", "operators": [GEMM, RELU, CONV, SOFTMAX, POOL]}, SMALL))
def test_workload_reader(text):
    workload = accepted_or_refused(lambda: parse_model(text, Workload, file="w.yaml"))
    if workload is not None:
        run_invariants(PLATFORM_MODEL, workload, NO_SEARCH)


PLAN_VALUES = st.one_of(st.integers(-1, 48), st.sampled_from(LOOP_ORDERS),
                        st.sampled_from(["os", "ws", "is", "array_aligned", "min_offchip",
                                         "os_k_inner", "r", "g", "os:system"]), HOSTILE)
PLAN = {"name": "plan", "default": {"depth": 2, "heuristic": "array_aligned"},
        "layer_types": {"fc": {"tm": 8, "tn": 8, "tk": 16, "loop_order": "mnk",
                               "dataflow": "os"}},
        "operators": {"g": {"fuse": "r", "depth": 1}, "c": {"tm": 12, "tk": 9},
                      "s": {"rows_per_tile": 2}}}


@FUZZ
@given(yaml_text(PLAN, PLAN_VALUES))
def test_plan_reader(text):
    plan = accepted_or_refused(lambda: parse_model(text, Mapping, file="m.yaml"))
    if plan is not None:
        if plan.default.heuristic is None:  # fill the open fields without a search
            plan = plan.model_copy(update={"default": plan.default.model_copy(
                update={"heuristic": "array_aligned"})})
        run_invariants(PLATFORM_MODEL, WORKLOAD_MODEL, plan)


@pytest.fixture(scope="module")
def result_json() -> dict:
    return json.loads(json.dumps(result_dict(simulate(Inputs(PLATFORM_MODEL,
                                                             SMALL_WORKLOAD, FUSED)))))


@pytest.fixture(scope="module")
def result_path():
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder) / "r.json"


@FUZZ
@given(data=st.data())
def test_result_json_reader(result_json, result_path, data):
    if data.draw(st.integers(0, 4)) == 0:  # raw text: truncated, spliced
        text = json.dumps(result_json)
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + data.draw(st.text(max_size=6)) + \
            text[at + data.draw(st.integers(0, 20)):]
    else:
        text = json.dumps(data.draw(mutated(result_json)))
    result_path.write_text(text)
    found = accepted_or_refused(lambda: read_result(str(result_path)))
    if found is not None:
        recorded, models = found
        assert isinstance(models["platform"], Platform)
        assert isinstance(models["workload"], Workload)


CFG_KEYS = ["ArrayHeight", "ArrayWidth", "IfmapSramSzkB", "FilterSramSzkB",
            "OfmapSramSzkB", "Dataflow", "Bandwidth", "MemoryBanks", "run_name"]
CFG_VALUES = st.one_of(st.sampled_from(["8", "32", "64", "os", "ws", "is", "10", "10,20",
                                        "nan", "inf", "-1", "0", "1e3", "0x10", "1_0",
                                        str(2**63), "", "\x1b[2J", "[/]", "true"]),
                       st.integers(-5, 300).map(str), st.text(max_size=6))


@FUZZ
@given(st.dictionaries(st.sampled_from(CFG_KEYS), CFG_VALUES, max_size=len(CFG_KEYS)),
       st.integers(0, 4), st.text(max_size=6))
def test_scalesim_config_reader(fields, splice, noise):
    lines = ["[general]"] + [f"run_name = {fields.pop('run_name')}"
                             if "run_name" in fields else "run_name = fuzz"]
    lines += ["[architecture_presets]"] + [f"{key}: {value}" for key, value in
                                           fields.items()]
    text = "\n".join(lines) + "\n"
    if splice == 0:
        text = noise + text
    template = template_platform()

    def read():
        return parse_config(text, file="c.cfg").platform(template)
    platform = accepted_or_refused(read)
    if platform is not None:
        run_invariants(platform, SMALL_WORKLOAD, FUSED)


CELLS = st.one_of(st.integers(1, 40).map(str), st.sampled_from(
    ["0", "-3", "4.5", "x", "", str(2**40), str(2**63), "1e3", "nan", " 7 ", "\x1b"]),
    st.text(max_size=4))


@FUZZ
@given(st.sampled_from(["conv", "gemm"]),
       st.lists(st.lists(CELLS, min_size=2, max_size=9), min_size=1, max_size=3),
       st.booleans())
def test_scalesim_topology_reader(kind, rows, named):
    header = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
              "Channels, Num Filter, Strides," if kind == "conv" else "Layer, M, N, K,")
    body = [", ".join([f"L{i}" if named else cells[0], *cells[1:]]) + ","
            for i, cells in enumerate(rows)]
    text = "\n".join([header, *body]) + "\n"

    def read():
        return parse_topology(text, kind, file="t.csv").workload("t")
    workload = accepted_or_refused(read)
    if workload is not None:
        run_invariants(PLATFORM_MODEL, workload, NO_SEARCH)
