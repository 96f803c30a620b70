"""`accsim serve --mapping PLAN.yaml` (issue 29 item 4): iteration operators take the
plan's entries (by operator name and layer_type) as `accsim run --mapping` applies them,
a served iteration equals `accsim run --mapping` of the same step, the plan's content
is part of the serving cost-cache key, and a plan naming no iteration operator, or an
entry an iteration cannot take, is one error naming the plan's file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.errors import AccsimError
from simulator.frontends.hf.config import load_model_config
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import load_model
from simulator.mapping.plan import Mapping
from simulator.serving.iteration_cost import OperatorCosts, PlainBatchCost
from simulator.serving.cost_cache import CostCache
from simulator.serving.llm_cost import LlmCost
from simulator.serving.serve import prepare
from simulator.serving.spec import ServeSpec
from simulator.simulate import simulate

MODEL = "llama_3_1_8b"
ARCH = "tpu_v5e_like"
CONTEXT = 300
# Entries by name (shared operators every iteration has) and by layer_type (attention,
# named per request by its shape): a partial tiling, and two heuristics.
LLAMA_PLAN = """name: served
layer_types:
  attention.core: {heuristic: min_offchip}
operators:
  qkv: {heuristic: array_aligned}
  mlp_down: {tn: 512, tk: 512, loop_order: nkm, dataflow: ws, depth: 2}
"""
BERT_PLAN = """name: bert_plan
layer_types:
  mlp.up: {heuristic: min_offchip}
operators:
  layer0_attn_qkv: {tn: 256, tk: 256, dataflow: ws, depth: 2}
  layer0_mlp_down: {heuristic: array_aligned}
