"""`accsim serve --precision` and `--heuristic` (issue 29 item 4): every iteration is
costed with the plan applied and under the heuristic's tilings, as `accsim run` costs
the same step with the same flags, and both are part of the serving cost cache key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.frontends.hf.config import load_model_config
from simulator.inputs.run_inputs import Inputs
from simulator.mapping.plan import Mapping, with_heuristic
from simulator.serving.iteration_cost import PlainBatchCost
from simulator.serving.cost_cache import CostCache
from simulator.serving.llm_cost import LlmCost
from simulator.serving.precision import ServingPrecision
from simulator.serving.serve import prepare
from simulator.serving.spec import ServeSpec
from simulator.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
PLAN = str(ROOT / "experiments" / "studies" / "precision" / "int8_weights.yaml")
MODEL = "llama_3_1_8b"
ARCH = "tpu_v5e_like"
CONTEXT = 300


@pytest.fixture(scope="module")
def platform():
    return load_inputs(ARCH, "gemm_4096", None).platform


@pytest.fixture(scope="module")
def costs(platform):
    """Llama-3.1-8B iteration costs: plain, under the int8-weights plan, and under the
    min_offchip heuristic (exact: bits large enough that nothing is interpolated)."""
    config = load_model_config(MODEL)

    def cost(**kwargs):
        return LlmCost(platform, config, dtype=None, bits=20, cache=CostCache(None),
                       **kwargs)
    return {"plain": cost(),
            "int8": cost(precision=ServingPrecision.load(PLAN, platform)),
            "min_offchip": cost(mapping=with_heuristic(Mapping(), "min_offchip"))}


def _operators_seconds(cost: LlmCost, prefill, decode) -> float:
    """The served iteration less its call (launch and token ids)."""
    call = cost._call(len(decode) + sum(n for n, _ in prefill), len(decode) + len(prefill))
    return cost.iteration(prefill, decode).seconds - call.seconds


def _run_seconds(tmp_path, *flags) -> float:
    """`accsim run` of one decode step of one request at CONTEXT: its operators' time
    (the run's cycles; overhead_cycles are the operators' own, counted within them)."""
    out = tmp_path / "run.json"
    assert main(["run", "--arch", ARCH, "--model", MODEL, "--phase", "decode",
                 "--context", str(CONTEXT), *flags, "--json", str(out)]) == 0
    total = json.loads(out.read_text())["workload"]
    clock = load_inputs(ARCH, "gemm_4096", None).platform.clock_ghz * 1e9
    return total["cycles"] / clock


def test_int8_weights_make_decode_cheaper(costs):
    assert costs["int8"].iteration((), [CONTEXT]).seconds < \
        0.9 * costs["plain"].iteration((), [CONTEXT]).seconds
    assert costs["int8"].decode_run([CONTEXT], 4).seconds.sum() < \
        costs["plain"].decode_run([CONTEXT], 4).seconds.sum()


def test_the_plan_sets_the_costed_operators_dtypes(costs):
    gemms = [op for op in costs["int8"].reference_workload().operators if op.kind == "gemm"]
    assert gemms and all(op.weight_dtype == "int8" for op in gemms)
    record = costs["int8"].precision_record()
    assert record["plan"] == "int8_weights"
    assert {op["name"] for op in record["operators"]} >= {op.name for op in gemms}
    assert costs["plain"].precision_record() is None


@pytest.mark.parametrize("prefill, decode", [([], [CONTEXT]), ([(48, 0)], [])])
def test_a_served_iteration_under_the_plan_is_a_run_of_its_planned_workload(
        costs, prefill, decode):
    cost = costs["int8"]
    planned = cost.precision.apply(cost._frontend_workload(prefill, decode))
    run = simulate(Inputs(cost.platform, planned, Mapping())).operators_total
    assert _operators_seconds(cost, prefill, decode) == pytest.approx(
        run.cycles / (cost.platform.clock_ghz * 1e9), rel=1e-12)


@pytest.mark.parametrize("name, flags", [
    ("int8", ["--precision", PLAN]), ("min_offchip", ["--heuristic", "min_offchip"])])
def test_a_served_decode_iteration_equals_accsim_run_of_the_step(costs, tmp_path, name,
                                                                  flags):
    assert _operators_seconds(costs[name], (), [CONTEXT]) == pytest.approx(
        _run_seconds(tmp_path, *flags), rel=1e-12)


def test_the_heuristic_changes_the_costed_tilings(costs):
    assert costs["min_offchip"].costs.mapping.default.heuristic == "min_offchip"
    assert costs["min_offchip"].iteration((), [CONTEXT]).seconds != \
        costs["plain"].iteration((), [CONTEXT]).seconds


def test_plan_and_heuristic_are_part_of_the_cache_key(costs, platform, tmp_path):
    keys = {name: cost.key for name, cost in costs.items()}
    assert len(set(keys.values())) == 3
    other = tmp_path / "bf16.yaml"
    other.write_text("name: int8_weights\ndefault:\n  weight: [bf16]\n")
    config = load_model_config(MODEL)
    same_name = LlmCost(platform, config, dtype=None, bits=20, cache=CostCache(None),
                        precision=ServingPrecision.load(str(other), platform))
    assert same_name.key not in keys.values()  # the content keys, not the plan's name


def test_a_cached_plain_cost_is_never_served_to_a_plan(platform, tmp_path):
    """A cache filled without the plan: the planned run reads nothing of it and
    costs its iterations under the plan."""
    config = load_model_config(MODEL)
    cache = CostCache(tmp_path / "cache", strict=True)
    plain = LlmCost(platform, config, dtype=None, bits=3, cache=cache)
    expected = plain.iteration((), [CONTEXT]).seconds
    plain.save()
    planned = LlmCost(platform, config, dtype=None, bits=3, cache=cache,
                      precision=ServingPrecision.load(PLAN, platform))
    assert planned._sizes() == (0, 0, 0, 0)
    assert planned.iteration((), [CONTEXT]).seconds < expected
    planned.save()
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2


def test_serve_cli_records_the_plan_and_serves_tokens_faster(tmp_path):
    tpot, data = {}, {}
    for name, flags in (("plain", []), ("int8", ["--precision", PLAN])):
        out = tmp_path / f"{name}.json"
        assert main(["serve", "--arch", ARCH, "--model", MODEL, "--rate", "2",
                     "--requests", "6", "--prompt-tokens", "64", "--output-tokens", "8",
                     "--cost-cache", str(tmp_path / "cache"), *flags,
                     "--json", str(out)]) == 0
        data[name] = json.loads(out.read_text())
        tpot[name] = data[name]["tpot_ms"]["p50"]
    assert tpot["int8"] < tpot["plain"]
    assert "precision" not in data["plain"]
    assert "precision" not in data["plain"]["manifest"]["serving"]["spec"]
    assert data["int8"]["precision"]["plan"] == "int8_weights"
    assert data["int8"]["manifest"]["serving"]["spec"]["precision"] == PLAN
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2


def test_serve_plain_workload_takes_both(platform):
    setup = prepare(ServeSpec(workload="bert_base_s128", arch=ARCH, rate=10,
                              precision=PLAN, heuristic="min_offchip"))
    assert isinstance(setup.cost, PlainBatchCost)
    assert setup.cost._costs.mapping.default.heuristic == "min_offchip"
    assert setup.reference.mapping.default.heuristic == "min_offchip"
    assert setup.precision["plan"] == "int8_weights"
    plain = prepare(ServeSpec(workload="bert_base_s128", arch=ARCH, rate=10))
    assert setup.cost.batch(2).seconds != plain.cost.batch(2).seconds


def test_an_unknown_heuristic_is_one_clear_error(capsys):
    assert main(["serve", "--arch", ARCH, "--model", MODEL, "--rate", "1",
                 "--heuristic", "no_such"]) == 1
    err = capsys.readouterr().err
    assert "--heuristic" in err and "unknown heuristic 'no_such'" in err
    assert "Traceback" not in err


def test_a_tensor_parallel_replica_stores_its_shard_at_the_plan_formats():
    """Each chip of a T = 2 replica holds half of every GEMM's weights: under the plan
    they are int8, so the chip's weights shrink by half of its GEMM weight bytes and
    its KV cache grows by what that frees (the capacity rule at the same bytes)."""
    plain = prepare(ServeSpec(model=MODEL, arch=ARCH, rate=1, chips=2, tp=2))
    planned = prepare(ServeSpec(model=MODEL, arch=ARCH, rate=1, chips=2, tp=2,
                                precision=PLAN))
    chip_gemms = sum(op.k * op.n * 2 * op.repeat
                     for op in plain.cost.reference_workload().operators
                     if op.kind == "gemm")   # bf16 weights
    freed = plain.capacity.footprint.weight_bytes - planned.capacity.footprint.weight_bytes
    assert freed == chip_gemms // 2 > 0
    assert planned.kv_blocks > plain.kv_blocks
    assert planned.precision["plan"] == "int8_weights"


def test_a_pipelined_replica_holds_its_busiest_stage_at_the_plan_formats():
    """P = 2 stages of 16 layers each: the first adds the embedding table, the last the
    final norm and lm_head (one norm's bytes more, so it is the busiest). Under the plan
    every GEMM's weights are int8: each stage frees half its layers' GEMM bytes and the
    last also half the lm_head's, so the first stage becomes the busiest one."""
    plain = prepare(ServeSpec(model=MODEL, arch=ARCH, rate=1, chips=2, pp=2))
    planned = prepare(ServeSpec(model=MODEL, arch=ARCH, rate=1, chips=2, pp=2,
                                precision=PLAN))
    gemms = [op for op in plain.cost.reference_workload().operators if op.kind == "gemm"]
    per_layer = sum(op.k * op.n * 2 for op in gemms if op.repeat > 1)  # bf16 weights
    layers = next(op.repeat for op in gemms if op.repeat > 1)
    hidden = next(op.k for op in gemms if op.name == "lm_head")
    last_stage = plain.capacity.footprint.weight_bytes
    first_stage = last_stage - hidden * 2   # less the final norm's bf16 weights
    assert planned.capacity.footprint.weight_bytes == \
        first_stage - layers // 2 * per_layer // 2
    assert planned.kv_blocks > plain.kv_blocks


def test_a_served_plan_result_verifies_elsewhere_and_names_an_edited_plan(
        tmp_path, monkeypatch, capsys):
    """The plan is recorded with its sha256 (relative to the result's folder), so
    `accsim verify` serves again under it from any directory, and names it once edited."""
    plan = tmp_path / "inputs" / "plan.yaml"
    plan.parent.mkdir()
    plan.write_text(Path(PLAN).read_text())
    out = tmp_path / "out" / "serve.json"
    out.parent.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--arch", ARCH, "--workload", "bert_base_s128", "--rate", "20",
                 "--requests", "10", "--precision", "inputs/plan.yaml",
                 "--json", str(out)]) == 0
    recorded = json.loads(out.read_text())["manifest"]["serving"]
    assert recorded["spec"]["precision"] == "../inputs/plan.yaml"
    assert recorded["precision"]["path"] == "../inputs/plan.yaml"
    monkeypatch.chdir(out.parent)
    capsys.readouterr()
    assert main(["verify", "serve.json"]) == 0, capsys.readouterr().out
    plan.write_text(plan.read_text().replace("[int8, bf16]", "[bf16]"))
    assert main(["verify", "serve.json"]) == 1
    assert "precision plan" in capsys.readouterr().out


def test_a_plan_naming_no_iteration_operator_is_one_clear_error(tmp_path, capsys):
    plan = tmp_path / "bad.yaml"
    plan.write_text("name: bad\noperators:\n  no_such_op: {weight: [int8]}\n")
    assert main(["serve", "--arch", ARCH, "--model", MODEL, "--rate", "1",
                 "--requests", "2", "--no-cost-cache", "--precision", str(plan)]) == 1
    err = capsys.readouterr().err
    assert f"{plan}: operators.no_such_op: no operator 'no_such_op'" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
