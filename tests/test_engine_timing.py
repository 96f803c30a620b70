"""Exact timelines, checked by hand, for the SimPy engine and the naive reference.

Each case writes its arithmetic in comments, in the notation of DESIGN.md section 3:
s = service_cycles(bytes, B), L' = latency + DMA setup; a transfer raised at r may start
at r + 1; [a, b) is a service or compute interval. Unless a case says otherwise the
memory moves B = 64 bytes/cycle with latency 10 and setup 2 (L' = 12), so 64 B -> s = 1,
512 B -> s = 8, 1024 B -> s = 16, 2560 B -> s = 40.
"""

from __future__ import annotations

import pytest
from naive_timeline import naive_timeline

from simulator.engines.des import run_des
from simulator.errors import InvalidProgramError, UnfinishedStepError
from simulator.program.tile_program import MemoryParams, make_program

MEMORY = MemoryParams(bytes_per_cycle=64.0, latency_cycles=10, dma_setup_cycles=2)


def des_with_steps(program, memory):
    return run_des(program, memory, keep_steps=True)


ENGINES = [pytest.param(des_with_steps, id="des"), pytest.param(naive_timeline, id="naive")]


def assert_timeline(outcome, times: dict[str, list[int]], breakdown: dict[str, int]):
    """Every per-step array, and every breakdown field (those not given must be 0)."""
    got_times = {name: array.tolist() for name, array in outcome.steps.as_dict().items()}
    assert got_times == times
    assert outcome.breakdown.as_dict() == {
        name: breakdown.get(name, 0) for name in outcome.breakdown.as_dict()}


@pytest.mark.parametrize("engine", ENGINES)
def test_worked_example_of_the_design(engine):
    # DESIGN.md section 3, three k steps of one C tile, depth 2, 2 slots:
    # load 0: raised 0, served [1, 17), usable 17 + 12 = 29.
    # load 1: raised 0, served [17, 33), usable 45.   compute 0: [29, 49).
    # compute 1: max(45, 49) = 49 -> [49, 69).
    # load 2: raised at compute end 0 = 49, served [50, 66), usable 78.
    # compute 2: max(78, 69) = 78 -> [78, 98); input stall 78 - 69 = 9.
    # stores 0, 1 move 0 bytes: done when raised, at their compute ends 49, 69.
    # store 2: raised 98, served [99, 107), complete 119.
    # total 119 = fill 29 + busy 60 + input 9 + drain 21; memory busy 3 * 16 + 8 = 56.
    program = make_program([1024] * 3, [20] * 3, acquire=[1, 0, 0],
                           store_bytes=[0, 0, 512], depth=2, slots=2)
    assert_timeline(engine(program, MEMORY), {
        "load_request": [0, 0, 49], "load_start": [1, 17, 50], "load_usable": [29, 45, 78],
        "compute_start": [29, 49, 78], "compute_end": [49, 69, 98],
        "vector_end": [49, 69, 98], "store_request": [49, 69, 98],
        "store_start": [49, 69, 99], "store_served": [49, 69, 107],
        "store_complete": [49, 69, 119],
    }, {"total_cycles": 119, "busy_cycles": 60, "fill_cycles": 29, "input_stall_cycles": 9,
        "drain_cycles": 21, "store_tail_cycles": 21, "offchip_busy_cycles": 56})


