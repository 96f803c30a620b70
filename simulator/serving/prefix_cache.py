"""Prefix caching by trace column: requests of one `prefix_id` share their first
`prefix_len` prompt tokens, and a later request skips the prefill of the part whose KV
blocks are still resident.

As vLLM's automatic prefix caching (docs.vllm.ai/en/latest/design/prefix_caching; its
RFC, vllm-project/vllm#2614, matches SGLang's RadixAttention eviction: reference count
0 only, least recently used first, longer prefixes first): only whole blocks are
cached; the request that first computes a prefix leaves its full blocks of it in the
cache once its prefill has passed them; a later
request reads them (a reference each, never copied) and prefills the rest of its
prompt, the cached tokens still read as cached context; at most all but the prompt's
last token hit (its logits give the first output token, as vLLM recomputes it). Blocks
no running request reads stay cached but count as free: an allocation that finds no
truly free block evicts the least recently released prefix's blocks, its last blocks
first (vLLM frees a request's blocks in reverse order, so a prefix shrinks from its
tail and its head stays a valid prefix).

Simplifications: a prefix is cached once per id, at its first computer's length in
whole blocks (a later request of the same id reads min(that, its own prefix_len)); its
blocks become readable when that request's prefill has passed all of them, not block
by block (vLLM v1 caches a full block at allocation); an allocation takes never-cached
free blocks before evicting (vLLM's one free queue interleaves them in release order); a
request swapped out to a host tier copies its prefix back as its own blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from simulator.errors import AccsimError
from simulator.serving.kv_cache import PagedKvCache, blocks_for
from simulator.serving.requests import Request


def check_prefix_options(spec, named: bool, file: str | None) -> None:
    """Trace prefix columns (`named`) with the options that would contradict them:
    one clear error, naming the trace file."""
    if not named:
        return
    rules = [
        (getattr(spec, "prefix_hit_rate", None) is not None,
         "the trace's prefix_id and prefix_len give each request's prefix-cache hits; "
         "--prefix-hit-rate (prefix_hit_rate) would model them a second way: drop one"),
        (getattr(spec, "batching", "continuous") != "continuous",
         f"the prefix cache skips prefill chunks of continuous batching; "
         f"{getattr(spec, 'batching', '')} batching would ignore the trace's prefix_id "
         "and prefix_len: use batching continuous, or drop the columns"),
        (getattr(spec, "disaggregate", None) is not None,
         "a prefix cache by trace column is modelled for co-located replicas, not "
         "disaggregated pools: drop --disaggregate, or drop the columns"),
    ]
    for broken, rule in rules:
        if broken:
            raise AccsimError(rule, file=file, field="prefix_id, prefix_len")


@dataclass
class PrefixStats:
    """What the prefix cache did in a run, over every replica's cache."""

    lookups: int = 0         # admissions of a request that names a prefix
    hits: int = 0            # of them, those that read cached blocks
    prompt_tokens: int = 0   # the prompt tokens of those admissions
    tokens_saved: int = 0    # prompt tokens read from the cache, never prefilled
    evicted_blocks: int = 0  # cached blocks reused for other KV

    def record(self) -> dict:
        return {"lookups": self.lookups, "hits": self.hits,
                "prompt_tokens": self.prompt_tokens, "tokens_saved": self.tokens_saved,
                "token_hit_rate": self.tokens_saved / self.prompt_tokens
                if self.prompt_tokens else 0.0,
                "evicted_blocks": self.evicted_blocks}


@dataclass(slots=True)
class CachedPrefix:
    """One prefix's blocks: `blocks` whole blocks, read by `refs` running requests;
    while `owner` is set, that request is still computing them (not yet readable)."""

    blocks: int
    refs: int = 0
    owner: Request | None = None


