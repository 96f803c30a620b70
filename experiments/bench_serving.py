"""How fast `accsim serve` simulates a large request stream, and how far its bucketed
iteration costs are from exact simulation (issue 12's speed acceptance).

1. LLM: REQUESTS requests of Llama-3.1-8B (bf16) served with continuous batching on
   tpu_v5e_like (16 GiB HBM: weights, the rest KV cache), arrivals from the shipped
   splitwise_conv trace scaled to RATE_RPS and repeated to REQUESTS. The wall time
   covers everything `serve` does (cost memo filled from empty, event loop, metrics,
   the bucketing-error sample); the bucketing error is the run's own report (mean and
   max relative error per sampled iteration, and of their summed time, against whole-
   iteration simulation). Needs the Hugging Face frontend (simulator.frontends.hf);
   `--frontend stand-in` uses tests/fake_hf.py with Llama-3.1-8B's dimensions instead
   (same operator layout as the frontend promises; no norms' or RoPE's exact costs), to
   time the serving loop where the frontend is missing.
2. Plain: PLAIN_REQUESTS requests of ResNet-50 (batch 1 each) on tpu_v1 with dynamic
   batching (max 8, 1 ms wait) at PLAIN_RATE_RPS, Poisson arrivals.

Prints one table (and writes it to experiments/bench_serving.md with --write).
Run: `python experiments/bench_serving.py [--frontend hf|stand-in] [--write]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

from simulator.inputs.named_inputs import load_inputs
from simulator.serving.serve import prepare, serve
from simulator.serving.spec import ServeSpec

REQUESTS = 100_000
RATE_RPS = 0.25                 # offered load, requests/s (trace rescaled to it)
MODEL = "llama_3_1_8b"
ARCH = "tpu_v5e_like"
HBM_BYTES = 16 * 2**30          # TPU v5e: 16 GiB HBM2 (if the platform file lacks it)
MAX_TOKENS = 512                # chunked-prefill budget per iteration, tokens
PLAIN_REQUESTS = 100_000
PLAIN_RATE_RPS = 2_000.0
SPEED_TARGET_S = 60.0


def llama_stand_in():
    """tests/fake_hf.py with Llama-3.1-8B's shape (32 layers, hidden 4096, 32 heads of
    128 with 8 KV heads, MLP 14336, vocabulary 128256)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import fake_hf
    config = fake_hf.TinyConfig(name="llama_3_1_8b_stand_in", layers=32, hidden=4096,
                                heads=32, kv_heads=8, head_dim=128, ffn=14336,
                                vocab=128256)

    class StandIn:
        iteration_workload = staticmethod(fake_hf.iteration_workload)
        model_stats = staticmethod(fake_hf.model_stats)

        @staticmethod
        def load_model_config(name):
            return config
    return StandIn


def platform_with_hbm(folder: str) -> str:
    """The shipped platform, with HBM_BYTES as its capacity if it states none."""
    platform = load_inputs(ARCH, "gemm_4096", None).platform
    if platform.offchip.capacity_bytes is not None:
        return ARCH
    raw = platform.model_dump(mode="json")
    raw["offchip"]["capacity_bytes"] = HBM_BYTES
    path = Path(folder) / f"{ARCH}_16gib.yaml"
    path.write_text(yaml.safe_dump(raw))
    print(f"note: {ARCH} states no offchip.capacity_bytes; using {HBM_BYTES:,} bytes")
    return str(path)


def timed(spec: ServeSpec, hf=None) -> tuple[str, dict]:
    """Wall and CPU seconds of prepare + serve (the machine may be shared: CPU seconds
    are this process's own)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result, _ = serve(prepare(spec, hf=hf), spec)
    return f"{time.perf_counter() - wall:.1f} / {time.process_time() - cpu:.1f}", result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", choices=["hf", "stand-in"], default="hf")
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        hf = llama_stand_in() if args.frontend == "stand-in" else None
        spec = ServeSpec(arch=platform_with_hbm(folder), model=MODEL, arrival="trace",
                         arrival_trace="splitwise_conv", rate=RATE_RPS,
                         requests=args.requests, max_tokens=MAX_TOKENS)
        wall, result = timed(spec, hf)
        b = result["bucketing"]
        rows.append((f"{MODEL} ({args.frontend}) continuous, {ARCH}", result, wall,
                     f"{100 * b['mean_abs_error']:.2f}% mean, "
                     f"{100 * b['max_abs_error']:.2f}% max, "
                     f"{100 * b['total_time_error']:+.2f}% summed "
                     f"({b['samples']} iterations)"))
    plain = ServeSpec(arch="tpu_v1", workload="resnet50_b1", rate=PLAIN_RATE_RPS,
                      requests=PLAIN_REQUESTS, batching="dynamic", max_batch=8,
                      max_wait_ms=1.0)
    wall, result = timed(plain)
    rows.append(("resnet50_b1 dynamic (max 8, 1 ms), tpu_v1", result, wall,
                 "exact (every batch size simulated)"))
    lines = ["| run | requests | completed | dropped | preempted | throughput rps | "
             "latency p99 ms | wall / CPU s | bucketing error |", "|---" * 9 + "|"]
    for name, r, wall, error in rows:
        lines.append(f"| {name} | {r['requests']:,} | {r['completed']:,} | "
                     f"{r['dropped']:,} | {r['preempted']:,} | "
                     f"{r['throughput_rps']:,.2f} | "
                     f"{r['latency_ms']['p99']:,.1f} | {wall} | {error} |")
    table = "\n".join(lines)
    print(table)
    print(f"speed target: {REQUESTS:,} LLM requests in < {SPEED_TARGET_S:.0f} s wall")
    if args.write:
        out = Path(__file__).with_suffix(".md")
        out.write_text(f"# bench_serving ({args.frontend} frontend)\n\n{table}\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
