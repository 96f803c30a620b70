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
    exist. A request holds at most prompt + output - 1 tokens of KV (the last token is
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
    # Where its time went (serving.tails): seconds its first admission waited while
    # the KV cache had no room for the head of the queue, seconds from each preemption
    # until its prefill was recomputed (before its first token, and in all), and the
    # marks those are measured from.
    admitted_s: float | None = None
    kv_wait_s: float = 0.0
    kv_wait_mark: float = 0.0
    preempted_at_s: float | None = None
    preemption_s: float = 0.0
    preemption_before_first_s: float = 0.0

    @property
    def max_kv_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens - 1

    @property
    def in_prefill(self) -> bool:
        return self.prefilled < self.prefill_target
