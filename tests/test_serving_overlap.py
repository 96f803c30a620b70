"""Collective overlap in serving and sweeps (DESIGN.md sections 10, 11 and 14):
`accsim serve --overlap` prices each iteration of a T-chip replica as `accsim run
--overlap` prices the same step (the collective time the plan hides behind compute
comes off the iteration), and `system.overlap` is a sweep axis timed the same way."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.errors import AccsimError
from simulator.frontends import hf as hf_frontend
from simulator.frontends.hf.config import load_model_config
from simulator.serving.cost_cache import CostCache
from simulator.serving.llm_cost import LlmCost
from simulator.serving.spec import ServeSpec
from simulator.sweep.coordinator import run_sweep
from simulator.sweep.executors import Serial
from simulator.sweep.jobs import make_plan
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store
from simulator.system.overlap import OVERLAP_MODES
from simulator.system.parallelism import SystemPlan
from simulator.system.serving import ShardedFrontend

ARCH, MODEL, TP, SEQ = "tpu_v5e_like", "gpt2", 4, 64


@pytest.fixture(scope="module")
def costs():
    """Each mode's LlmCost of one chip of a T = 4 replica, on exact grid points."""
    platform = load_inputs(ARCH, "gemm_4096", None).platform
    config = load_model_config(MODEL)
    return {mode: LlmCost(platform, config, dtype=None, bits=20, cache=CostCache(None),
                          hf=ShardedFrontend(hf_frontend, SystemPlan(
                              chips=TP, tp=TP, overlap=mode), platform))
            for mode in OVERLAP_MODES}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """`accsim run` of the prefill step under each mode: its JSON result."""
    folder = tmp_path_factory.mktemp("runs")
    records = {}
    for mode in OVERLAP_MODES:
        path = folder / f"{mode}.json"
        assert main(["run", "--arch", ARCH, "--model", MODEL, "--phase", "prefill",
                     "--seq", str(SEQ), "--tp", str(TP), "--overlap", mode,
                     "--json", str(path)]) == 0
        records[mode] = json.loads(path.read_text())
    return records


def _iteration_s(cost: LlmCost, prefill, decode) -> float:
    """The iteration's operators, less the per-call cost a run charges its own way."""
    call = cost._call(len(decode) + sum(n for n, _ in prefill), len(decode) + len(prefill))
    return cost.iteration(prefill, decode).seconds - call.seconds


@pytest.mark.parametrize("mode", OVERLAP_MODES)
def test_a_served_iteration_costs_what_a_run_of_the_step_takes(costs, runs, capsys, mode):
    capsys.readouterr()
    record = runs[mode]
    clock_hz = costs[mode].platform.clock_ghz * 1e9
    invocation_s = record["workload"].get("invocation_cycles", 0) / clock_hz
    expected = record["system"]["time_s"] - invocation_s
    assert _iteration_s(costs[mode], [(SEQ, 0)], []) == pytest.approx(expected, rel=1e-12)
    assert costs[mode].exact([(SEQ, 0)], []).seconds == pytest.approx(
        costs[mode].iteration([(SEQ, 0)], []).seconds, rel=1e-12)


def test_overlap_takes_off_exactly_the_hidden_collective_time(costs, runs):
    none, decomposed = runs["none"]["system"], runs["decomposed"]["system"]
    assert decomposed["collective_hidden_s"] > 0   # T = 4: two of three ring steps hide
    assert decomposed["collective_exposed_s"] <= none["collective_exposed_s"]
    for system in (none, decomposed, runs["independent"]["system"]):
        assert system["collective_exposed_s"] >= 0
        assert system["collective_exposed_s"] + system["collective_hidden_s"] == \
            pytest.approx(system["collective_s"], rel=1e-12)
    saved = _iteration_s(costs["none"], [(SEQ, 0)], []) - \
        _iteration_s(costs["decomposed"], [(SEQ, 0)], [])
    assert saved == pytest.approx(decomposed["collective_hidden_s"], rel=1e-9)


@pytest.mark.parametrize("shape", [((), [300]), ([(24, 40)], [90, 200])])
def test_decode_and_mixed_iterations_save_and_match_their_exact_simulation(costs, shape):
    assert costs["decomposed"].iteration(*shape).seconds < \
        costs["none"].iteration(*shape).seconds
    assert costs["independent"].iteration(*shape).seconds <= \
        costs["none"].iteration(*shape).seconds
    assert costs["decomposed"].iteration(*shape).seconds == pytest.approx(
        costs["decomposed"].exact(*shape).seconds, rel=1e-3)


