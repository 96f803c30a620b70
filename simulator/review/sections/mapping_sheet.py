"""The mapping sheet: per operator of every run, the tiling it ran with, the
expected and simulated bottleneck class and the rule that decided it."""

from __future__ import annotations

from simulator.metrics.bottleneck import Verdict
from simulator.present.results import OperatorRecord
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, RUN_COLUMNS,
                                              Context, finding, link, operator_anchor,
                                              pointer, run_cells, run_label, section,
                                              table)


def _tiling(op: OperatorRecord) -> list:
    """The tiling cells: tile sizes (rows per tile on the vector unit), loop order,
    dataflow, depth."""
    tiling = op.tiling
    if tiling is None:  # a collective: links only, no tiling
        return ["-", "-", "-", "-"]
    if op.unit == "vector":
        return [f"{tiling.tm} rows", "-", "-", tiling.depth]
    return [f"{tiling.tm}x{tiling.tn}x{tiling.tk}", tiling.loop_order,
            tiling.dataflow, tiling.depth]


def mapping_sheet(ctx: Context) -> dict:
    expected = ctx.study.study.expected_bottlenecks
    mismatched, matched, findings = [], [], []
    compared = 0
    for record in ctx.records:
        groups: dict[tuple, list] = {}
        for index, op in enumerate(record.result.operators):
            want = expected.operators.get(op.name) or \
                expected.layer_types.get(op.layer_type)
            got = op.bottleneck.bottleneck_class
            verdict = Verdict(got, tuple(op.bottleneck.rules_tried))
            status = "-" if want is None else "match" if want == got else "MISMATCH"
            row = [{"text": op.name, "id": operator_anchor(record, index)}] + \
                run_cells(record) + [op.layer_type, *_tiling(op), op.fused or "-",
                                     want or "-", got, status, verdict.reason(),
                                     op.totals.cycles,
                                     link("result", pointer(record, "operators", index))]
            if want is not None:
                compared += 1
            (mismatched if status == "MISMATCH" else matched).append(row)
            if status == "MISMATCH":
                groups.setdefault((op.layer_type, want, got), []).append((index, op))
        for (layer_type, want, got), ops in groups.items():
            first = ops[0][0]
            names = ", ".join(op.name for _, op in ops[:4]) + \
                (f" and {len(ops) - 4} more" if len(ops) > 4 else "")
            findings.append(finding(
                "bottleneck mismatch", f"bottleneck mismatch on {run_label(record)}: "
                f"{layer_type} expected {want}, simulated {got} ({len(ops)} operators: "
                f"{names})", "#" + operator_anchor(record, first)))
    if not ctx.records:
        verdict, reason = NOT_EVALUATED, "no run in this packet"
    elif compared == 0:
        verdict, reason = NOT_EVALUATED, ("the study states no expected bottleneck class "
                                          "(expected_bottlenecks)")
    elif mismatched:
        verdict = FAIL
        reason = (f"{len(mismatched)} of {compared} operators with an expected class "
                  "simulate in another (listed first)")
    else:
        verdict, reason = PASS, f"{compared} of {compared} expected classes match the " \
            "simulation"
    text = ["Per operator of every run: the tiling it ran with (Tm x Tn x Tk, or rows "
            "per tile on the vector unit), loop order outermost first, dataflow, "
            "prefetch depth, the vector operators fused as its prologue (a norm) and "
            "epilogue, the expected and "
            "simulated bottleneck class, and the measured values of the rule that "
            "decided the class (DESIGN.md section 4). Mismatches come first. Buffer "
            "occupancy per operand is in `accsim run --sheet` for the same inputs."]
    return section("mapping-sheet", verdict, reason, text=text, findings=findings,
                   tables=[table("mapping-sheet", "Operator-to-kernel mapping sheet",
                                 [("operator", "anchor")] + RUN_COLUMNS + [
                                     ("layer_type", "text"), ("tiling", "text"),
                                     ("loop", "text"), ("dataflow", "text"),
                                     ("depth", "int"), ("fused", "text"),
                                     ("expected", "text"), ("simulated", "text"),
                                     ("check", "text"), ("evidence", "text"),
                                     ("cycles", "int"), ("result", "link")],
                                 mismatched + matched)])
