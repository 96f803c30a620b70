"""Per-call cost (DESIGN.md section 15): the launch and synchronisation of one call of
a workload (runtime.invocation_overhead_us) and, over an optional host link, its inputs
arriving and its outputs leaving unless the workload marks them resident.

Charged once per workload run and once per serving iteration, never per operator, so
it lives apart from the tile programs: a Totals of its own (metrics.totals.
invocation_totals) that the run adds to its operators' (the `invocation` term).
"""

from __future__ import annotations

import math

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.mapping.footprint import tensor_bytes
from simulator.model.timing import host_transfer_cycles
from simulator.inputs.workload import Workload, is_attention, is_collective


# One call's cycles: with the operators' (2**62 at most, simulator.limits) the run's
# total stays within int64.
MAX_CALL_CYCLES = 2**60


def call_io_bytes(workload: Workload, platform: Platform) -> tuple[int, int]:
    """(input, output) bytes of one call: the first operator's activations in and the
    last one's out (weights and KV caches stay on the device); (0, 0) when the workload
    is resident. A collective or attention at either end moves nothing over the link
    there (its operands are already on the device: a previous operator's or the KV
    cache), a simplification this model makes."""
    if workload.resident:
        return 0, 0
    first, last = workload.operators[0], workload.operators[-1]

    def on_device(op) -> bool:
        return is_collective(op) or is_attention(op)

    return (0 if on_device(first) else tensor_bytes(first, platform)[0],
            0 if on_device(last) else tensor_bytes(last, platform)[1])


def invocation_cycles(workload: Workload, platform: Platform) -> int:
    """Cycles of one call of the workload (call_cycles of its call_io_bytes; no bytes
    are counted without a host link)."""
    if platform.runtime.host_link is None:
        return call_cycles(platform, 0, 0)
    return call_cycles(platform, *call_io_bytes(workload, platform))


def call_cost_reads_bytes(platform: Platform) -> bool:
    """Whether a call's cycles depend on the bytes it moves (call_cycles): only over a
    host link; without one every call costs the launch overhead alone."""
    return platform.runtime.host_link is not None


def call_cycles(platform: Platform, in_bytes: int, out_bytes: int) -> int:
    """Cycles of one call moving these bytes: the launch overhead, then, over the host
    link, the inputs in and the outputs out (each its latency + bytes / bandwidth);
    0 by default (no overhead, no link)."""
    runtime = platform.runtime
    cycles_per_us = platform.cycles_per_us
    cycles = int(math.ceil(runtime.invocation_overhead_us * cycles_per_us))
    link = runtime.host_link
    if link is not None:
        bytes_per_cycle = link.bandwidth_gbps / platform.clock_ghz
        latency = int(math.ceil(link.latency_us * cycles_per_us))
        for nbytes in (in_bytes, out_bytes):
            if nbytes / bytes_per_cycle + latency >= MAX_CALL_CYCLES:  # int64 kernel
                cycles = MAX_CALL_CYCLES
                break
            cycles += host_transfer_cycles(nbytes, bytes_per_cycle, latency)
    if cycles >= MAX_CALL_CYCLES:
        field = "runtime.host_link" if link is not None else \
            "runtime.invocation_overhead_us"
        raise AccsimError(f"one call's launch and its {in_bytes + out_bytes:,} bytes over "
                          "the host link take 2**60 cycles or more, past what an int64 "
                          "cycle count keeps beside the operators'", field=field)
    return cycles
