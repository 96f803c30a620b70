"""Issue 26's serving acceptance: 100k requests of Llama-3.1-8B on tpu_v5e_like served
by `accsim serve`, whole process, with an empty cost cache (cold) and then with the
cache that run filled (warm); targets < 30 s cold and < 15 s warm.

Arrivals: the shipped splitwise_conv trace rescaled to 0.25 requests/s (stable: about
68% utilisation), chunked-prefill budget 512 tokens. The command timed is printed.
Run: `python experiments/bench_serving_cache.py [--requests N]`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

COLD_TARGET_S, WARM_TARGET_S = 30.0, 15.0


def command(requests: int, cache: str) -> list[str]:
    return [sys.executable, "-m", "simulator.cli", "serve", "--model", "llama_3_1_8b",
            "--arch", "tpu_v5e_like", "--arrival-trace", "splitwise_conv", "--rate",
            "0.25", "--requests", str(requests), "--max-tokens", "512",
            "--cost-cache", cache]


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        print("command:", " ".join(command(args.requests, "DIR")))
        cold = timed(command(args.requests, cache))
        warm = timed(command(args.requests, cache))
    print(f"cold (empty cost cache): {cold:6.1f} s whole process (target < "
          f"{COLD_TARGET_S:.0f} s): {'met' if cold < COLD_TARGET_S else 'MISSED'}")
    print(f"warm (cache filled):     {warm:6.1f} s whole process (target < "
          f"{WARM_TARGET_S:.0f} s): {'met' if warm < WARM_TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
