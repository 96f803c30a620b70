"""Hypothesis strategies for valid tile programs and memory parameters.

Programs are built the way lowering builds them: blocks of `live` C tiles visited
round-robin over `k` rounds (live = 1 is k innermost; live > 1 keeps several tiles live
at once), acquiring on a tile's first step and releasing on its last; or, in a spilling
block, acquiring and releasing on every step, storing partial sums after each round but
the last and reloading them on the tile's next visit (`reload_of`), as lowering does
when the live tiles exceed the output slots. Every generated program is valid by
construction, and some carry a dispatch overhead or evacuation cycles on their releasing
steps (output_path: vector). Small integer ranges make loads and stores raised in
the same cycle common.
"""

from __future__ import annotations

from hypothesis import strategies as st

from simulator.program.tile_program import MAX_DEPTH, MemoryParams, TileProgram, make_program

BANDWIDTHS = [0.5, 1.0, 3.7, 16.0, 34 / 0.7, 64.0, 819 / 1.5]


@st.composite
def memory_params(draw) -> MemoryParams:
    return MemoryParams(
        bytes_per_cycle=draw(st.sampled_from(BANDWIDTHS) | st.floats(0.25, 600.0)),
        latency_cycles=draw(st.integers(0, 60)),
        dma_setup_cycles=draw(st.integers(0, 8)),
    )


@st.composite
def tile_programs(draw, max_blocks: int = 6, max_live: int = 4, max_rounds: int = 5,
                  vector_epilogues: bool = True, spills: bool = True) -> TileProgram:
    depth = draw(st.integers(1, MAX_DEPTH))
    slots = draw(st.integers(depth, depth + 3))
    acquire, release, store_bytes, reload_of = [], [], [], []
    for _ in range(draw(st.integers(1, max_blocks))):
        spill = spills and draw(st.booleans())
        live = draw(st.integers(1, max_live + 2 if spill else min(max_live, slots)))
        rounds = draw(st.integers(2 if spill else 1, max_rounds))
        for r in range(rounds):
            for _tile in range(live):
                last = r == rounds - 1
                acquire.append(spill or r == 0)
                release.append(spill or last)
                reload_of.append(len(reload_of) - live if spill and r > 0 else -1)
                choices = [0, 64, 512, 1000, 4096] if last else \
                    [0, 64, 300, 2048] if spill else [0]
                store_bytes.append(draw(st.sampled_from(choices)))
    steps = len(acquire)
    small = st.integers(1, 60)
    load_bytes = draw(st.lists(st.sampled_from([0, 0, 64, 100, 1024, 3000]) | small,
                               min_size=steps, max_size=steps))
    compute = draw(st.lists(small | st.integers(1, 800), min_size=steps, max_size=steps))
    if vector_epilogues:
        vector = [draw(st.sampled_from([0, 0, 3, 17, 90])) if rel else 0 for rel in release]
    else:
        vector = [0] * steps
    overhead = draw(st.sampled_from([0, 0, 0, 1, 7, 300]))
    evacuation = None
    if draw(st.booleans()):
        evacuation = [draw(st.sampled_from([0, 1, 5, 40, 300])) if rel else 0
                      for rel in release]
    return make_program(load_bytes, compute, vector, acquire, release, store_bytes,
                        reload_of, depth=depth, slots=slots, overhead_cycles=overhead,
                        evacuation_cycles=evacuation)
