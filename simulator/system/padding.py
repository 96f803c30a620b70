"""Attention heads under a tensor parallelism T that need not divide them (DESIGN.md
section 14): the query heads are padded up to a multiple of T, as Megatron-style
deployments pad them, so every chip runs ceil(heads / T) query heads and the padded
ones are computed, reported as waste and never counted as model FLOPs.

KV heads are replicated, not padded: each chip holds the KV heads its (real) query
heads read. That is today's rule where it applied (kv_heads / T each when T divides
them, one each when T is a multiple of them) and what serving stacks do when T exceeds
the KV heads: a padded KV head would serve no real query, while a group that straddles
two chips needs its KV head on both. Where that contiguous layout gives a chip query
heads of two groups unevenly and T is a multiple of the KV heads, each KV head is
replicated on T / kv_heads chips, one a chip, and each group's query heads are padded
interleaved to heads_padded / kv_heads (NxD Inference's GQA.REPLICATE_TO_TP_DEGREE,
neuronx_distributed_inference/modules/attention/gqa.py; the rule transformers-neuronx
and optimum-neuron follow): Llama-2-70B (64 heads, 8 KV heads) at T = 24 runs 3 query
heads and 1 KV head a chip, its KV cache and attention priced for that replica. Any
other plan whose chip cannot run one grouped-query attention (NxD would convert it to
multi-head attention, a KV head per query head) is refused, naming buildable T near it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Operators of a Hugging Face layer whose work scales with the query heads (their
# layer_type), and whether their size also counts the chip's KV heads (the fused QKV
# projection's columns: query heads + 2 x KV heads).
HEAD_SCALED = {"attention.qkv": True, "attention.core": False, "attention.o": False}


@dataclass(frozen=True)
class HeadLayout:
    """How T chips hold a model's attention heads."""

    heads: int           # the model's query heads
    kv_heads: int
    tp: int
    per_chip: int        # query heads each chip computes (padded ones included)
    kv_per_chip: int     # KV heads each chip holds (replicated where groups straddle)

    @property
    def padded_heads(self) -> int:
        """Query heads after padding: a multiple of T."""
        return self.per_chip * self.tp

    @property
    def waste_heads(self) -> int:
        return self.padded_heads - self.heads

    @property
    def buildable(self) -> bool:
        return self.per_chip % self.kv_per_chip == 0

    def waste_flops(self, layer_type: str, flops: int) -> int:
        """FLOPs of one chip's operator (of `layer_type`) that T chips spend on padded
        heads: its share of the padded query heads over the heads it computes."""
        if layer_type not in HEAD_SCALED or not self.waste_heads:
            return 0
        slots = self.per_chip + (2 * self.kv_per_chip if HEAD_SCALED[layer_type] else 0)
        return flops * self.waste_heads // slots


def head_layout(heads: int, kv_heads: int, tp: int) -> HeadLayout:
    """Query heads padded to ceil(heads / T) x T, laid out contiguously (the padded
    ones last); each chip's KV heads are the distinct groups its real query heads fall
    in (at least one: a chip of padded heads still reads one). Where that cannot be
    built and T is a multiple of the KV heads, one replicated KV head a chip with the
    padding interleaved per group (module docstring): as many query heads a chip."""
    per_chip = math.ceil(heads / tp)
    group = heads // kv_heads
    kv_per_chip = 1
    for chip in range(tp):
        first, last = chip * per_chip, min((chip + 1) * per_chip, heads) - 1
        if first <= last:
            kv_per_chip = max(kv_per_chip, last // group - first // group + 1)
    if per_chip % kv_per_chip and tp % kv_heads == 0:
        kv_per_chip = 1  # each replica serves per_chip padded slots of one group
    return HeadLayout(heads, kv_heads, tp, per_chip, kv_per_chip)


def buildable_near(heads: int, kv_heads: int, tp: int) -> tuple[int | None, int | None]:
    """The nearest T below and above `tp` whose head layout can be built (None: none
    within a factor of two)."""
    below = next((t for t in range(tp - 1, max(tp // 2, 1) - 1, -1)
                  if head_layout(heads, kv_heads, t).buildable), None)
    above = next((t for t in range(tp + 1, 2 * tp + 1)
                  if head_layout(heads, kv_heads, t).buildable), None)
    return below, above
