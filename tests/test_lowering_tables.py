"""lower_compute with the search's TileTables (tables built once per tile sizes) lowers
exactly as without them, and tables kept for one operator never serve another."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from simulator.inputs.named_inputs import load_inputs
from simulator.lowering import lower_compute
from simulator.lowering.tile_table import TileTables
from simulator.mapping.plan import Tiling
from simulator.program.tile_program import TileProgram

SCALESIM = "tests/data/scalesim"


def _same(a, b) -> None:
    assert a.counters == b.counters
    for field in fields(TileProgram):
        x, y = getattr(a.program, field.name), getattr(b.program, field.name)
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, field.name


def test_tables_reused_across_tilings_and_never_across_operators():
    inputs = load_inputs(f"{SCALESIM}/scale.cfg", f"{SCALESIM}/alexnet.csv", None)
    ops = [op for op in inputs.workload.operators if op.kind == "conv2d"][:2]
    platform = inputs.platform
    tables = TileTables(ops[0], platform)
    for op in ops:   # the second operator is not served by the first one's tables
        for order in ("mnk", "knm", "nkm"):
            for tn in (8, 32):
                tiling = Tiling(16, tn, 32, order, "ws", 2, None, "search")
                _same(lower_compute(op, tiling, platform, tables=tables),
                      lower_compute(op, tiling, platform))
    assert not tables.serves(ops[1], platform)
