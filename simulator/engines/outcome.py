"""What an engine returns for one tile program: per-step times and the cycle breakdown.

Both engines fill these same types, so equivalence tests compare them field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class StepTimes:
    """Integer cycles from the operator's cycle 0 (after its dispatch overhead), one
    int64 array per event, per step.

    A 0-byte transfer never touches the server: its start, service end and
    usable/complete times all equal its request.
    """

    load_request: np.ndarray
    load_start: np.ndarray       # off-chip service start
    load_usable: np.ndarray      # service end + latency + DMA setup
    compute_start: np.ndarray
    compute_end: np.ndarray
    vector_end: np.ndarray       # ve[i] = max(compute_end[i], ve[i-1]) + vector_cycles[i]
    store_request: np.ndarray    # = vector_end, always
    store_start: np.ndarray
    store_served: np.ndarray     # service end: frees the output slot
    store_complete: np.ndarray   # service end + latency + DMA setup

    def as_dict(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Breakdown:
    """Where one run of an operator's cycles went (DESIGN.md section 3, accounting).

    overhead + busy + fill + input_stall + output_stall + drain + collective
    + invocation == total,
    where drain = vector_tail + store_tail and output_stall_vector is the part of
    output_stall whose blocking store waited on the vector unit.
    """

    total_cycles: int
    busy_cycles: int
    fill_cycles: int
    input_stall_cycles: int
    output_stall_cycles: int
    output_stall_vector_cycles: int
    drain_cycles: int
    vector_tail_cycles: int
    store_tail_cycles: int
    offchip_busy_cycles: int     # sum of service cycles of all transfers
    vector_busy_cycles: int      # sum of vector_cycles (fused epilogues)
    overhead_cycles: int = 0     # the program's dispatch overhead, before its cycle 0
    collective_cycles: int = 0   # a collective's time on the links (no tile program)
    # Vector-unit cycles copying output tiles out of the accumulators (output_path:
    # vector); they occupy the vector unit with the epilogues, so what they delay shows
    # in vector_tail and output_stall_vector. Written only when non-zero.
    evacuation_cycles: int = 0
    # A workload call's launch and host transfers (runtime.invocation_overhead_us,
    # host_link): a term of the total, written only when non-zero.
    invocation_cycles: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)
                if f.name not in OPTIONAL_TERMS or getattr(self, f.name)}


# Breakdown fields written only when non-zero, so results without them are unchanged.
OPTIONAL_TERMS = ("evacuation_cycles", "invocation_cycles")


@dataclass(frozen=True)
class EngineOutcome:
    """A breakdown, and the per-step times when they were asked for."""

    breakdown: Breakdown
    steps: StepTimes | None
