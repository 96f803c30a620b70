"""A partial-sum reload waits for the store that spilled those sums (DESIGN.md section 3,
"Engines"): the smallest known case where serving the reload earlier would read sums
not yet written back, pinned on the three timelines (fast, SimPy, naive)."""

from __future__ import annotations

import numpy as np
from naive_timeline import naive_timeline
from platforms import make_platform

from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.lowering import lower_compute
from simulator.mapping.plan import Tiling
from simulator.program.tile_program import memory_params
from simulator.inputs.workload import Elementwise, Gemm

# 8x8 array, GEMM 16x32x16 in 8x8x8 tiles, loop order mkn (n inside k: 4 live C tiles),
# ws, depth 3, an output buffer of 3 int32 8x8 tiles, gelu fused, one vector lane.
PLATFORM = make_platform(buffers={"output_bytes": 3 * 8 * 8 * 4},
                         vector_unit={"lanes": 1})
GEMM = Gemm(name="g", layer_type="gemm", kind="gemm", m=16, n=32, k=16)
GELU = Elementwise(name="act", layer_type="gelu", kind="elementwise", elements=16 * 32,
                   op="gelu")
TILING = Tiling(8, 8, 8, "mkn", "ws", 3, fuse="act")
PINNED_TOTAL = 2351  # cycles under the rule (fast, SimPy and naive agree)


def lowered():
    return lower_compute(GEMM, TILING, PLATFORM, following=GELU)


def test_the_case_spills_partial_sums():
    op = lowered()
    assert op.counters.spills and op.program.slots == 3
    assert (op.program.reload_of >= 0).sum() == 8   # second k step of each of 8 C tiles


def test_every_reload_is_requested_after_its_spill_store_completes():
    program = lowered().program
    memory = memory_params(PLATFORM)
    runs = [run_fast(program, memory, keep_steps=True),
            run_des(program, memory, keep_steps=True), naive_timeline(program, memory)]
    reloads = np.flatnonzero(program.reload_of >= 0)
    sources = program.reload_of[reloads]
    for run in runs:
        steps = run.steps
        assert (steps.load_request[reloads] >= steps.store_complete[sources]).all()
        for name, times in runs[0].steps.as_dict().items():
            np.testing.assert_array_equal(getattr(steps, name), times, err_msg=name)
        assert run.breakdown == runs[0].breakdown
    # The rule binds here: some reload would be raised earlier by the prefetch rule
    # alone (compute of step i - depth ended, the previous load raised).
    steps = runs[0].steps
    depth = program.depth
    prefetch = np.array([max(steps.compute_end[i - depth] if i >= depth else 0,
                             steps.load_request[i - 1] if i else 0) for i in reloads])
    assert (steps.store_complete[sources] > prefetch).any()
    assert runs[0].breakdown.total_cycles == PINNED_TOTAL

