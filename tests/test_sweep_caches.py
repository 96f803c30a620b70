"""The per-process caches and shortcuts that make a default-mapping sweep fast change no
result (issue 13, speed): sample points of experiments/bench_sweep.py's grid (TPU v1
variants: array rows x cols x DRAM bandwidth) give, operator by operator, exactly the
tilings and figures recorded in tests/data/sweep_points_golden.json, which were
computed before those caches existed. Regenerate the file only for a deliberate model
change: `PYTHONPATH=$PWD python tests/test_sweep_caches.py`."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from simulator.inputs.platform import Platform
from simulator.inputs.loader import load_model, locate
from simulator.mapping.heuristics import _min_offchip, min_offchip
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.sweep.task import evaluate_point
from simulator.inputs.workload import Workload

GOLDEN = Path(__file__).parent / "data" / "sweep_points_golden.json"
# (rows, cols, bandwidth GB/s): three points sharing an array (so the second and third
# reuse what the first cached), in a mixed order, and two other arrays.
POINTS = [(64, 96, 85), (256, 16, 34), (64, 96, 17), (32, 224, 170), (64, 96, 170)]


def point_inputs(rows: int, cols: int, gbps: int) -> Inputs:
    platform, _ = load_model(locate("tpu_v1", "platform"), Platform)
    platform = platform.model_copy(update={
        "systolic_array": platform.systolic_array.model_copy(
            update={"rows": rows, "cols": cols}),
        "offchip": platform.offchip.model_copy(update={"bandwidth_gbps": float(gbps)})})
    workload, _ = load_model(locate("resnet50_b1", "workload"), Workload)
    # The golden figures were recorded operator at a time (before the fusion planner).
    return Inputs(Platform.model_validate(platform.model_dump()), workload,
                  Mapping(fusion="none"))


def figures(rows: int, cols: int, gbps: int) -> dict:
    """A point's sweep metrics, and per operator its tiling and a digest of everything
    simulated about it (counters, engine breakdown, totals, bottleneck verdict). The
    metrics lose `model_version`: it counts changes of the default (fused) model, and
    these figures are operator at a time."""
    inputs = point_inputs(rows, cols, gbps)
    result = simulate(inputs)
    metrics = evaluate_point(inputs.platform, inputs.workload, inputs.mapping)
    metrics.pop("model_version")
    return {
        "metrics": metrics,
        "operators": [[op.lowered.name, repr(op.lowered.tiling), hashlib.sha256(
            repr((op.lowered.counters, op.run, op.totals, op.verdict)).encode()
        ).hexdigest()] for op in result.operators],
    }


def label(point: tuple[int, int, int]) -> str:
    return "rows {} cols {} bandwidth {}".format(*point)


def test_sample_points_are_exactly_as_before_the_caches():
    golden = json.loads(GOLDEN.read_text())
    for point in POINTS:
        assert json.loads(json.dumps(figures(*point))) == golden[label(point)], \
            label(point)


def test_min_offchip_is_shared_by_platforms_differing_only_off_chip():
    workload = point_inputs(48, 48, 17).workload
    conv = next(op for op in workload.operators if op.kind == "conv2d")
    slow, fast = point_inputs(48, 48, 17).platform, point_inputs(48, 48, 170).platform
    _min_offchip.cache_clear()  # a pure cache: clearing it changes no result
    first = min_offchip(conv, slow, 2, "ws")
    assert min_offchip(conv, fast, 2, "ws") == first
    assert (_min_offchip.cache_info().hits, _min_offchip.cache_info().misses) == (1, 1)
    # Another array is another answer's inputs: computed anew.
    min_offchip(conv, point_inputs(48, 64, 17).platform, 2, "ws")
    assert (_min_offchip.cache_info().hits, _min_offchip.cache_info().misses) == (1, 2)

if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({label(p): figures(*p) for p in POINTS}, indent=1,
                                 sort_keys=True) + "\n")
    sys.exit(0)
