"""Memory parameters are checked once (program.validate_memory), the same way by both
engines: a bandwidth that is not positive and finite, or a latency or DMA setup that is
not a non-negative integer, is rejected naming the field, before any replay."""

from __future__ import annotations

import pytest

from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.errors import AccsimError
from simulator.program.tile_program import MemoryParams, make_program, validate_memory

# DESIGN.md section 3's worked example (total 119 cycles with VALID).
PROGRAM = make_program([1024, 1024, 1024], [20, 20, 20], None, [1, 0, 0], [0, 0, 1],
                       [0, 0, 512], depth=2, slots=2)
VALID = MemoryParams(bytes_per_cycle=64.0, latency_cycles=10, dma_setup_cycles=2)
ENGINES = {"fast": run_fast, "simpy": run_des}

INVALID = [
    (MemoryParams(0.0, 10, 2), "bytes_per_cycle"),
    (MemoryParams(-64.0, 10, 2), "bytes_per_cycle"),
    (MemoryParams(float("nan"), 10, 2), "bytes_per_cycle"),
    (MemoryParams(float("inf"), 10, 2), "bytes_per_cycle"),
    (MemoryParams(64.0, -1, 2), "latency_cycles"),
    (MemoryParams(64.0, 10.5, 2), "latency_cycles"),
    (MemoryParams(64.0, 10, -2), "dma_setup_cycles"),
    (MemoryParams(64.0, 10, 2.0), "dma_setup_cycles"),
]
INVALID_IDS = ["zero-bw", "negative-bw", "nan-bw", "inf-bw", "negative-latency",
               "fractional-latency", "negative-setup", "float-setup"]


@pytest.mark.parametrize("memory, field", INVALID, ids=INVALID_IDS)
def test_validate_memory_names_the_field(memory, field) -> None:
    with pytest.raises(AccsimError) as error:
        validate_memory(memory)
    assert error.value.field == field
    assert error.value.file == "memory"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("memory, field", INVALID, ids=INVALID_IDS)
def test_both_engines_reject_invalid_memory(engine, memory, field) -> None:
    with pytest.raises(AccsimError) as error:
        ENGINES[engine](PROGRAM, memory)
    assert error.value.field == field


@pytest.mark.parametrize("memory", [
    VALID,
    MemoryParams(0.25, 0, 0),                      # zero latency and setup are allowed
    MemoryParams(819 / 1.5, 200, 32),              # tpu_v5e_like
])
def test_valid_memory_is_accepted_and_engines_agree(memory) -> None:
    validate_memory(memory)
    fast, des = run_fast(PROGRAM, memory), run_des(PROGRAM, memory)
    assert fast.breakdown == des.breakdown
    if memory == VALID:
        assert fast.breakdown.total_cycles == 119


def test_engines_validate_through_the_shared_function(monkeypatch) -> None:
    # Both engines call program.validate_memory (no private copy of the rules).
    calls = []
    for module in ("simulator.engines.fast", "simulator.engines.des"):
        monkeypatch.setattr(f"{module}.validate_memory",
                            lambda memory, module=module: calls.append(module))
    run_fast(PROGRAM, VALID)
    run_des(PROGRAM, VALID)
    assert calls == ["simulator.engines.fast", "simulator.engines.des"]
