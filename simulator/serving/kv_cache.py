"""The KV cache of one replica: what HBM holds after the weights, handed out in blocks.

Sizing (`kv_capacity_blocks`) lives apart from allocation, as in Vidur's memory
planner: capacity_bytes - weight_bytes, divided into blocks of `block_tokens` tokens.
Allocators are registered by name; `paged` gives each request whole blocks as its KV
grows (vLLM's paged attention) and frees them when it finishes or is preempted.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import AccsimError
from simulator.serving.registry import Registry
from simulator.serving.requests import Request


def blocks_for(tokens: int, block_tokens: int) -> int:
    """Blocks that hold `tokens` tokens of KV."""
    return -(-tokens // block_tokens)


def kv_capacity_blocks(capacity_bytes: int, weight_bytes: int, kv_bytes_per_token: int,
                       block_tokens: int, *, file: str | None = None) -> int:
    """How many KV blocks fit beside the weights; weights that do not fit are an error
    naming both sizes."""
    if weight_bytes >= capacity_bytes:
        raise AccsimError(f"the weights ({weight_bytes:,} bytes) do not fit in HBM "
                          f"(offchip.capacity_bytes {capacity_bytes:,} bytes), leaving no "
                          "room for the KV cache", file=file,
                          field="offchip.capacity_bytes")
    free, block = capacity_bytes - weight_bytes, kv_bytes_per_token * block_tokens
    if block > free:
        raise AccsimError(f"one KV block of {block_tokens:,} tokens ({block:,} bytes) is "
                          f"larger than the {free:,} bytes of HBM the weights leave for "
                          "the KV cache: give a smaller block_tokens", file=file,
                          field="block_tokens")
    return free // block


@dataclass(frozen=True)
class HostTier:
    """Host memory behind a replica's KV cache (DESIGN.md section 20): a preempted
    decoding request's blocks go out to it and come back over the host link
    (runtime.host_link: latency + bytes / bandwidth each way) instead of being
    recomputed. Each chip of the replica moves its own share of the KV over its own
    link, at once; host memory is taken to hold whatever is swapped out."""

    latency_s: float
    bandwidth_bytes_s: float
    bytes_per_token: int    # one chip's KV per token (its shard, at the stored format)

    def seconds(self, tokens: int) -> float:
        """One way: `tokens` tokens of KV out to host memory, or back in."""
        return self.latency_s + tokens * self.bytes_per_token / self.bandwidth_bytes_s


KV_ALLOCATORS: Registry = Registry("KV allocator")


@KV_ALLOCATORS.register("paged")
class PagedKvCache:
    """Whole blocks per request; a request's blocks grow with its KV tokens (the tokens
    they hold are the request's `kv_held`)."""

    def __init__(self, total_blocks: int, block_tokens: int,
                 host: HostTier | None = None):
        self.total_blocks = total_blocks
        self.block_tokens = block_tokens
        self.free_blocks = total_blocks
        self.host = host  # where preempted requests' blocks go, None: recompute

    def extra_blocks(self, request: Request, tokens: int) -> int:
        """Blocks a request must gain to hold `tokens` tokens."""
        short = tokens - request.kv_held
        return -(-short // self.block_tokens) if short > 0 else 0

    def extra_blocks_after(self, requests: list[Request], steps: int) -> int:
        """Blocks the requests must gain in all to hold `steps` more tokens each."""
        block, total = self.block_tokens, 0
        for request in requests:
            short = request.kv_tokens + steps - request.kv_held
            if short > 0:
                total += -(-short // block)
        return total

    def admit(self, request: Request) -> bool:
        """Blocks for a request joining the running set: its prefill target (a prefix
        cache, simulator.serving.prefix_cache, reads cached blocks first)."""
        return self.grow(request, request.prefill_target)

    def grow(self, request: Request, tokens: int) -> bool:
        """Make the request hold `tokens` tokens; False (and nothing changed) if the
        free blocks do not suffice."""
        extra = self.extra_blocks(request, tokens)
        if extra > self.free_blocks:
            return False
        if extra:
            self.free_blocks -= extra
            request.kv_held += extra * self.block_tokens
        return True

    def release(self, request: Request) -> None:
        self.free_blocks += request.kv_held // self.block_tokens
        request.kv_held = 0

    @property
    def used_blocks(self) -> int:
        return self.total_blocks - self.free_blocks
