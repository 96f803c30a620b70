"""A decode batch's attention as one launch per layer (DESIGN.md section 10, issue 41
item 2): a served Llama-3.1-8B decode iteration's attention priced as one launch
(each request's variable part, the fixed part once) against the same requests as
batch-1 operators one after another, and against reading their KV cache at the rated
bandwidth; with the iteration's bucketed cost against `LlmCost.exact`.

Run: `python experiments/decode_launch.py [PLATFORM ...]` (default tpu_v5e_like;
about 20 s per platform on a shared 2-core machine).
"""

from __future__ import annotations

import sys

from simulator.api import load_platform
from simulator.serving.cost_cache import CostCache
from simulator.serving.llm_cost import FIXED, VARIABLE, LlmCost, load_model

MODEL = "llama_3_1_8b"
BATCHES = (16, 64)
CONTEXT = 2048
BITS = 6


def rows(platform_name: str) -> list[str]:
    platform = load_platform(platform_name)
    config, facts = load_model(MODEL, dtype=None, platform=platform)
    cost = LlmCost(platform, config, dtype=None, bits=BITS, cache=CostCache(None))
    rated = platform.offchip.bandwidth_gbps * 1e9
    lines = []
    for batch in BATCHES:
        for contexts in ([CONTEXT] * batch, list(range(CONTEXT - batch + 1, CONTEXT + 1))):
            parts = [cost._decode_cost(c) for c in contexts]
            launch = sum(p[VARIABLE][0] for p in parts) + \
                cost._decode_cost(max(contexts))[FIXED][0]
            apart = sum(p[VARIABLE][0] + p[FIXED][0] for p in parts)
            kv = sum(contexts) * facts.kv_bytes_per_token / rated
            iteration = cost.iteration((), contexts).seconds
            exact = cost.exact((), contexts).seconds
            lines.append(
                f"{platform_name:14s} {batch:5d} {contexts[0]:>5d}-{contexts[-1]:<5d} "
                f"{apart * 1e3:9.3f} {launch * 1e3:9.3f} {kv * 1e3:9.3f} "
                f"{launch / kv:6.3f} {iteration * 1e3:10.3f} {exact * 1e3:10.3f}")
    return lines


def main() -> int:
    names = sys.argv[1:] or ["tpu_v5e_like"]
    print(f"{MODEL} decode iterations, attention in ms (bits {BITS}): as batch-1 "
          "operators (apart), as one launch, KV read at rated bandwidth; whole "
          "iteration bucketed and exact")
    print(f"{'platform':14s} {'batch':>5s} {'contexts':11s} {'apart':>9s} {'launch':>9s} "
          f"{'kv read':>9s} {'x kv':>6s} {'iteration':>10s} {'exact':>10s}")
    for name in names:
        for line in rows(name):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
