"""How many K/V head groups (one batch item's K/V head each: a request x group pair)
one attention step covers (DESIGN.md section 19).

A decode kernel walks a batch's sequences and heads in one launch, the K/V of all its
pairs one stream (paged KV: a list of pages), and keeps enough of that stream in flight
to cover the memory's latency: by Little's law, latency x bandwidth bytes. Where one
pair's step moves fewer (short contexts, fast memories: Llama-2-7B at context 191 moves
49 KB per pair, against 500 KB in flight on a 3.67 TB/s chip), one transfer per pair
with the next prefetched leaves the memory idle most of each step. The kernel instead
moves several pairs' K/V per transfer (one descriptor chain over their pages) and runs
their products one after another: the step of `pairs` pairs is `pairs` times one pair's
step, its output tile `pairs` output tiles.

The rule: among the divisors of the program's groups whose tiles, `depth` of each,
still fit the buffers, the one with the least estimated program time by DESIGN.md
section 3's steady state: the first step's load and latency, then a step period of
max(compute, service, (compute + 1 + service + L') / depth) per further step, then the
last step's compute (ties: fewer pairs). One pair per step where one already hides the
latency: long contexts are unchanged.
"""

from __future__ import annotations

import math

from simulator.program.tile_program import MemoryParams


def program_estimate(pairs: int, compute: float, load_bytes: float, steps: int,
                     depth: int, memory: MemoryParams) -> float:
    """Cycles of a program of `steps` steps of `pairs` pairs each (each pair's share of
    a step: `compute` cycles, `load_bytes` bytes) at `depth`, by the steady-state
    period."""
    step_compute = pairs * compute
    service = math.ceil(pairs * load_bytes / memory.bytes_per_cycle) if load_bytes > 0 else 0
    period = max(step_compute, service,
                 (step_compute + 1 + service + memory.access_cycles) / depth)
    return service + memory.access_cycles + (steps - 1) * period + step_compute


def pairs_per_step(group_compute: int, group_moved: int, group_steps: int, groups: int,
                   depth: int, slots: int, memory: MemoryParams) -> int:
    """Pairs one step covers: `group_compute` and `group_moved` are one pair's compute
    cycles and bytes loaded and stored (one memory serves both) over its `group_steps`
    steps, `groups` the pairs of one program, `slots` the fewest tiles any buffer
    holds."""
    compute, load = group_compute / group_steps, group_moved / group_steps
    fitting = [p for p in range(1, groups + 1)
               if groups % p == 0 and slots // p >= depth]
    return min(fitting, key=lambda p: (program_estimate(
        p, compute, load, groups // p * group_steps, depth, memory), p))