@pytest.mark.parametrize("engine", ENGINES)
def test_load_bound_at_zero_latency(engine):
    # L' = 0, loads of 1280 B take s = 20, compute 8, depth 2: each step after the
    # first waits s - compute = 12 cycles for its load.
    # load 0: [1, 21), usable 21; load 1: [21, 41), usable 41; compute 0: [21, 29).
    # load 2: raised 29, server busy until 41 -> [41, 61); compute 1: [41, 49).
    # load 3: raised 49 -> [61, 81); compute 2: [61, 69); compute 3: [81, 89).
    # No bytes stored: every store is done at its compute end. total 89 = fill 21 +
    # busy 32 + input 3 * 12; memory busy 4 * 20 = 80.
    memory = MemoryParams(bytes_per_cycle=64.0, latency_cycles=0, dma_setup_cycles=0)
    program = make_program([1280] * 4, [8] * 4, depth=2, slots=2)
    ends = [29, 49, 69, 89]
    assert_timeline(engine(program, memory), {
        "load_request": [0, 0, 29, 49], "load_start": [1, 21, 41, 61],
        "load_usable": [21, 41, 61, 81],
        "compute_start": [21, 41, 61, 81], "compute_end": ends, "vector_end": ends,
        "store_request": ends, "store_start": ends, "store_served": ends,
        "store_complete": ends,
    }, {"total_cycles": 89, "busy_cycles": 32, "fill_cycles": 21, "input_stall_cycles": 36,
        "offchip_busy_cycles": 80})


