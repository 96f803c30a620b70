"""What every section is built from and built of: the Context (the study and its
decoded results), the verdict words, and the plain-dict blocks packet.json holds as they
are (tables, links into result files, findings, a section).

Every claim links to its evidence: `results/FILE.json#/JSON/POINTER` (RFC 6901) for a
record of a result file, `#op-...` for an operator's row in the mapping sheet.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from simulator.review.providers import NotEvaluated
from simulator.review.runs import RunRecord
from simulator.review.serving_runs import ServingRecord
from simulator.review.study import WORKLOAD_METRICS, ModelUnderReview, ResolvedStudy
from simulator.review.sweep import SweepRecord
from simulator.review.variants import VariantRecord

PASS, FAIL, NOT_EVALUATED = "pass", "fail", "not evaluated"
RUN_COLUMNS = [("platform", "text"), ("workload", "text"), ("mapping", "text")]
# Every section's id and heading, in the packet's order.
TITLES = {
    "scope-sla": "Scope and SLA",
    "environment": "Environment manifest",
    "utilisation": "MFU and memory stalls by layer type",
    "mapping-sheet": "Mapping sheet",
    "serving": "Latency-throughput curves",
    "efficiency": "Performance per watt and per mm^2",
    "fit": "Workload fit matrix",
    "sweep": "Design-space sweep",
    "deployment": "Deployment search",
    "assumptions": "Assumptions and sensitivity",
    "precision": "Precision changes",
    "precision-whatif": "Precision what-ifs, simulated",
    "risks": "Risks and owners",
    "rollback": "Rollback trigger",
    "validation": "Validation status",
}


@dataclass(frozen=True)
class Context:
    """What every section is built from."""

    study: ResolvedStudy
    records: list[RunRecord]
    models: list[tuple[ModelUnderReview, object]]  # (model, study.Loaded)
    serving: list[ServingRecord] | NotEvaluated
    sweep: SweepRecord | NotEvaluated
    variants: tuple[VariantRecord, ...] = ()  # precision variants beside baselines
    # review.assumption_study.AssumptionsRecord where the study asks for it
    assumptions: object = NotEvaluated("the study asks for no sensitivity study "
                                       "(assumptions:)")
    deployment: object = NotEvaluated("the study asks for no deployment search "
                                      "(scope.deployment_search)")  # DeploymentRecord


# --- building blocks (plain dicts: packet.json holds them as they are) ---

def table(table_id: str, caption: str, columns: list[tuple[str, str]],
          rows: list[list]) -> dict:
    """A table: columns (name, format) and rows of raw cells (number, text, None, or a
    link {"text", "href"})."""
    return {"id": table_id, "caption": caption,
            "columns": [{"name": name, "format": fmt} for name, fmt in columns],
            "rows": rows}


def link(text: str, href: str) -> dict:
    return {"text": text, "href": href}


def pointer(record: RunRecord, *parts) -> str:
    """A link into a result file: its path and a JSON Pointer fragment."""
    escaped = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return f"{record.file}#" + quote("/" + "/".join(escaped), safe="/~")


def operator_anchor(record: RunRecord, index: int) -> str:
    return f"op-{record.spec.name}-{index}"


def finding(kind: str, text: str, href: str | None) -> dict:
    return {"kind": kind, "text": text, "href": href}


def section(section_id: str, verdict: str, reason: str, *, text: list[str] = (),
            tables: list[dict] = (), figures_: list[dict] = (),
            findings: list[dict] = ()) -> dict:
    return {"id": section_id, "title": TITLES[section_id], "verdict": verdict,
            "reason": reason, "text": list(text), "tables": list(tables),
            "figures": list(figures_), "findings": list(findings)}


def listing(items: list[str], limit: int = 3) -> str:
    """The first few items and how many more (the full list is in the tables)."""
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def run_cells(record: RunRecord) -> list[str]:
    spec = record.spec
    return [spec.platform.label, spec.workload.label, spec.mapping.label]


def run_label(record: RunRecord) -> str:
    return " / ".join(run_cells(record))


def workload_metric(record: RunRecord, metric: str) -> float:
    return WORKLOAD_METRICS[metric][1](record.result.workload)
