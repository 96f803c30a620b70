"""The packet's sections (DESIGN.md section 12), each with a verdict: pass, fail, or not
evaluated and why, one module per section (or per kin of sections). Every number comes
from a result file (a run's, a serving result, the sweep's export), read through its
typed model (simulator.present.results, review.serving_runs, review.sweep), and every claim links
to it.

Sections are built from decoded result files only, so a cached result and a fresh one
give the same packet. Nothing here simulates.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.review.providers import NotEvaluated
from simulator.review.sections.assumptions import assumptions
from simulator.review.sections.blocks import TITLES, Context
from simulator.review.sections.declared import precision, risks, rollback
from simulator.review.sections.deployment import deployment
from simulator.review.sections.efficiency import efficiency
from simulator.review.sections.fit import workload_fit
from simulator.review.sections.mapping_sheet import mapping_sheet
from simulator.review.sections.precision_whatif import precision_whatif
from simulator.review.sections.scope import environment, scope_and_sla
from simulator.review.sections.search_efficiency import search_efficiency
from simulator.review.sections.search_fit import search_fit
from simulator.review.sections.search_serving import search_serving
from simulator.review.sections.serving_curves import serving
from simulator.review.sections.sweep_front import sweep
from simulator.review.sections.utilisation import utilisation
from simulator.review.sections.validation import validation

__all__ = ["TITLES", "Context", "build_sections", "ordered_findings"]
# Findings on the first screen, in this order: a mismatch between the expected and the
# simulated bottleneck class first (DESIGN.md section 12, issue 14 item 4).
FINDING_ORDER = ("bottleneck mismatch", "SLA missed", "rollback fired",
                 "precision without guardrail", "precision without quality evidence",
                 "target missed", "no fit", "unbounded", "no sweep front", "binding constraint",
                 "verdict can flip", "validation failed")
Builder = Callable[[Context], dict]


def from_search(own: Builder, searched: Builder) -> Builder:
    """A section built from the study's deployment search where it names one
    (scope.deployment_search), else from its own runs."""
    def build(ctx: Context) -> dict:
        return own(ctx) if isinstance(ctx.deployment, NotEvaluated) else searched(ctx)
    return build


# Each section's builder by id; blocks.TITLES gives their order and headings.
BUILDERS: dict[str, Builder] = {
    "scope-sla": scope_and_sla, "environment": environment, "utilisation": utilisation,
    "mapping-sheet": mapping_sheet, "serving": from_search(serving, search_serving),
    "efficiency": from_search(efficiency, search_efficiency),
    "fit": from_search(workload_fit, search_fit), "sweep": sweep, "deployment": deployment,
    "assumptions": assumptions, "precision": precision,
    "precision-whatif": precision_whatif, "risks": risks,
    "rollback": rollback, "validation": validation,
}


def build_sections(ctx: Context) -> list[dict]:
    """Every section, in order."""
    return [BUILDERS[section_id](ctx) for section_id in TITLES]


def ordered_findings(sections: list[dict]) -> list[dict]:
    """All findings, bottleneck mismatches first, then by FINDING_ORDER."""
    found = [dict(f, section=s["id"]) for s in sections for f in s["findings"]]
    return sorted(found, key=lambda f: FINDING_ORDER.index(f["kind"]))