class PrefixCachingKvCache(PagedKvCache):
    """Paged KV blocks with cached prefixes. `free_blocks` counts the blocks of cached
    prefixes no request reads (evictable) with the truly free ones, as vLLM's free
    block queue does, so a scheduler's admission and preemption rules read it as
    before; `idle_blocks` is that evictable part."""

    def __init__(self, total_blocks: int, block_tokens: int, host=None, *,
                 stats: PrefixStats):
        super().__init__(total_blocks, block_tokens, host=host)
        self.stats = stats
        self.prefixes: dict[int, CachedPrefix] = {}
        self.idle: OrderedDict[int, CachedPrefix] = OrderedDict()  # LRU first
        self.idle_blocks = 0

    def admit(self, request: Request) -> bool:
        """Blocks for the request's prefill target, its prefix's cached blocks read
        rather than computed (its `prefilled` moves past them); False (nothing
        changed) if the blocks do not suffice."""
        if request.prefix_id < 0:
            return super().admit(request)
        block = self.block_tokens
        entry = self._readable(request.prefix_id)
        usable = 0 if entry is None else min(entry.blocks, request.prefix_len // block,
                                             (request.prompt_tokens - 1) // block)
        pinned = entry.blocks if usable and entry.refs == 0 else 0  # leave the free pool
        own = blocks_for(request.prefill_target, block) - usable
        if own > self.free_blocks - pinned:
            return False
        stats = self.stats
        stats.lookups += 1
        stats.prompt_tokens += request.prompt_tokens
        if usable:
            if pinned:
                del self.idle[request.prefix_id]
                self.idle_blocks -= pinned
                self.free_blocks -= pinned
            entry.refs += 1
            request.shared_blocks = usable
            request.kv_held = usable * block
            request.prefilled = max(request.prefilled, usable * block)
            stats.hits += 1
            stats.tokens_saved += usable * block
        elif entry is None and request.prefix_len // block:
            self.prefixes[request.prefix_id] = CachedPrefix(
                request.prefix_len // block, owner=request)
        return self.grow(request, request.prefill_target)

    def _readable(self, prefix_id: int) -> CachedPrefix | None:
        """The prefix's cached blocks if they are computed; a prefix whose computing
        request has passed them is handed to the cache (that request reads them)."""
        entry = self.prefixes.get(prefix_id)
        if entry is None or entry.owner is None:
            return entry
        owner = entry.owner
        if owner.prefilled < entry.blocks * self.block_tokens:
            return None  # still being computed
        entry.owner, entry.refs, owner.shared_blocks = None, 1, entry.blocks
        return entry

    def grow(self, request: Request, tokens: int) -> bool:
        extra = self.extra_blocks(request, tokens)
        if extra > self.free_blocks:
            return False
        if extra:
            short = extra - (self.free_blocks - self.idle_blocks)
            if short > 0:
                self._evict(short)
            self.free_blocks -= extra
            request.kv_held += extra * self.block_tokens
        return True

    def _evict(self, count: int) -> None:
        """Reuse `count` blocks of cached prefixes no request reads: the least
        recently released first, each from its last block."""
        self.stats.evicted_blocks += count
        self.idle_blocks -= count
        while count:
            prefix_id, entry = next(iter(self.idle.items()))
            taken = min(entry.blocks, count)
            entry.blocks -= taken
            count -= taken
            if not entry.blocks:
                del self.idle[prefix_id]
                del self.prefixes[prefix_id]

    def release(self, request: Request) -> None:
        entry = self.prefixes.get(request.prefix_id) if request.prefix_id >= 0 else None
        if entry is not None and entry.owner is request:  # it was computing the prefix
            if self._readable(request.prefix_id) is None:  # not got that far: dropped
                del self.prefixes[request.prefix_id]
        self.free_blocks += request.kv_held // self.block_tokens - request.shared_blocks
        request.kv_held = 0
        if request.shared_blocks:
            request.shared_blocks = 0
            entry.refs -= 1
            if not entry.refs:  # cached, read by none: evictable, most recent last
                self.idle[request.prefix_id] = entry
                self.idle_blocks += entry.blocks
                self.free_blocks += entry.blocks