# Twelve steps of compute 20 with no stores, L' = 12, at depth 1, 2 and 4; the steady
# step period is max(compute, s, (compute + 1 + s + L') / depth).
# - 1024 B, s = 16, depth 1: (20 + 1 + 16 + 12) / 1 = 49. Load i is raised at compute
#   end i - 1 and usable 1 + 16 + 12 = 29 later: starts 29 + 49 i, input 11 * 29.
# - depth 2: 49 / 2 = 24.5: pairs of steps every 49. Loads 0, 1 usable 29, 45;
#   load i >= 2 raised at compute end i - 2, usable 29 later. Starts 29, 49 (compute
#   bound), 78 = 49 + 29 (input 9), 98, 127, 147, ...: input 5 * 9 = 45.
# - depth 4: 49 / 4 < 20: compute bound from the start, starts 29 + 20 i. (Loads 0..3
#   usable 29, 45, 61, 77; load 4 raised 49, served [65, 81), usable 93 <= 109.)
# - 2560 B, s = 40, depth 4: (20 + 1 + 40 + 12) / 4 = 18.25 < 40: the memory is busy
#   from cycle 1 on, load i served [1 + 40 i, 41 + 40 i), usable 53 + 40 i, so starts
#   53 + 40 i and input 11 * 20.
PERIOD_CASES = [
    # depth, load bytes, compute starts, breakdown
    (1, 1024, [29 + 49 * i for i in range(12)],
     {"total_cycles": 588, "fill_cycles": 29, "input_stall_cycles": 319,
      "offchip_busy_cycles": 192}),
    (2, 1024, [29, 49, 78, 98, 127, 147, 176, 196, 225, 245, 274, 294],
     {"total_cycles": 314, "fill_cycles": 29, "input_stall_cycles": 45,
      "offchip_busy_cycles": 192}),
    (4, 1024, [29 + 20 * i for i in range(12)],
     {"total_cycles": 269, "fill_cycles": 29, "offchip_busy_cycles": 192}),
    (4, 2560, [53 + 40 * i for i in range(12)],
     {"total_cycles": 513, "fill_cycles": 53, "input_stall_cycles": 220,
      "offchip_busy_cycles": 480}),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("depth, load_bytes, starts, breakdown", PERIOD_CASES,
                         ids=["depth1-latency", "depth2-latency", "depth4-compute",
                              "depth4-memory"])
def test_steady_state_period(engine, depth, load_bytes, starts, breakdown):
    compute, steps = 20, 12
    service = load_bytes // 64
    program = make_program([load_bytes] * steps, [compute] * steps, depth=depth,
                           slots=depth)
    outcome = engine(program, MEMORY)
    assert outcome.steps.compute_start.tolist() == starts
    assert outcome.breakdown.as_dict() == {
        name: breakdown.get(name, 0) for name in outcome.breakdown.as_dict()} | {
        "busy_cycles": steps * compute, "drain_cycles": 0}
    # Over `depth` steps the period is depth * max(...): exact when that is an integer.
    window = max(depth * compute, depth * service,
                 compute + 1 + service + MEMORY.access_cycles)
    later_half = starts[steps // 2:]
    assert [b - a for a, b in zip(later_half, later_half[depth:])] == \
        [window] * (len(later_half) - depth)


@pytest.mark.parametrize("engine", ENGINES)
def test_output_bound_when_stores_are_slow(engine):
    # Operands on chip (0-byte loads), one C tile per step, depth 1, 2 slots; compute
    # 10 and stores of 1280 B (s = 20): compute i >= 2 waits for store i - 2's service
    # end, so the period is the store service, 20.
    # compute 0: [0, 10); store 0 raised 10, served [11, 31), complete 43.
    # compute 1: [10, 20) (slot 1 never taken); store 1 raised 20 -> [31, 51).
    # compute 2: slot of store 0 free at 31 -> [31, 41) (output 11); store 2 [51, 71).
    # compute 3: [51, 61) (output 10); store 3 raised 61 -> [71, 91).
    # compute 4: [71, 81) (output 10); store 4 raised 81 -> [91, 111), complete 123.
    # total 123 = busy 50 + output 31 + drain 123 - 81 = 42; memory busy 5 * 20 = 100.
    program = make_program([0] * 5, [10] * 5, acquire=[1] * 5, release=[1] * 5,
                           store_bytes=[1280] * 5, depth=1, slots=2)
    loads = [0, 10, 20, 41, 61]
    ends = [10, 20, 41, 61, 81]
    assert_timeline(engine(program, MEMORY), {
        "load_request": loads, "load_start": loads, "load_usable": loads,
        "compute_start": [0, 10, 31, 51, 71], "compute_end": ends, "vector_end": ends,
        "store_request": ends, "store_start": [11, 31, 51, 71, 91],
        "store_served": [31, 51, 71, 91, 111], "store_complete": [43, 63, 83, 103, 123],
    }, {"total_cycles": 123, "busy_cycles": 50, "output_stall_cycles": 31,
        "drain_cycles": 42, "store_tail_cycles": 42, "offchip_busy_cycles": 100})


@pytest.mark.parametrize("engine", ENGINES)
def test_store_served_before_load(engine):
    # One C tile per step, depth 2, 2 slots, loads 64 B (s = 1), compute 10, stores
    # 2560, 512, 512 B (s = 40, 8, 8).
    # loads 0, 1: raised 0, served [1, 2), [2, 3), usable 14, 15.
    # compute 0: [14, 24). Store 0 and load 2 are both raised at 24: the store is
    # served first, [25, 65), complete 77.
    # compute 1: [24, 34); store 1 raised 34. At 65 load 2 (raised 24) and store 1
    # (raised 34) wait: the store goes first, [65, 73), complete 85; then load 2
    # [73, 74), usable 86.
    # compute 2: max(86, 34, slot free 65) = 86 -> [86, 96) (input 52); store 2
    # [97, 105), complete 117.
    # total 117 = fill 14 + busy 30 + input 52 + drain 21; memory busy 59.
    program = make_program([64] * 3, [10] * 3, acquire=[1] * 3,
                           store_bytes=[2560, 512, 512], depth=2, slots=2)
    ends = [24, 34, 96]
    assert_timeline(engine(program, MEMORY), {
        "load_request": [0, 0, 24], "load_start": [1, 2, 73], "load_usable": [14, 15, 86],
        "compute_start": [14, 24, 86], "compute_end": ends, "vector_end": ends,
        "store_request": ends, "store_start": [25, 65, 97],
        "store_served": [65, 73, 105], "store_complete": [77, 85, 117],
    }, {"total_cycles": 117, "busy_cycles": 30, "fill_cycles": 14, "input_stall_cycles": 52,
        "drain_cycles": 21, "store_tail_cycles": 21, "offchip_busy_cycles": 59})


@pytest.mark.parametrize("engine", ENGINES)
def test_fused_vector_epilogue(engine):
    # One C tile per step with a 40-cycle epilogue, depth 2, 2 slots, loads 64 B
    # (s = 1), compute 20, stores 512 B (s = 8).
    # loads 0, 1 usable 14, 15; compute 0: [14, 34); ve 0 = 34 + 40 = 74.
    # compute 1: [34, 54); the vector unit is busy: ve 1 = max(54, 74) + 40 = 114.
    # load 2 raised 34, [35, 36), usable 48; load 3 raised 54, [55, 56), usable 68.
    # store 0 raised at ve 74 -> [75, 83): compute 2 waits for that slot until 83,
    # [83, 103): output stall 83 - 54 = 29, caused by the vector unit (ve 0 > 34).
    # ve 2 = max(103, 114) + 40 = 154. store 1 raised 114 -> [115, 123).
    # compute 3: [123, 143), output stall 20 (ve 1 = 114 > 54). ve 3 = 154 + 40 = 194.
    # stores 2, 3: [155, 163), [195, 203), complete 175, 215.
    # total 215 = fill 14 + busy 80 + output 49 + drain 72 (vector tail 194 - 143 = 51,
    # store tail 21); memory busy 4 + 32 = 36; vector busy 160.
    program = make_program([64] * 4, [20] * 4, [40] * 4, acquire=[1] * 4,
                           store_bytes=[512] * 4, depth=2, slots=2)
    vector_ends = [74, 114, 154, 194]
    assert_timeline(engine(program, MEMORY), {
        "load_request": [0, 0, 34, 54], "load_start": [1, 2, 35, 55],
        "load_usable": [14, 15, 48, 68],
        "compute_start": [14, 34, 83, 123], "compute_end": [34, 54, 103, 143],
        "vector_end": vector_ends, "store_request": vector_ends,
        "store_start": [75, 115, 155, 195], "store_served": [83, 123, 163, 203],
        "store_complete": [95, 135, 175, 215],
    }, {"total_cycles": 215, "busy_cycles": 80, "fill_cycles": 14,
        "output_stall_cycles": 49, "output_stall_vector_cycles": 49, "drain_cycles": 72,
        "vector_tail_cycles": 51, "store_tail_cycles": 21, "offchip_busy_cycles": 36,
        "vector_busy_cycles": 160})


@pytest.mark.parametrize("engine", ENGINES)
def test_vector_only_operator(engine):
    # A vector operator: the vector unit is the compute unit (compute 30 per row tile),
    # every step takes and frees a slot; depth 2, 2 slots, 640 B in and out (s = 10).
    # loads 0, 1: [1, 11), [11, 21), usable 23, 33. compute 0: [23, 53).
    # store 0 and load 2 raised at 53: store [54, 64) (complete 76), load [64, 74),
    # usable 86. compute 1: [53, 83); store 1 [84, 94).
    # compute 2: max(86, 83, slot free 64) = 86 -> [86, 116) (input 3); store 2
    # [117, 127), complete 139.
    # total 139 = fill 23 + busy 90 + input 3 + drain 23; memory busy 60. No fused
    # epilogue, so vector busy counts 0: the unit's cycles are the busy cycles.
    program = make_program([640] * 3, [30] * 3, acquire=[1] * 3, store_bytes=[640] * 3,
                           depth=2, slots=2)
    ends = [53, 83, 116]
    assert_timeline(engine(program, MEMORY), {
        "load_request": [0, 0, 53], "load_start": [1, 11, 64], "load_usable": [23, 33, 86],
        "compute_start": [23, 53, 86], "compute_end": ends, "vector_end": ends,
        "store_request": ends, "store_start": [54, 84, 117],
        "store_served": [64, 94, 127], "store_complete": [76, 106, 139],
    }, {"total_cycles": 139, "busy_cycles": 90, "fill_cycles": 23, "input_stall_cycles": 3,
        "drain_cycles": 23, "store_tail_cycles": 23, "offchip_busy_cycles": 60})


@pytest.mark.parametrize("engine", ENGINES)
def test_load_and_slot_both_bind(engine):
    # One C tile per step, depth 1, 1 slot; loads 1024 B (s = 16), compute 20, a
    # 30-cycle epilogue on step 0, stores 512 B (s = 8).
    # load 0 [1, 17), usable 29; compute 0 [29, 49); ve 0 = 79; store 0 [80, 88).
    # load 1 raised 49, [50, 66), usable 78. The slot frees at 88: compute 1 [88, 108).
    # Gap 88 - 49 = 39: input min(78, 88) - 49 = 29, output 39 - 29 = 10, which the
    # vector unit caused (ve 0 = 79 > 49).
    # ve 1 = 108; store 1 [109, 117), complete 129.
    # total 129 = fill 29 + busy 40 + input 29 + output 10 + drain 21.
    program = make_program([1024] * 2, [20] * 2, [30, 0], acquire=[1, 1],
                           store_bytes=[512, 512], depth=1, slots=1)
    assert_timeline(engine(program, MEMORY), {
        "load_request": [0, 49], "load_start": [1, 50], "load_usable": [29, 78],
        "compute_start": [29, 88], "compute_end": [49, 108], "vector_end": [79, 108],
        "store_request": [79, 108], "store_start": [80, 109], "store_served": [88, 117],
        "store_complete": [100, 129],
    }, {"total_cycles": 129, "busy_cycles": 40, "fill_cycles": 29, "input_stall_cycles": 29,
        "output_stall_cycles": 10, "output_stall_vector_cycles": 10, "drain_cycles": 21,
        "store_tail_cycles": 21, "offchip_busy_cycles": 48, "vector_busy_cycles": 30})


@pytest.mark.parametrize("engine", ENGINES)
def test_zero_byte_transfers_skip_the_memory(engine):
    # One C tile per step, depth 1, 1 slot, compute 20; loads 0, 1024, 0 B and stores
    # 0, 512, 0 B, every step releasing. A 0-byte transfer is done when raised.
    # load 0 usable 0: compute 0 [0, 20); store 0 done at 20, freeing the slot.
    # load 1 raised 20, [21, 37), usable 49: compute 1 [49, 69) (input 29).
    # store 1 raised 69, [70, 78), complete 90. load 2 done at 69, but the slot frees
    # at 78: compute 2 [78, 98) (output 9). store 2 done at 98.
    # total max(90, 98) = 98 = busy 60 + input 29 + output 9; memory busy 16 + 8 = 24.
    program = make_program([0, 1024, 0], [20] * 3, acquire=[1] * 3, release=[1] * 3,
                           store_bytes=[0, 512, 0], depth=1, slots=1)
    ends = [20, 69, 98]
    assert_timeline(engine(program, MEMORY), {
        "load_request": [0, 20, 69], "load_start": [0, 21, 69], "load_usable": [0, 49, 69],
        "compute_start": [0, 49, 78], "compute_end": ends, "vector_end": ends,
        "store_request": ends, "store_start": [20, 70, 98], "store_served": [20, 78, 98],
        "store_complete": [20, 90, 98],
    }, {"total_cycles": 98, "busy_cycles": 60, "input_stall_cycles": 29,
        "output_stall_cycles": 9, "offchip_busy_cycles": 24})


@pytest.mark.parametrize("program", [
    pytest.param(make_program([64] * 2, [10] * 2, depth=2, slots=1),
                 id="slots-below-depth"),
    pytest.param(make_program([64] * 2, [10] * 2, acquire=[1, 1], release=[0, 1],
                              store_bytes=[0, 64], depth=1, slots=1), id="deadlock"),
    pytest.param(make_program([64] * 2, [10] * 2, release=[0, 0], store_bytes=[0, 64],
                              depth=1, slots=1), id="store-without-release"),
])
def test_run_des_rejects_invalid_programs(program):
    with pytest.raises(InvalidProgramError):
        run_des(program, MEMORY)


def test_run_des_raises_on_unfinished_steps(monkeypatch):
    # Skip validation to feed a deadlock: the second acquisition waits for the first
    # release, which is its own step.
    monkeypatch.setattr("simulator.engines.des.validate_program", lambda program: None)
    program = make_program([64] * 2, [10] * 2, acquire=[1, 1], release=[0, 1],
                           store_bytes=[0, 64], depth=1, slots=1)
    with pytest.raises(UnfinishedStepError, match="step 1"):
        run_des(program, MEMORY)
