"""A request as plain data: what arrived, and how far serving has got with it.

The policies change these fields; the metrics store reads them. Times are simulated
seconds from the start of the run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Request:
    """One inference (plain workloads) or one prompt with its output (LLMs).

    LLM progress: `prefill_target` tokens are computed before the next token comes
    (the prompt, plus the tokens generated so far after a preemption); `prefilled`
    counts them; `kv_tokens` are the tokens whose KV is held; `produced` output tokens
    exist (`prefix_tokens` of the prompt come prefilled from the prefix cache). A
    request holds at most prompt + output - 1 tokens of KV (the last token is
    never fed back). `kv_held` is the room its KV blocks have, in tokens (the KV
    allocator's record, kept here so a scheduler reads it without a lookup).
    """

    id: int
    arrival_s: float
    prompt_tokens: int = 0
    output_tokens: int = 0
    prefill_target: int = 0
    prefilled: int = 0
    kv_tokens: int = 0
    produced: int = 0
    kv_held: int = 0
    first_token_s: float | None = None
    finish_s: float | None = None
    preemptions: int = 0
    dropped: bool = False
    prefix_tokens: int = 0      # the prompt's first tokens found in the prefix cache
    prefix_id: int = -1         # the trace's shared prefix (-1: none), of prefix_len
    prefix_len: int = 0         # tokens; shared_blocks of its KV blocks are the cache's
    shared_blocks: int = 0      # (simulator.serving.prefix_cache)
    swapped_tokens: int = 0     # KV tokens out in host memory, to come back on admission
    # Memory tails (simulator.serving.tails): when it was first admitted, its replica's
    # KV-blocked clock when it joined the queue, since when it has been preempted; and
    # the seconds lost to each cause (KV queueing in all, and before its first admission).
    admitted_s: float | None = None
    kv_mark: float = 0.0
    lost_since: float | None = None
    kv_wait_s: float = 0.0
    kv_wait_first_s: float = 0.0
    preempt_lost_s: float = 0.0
    swap_lost_s: float = 0.0

    @property
    def max_kv_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens - 1

    @property
    def in_prefill(self) -> bool:
        return self.prefilled < self.prefill_target
