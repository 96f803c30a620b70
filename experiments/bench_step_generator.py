"""Lowering's step generator against the step-by-step LRU model it replaced: the
search's evaluation of the 600 candidate tilings with the lowest bounds of three
resnet50_b1 operators on tpu_v5e_like (sharing their per-tile tables in each pass, as
the search does), with GEMM programs built by the loop nest
(production: lowering.nest, nest_steps) and by the LRU model (the test reference
tests/lru_steps.py, swapped in for lowering._gemm_program, the one call that builds a
GEMM's program). The two
must give identical evaluations; the CPU seconds of each (process time: the machine's
other work does not count), the best of ROUNDS interleaved A B A B passes after one
untimed pass that compiles or loads every kernel, are printed per operator.

Run: `python experiments/bench_step_generator.py` (about 40 s warm).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import simulator.lowering as lowering  # noqa: E402
from lru_steps import reference_program  # noqa: E402
from simulator.inputs.named_inputs import load_inputs  # noqa: E402
from simulator.lowering.tile_table import TileTables  # noqa: E402
from simulator.program.tile_program import memory_params  # noqa: E402
from simulator.search.bounds import candidate_bounds  # noqa: E402
from simulator.search.operator import evaluate  # noqa: E402

OPERATORS = ("res3a_branch2b", "res5c_branch2a", "fc1000")
CANDIDATES = 600
ROUNDS = 5


class ReferenceStream:
    """Stands in for lowering's GemmStream (lowering._gemm_program): the whole program
    and counters by the LRU model (lowering calls materialize and counters only, for a
    program in memory)."""

    def __init__(self, args, platform, tables, orientation, *, depth, slots,
                 overhead_cycles):
        self._built = reference_program(args, platform, depth=depth, slots=slots,
                                        overhead_cycles=overhead_cycles)

    def counters(self):
        return self._built[1], self._built[2]

    def materialize(self):
        return self._built[0]


def main() -> None:
    inputs = load_inputs("tpu_v5e_like", "resnet50_b1", None)
    memory = memory_params(inputs.platform)
    production = lowering._gemm_program
    print(f"{'operator':16} {'same':5} {'LRU model s':>12} {'loop nest s':>12}")
    for name in OPERATORS:
        op = next(op for op in inputs.workload.operators if op.name == name)
        tilings, bounds, _ = candidate_bounds(op, inputs.platform)
        chosen = [tilings[i] for i in np.argsort(bounds, kind="stable")[:CANDIDATES]]
        seconds: dict[str, list[float]] = {"reference": [], "nest": []}
        outcomes = {}
        for label, stream in [("reference", ReferenceStream), ("nest", production)] * (
                ROUNDS + 1):
            lowering._gemm_program = stream
            try:
                began = time.process_time()
                tables = TileTables(op, inputs.platform)
                outcomes[label] = repr([evaluate(op, tiling, inputs.platform, memory,
                                                 None, tables=tables)
                                        for tiling in chosen])
                seconds[label].append(time.process_time() - began)
            finally:
                lowering._gemm_program = production
        same = outcomes["reference"] == outcomes["nest"]
        times = {label: f"{min(spent[1:]):.3f}"   # the first: warm-up
                 for label, spent in seconds.items()}
        print(f"{name:16} {str(same):5} {times['reference']:>12} {times['nest']:>12}",
              flush=True)


if __name__ == "__main__":
    main()
