"""Serving results are byte-identical to those recorded before the serving loop was
made faster (iteration costs as float pairs and difference rows instead of an object
and a NumPy round trip per iteration): continuous batching with preemptions, on a
trace, static batching, several replicas on a shared queue, and plain dynamic
batching, with the stand-in frontend (tests/fake_hf.py) so each run takes seconds.

Each case's result (less the manifest, whose paths differ between checkouts) and its
per-request times are hashed; tests/data/serving_identity.json holds the digests, which
`python tests/test_serving_identity.py` rewrites (run it under the code to record)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import fake_hf
import pytest
import yaml

from simulator.inputs.named_inputs import load_inputs
from simulator.serving.cost_cache import CostCache
from simulator.serving.serve import prepare, serve
from simulator.serving.spec import ServeSpec

RECORD = Path(__file__).parent / "data" / "serving_identity.json"
KV_BLOCKS = 40
CASES = {
    "continuous_preempt": dict(rate=200.0, requests=300, prompt_tokens=96,
                               output_tokens=24, max_tokens=64),
    "continuous_trace": dict(arrival="trace", arrival_trace="splitwise_conv", rate=20.0,
                             requests=200, max_tokens=512, kv=None),
    "static": dict(batching="static", max_batch=4, max_wait_ms=20.0, rate=100.0,
                   requests=120, prompt_tokens=40, output_tokens=30),
    "shared_queue": dict(replicas=3, routing="shared_queue", rate=400.0, requests=300,
                         arrival="gamma", cv=2.0, seed=5, prompt_tokens=70,
                         output_tokens=17, max_tokens=48),
}


def platform_file(folder: Path, kv_blocks: int | None) -> str:
    """tpu_v5e_like with HBM for the tiny model's weights and `kv_blocks` KV blocks
    (None: the shipped capacity)."""
    if kv_blocks is None:
        return "tpu_v5e_like"
    stats = fake_hf.model_stats(fake_hf.TinyConfig())
    raw = load_inputs("tpu_v5e_like", "gemm_4096", None).platform.model_dump(mode="json")
    raw["offchip"]["capacity_bytes"] = stats.weight_bytes + kv_blocks * 16 \
        * stats.kv_bytes_per_token
    path = folder / "v5e_small_hbm.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def digest(name: str, folder: Path) -> str:
    fields = dict(CASES[name])
    arch = platform_file(folder, fields.pop("kv", KV_BLOCKS))
    spec = ServeSpec(arch=arch, model="tiny", **fields)
    result, times = serve(prepare(spec, hf=fake_hf, cost_cache=CostCache(None)), spec)
    result.pop("manifest")
    text = json.dumps(result, sort_keys=True).encode()
    arrays = [times.latency_s, times.ttft_s, times.tpot_s, times.output_tokens]
    return hashlib.sha256(text + b"".join(a.tobytes() for a in arrays)).hexdigest()


def plain_digest() -> str:
    spec = ServeSpec(arch="tpu_v1", workload="gemm_4096", rate=900.0, requests=2000,
                     batching="dynamic", max_batch=8, max_wait_ms=2.0)
    result, times = serve(prepare(spec, cost_cache=CostCache(None)), spec)
    result.pop("manifest")
    text = json.dumps(result, sort_keys=True).encode()
    return hashlib.sha256(text + times.latency_s.tobytes()).hexdigest()


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_llm_serving_run_is_identical_to_the_recorded_one(name, tmp_path):
    assert digest(name, tmp_path) == json.loads(RECORD.read_text())[name]


def test_a_plain_serving_run_is_identical_to_the_recorded_one():
    assert plain_digest() == json.loads(RECORD.read_text())["plain_dynamic"]


if __name__ == "__main__":  # record the digests under the code that runs this
    import tempfile
    with tempfile.TemporaryDirectory() as temp:
        recorded = {name: digest(name, Path(temp)) for name in CASES}
    recorded["plain_dynamic"] = plain_digest()
    RECORD.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD}", file=sys.stderr)
