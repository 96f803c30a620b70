"""How fast accsim simulates an LLM request: Llama-3.1-8B (bf16) on tpu_v5e_like, a
2048-token prefill then 128 decode steps (the LLM issue's speed target: under 10 s wall
on 2 cores, with the mapping search).

Decode step i (1..128) reads a KV cache of 2048 + i tokens. Contexts are bucketed:
each step is costed as a step at its bucket's upper edge (BUCKET_TOKENS wide), so only
one decode workload per bucket is searched and simulated. The timed part is the
prefill and one decode step per bucket, each with the mapper's search for its tilings
(`accsim map`, objective cycles) and the simulation under them. Untimed, every one of
the 128 contexts is then simulated exactly under its bucket's tilings, and the
bucketing error of the decode total and of the worst step is printed.

Run: `python experiments/bench_llm.py [--bucket TOKENS]` (about ten seconds).
"""

from __future__ import annotations

import argparse
import time

from simulator.config import Platform
from simulator.frontends.hf import decode_workload, load_model_config, prefill_workload
from simulator.loader import load_model, locate
from simulator.mapper import map_workload
from simulator.mapping import Mapping
from simulator.simulate import Inputs, simulate

PLATFORM = "tpu_v5e_like"
MODEL = "llama_3_1_8b"
DTYPE = "bf16"
PROMPT_TOKENS = 2048
DECODE_STEPS = 128
BUCKET_TOKENS = 64       # default bucket width, tokens of context
TARGET_WALL_S = 10.0     # the target


def _searched_run(chip: Platform, workload) -> tuple[float, Mapping]:
    """(simulated seconds, the plan) under the mapper's best tilings."""
    plan = map_workload(Inputs(chip, workload, Mapping()), objective="cycles").plan()
    result = simulate(Inputs(chip, workload, plan))
    return result.total.derived(chip)["time_s"], plan


def _within(plan: Mapping, context: int) -> Mapping:
    """A bucket's plan for a shorter context: the same tilings (operator names are the
    same at every context), attention's key tile cut to the keys there are."""
    operators = dict(plan.operators)
    attention = operators["attn"]
    operators["attn"] = attention.model_copy(update={"tn": min(attention.tn, context)})
    return plan.model_copy(update={"operators": operators})


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
    prefill_s, _ = _searched_run(chip, prefill_workload(cfg, batch=1, seq=PROMPT_TOKENS,
                                                        dtype=DTYPE))
    buckets = {edge: _searched_run(chip, decode_workload(cfg, batch=1, context=edge,
                                                         dtype=DTYPE))
               for edge in edges}
    wall_s = time.perf_counter() - started
    bucketed = [buckets[bucket_edge(c, args.bucket)][0] for c in contexts]

    exact = []
    for context in contexts:  # untimed reference: every context under its bucket's plan
        plan = _within(buckets[bucket_edge(context, args.bucket)][1], context)
        workload = decode_workload(cfg, batch=1, context=context, dtype=DTYPE)
        exact.append(simulate(Inputs(chip, workload, plan)).total.derived(chip)["time_s"])
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
    print(f"wall: {wall_s:.2f} s for the search and simulation of the prefill and "
          f"{len(edges)} decode buckets (target < {TARGET_WALL_S:.0f} s)")


if __name__ == "__main__":
    main()
