"""Deployment search: the constraint named as binding a platform's best point. Each
case is a copy of v5e with one field changed so that only that resource can bind (a
KV cache holding a few requests, an off-chip bandwidth 33 times lower, an
interconnect 500 times slower); the unchanged v5e serving the same deployments is
bound by none of them, and serves more at the SLA."""

from __future__ import annotations

import json

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.frontends import hf

SLA = "ttft_p99_ms=0.5,tpot_p99_ms=0.2"
WORKLOAD = ["--prompt-tokens", "64", "--output-tokens", "8", "--requests", "48"]
# Bytes beyond the model's weights: the smallest request's KV, one chunk's activations
# and room for a few more requests' KV (1 KiB per token of this model).
KV_ROOM = 450_000


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("binding")
    model = folder / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    base = load_inputs("tpu_v5e_like", "gemm_4096", None).platform.model_dump(mode="json")
    # The flat ring of section 14: under the wiring's own collectives (section 22) the
    # tiny model's 2-chip all-reduces, 4.5 us of fixed cost each, are 33% of an
    # iteration on v5e itself, which then binds on its interconnect too.
    base["interconnect"]["collectives"] = "ring"
    weights = hf.model_stats(hf.load_model_config(str(model))).weight_bytes
    variants = {
        "base": base,
        "kv": dict(base, offchip=dict(base["offchip"], capacity_bytes=weights + KV_ROOM)),
        "hbm": dict(base, offchip=dict(base["offchip"], bandwidth_gbps=25.0)),
        "interconnect": dict(base, interconnect=dict(base["interconnect"],
                                                      link_bandwidth_gbps=0.1)),
    }
    paths = {}
    for name, raw in variants.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(json.dumps(dict(raw, name=name)))
    return {"model": str(model), "folder": folder, **{k: str(v) for k, v in paths.items()}}


def best_points(files, capsys, chips: str, batching: str = "continuous",
                names=("base", "kv", "hbm", "interconnect"), max_batch: str = "16") -> dict:
    """plan-deployment of one replica of `chips` chips, max batch `max_batch`, on the variants
    and on v5e: their best points by name."""
    out = files["folder"] / f"plan-{chips}-{batching}-{max_batch}.json"
    assert main(["plan-deployment", "--model", files["model"], *WORKLOAD, "--sla", SLA,
                 "--budget-chips", chips, "--chips-per-replica", chips, "--replicas", "1",
                 "--max-batch", max_batch, "--batching", batching, "--json", str(out),
                 *[arg for name in names for arg in ("--arch", files[name])]]) == 0
    capsys.readouterr()
    best = json.loads(out.read_text())["best"]
    return {name: best[files[name]] for name in names}


def test_only_kv_capacity_or_only_hbm_bandwidth_binds(files, capsys):
    best = best_points(files, capsys, "1")
    kv, base = best["kv"], best["base"]
    assert kv["binding"]["resource"].startswith("KV capacity: ")
    assert kv["above"]["preempted"] + kv["above"]["dropped"] > 0
    assert not base["binding"]["resource"].startswith("KV capacity")
    assert base["above"]["preempted"] == base["above"]["dropped"] == 0
    assert kv["sla_rate_rps"] < base["sla_rate_rps"]
    # Off-chip bandwidth binds the copy whose memory is 33 times slower, not v5e.
    hbm = best["hbm"]
    assert hbm["binding"]["resource"].startswith("HBM bandwidth ")
    assert hbm["binding"]["iteration"]["hbm_busy"] >= 0.8
    assert hbm["above"]["preempted"] == 0
    assert not base["binding"]["resource"].startswith("HBM bandwidth")
    assert hbm["sla_rate_rps"] < base["sla_rate_rps"]
    for row in best.values():
        assert row["binding"]["text"] == (f"limited by {row['binding']['metric']} at rate "
                                          f"{row['binding']['rate_rps']:.4g}/s: "
                                          f"{row['binding']['resource']}")


def test_only_the_interconnect_binds(files, capsys):
    # Batches of up to 32: a decode batch's attention is one launch per layer, so at 16
    # the tiny model's iteration is short enough that v5e's own ring all-reduces (fixed
    # latency each) reach the 30% at which the interconnect binds.
    best = best_points(files, capsys, "2", max_batch="32")
    slow, base = best["interconnect"], best["base"]
    assert slow["chips_per_replica"] == base["chips_per_replica"] == 2
    assert slow["binding"]["resource"].startswith("interconnect: collectives ")
    assert slow["binding"]["iteration"]["collective"] >= 0.3
    assert not base["binding"]["resource"].startswith("interconnect")
    assert base["binding"]["iteration"]["collective"] < 0.3
    assert slow["sla_rate_rps"] < base["sla_rate_rps"]


def test_kv_capacity_binds_by_queueing_for_blocks_without_preemptions(files, capsys):
    """Dynamic batching reserves a request's whole KV before it runs: a small cache
    caps the batch (requests wait for blocks) and nothing is ever preempted."""
    best = best_points(files, capsys, "1", "dynamic", names=("base", "kv"))
    kv, base = best["kv"], best["base"]
    assert kv["above"]["preempted"] == kv["above"]["dropped"] == 0
    assert kv["binding"]["resource"].startswith("KV capacity: the cache ")
    assert kv["binding"]["resource"].endswith("held, requests wait for blocks")
    assert not base["binding"]["resource"].startswith("KV capacity")
    assert kv["sla_rate_rps"] < base["sla_rate_rps"]
