"""The precision what-ifs section (DESIGN.md section 17): each precision variant of the
study simulated beside its baseline run (time, energy, off-chip bytes), the formats
its plan chose per operator with every fallback and its reason, the emulated error
(relative error, SQNR) against the guardrail, and the quality figures the team
declared from its own evaluation.

A variant that wins (less time, energy or off-chip traffic than its baseline) needs
quality evidence: a declared quality figure, or an emulated error judged by a
guardrail on every operator it changed. An emulated error no guardrail judges is shown
but is a number without a bar, so a win resting on it alone is a failed check.
"""

from __future__ import annotations

from simulator.present.results import PrecisionOperatorRecord, RunResultFile
from simulator.review.sections.blocks import (FAIL, NOT_EVALUATED, PASS, Context,
                                              finding, link, listing, pointer, section,
                                              table)
from simulator.review.variants import VariantRecord

METRICS = (("time", "time_s", 1e3, "ms"), ("energy", "energy_j", 1e3, "mJ"),
           ("off-chip", "offchip_bytes", 1e-6, "MB"))


def _figure(result: RunResultFile, key: str) -> float:
    totals = result.workload
    if key == "offchip_bytes":
        return float(totals.offchip_read_bytes + totals.offchip_write_bytes)
    return float(getattr(totals, key))


def _operators(record) -> dict[str, dict]:
    """The canonical operators a run simulated, by name."""
    workload = record.result.manifest.inputs["workload"].canonical
    return {op["name"]: op for op in workload["operators"]}


def _changed(v: VariantRecord) -> list[PrecisionOperatorRecord]:
    """The plan's records of the operators it changed (formats or sparsity) from the
    baseline run's."""
    before, after = _operators(v.baseline), _operators(v.run)
    return [r for r in v.run.result.precision.operators
            if before.get(r.name) != after.get(r.name)]


def evidence(v: VariantRecord) -> tuple[bool, str]:
    """Whether the variant has quality evidence, and what it is."""
    if v.variant.quality:
        return True, f"{len(v.variant.quality)} declared quality figure(s)"
    changed = _changed(v)
    if not changed:
        return True, "no operator changed format"
    unjudged = [r.name for r in changed if r.guardrail is None or r.rel_error is None]
    if unjudged:
        return False, (f"emulated error not judged by a guardrail on "
                       f"{listing(unjudged)} and no quality figure declared")
    return True, f"emulated error within the guardrail on {len(changed)} operator(s)"


def _gain_cells(v: VariantRecord) -> tuple[list, bool]:
    cells, win = [], False
    for _, key, scale, _ in METRICS:
        base, run = _figure(v.baseline.result, key), _figure(v.run.result, key)
        cells += [base * scale, run * scale, base / run if run else None]
        win = win or run < base
    return cells, win


def _quality(records: list[PrecisionOperatorRecord]) -> tuple[float | None, float | None]:
    errors = [r.rel_error for r in records if r.rel_error is not None]
    sqnrs = [r.sqnr_db for r in records if r.sqnr_db is not None]
    return (max(errors) if errors else None), (min(sqnrs) if sqnrs else None)


def _guardrail(bound: dict | None) -> str:
    if not bound:
        return "none"
    parts = [f"rel error <= {bound['max_rel_error']:g}"] if "max_rel_error" in bound \
        else []
    parts += [f"SQNR >= {bound['min_sqnr_db']:g} dB"] if "min_sqnr_db" in bound else []
    return ", ".join(parts)


def precision_whatif(ctx: Context) -> dict:
    variants = list(ctx.variants)
    if not variants:
        return section("precision-whatif", NOT_EVALUATED,
                       "the study simulates no precision variant (precision_variants)")
    gains, operators, figures, findings, wins = [], [], [], [], 0
    for v in variants:
        run, block = v.run, v.run.result.precision
        cells, win = _gain_cells(v)
        ok, why = evidence(v)
        fallbacks = sum(len(r.fallbacks) for r in block.operators)
        worst, lowest = _quality(block.operators)
        subject = f"{v.variant.name} on {run.spec.platform.label} / " \
            f"{v.baseline.spec.workload.label} / {run.spec.mapping.label}"
        status = "no gain" if not win else "win, evidence" if ok else "WIN WITHOUT EVIDENCE"
        wins += win
        gains.append([v.variant.name, run.spec.platform.label,
                      v.baseline.spec.workload.label, run.spec.mapping.label, *cells,
                      fallbacks, worst, lowest, why, status,
                      link("result", pointer(run, "precision"))])
        if win and not ok:
            findings.append(finding("precision without quality evidence",
                                    f"precision win without quality evidence: {subject} "
                                    f"({why})", pointer(run, "precision")))
        for index, record in enumerate(block.operators):
            formats = ", ".join(f"{role} {dtype}" for role, dtype in
                                record.formats.items())
            fell = "; ".join(f"{f.role} {f.format}: {f.reason}" for f in record.fallbacks)
            operators.append([v.variant.name, run.spec.platform.label, record.name,
                              formats, record.sparsity, fell or "-", record.rel_error,
                              record.sqnr_db, _guardrail(record.guardrail),
                              record.tensors or "-", link(
                                  "record", pointer(run, "precision", "operators", index))])
    for variant in ctx.study.study.precision_variants:
        figures += [[variant.name, q.metric, q.value, q.unit or "-", q.source]
                    for q in variant.quality]
    if findings:
        verdict = FAIL
        reason = f"{len(findings)} of {wins} precision wins have no quality evidence"
    else:
        verdict = PASS
        reason = f"{len(gains)} variant runs simulated against their baselines; " \
            f"{wins} win(s), each with quality evidence"
    gain_columns = [("variant", "text"), ("platform", "text"), ("workload", "text"),
                    ("mapping", "text")]
    for name, _, _, unit in METRICS:
        gain_columns += [(f"{name} base {unit}", "f3"), (f"{name} variant {unit}", "f3"),
                         (f"{name} gain x", "f2")]
    gain_columns += [("fallbacks", "int"), ("worst rel error", "g4"),
                     ("lowest SQNR dB", "f1"), ("quality evidence", "text"),
                     ("check", "text"), ("evidence", "link")]
    text = ["Each variant's precision plan is applied to the baseline run's workload on "
            "its platform, as `accsim run --precision` applies it, and simulated; gain x "
            "is baseline / variant. Emulated errors are of the operator's GEMM in the "
            "chosen formats against fp32 on sample tensors (DESIGN.md section 17)."]
    return section("precision-whatif", verdict, reason, text=text, findings=findings,
                   tables=[
        table("precision-gain", "Precision variants against their baselines",
              gain_columns, gains),
        table("precision-operators", "Formats chosen per operator, fallbacks and "
              "emulated error", [("variant", "text"), ("platform", "text"),
                                 ("operator", "text"), ("formats", "text"),
                                 ("sparsity", "text"), ("fallbacks", "text"),
                                 ("rel error", "g4"), ("SQNR dB", "f1"),
                                 ("guardrail", "text"), ("tensors", "text"),
                                 ("evidence", "link")], operators),
        table("precision-quality", "Quality figures declared by the study (the team's "
              "own evaluation)", [("variant", "text"), ("metric", "text"),
                                   ("value", "g"), ("unit", "text"),
                                   ("source", "text")], figures)])
