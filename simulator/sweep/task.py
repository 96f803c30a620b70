"""The one task a sweep runs for each point x workload, and the metrics it yields.

`evaluate_point` is pure (inputs in, a dict of metrics out, nothing written), so the
same function runs in the coordinating process, a local process pool or a Dask worker;
only the coordinator writes the store.
"""

from __future__ import annotations

import simulator
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.mapping.plan import Mapping, describe_mapping
from simulator.search.fusion import fusion_mode
from simulator.metrics.totals import dominant_bottleneck
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload
from simulator.system.plan_run import check_fit, run_plan
from simulator.system.parallelism import SystemPlan

# Stored metrics: name -> (SQLite column type, the better direction, what it holds).
METRICS: dict[str, tuple[str, str, str]] = {
    "cycles": ("INTEGER", "min", "workload cycles"),
    "time_s": ("REAL", "min", "workload latency, seconds"),
    "mfu": ("REAL", "max", "model FLOPs / (time x peak FLOP/s)"),
    "memory_stall_fraction": ("REAL", "min", "memory-stall cycles / total"),
    "energy_j": ("REAL", "min", "energy, joules"),
    "avg_power_w": ("REAL", "min", "energy / time, watts"),
    "tops_per_w": ("REAL", "max", "model tera-operations per joule"),
    "area_mm2": ("REAL", "min", "platform area (its area table), mm^2; NULL without one"),
}
# Text columns filled beside the metrics.
LABELS = ("bottleneck", "engine")


def mapping_mode(mapping: Mapping) -> str:
    """How points are mapped, in words: part of every key, so a store never mixes
    mapping modes (and a change of what `Mapping()` means changes the words); a fusion
    planner's mode other than operator at a time (DESIGN.md section 15) is part of it,
    so the keys of unfused points are those they had before the planner."""
    mode = fusion_mode(mapping)
    return describe_mapping(mapping) + ("" if mode == "none" else f"; fusion {mode}")


def evaluate_point(platform: Platform, workload: Workload, mapping: Mapping,
                   system=None, ignore_capacity: bool = False) -> dict:
    """Simulate one workload on one platform with a mapping (`Mapping()`, the default
    mapping, unless the sweep names a heuristic for every operator): the metrics
    and labels as a dict with status "ok", or status "failed" and the reason when the
    workload cannot run there (a buffer too small for any tiling, say). Each outcome
    names the MODEL_VERSION that computed it, so a coordinator can refuse results
    from a worker running other timing semantics than its keys promise. `system` (a
    simulator.system.parallelism.SystemPlan of more than one chip): the workload sharded over
    that many chips, its time end to end and its energy and MFU those of the system.
    A point whose chip cannot hold the workload (simulator.system.capacity) fails with the
    refusal, before it is simulated, unless `ignore_capacity` (--ignore-capacity, a
    what-if that the job's key records) lets it run."""
    inputs = Inputs(platform, workload, mapping)
    try:
        if system is None or system.single_chip:
            check_fit(inputs, SystemPlan(), ignore=ignore_capacity)
            result = simulate(inputs)
            figures = None
        else:
            run = run_plan(inputs, system, ignore_capacity=ignore_capacity)
            result, figures = run.result, run.figures()
    except AccsimError as exc:
        return {"status": "failed", "error": exc.message(),
                "model_version": simulator.MODEL_VERSION}
    total = result.total
    derived = total.derived(platform)
    time_s, energy_j, flops = derived["time_s"], derived["energy_j"], total.model_flops
    mfu = derived["mfu"]
    if figures is not None:  # the system's time: less what the plan's overlap hides
        time_s, energy_j, flops, mfu = (figures["time_s"], figures["energy_j"],
                                        figures["flops"], figures["mfu"])
    return {
        "status": "ok",
        "error": None,
        "cycles": total.cycles,
        "time_s": time_s,
        "mfu": mfu,
        "memory_stall_fraction": derived["memory_stall_fraction"],
        "energy_j": energy_j,
        "avg_power_w": energy_j / time_s if time_s else 0.0,
        "tops_per_w": flops / energy_j / 1e12 if energy_j else None,
        "area_mm2": platform.area_mm2,
        "bottleneck": dominant_bottleneck(result.operators),
        "engine": result.engine,
        "model_version": simulator.MODEL_VERSION,
    }
