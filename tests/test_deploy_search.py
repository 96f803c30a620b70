"""Deployment search (DESIGN.md section 18): the best point per platform equals a brute
force run of `accsim serve --find-max-rate` over the same grid, pruning before
simulation is exactly the capacity rule and the roofline bound, cost per million tokens,
and bad input gets one clear error. A tiny Llama config keeps every run fast."""

from __future__ import annotations

import json

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.frontends import hf
from simulator.sweep.roofline_bound import iteration_bound_s
from simulator.system.parallelism import SystemPlan
from simulator.system.serving import ShardedFrontend

PRICE = 1.25
SLA = "ttft_p99_ms=0.15,tpot_p99_ms=0.06"
WORKLOAD = ["--prompt-tokens", "64", "--output-tokens", "8", "--requests", "48"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The tiny model, a v5e copy with a cost table and a v5e copy with half the HBM
    bandwidth whose capacity holds the model on two chips but not on one."""
    folder = tmp_path_factory.mktemp("deploy")
    model = folder / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    base = load_inputs("tpu_v5e_like", "gemm_4096", None).platform.model_dump(mode="json")
    priced = dict(base, name="priced", cost={"price_per_chip_hour": PRICE})
    priced["provenance"] = {"cost.price_per_chip_hour": {"kind": "assumed",
                                                         "range": [0.5, 2.0]}}
    (folder / "priced.yaml").write_text(json.dumps(priced))
    config = hf.load_model_config(str(model))
    weights = hf.model_stats(config).weight_bytes
    small = dict(base, name="small", offchip=dict(
        base["offchip"], bandwidth_gbps=409.5, capacity_bytes=int(weights * 0.8)))
    (folder / "small.yaml").write_text(json.dumps(small))
    return {"model": str(model), "priced": str(folder / "priced.yaml"),
            "small": str(folder / "small.yaml"), "folder": folder}


# 1 x 1, 2 x 1 and 1 x 2 chips per replica, 1 or 2 replicas, max batch 4 or 16:
# 12 deployments per platform.
GRID_12 = ("--budget-chips", "4", "--chips-per-replica", "1,2", "--replicas", "1,2",
           "--max-batch", "4,16")
GRID_6 = ("--budget-chips", "2", "--replicas", "1", "--max-batch", "4,16")


def plan_deployment(files, *extra, sla=SLA, archs=("priced", "small"), grid=GRID_6) -> dict:
    out = files["folder"] / "plan.json"
    out.unlink(missing_ok=True)
    args = ["plan-deployment", "--model", files["model"], *WORKLOAD, "--sla", sla,
            *grid, "--json", str(out), *extra]
    for arch in archs:
        args += ["--arch", files[arch]]
    assert main(args) == 0
    return json.loads(out.read_text())


def brute_force(files, row: dict) -> dict:
    """`accsim serve --find-max-rate` on one point, and its figures at the rate found."""
    out = files["folder"] / "serve.json"
    out.unlink(missing_ok=True)
    assert main(["serve", "--arch", row["arch"], "--model", files["model"], *WORKLOAD,
                 "--sla", SLA, "--find-max-rate", "--chips", str(row["chips_per_replica"]),
                 "--tp", str(row["tp"]), "--pp", str(row["pp"]), "--replicas",
                 str(row["replicas"]), "--batching", row["batching"], "--max-batch",
                 str(row["max_batch"]), "--json", str(out)]) == 0
    found = json.loads(out.read_text())
    at = next(e for e in found["evaluations"] if e["rate_rps"] == found["max_rate_rps"])
    return {"rate": found["max_rate_rps"], "tokens_per_s": at["figures"]["tokens_per_s"]}


def test_the_best_point_per_platform_is_the_brute_force_best(files, capsys):
    result = plan_deployment(files, "--objective", "tokens_per_s_per_chip", grid=GRID_12)
    capsys.readouterr()
    for arch in (files["priced"], files["small"]):
        assert sum(row["arch"] == arch for row in result["points"]) == 12
    points = [row for row in result["points"] if row["status"] == "searched"]
    assert {row["arch"] for row in points} == {files["priced"], files["small"]}
    for arch in (files["priced"], files["small"]):
        mine = [row for row in points if row["arch"] == arch]
        forced = []
        for row in mine:
            brute = brute_force(files, row)
            assert row["sla_rate_rps"] == brute["rate"]
            forced.append((-brute["tokens_per_s"] / row["chips"], row["chips"], row))
        chosen = min(forced, key=lambda item: item[:2])[2]
        best = result["best"][arch]
        assert {k: best[k] for k in ("tp", "pp", "replicas", "max_batch")} == \
            {k: chosen[k] for k in ("tp", "pp", "replicas", "max_batch")}
        assert best["binding"]["text"].startswith("limited by ")
    capsys.readouterr()


def test_pruned_points_are_those_that_do_not_fit_or_whose_bound_misses(files, capsys):
    config = hf.load_model_config(files["model"])
    plans = ((1, 1), (2, 1), (1, 2))

    def decode_bound_ms(arch: str, plan: SystemPlan) -> float:
        platform = load_inputs(arch, "gemm_4096", None).platform
        frontend = hf if plan.single_chip else ShardedFrontend(hf, plan, platform)
        workload = frontend.iteration_workload(config, prefill=[], decode=[64])
        return iteration_bound_s(platform, workload) * 1e3

    bounds = {(files[name], t, p): decode_bound_ms(files[name],
                                                   SystemPlan(chips=t * p, tp=t, pp=p))
              for name in ("priced", "small") for t, p in plans}
    priced = [bounds[files["priced"], t, p] for t, p in plans]
    target = (min(priced) + max(priced)) / 2  # some plans' bounds above it, some below
    assert min(priced) < target < max(priced)
    result = plan_deployment(files, sla=f"tpot_p99_ms={target}")
    capsys.readouterr()
    pruned = {(row["arch"], row["tp"], row["pp"], row["max_batch"]): row["reason"]
              for row in result["points"] if row["status"] == "pruned"}
    expected = {}
    for (arch, t, p), bound in bounds.items():
        for batch in (4, 16):
            if arch == files["small"] and t * p == 1:
                expected[arch, t, p, batch] = "capacity"
            elif bound > target:
                expected[arch, t, p, batch] = "bound"
    assert {key: reason.split(":")[0] for key, reason in pruned.items()} == expected
    assert any(row["status"] != "pruned" for row in result["points"])  # some simulated
    # A full run of a bound-pruned point misses the target it was pruned for.
    _, t, p = max((key for key in bounds if key[0] == files["priced"]), key=bounds.get)
    out = files["folder"] / "pruned.json"
    assert main(["serve", "--arch", files["priced"], "--model", files["model"],
                 *WORKLOAD, "--rate", "1", "--chips", str(t * p), "--tp", str(t),
                 "--pp", str(p), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["tpot_ms"]["p99"] > target
    capsys.readouterr()
    # A full run without pruning: every pruned point is refused (it does not fit) or
    # meets the SLA at no rate, and every other point is as the pruned search found it.
    full = plan_deployment(files, "--no-prune", sla=f"tpot_p99_ms={target}")
    capsys.readouterr()
    everything = {(row["arch"], row["tp"], row["pp"], row["max_batch"]): row
                  for row in full["points"]}
    assert len(everything) == len(result["points"])
    assert all(row["status"] != "pruned" for row in full["points"])
    for row in result["points"]:
        same = everything[row["arch"], row["tp"], row["pp"], row["max_batch"]]
        reason = pruned.get((row["arch"], row["tp"], row["pp"], row["max_batch"]))
        if reason is None:
            assert (same["status"], same["sla_rate_rps"], same.get("tokens_per_s")) == \
                (row["status"], row["sla_rate_rps"], row.get("tokens_per_s"))
        elif reason.startswith("capacity"):
            assert same["status"] == "refused" and "does not fit" in same["reason"]
        else:
            assert same["status"] == "no rate meets the SLA"
    def unkeyed(best: dict) -> dict:  # a point's key names the search's pruning
        return {arch: row and {k: v for k, v in row.items() if k != "key"}
                for arch, row in best.items()}

    assert unkeyed(full["best"]) == unkeyed(result["best"])


def test_cost_per_million_tokens_at_the_sla_rate(files, capsys):
    result = plan_deployment(files, "--objective", "cost_per_mtok", archs=("priced",))
    capsys.readouterr()
    for row in result["points"]:
        if row["status"] == "searched":
            assert row["cost_per_mtok"] == pytest.approx(
                row["chips"] * PRICE / (row["tokens_per_s"] * 3600) * 1e6)
    assert result["best"][files["priced"]]["cost_per_mtok"] == min(
        row["cost_per_mtok"] for row in result["points"] if row["status"] == "searched")


@pytest.mark.parametrize("extra, message", [
    (["--sla", "queue_p99_ms=5"], "--sla: unknown SLA key 'queue_p99_ms'"),
    (["--chips-per-replica", "4"], "--budget-chips: the grid is empty"),
    (["--objective", "cost_per_mtok", "--arch", "tpu_v5e_like"],
     "cost: objective cost_per_mtok needs the platform's cost table"),
    (["--chips-per-replica", "1"], "no deployment of any platform is left to search"),
])
def test_bad_input_gets_one_clear_error(files, capsys, extra, message):
    args = ["plan-deployment", "--arch", files["small"], "--model", files["model"],
            *WORKLOAD, "--sla", SLA, "--budget-chips", "2", *extra]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_points_searched_in_worker_processes_are_those_searched_serially(files, capsys):
    serial = plan_deployment(files, "--scheduler", "serial")
    pooled = plan_deployment(files, "--scheduler", "processes", "--workers", "2")
    capsys.readouterr()
    assert sum(row["status"] == "searched" for row in serial["points"]) >= 2
    assert pooled["points"] == serial["points"] and pooled["best"] == serial["best"]
