"""What an engine returns for one tile program: per-step times and the cycle breakdown.

Both engines fill these same types, so equivalence tests compare them field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

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


# Metadata of a Breakdown term: a part of total_cycles (the accounting identity), and
# written only where non-zero (terms later sections added, so results without them are
# unchanged).
PART = {"part": True}
PART_WHEN_NONZERO = {"part": True, "optional": True}
WHEN_NONZERO = {"optional": True}


@dataclass(frozen=True)
class Breakdown:
    """Where one run of an operator's cycles went (DESIGN.md section 3, accounting).

    The one declaration of the cycle terms: metrics.totals.Totals scales and sums these
    fields and present.results.TotalsRecord (the written record and its JSON schema)
    lists them, both generated from here.

    overhead + busy + fill + input_stall + output_stall + drain + collective
    + invocation == total (the fields marked PART),
    where drain = vector_tail + store_tail and output_stall_vector is the part of
    output_stall whose blocking store waited on the vector unit.
    """

    total_cycles: int
    busy_cycles: int = field(metadata=PART)
    fill_cycles: int = field(metadata=PART)
    input_stall_cycles: int = field(metadata=PART)
    output_stall_cycles: int = field(metadata=PART)
    output_stall_vector_cycles: int
    drain_cycles: int = field(metadata=PART)
    vector_tail_cycles: int
    store_tail_cycles: int
    offchip_busy_cycles: int     # sum of service cycles of all transfers
    vector_busy_cycles: int      # sum of vector_cycles (fused epilogues)
    # the program's dispatch overhead, before its cycle 0
    overhead_cycles: int = field(default=0, metadata=PART)
    # a collective's time on the links (no tile program)
    collective_cycles: int = field(default=0, metadata=PART)
    # Vector-unit cycles copying output tiles out of the accumulators (output_path:
    # vector); they occupy the vector unit with the epilogues, so what they delay shows
    # in vector_tail and output_stall_vector.
    evacuation_cycles: int = field(default=0, metadata=WHEN_NONZERO)
    # A workload call's launch and host transfers (runtime.invocation_overhead_us,
    # host_link).
    invocation_cycles: int = field(default=0, metadata=PART_WHEN_NONZERO)

    def as_dict(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)
                if f.name not in OPTIONAL_TERMS or getattr(self, f.name)}


# The terms that add up to total_cycles, and those written only where non-zero.
STALL_PARTS = tuple(f.name for f in fields(Breakdown) if f.metadata.get("part"))
OPTIONAL_TERMS = tuple(f.name for f in fields(Breakdown) if f.metadata.get("optional"))


@dataclass(frozen=True)
class EngineOutcome:
    """A breakdown, and the per-step times when they were asked for."""

    breakdown: Breakdown
    steps: StepTimes | None
