"""The validation section: the checks every result is held to, operator by
operator, and what accsim's own test suite validates."""

from __future__ import annotations

from collections.abc import Callable

from simulator.present.results import TotalsRecord
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              finding, link, listing, pointer, run_label,
                                              section, table)


# Checks each result is held to, from its operator records: (name, what it checks,
# the test that holds the rule in accsim's suite, failing operator predicate).
RESULT_CHECKS: tuple[tuple[str, str, Callable[[TotalsRecord], bool]], ...] = (
    ("roofline bound", "simulated cycles >= roofline bound (compute or compulsory "
     "bytes) on every operator",
     lambda t: t.cycles + 1e-9 >= t.roofline_bound_cycles),
    ("cycle identity", "busy + fill + input stall + output stall + drain (+ collective "
     "link time) = total on every operator",
     lambda t: t.busy_cycles + t.fill_cycles + t.input_stall_cycles
     + t.output_stall_cycles + t.drain_cycles + t.overhead_cycles
     + t.collective_cycles == t.cycles),
)
# What accsim's own test suite validates, not rerun for a packet.
SUITE_VALIDATIONS = (
    ("SCALE-Sim v3 exactness", "compute cycles in `accsim run --validate scalesim` "
     "(unbounded buffers, one tile per GEMM) equal SCALE-Sim's for every layer and "
     "dataflow of its shipped topologies", "tests/test_scalesim_goldens.py; does not "
     "cover these runs' own tilings"),
    ("Engine equivalence", "the Numba kernel gives cycle-identical results to the SimPy "
     "model of record on every shipped platform x workload",
     "tests/test_engine_equivalence_shipped.py"),
    ("Platform facts", "shipped real-chip platforms match their cited peak FLOP/s and "
     "bandwidth within 1%", "tests/test_shipped_inputs.py"),
)


def validation(ctx: Context) -> dict:
    rows, failed = [], []
    for name, what, holds in RESULT_CHECKS:
        for record in ctx.records:
            bad = [i for i, op in enumerate(record.result.operators)
                   if not holds(op.totals)]
            ops = len(record.result.operators)
            status = f"pass ({ops} of {ops} operators)" if not bad else \
                f"FAIL ({len(bad)} of {ops} operators)"
            href = pointer(record, "operators", bad[0]) if bad else pointer(record,
                                                                            "operators")
            rows.append([name, what, run_label(record), status, link("result", href)])
            if bad:
                failed.append(f"{name} on {run_label(record)}")
    for name, what, where in SUITE_VALIDATIONS:
        rows.append([name, what, "accsim's test suite", "not rerun for this packet",
                     where])
    findings = [finding("validation failed", f"validation failed: {text}", "#table-"
                        "validation") for text in failed]
    if not ctx.records:
        verdict, reason = NOT_EVALUATED, "no run in this packet"
    elif failed:
        verdict, reason = FAIL, listing(failed)
    else:
        verdict = PASS
        reason = (f"roofline bound and cycle identity hold on every operator of "
                  f"{len(ctx.records)} runs")
    return section("validation", verdict, reason, findings=findings, tables=[table(
        "validation", "What the figures are validated against", [
            ("check", "text"), ("what", "text"), ("applies to", "text"),
            ("status", "text"), ("evidence", "link")], rows)])