def test_the_overlap_is_in_the_cost_cache_key(costs):
    assert len({cost.key for cost in costs.values()}) == len(OVERLAP_MODES)


def test_the_spec_carries_overlap_to_the_replica_plan():
    assert "overlap" not in ServeSpec(rate=1).model_dump()   # unset: dumps as before
    spec = ServeSpec(model=MODEL, rate=1, tp=TP, overlap="decomposed")
    assert spec.system.overlap == "decomposed"
    assert ServeSpec(model=MODEL, rate=1, tp=TP).system.overlap == "none"


def test_serve_overlap_flag_reaches_the_result(tmp_path, capsys):
    path = tmp_path / "serve.json"
    assert main(["serve", "--arch", ARCH, "--model", MODEL, "--tp", str(TP), "--overlap",
                 "decomposed", "--rate", "5", "--requests", "3", "--prompt-tokens", "64",
                 "--output-tokens", "3", "--no-cost-cache", "--json", str(path)]) == 0
    capsys.readouterr()
    result = json.loads(path.read_text())
    assert result["system"]["overlap"] == "decomposed"
    assert result["manifest"]["serving"]["spec"]["overlap"] == "decomposed"
    assert result["completed"] == 3
    with pytest.raises(SystemExit):   # argparse refuses a mode it does not know
        main(["serve", "--arch", ARCH, "--model", MODEL, "--overlap", "sideways"])
    assert "invalid choice: 'sideways'" in capsys.readouterr().err


SWEEP = """\
name: overlap
platform: tpu_v5e_like
workloads: [bert_base_s128]
axes:
  system.tp: [4]
  system.overlap: [none, independent, decomposed]
"""


def test_system_overlap_is_a_sweep_axis_keyed_and_timed_as_run_times_it(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP)
    plan = make_plan(load_sweep(spec))
    assert {job.system.overlap for job in plan.jobs} == set(OVERLAP_MODES)
    assert len({job.key for job in plan.jobs}) == 3
    with Store(tmp_path / "s.sqlite") as store:
        run_sweep(plan, store, Serial())
        rows = {row["point"]["system.overlap"]: row for row in store.rows(status="ok")}
    run_path = tmp_path / "run.json"
    assert main(["run", "--arch", ARCH, "--workload", "bert_base_s128", "--tp", "4",
                 "--overlap", "decomposed", "--json", str(run_path)]) == 0
    system = json.loads(run_path.read_text())["system"]
    assert rows["decomposed"]["time_s"] == pytest.approx(system["time_s"], rel=1e-12)
    assert rows["none"]["time_s"] - rows["decomposed"]["time_s"] == pytest.approx(
        system["collective_hidden_s"], rel=1e-9)
    assert rows["independent"]["time_s"] <= rows["none"]["time_s"]


@pytest.mark.parametrize("axis, rule", [
    ("system.overlap: [none, sideways]", "axes.system.overlap[1]: value 'sideways': not "
     "an overlap mode"),
    ("system.overlap: [2]", "axes.system.overlap[0]: value 2: not an overlap mode")])
def test_a_bad_overlap_axis_names_its_value(tmp_path, axis, rule):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP.replace("system.overlap: [none, independent, decomposed]", axis))
    with pytest.raises(AccsimError) as info:
        load_sweep(spec)
    assert rule in str(info.value)


def test_a_serving_sweep_takes_overlap_from_its_serving_workload_not_an_axis(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: s\nplatform: {ARCH}\nserving:\n  model: {MODEL}\n  sla: "
                    "{ttft_p99_ms: 5}\n  overlap: decomposed\naxes:\n  system.tp: [1, 4]\n"
                    "objectives: {tokens_per_s_per_chip: max}\n")
    assert load_sweep(spec).serving.system.overlap == "decomposed"
    spec.write_text(spec.read_text().replace("system.tp: [1, 4]",
                                             "system.overlap: [none, decomposed]"))
    with pytest.raises(AccsimError) as info:
        load_sweep(spec)
    assert "axes.system.overlap: a serving sweep takes its overlap from the serving " \
        "workload" in str(info.value)
