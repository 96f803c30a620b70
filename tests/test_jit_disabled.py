"""The compiled kernels stay correct as plain Python: a handful of the fast-engine and
lowering tests rerun in a subprocess with NUMBA_DISABLE_JIT=1, as stumpy's coverage leg
does (STYLE.md), so the kernels can be stepped through in a debugger and measured by
coverage tools. Chosen: the hand-checked timelines, the error paths, the two cheapest
Hypothesis suites of the engine (about 400 programs), and lowering cases covering every
dataflow, spilling, convs and fused epilogues; about 5 s in all."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from timed_cli import HANG_S

TESTS = Path(__file__).parent

SELECTED = {
    "test_fast_engine.py": ["worked_example", "store_beats_load", "slot_wait",
                            "stores_piling_up", "invalid_programs_are_rejected",
                            "invalid_memory", "deadlocked", "identical_to_naive_reference",
                            "keep_steps_does_not_change"],
    "test_lowering.py": ["mnk_totals_and_stores", "kmn_spills", "conv_a_traffic",
                         "tiled_compute_sums_to_scalesim", "fused_epilogue"],
}

# Checks that the kernels really are plain Python functions, then runs pytest in this
# process (-n 0: no workers), the one checked.
_RUN = """
import sys
import pytest
from simulator.engines import fast
from simulator.lowering import nest_steps
from simulator.model import timing
kernels = (fast._replay, fast._grow_fifo, nest_steps.fill_steps, nest_steps.shape_tables,
           timing.service_cycles)
compiled = [k.__name__ for k in kernels if hasattr(k, "py_func")]
if compiled:
    sys.exit(f"still compiled with NUMBA_DISABLE_JIT=1: {compiled}")
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_selected_tests_pass_with_jit_disabled() -> None:
    names = [name for group in SELECTED.values() for name in group]
    args = [str(TESTS / file) for file in SELECTED] + [
        "-q", "-p", "no:cacheprovider", "-n", "0", "-k", " or ".join(names)]
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    done = subprocess.run([sys.executable, "-c", _RUN, *args], env=env, cwd=TESTS.parent,
                          capture_output=True, text=True, timeout=HANG_S)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    passed = re.search(r"(\d+) passed", report)
    # Every selected name matches at least one test (parametrized ones match several).
    assert passed and int(passed.group(1)) >= len(names), report
