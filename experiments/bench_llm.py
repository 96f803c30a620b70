"""How fast accsim simulates an LLM request: Llama-3.1-8B (bf16) on tpu_v5e_like, a
2048-token prefill then 128 decode steps (the LLM issue's speed target: under 10 s wall
on 2 cores, with the mapping search).

Decode step i (1..128) reads a KV cache of 2048 + i tokens. Contexts are bucketed:
each step is costed as a step at its bucket's upper edge (BUCKET_TOKENS wide), so only
one decode workload per bucket is simulated. The timed part is the prefill and one
decode step per bucket under the default mapping (`Mapping()`: the mapper's search per
distinct operator, memoised, so the decode buckets search only their attention anew).
Untimed, every one of the 128 contexts is then simulated exactly, and the bucketing
error of the decode total and of the worst step is printed.

Run: `python experiments/bench_llm.py [--bucket TOKENS]` (under a minute: the exact reference dominates).
"""

from __future__ import annotations

import argparse
import time

from simulator.inputs.platform import Platform
from simulator.frontends.hf import decode_workload, load_model_config, prefill_workload
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate

PLATFORM = "tpu_v5e_like"
MODEL = "llama_3_1_8b"
DTYPE = "bf16"
PROMPT_TOKENS = 2048
DECODE_STEPS = 128
BUCKET_TOKENS = 64       # default bucket width, tokens of context
TARGET_WALL_S = 10.0     # the target


def _seconds(chip: Platform, workload) -> float:
    """Simulated seconds under the default mapping."""
    return simulate(Inputs(chip, workload, Mapping())).total.derived(chip)["time_s"]


def bucket_edge(context: int, width: int) -> int:
    """The upper edge of the bucket holding `context`: a multiple of `width`."""
    return -(-context // width) * width


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bucket", type=int, default=BUCKET_TOKENS,
                        help=f"bucket width in tokens (default {BUCKET_TOKENS})")
    args = parser.parse_args()
    chip = load_model(locate(PLATFORM, "platform"), Platform)[0]
    cfg = load_model_config(MODEL)
    contexts = [PROMPT_TOKENS + step for step in range(1, DECODE_STEPS + 1)]
    edges = sorted({bucket_edge(c, args.bucket) for c in contexts})

    started = time.perf_counter()
    prefill_s = _seconds(chip, prefill_workload(cfg, batch=1, seq=PROMPT_TOKENS,
                                                dtype=DTYPE))
    buckets = {edge: _seconds(chip, decode_workload(cfg, batch=1, context=edge,
                                                    dtype=DTYPE))
               for edge in edges}
    wall_s = time.perf_counter() - started
    bucketed = [buckets[bucket_edge(c, args.bucket)] for c in contexts]

    exact = [_seconds(chip, decode_workload(cfg, batch=1, context=context, dtype=DTYPE))
             for context in contexts]  # untimed reference
    decode_error = sum(bucketed) / sum(exact) - 1
    worst = max(abs(b / e - 1) for b, e in zip(bucketed, exact))

    print(f"{MODEL} {DTYPE} on {PLATFORM}: prefill {PROMPT_TOKENS} + {DECODE_STEPS} "
          f"decode steps, contexts {contexts[0]}..{contexts[-1]} in {len(edges)} buckets "
          f"of {args.bucket} tokens")
    print(f"simulated: prefill {prefill_s * 1e3:.2f} ms, decode {sum(bucketed) * 1e3:.2f} "
          f"ms ({sum(bucketed) / DECODE_STEPS * 1e3:.3f} ms/token), request "
          f"{(prefill_s + sum(bucketed)) * 1e3:.2f} ms")
    print(f"bucketing error: decode total {100 * decode_error:+.4f}%, worst step "
          f"{100 * worst:.4f}% (against all {DECODE_STEPS} contexts simulated exactly)")
    print(f"wall: {wall_s:.2f} s for the prefill and {len(edges)} decode buckets, "
          f"default mapping search included (target < {TARGET_WALL_S:.0f} s)")


if __name__ == "__main__":
    main()
