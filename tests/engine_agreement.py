"""One check the engine-agreement tests share: the fast engine's per-step times and
breakdown equal SimPy's, and the naive reference's when asked (it is slow)."""

from __future__ import annotations

import numpy as np
from naive_timeline import naive_timeline

from simulator.engines.des import run_des
from simulator.engines.fast import run_fast
from simulator.engines.outcome import EngineOutcome
from simulator.program.tile_program import MemoryParams, TileProgram


def assert_engines_agree(program: TileProgram, memory: MemoryParams, *,
                         naive: bool) -> EngineOutcome:
    """The fast engine's outcome, once every reference has agreed with it."""
    fast = run_fast(program, memory, keep_steps=True)
    references = [run_des(program, memory, keep_steps=True)]
    if naive:
        references.append(naive_timeline(program, memory))
    for reference in references:
        for name, times in reference.steps.as_dict().items():
            np.testing.assert_array_equal(getattr(fast.steps, name), times, err_msg=name)
        assert fast.breakdown == reference.breakdown
    return fast