"""


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "served.yaml"
    path.write_text(LLAMA_PLAN)
    return str(path)


@pytest.fixture(scope="module")
def platform():
    return load_inputs(ARCH, "gemm_4096", None).platform


@pytest.fixture(scope="module")
def costs(platform, plan_file):
    """Llama-3.1-8B iteration costs, plain and under the plan (exact: bits large enough
    that nothing is interpolated)."""
    config = load_model_config(MODEL)
    plan, _ = load_model(plan_file, Mapping)
    return {name: LlmCost(platform, config, dtype=None, bits=20, cache=CostCache(None),
                          mapping=mapping, plan_file=plan_file)
            for name, mapping in (("plain", None), ("plan", plan))}


def _operators_seconds(cost: LlmCost, prefill, decode) -> float:
    """The served iteration less its call (launch and token ids)."""
    call = cost._call(len(decode) + sum(n for n, _ in prefill), len(decode) + len(prefill))
    return cost.iteration(prefill, decode).seconds - call.seconds


def test_a_served_decode_iteration_equals_accsim_run_mapping_of_the_step(costs, plan_file,
                                                                         tmp_path):
    out = tmp_path / "run.json"
    assert main(["run", "--arch", ARCH, "--model", MODEL, "--phase", "decode",
                 "--context", str(CONTEXT), "--mapping", plan_file, "--json",
                 str(out)]) == 0
    run = json.loads(out.read_text())
    seconds = run["workload"]["cycles"] / (costs["plan"].platform.clock_ghz * 1e9)
    assert _operators_seconds(costs["plan"], (), [CONTEXT]) == pytest.approx(seconds,
                                                                             rel=1e-12)
    # the plan changed the costed tilings: mlp_down runs the plan's tn, tk
    down = next(op for op in run["operators"] if op["name"] == "mlp_down")
    assert (down["tiling"]["tn"], down["tiling"]["tk"]) == (512, 512)
    assert costs["plan"].iteration((), [CONTEXT]).seconds != \
        costs["plain"].iteration((), [CONTEXT]).seconds


@pytest.mark.parametrize("prefill, decode", [([(48, 0)], []), ([(16, 32)], [])])
def test_a_served_iteration_under_the_plan_is_a_run_of_its_workload(costs, prefill,
                                                                      decode):
    cost = costs["plan"]
    run = simulate(Inputs(cost.platform, cost._frontend_workload(prefill, decode),
                          cost.costs.mapping)).operators_total
    assert _operators_seconds(cost, prefill, decode) == pytest.approx(
        run.cycles / (cost.platform.clock_ghz * 1e9), rel=1e-12)


@pytest.mark.parametrize("mode", ["none", "epilogue", "auto"])
def test_plain_workload_units_under_a_plan_sum_to_a_whole_run(tmp_path, mode):
    path = tmp_path / "bert.yaml"
    path.write_text(BERT_PLAN)
    inputs = load_inputs(ARCH, "bert_base_s128", str(path), fusion=mode)
    summed = OperatorCosts(inputs.platform, inputs.mapping).workload(inputs.workload)
    run = simulate(inputs).operators_total
    assert summed.seconds == pytest.approx(
        run.cycles / (inputs.platform.clock_ghz * 1e9), rel=1e-12)
    assert summed.energy_j == pytest.approx(run.energy_pj * 1e-12, rel=1e-9)
    plain = load_inputs(ARCH, "bert_base_s128", None, fusion=mode)
    assert summed.seconds != OperatorCosts(plain.platform, plain.mapping).workload(
        plain.workload).seconds


def test_the_plan_content_is_part_of_the_cache_key(costs, platform, tmp_path):
    keys = {name: cost.key for name, cost in costs.items()}
    assert len(set(keys.values())) == 2
    config = load_model_config(MODEL)
    # no plan: the key of before --mapping existed (the default mapping)
    assert LlmCost(platform, config, dtype=None, bits=20, cache=CostCache(None),
                   mapping=Mapping()).key == keys["plain"]
    edited = tmp_path / "edited.yaml"  # same name, another tiling
    edited.write_text(LLAMA_PLAN.replace("tn: 512", "tn: 256"))
    plan, _ = load_model(str(edited), Mapping)
    other = LlmCost(platform, config, dtype=None, bits=20, cache=CostCache(None),
                    mapping=plan)
    assert other.key not in keys.values()


def test_a_cached_plain_cost_is_never_served_to_a_plan(platform, plan_file, tmp_path):
    config = load_model_config(MODEL)
    cache = CostCache(tmp_path / "cache", strict=True)
    plain = LlmCost(platform, config, dtype=None, bits=3, cache=cache)
    expected = plain.iteration((), [CONTEXT]).seconds
    plain.save()
    plan, _ = load_model(plan_file, Mapping)
    planned = LlmCost(platform, config, dtype=None, bits=3, cache=cache, mapping=plan)
    assert planned._sizes() == (0, 0, 0, 0)
    assert planned.iteration((), [CONTEXT]).seconds != expected


def test_serve_cli_records_the_plan_and_verifies(plan_file, tmp_path, monkeypatch,
                                                 capsys):
    """The plan is recorded with its sha256, so `accsim verify` serves again under it and
    names it once edited. (An absolute path: the manifest's mapping_mode names the plan
    as given, which a rerun from anchored paths does not reproduce for a relative one,
    as with `accsim run --mapping`.)"""
    plan = tmp_path / "inputs" / "plan.yaml"
    plan.parent.mkdir()
    plan.write_text(Path(plan_file).read_text())
    out = tmp_path / "out" / "serve.json"
    out.parent.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--arch", ARCH, "--model", MODEL, "--rate", "2", "--requests",
                 "4", "--prompt-tokens", "32", "--output-tokens", "4", "--no-cost-cache",
                 "--mapping", str(plan), "--json", str(out)]) == 0
    recorded = json.loads(out.read_text())["manifest"]
    assert recorded["serving"]["spec"]["mapping_plan"] == str(plan)
    assert recorded["serving"]["mapping"]["path"] == str(plan)
    assert recorded["inputs"]["mapping"]["canonical"]["name"] == "served"
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0, capsys.readouterr().out
    plan.write_text(plan.read_text().replace("tn: 512", "tn: 256"))
    assert main(["verify", str(out)]) == 1
    assert "tiling plan" in capsys.readouterr().out


def test_serve_plain_workload_takes_the_plan(tmp_path):
    path = tmp_path / "bert.yaml"
    path.write_text(BERT_PLAN)
    setup = prepare(ServeSpec(workload="bert_base_s128", arch=ARCH, rate=10,
                              mapping_plan=str(path), fusion="none"))
    assert isinstance(setup.cost, PlainBatchCost)
    assert setup.reference.mapping.operators["layer0_attn_qkv"].tn == 256
    plain = prepare(ServeSpec(workload="bert_base_s128", arch=ARCH, rate=10,
                              fusion="none"))
    assert setup.cost.batch(2).seconds != plain.cost.batch(2).seconds
    inputs = load_inputs(ARCH, "bert_base_s128", str(path), fusion="none")
    batch = simulate(Inputs(inputs.platform, inputs.workload, inputs.mapping))
    assert setup.cost.batch(1).seconds == pytest.approx(
        batch.total.cycles / (inputs.platform.clock_ghz * 1e9), rel=1e-12)


@pytest.mark.parametrize("plan, field, fragment", [
    ("name: bad\noperators:\n  attn: {heuristic: min_offchip}\n", "operators.attn",
     "no operator 'attn' in an iteration of"),
    ("name: bad\noperators:\n  mlp_down: {tm: 128}\n", "operators.mlp_down",
     "tm 128 is larger than the operator's M 1"),
])
def test_a_plan_iterations_cannot_take_is_one_clear_error(tmp_path, capsys, plan, field,
                                                          fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(plan)
    assert main(["serve", "--arch", ARCH, "--model", MODEL, "--rate", "1",
                 "--requests", "2", "--no-cost-cache", "--mapping", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: {field}: {fragment}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_entry_failing_on_a_later_shape_names_the_plan_and_operator(platform,
                                                                       tmp_path):
    """The reference iteration (context 64) takes tn 96 for attention; a context of 40
    cannot: the error names the plan's file and the operator as the iteration names
    it, as it is costed."""
    path = tmp_path / "attn.yaml"
    path.write_text("name: attn\noperators: {}\nlayer_types:\n"
                    "  attention.core: {tn: 96}\n")
    plan, _ = load_model(str(path), Mapping)
    cost = LlmCost(platform, load_model_config(MODEL), dtype=None, bits=20,
                   cache=CostCache(None), mapping=plan, plan_file=str(path))
    with pytest.raises(AccsimError) as caught:
        cost.iteration((), [40])
    assert caught.value.file == str(path)
    assert caught.value.field == "operators.attn"
    assert "tn 96" in caught.value.rule


def test_mapping_on_multi_chip_replicas_is_refused(plan_file):
    with pytest.raises(AccsimError, match="single-chip"):
        prepare(ServeSpec(model=MODEL, arch=ARCH, rate=1, tp=2, mapping_plan=plan_file))


def test_a_spec_file_mapping_plan_serves_as_the_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bert.yaml").write_text(BERT_PLAN)
    Path("spec.yaml").write_text(f"arch: {ARCH}\nworkload: bert_base_s128\nrate: 20\n"
                                 "requests: 10\nmapping_plan: bert.yaml\n")
    assert main(["serve", "--spec", "spec.yaml", "--json", "spec.json"]) == 0
    assert main(["serve", "--arch", ARCH, "--workload", "bert_base_s128", "--rate", "20",
                 "--requests", "10", "--mapping", "bert.yaml", "--json", "flag.json"]) == 0
    assert main(["serve", "--arch", ARCH, "--workload", "bert_base_s128", "--rate", "20",
                 "--requests", "10", "--json", "plain.json"]) == 0
    spec, flag, plain = (json.loads(Path(f"{name}.json").read_text())
                         for name in ("spec", "flag", "plain"))
    assert spec == flag
    assert spec["latency_ms"] != plain["latency_ms"]
