"""Timelines in the Chrome / Perfetto trace format (open in ui.perfetto.dev or
chrome://tracing): one track per hardware block, one slice per tile transfer or
computation, operators laid end to end as the timing model runs them.

The engines keep per-step times only when asked, so each operator's program is replayed
once more here with keep_steps; a repeated operator shows its first run and spans the
time of all its runs. A streamed program (simulator.program.streamed) is gathered whole here: a
run with a trace holds every step (its memory budget counts them).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from simulator.engines.runner import engine_runner
from simulator.output.files import write_file
from simulator.program.tile_program import TileProgram, memory_params
from simulator.simulate import RunResult

TRACKS = {"operators": 0, "off-chip memory": 1, "array / vector unit": 2,
          "vector epilogue": 3, "ICI (chip-to-chip links)": 4}


def _slices(name: str, track: str, steps: np.ndarray, starts: np.ndarray,
            ends: np.ndarray, offset: int, us_per_cycle: float, operator: str,
            nbytes: np.ndarray | None = None) -> list[dict]:
    """One complete ("X") event per listed step with a non-empty span."""
    events = []
    for i in steps:
        start, end = int(starts[i]), int(ends[i])
        if end <= start:
            continue
        args = {"operator": operator, "step": int(i)}
        if nbytes is not None:
            args["bytes"] = int(nbytes[i])
        events.append({"name": name, "ph": "X", "pid": 0, "tid": TRACKS[track],
                       "ts": (offset + start) * us_per_cycle,
                       "dur": (end - start) * us_per_cycle, "args": args})
    return events


def trace_events(result: RunResult) -> list[dict]:
    """Trace events for every operator of a result, in microseconds."""
    platform = result.platform
    us_per_cycle = 1e-3 / platform.clock_ghz
    replay = engine_runner(result.engine)
    memory = memory_params(platform)
    events = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid,
               "args": {"name": track}} for track, tid in TRACKS.items()]
    offset = 0
    for op in result.operators:
        lowered = op.lowered
        program = lowered.program
        events.append({"name": lowered.name, "ph": "X", "pid": 0,
                       "tid": TRACKS["operators"], "ts": offset * us_per_cycle,
                       "dur": op.totals.cycles * us_per_cycle,
                       "args": {"layer_type": lowered.layer_type, "runs": lowered.runs,
                                "bottleneck": op.verdict.bottleneck}})
        if lowered.collective is not None:  # no tile program: one slice on the links
            cost = lowered.collective
            events.append({"name": cost.kind, "ph": "X", "pid": 0,
                           "tid": TRACKS["ICI (chip-to-chip links)"],
                           "ts": offset * us_per_cycle,
                           "dur": op.totals.cycles * us_per_cycle,
                           "args": {"operator": lowered.name, "chips": cost.chips,
                                    "algorithm": cost.algorithm, "hops": cost.hops,
                                    "group": cost.group,
                                    "bytes_per_link": cost.bytes_per_link,
                                    "runs": lowered.runs}})
            offset += op.totals.cycles
            continue
        if not isinstance(program, TileProgram):  # a stream: its arrays are needed whole
            program = program.materialize()
        times = replay(program, memory, keep_steps=True).steps
        every = np.arange(program.steps)
        pipeline = offset + program.overhead_cycles  # step times count from here
        events += _slices("load", "off-chip memory", np.flatnonzero(program.load_bytes),
                          times.load_start, times.load_usable - memory.access_cycles,
                          pipeline, us_per_cycle, lowered.name, program.load_bytes)
        events += _slices("store", "off-chip memory", np.flatnonzero(program.store_bytes),
                          times.store_start, times.store_served, pipeline, us_per_cycle,
                          lowered.name, program.store_bytes)
        events += _slices(lowered.kind, "array / vector unit", every, times.compute_start,
                          times.compute_end, pipeline, us_per_cycle, lowered.name)
        events += _slices(f"{lowered.fused} (fused)", "vector epilogue",
                          np.flatnonzero(program.vector_cycles),
                          times.vector_end - program.vector_cycles, times.vector_end,
                          pipeline, us_per_cycle, lowered.name)
        offset += op.totals.cycles
    return events


def write_trace(result: RunResult, path: str | Path) -> None:
    """Write the timeline as a Chrome/Perfetto JSON trace."""
    write_file(path, json.dumps({"traceEvents": trace_events(result),
                                 "displayTimeUnit": "ns"}))
