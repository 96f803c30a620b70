"""Work shared across a deployment search's points (DESIGN.md section 20): a serving
run shared between points that differ only in max_batch is the run each would
simulate, and the shared, parallel search (worker processes, a local Dask cluster)
finds every point's figures exactly as a serial, unshared one: each split's serve
setup (its iteration-cost table) is built once, in one task, and the roofline bounds
that prune share their tiling searches. A tiny Llama config on
a v5e copy whose HBM holds few requests' KV keeps every run fast and makes max_batch
bind for some points and not for others."""

from __future__ import annotations

import json

import pytest
from tiny_llama import TINY_LLAMA

from simulator.frontends import hf
from simulator.inputs.named_inputs import load_inputs
from simulator.serving.curves import find_max_rate
from simulator.serving.serve import prepare, simulate_serving, summary
from simulator.serving.cost_cache import CostCache
from simulator.serving.iteration_cost import UnitCosts
from simulator.serving.spec import ServeSpec
from simulator.sweep import deploy
from simulator.sweep.deploy import Grid, search_platforms
from simulator.sweep.roofline_bound import iteration_bound_s
from simulator.sweep.executors import executor_for
from simulator.system.parallelism import SystemPlan
from simulator.system.serving import ShardedFrontend

SLA = {"ttft_p99_ms": 0.4, "tpot_p99_ms": 0.06}
# Every T x P split of 1 and 2 chips, 1 or 2 replicas, max batch 2, 8 and 64.
GRID = Grid(budget_chips=4, chips_per_replica=(1, 2), replicas=(1, 2),
            batching=("continuous",), max_batch=(2, 8, 64))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The tiny model and a v5e copy whose HBM holds its weights and the KV cache of
    about 8 of the requests served (prompt 64 + output 8 tokens)."""
    folder = tmp_path_factory.mktemp("shared")
    model = folder / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    config = hf.load_model_config(str(model))
    stats = hf.model_stats(config)
    base = load_inputs("tpu_v5e_like", "gemm_4096", None).platform.model_dump(mode="json")
    hbm = stats.weight_bytes + 8 * 72 * stats.kv_bytes_per_token
    tight = dict(base, name="tight", offchip=dict(base["offchip"], capacity_bytes=hbm))
    (folder / "tight.yaml").write_text(json.dumps(tight))
    return {"model": str(model), "tight": str(folder / "tight.yaml"), "folder": folder}


def spec(files, **extra) -> ServeSpec:
    return ServeSpec.model_validate({
        "model": files["model"], "prompt_tokens": 64, "output_tokens": 8,
        "requests": 64, "sla": SLA, "find_max_rate": True, **extra}).resolved()


def test_a_run_is_the_same_under_every_max_batch_its_range_names(files):
    at = spec(files, arch=files["tight"], max_batch=64, rate=40000.0)
    setup = prepare(at, cost_cache=CostCache(None))
    served, came = simulate_serving(setup, at)
    lowest, highest = served.same_under_max_batch
    assert 1 < lowest <= 64 <= highest
    reference = summary(setup, at, served, came)
    for other in (lowest, highest if highest != float("inf") else 4096):
        again = at.model_copy(update={"max_batch": other})
        assert summary(setup, again, *simulate_serving(setup, again)) == reference
    below = at.model_copy(update={"max_batch": lowest - 1})
    assert simulate_serving(setup, below)[0].same_under_max_batch[1] == lowest - 1


def search(files, scheduler: str, *, share: bool):
    with executor_for(scheduler, 2 if scheduler != "serial" else None) as executor:
        return search_platforms(spec(files), [files["tight"]], GRID,
                                cost_cache=CostCache(None), executor=executor,
                                share=share)


def rows(outcomes) -> list:
    return [(o.arch, o.points, o.pruned) for o in outcomes]


@pytest.fixture(scope="module")
def unshared(files):
    return search(files, "serial", share=False)


@pytest.fixture(scope="module")
def pooled(files):
    return search(files, "processes", share=True)


def test_a_shared_search_in_worker_processes_equals_a_serial_unshared_one(unshared,
                                                                          pooled):
    shared = pooled
    searched = [row for row in unshared[0].points if row["status"] == "searched"]
    assert len(searched) >= 6 and unshared[0].runs_shared == 0
    assert shared[0].runs_shared > 0
    assert rows(shared) == rows(unshared)


def test_each_point_finds_the_rate_serve_finds_for_it_alone(files, pooled):
    """Each searched point of the shared search (worker processes) has the SLA
    capacity `accsim serve --find-max-rate` finds for that deployment alone (its own
    setup, every run its own) after as many runs: no rate bracket is carried from
    another point, so a point's rate does not hang on its neighbours' even where the
    SLA's verdict is not monotone in the rate (docs/plan-deployment.md). The lone
    setups share their fusion units' simulations (by content: no figure of a unit
    hangs on which setup met it first), each its own cost model and grid points."""
    searched = [row for row in pooled[0].points if row["status"] == "searched"]
    assert len(searched) >= 6
    units = UnitCosts()
    for row in searched:
        alone = spec(files, arch=files["tight"], chips=row["chips_per_replica"],
                     tp=row["tp"], pp=row["pp"], replicas=row["replicas"],
                     batching=row["batching"], max_batch=row["max_batch"])
        found = find_max_rate(prepare(alone, cost_cache=CostCache(None), units=units),
                              alone)
        assert (row["sla_rate_rps"], row["evaluations"]) == \
            (found["max_rate_rps"], len(found["evaluations"]))


def test_a_shared_search_on_a_local_dask_cluster_equals_a_serial_unshared_one(
        files, unshared):
    pytest.importorskip("distributed", reason="a local Dask cluster needs the "
                        "distributed package (pip install 'accsim[dask]')")
    shared = search(files, "dask-local", share=True)
    assert shared[0].runs_shared > 0 and rows(shared) == rows(unshared)


def test_splits_sharing_their_bounds_tiling_searches_prune_as_each_alone(files):
    """The roofline bounds of one platform's splits, their tilings searched once per
    operator content (Outcome.searches), prune the same points for the same figures
    as each bound searched alone; a TPOT target between the splits' decode-step bounds
    prunes some splits and not others."""
    config = hf.load_model_config(files["model"])
    platform = load_inputs(files["tight"], "gemm_4096", None).platform
    bounds = []
    for tp, pp in ((1, 1), (2, 1), (1, 2)):
        plan = SystemPlan(chips=tp * pp, tp=tp, pp=pp)
        frontend = hf if plan.single_chip else ShardedFrontend(hf, plan, platform)
        workload = frontend.iteration_workload(config, prefill=[], decode=[64])
        bounds.append(iteration_bound_s(platform, workload) * 1e3)
    target = (min(bounds) + max(bounds)) / 2
    sla = {**SLA, "tpot_p99_ms": target}
    outcomes = {share: search_platforms(spec(files, sla=sla), [files["tight"]], GRID,
                                        cost_cache=CostCache(None), share=share)
                for share in (True, False)}
    shared, alone = outcomes[True][0], outcomes[False][0]
    assert shared.searches.hits > 0 and alone.searches is None
    assert any(row["reason"].startswith("bound: ") for row in shared.pruned)
    assert shared.points and rows(outcomes[True]) == rows(outcomes[False])


def test_each_split_has_one_serve_setup_for_all_its_replicas_and_batches(files,
                                                                         monkeypatch):
    """One serve setup (its iteration-cost table, filled as runs ask) per platform,
    split and precision plan, in one task: every replica count and max batch of the
    split reads the same table, and no two tasks (no two worker processes) build
    it."""
    made = []

    def counted(at, **options):
        made.append((at.arch, at.chips, at.tp, at.pp, at.precision))
        return prepare(at, **options)

    monkeypatch.setattr(deploy, "prepare", counted)
    task = deploy.search_group
    tasks = []
    monkeypatch.setattr(deploy, "search_group",
                        lambda group: tasks.append(group) or task(group))
    outcome = search_platforms(spec(files), [files["tight"]], GRID,
                               cost_cache=CostCache(None))[0]
    splits = {(row["chips_per_replica"], row["tp"], row["pp"]) for row in outcome.points}
    assert len(splits) == 3 and len(made) == len(set(made)) == len(splits)
    by_task = [{(p.plan.chips, p.plan.tp, p.plan.pp) for p in group.points}
               for group in tasks]
    assert sum(map(len, by_task)) == len(set().union(*by_task)) == len(splits)
    assert {row["replicas"] for row in outcome.points} == {1, 2}
