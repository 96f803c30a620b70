"""Assembling the packet from a resolved study and its runs, and writing it: packet.json
(the data), packet.md and index.html (both rendered from that data by the jinja2
templates shipped in simulator/review/templates, through one cell formatter, so the
three carry the same numbers), and figures/*.svg.

index.html is one file: inline CSS, figures as inline SVG, and a Content-Security-Policy
that forbids every network fetch, so it opens anywhere and leaks nothing.
"""

from __future__ import annotations

import hashlib
import json
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined

import simulator
from simulator.inputs.anchors import rebase
from simulator.output.escape import markdown, markdown_line
from simulator.output.files import OutputFolder
from simulator.review.packet_format import PACKET_FORMAT, PACKET_VERSION
from simulator.review.providers import NotEvaluated
from simulator.review.sections import Context, build_sections, ordered_findings
from simulator.review.sections.blocks import FAIL, NOT_EVALUATED, PASS
from simulator.review.sections.checks import served

FIGURES_FOLDER = "figures"
# The first screen: one status line per (section, label, wording of its verdicts).
FIRST_SCREEN = (
    ("scope-sla", "SLA", {FAIL: "MISSED", PASS: "met"}),
    ("rollback", "Rollback trigger", {FAIL: "FIRED", PASS: "not fired"}),
    ("precision", "Precision changes", {FAIL: "FLAGGED: no quality guardrail",
                                        PASS: "each has a guardrail"}),
    ("precision-whatif", "Precision what-ifs", {
        FAIL: "FLAGGED: a win without quality evidence", PASS: "each win has evidence"}),
    ("mapping-sheet", "Expected bottlenecks", {FAIL: "MISMATCH", PASS: "all match"}),
)
# First-screen lines shown only where their section was evaluated (a study without
# precision variants keeps the first screen it had).
ONLY_WHEN_EVALUATED = frozenset({"precision-whatif"})
# How a column's cells are written, in every format of the packet.
NUMBER_FORMATS = {
    "int": lambda v: f"{v:,}",
    "pct1": lambda v: f"{100 * v:,.1f}",
    "f1": lambda v: f"{v:,.1f}",
    "f2": lambda v: f"{v:,.2f}",
    "f3": lambda v: f"{v:,.3f}",
    "g": lambda v: f"{v:g}",
    "g4": lambda v: f"{v:.4g}",
}


def cell_text(value, fmt: str) -> str:
    """The text of one table cell: numbers by their column's format, links and anchors
    by their text, None as a dash."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return value["text"]
    if fmt in NUMBER_FORMATS and isinstance(value, (int, float)):
        return NUMBER_FORMATS[fmt](value)
    return str(value)


def overall_verdict(sections: list[dict]) -> str:
    verdicts = {s["verdict"] for s in sections}
    return FAIL if FAIL in verdicts else PASS if PASS in verdicts else NOT_EVALUATED


def first_screen(sections: list[dict]) -> list[dict]:
    """The status lines shown before anything else."""
    by_id = {s["id"]: s for s in sections}
    lines = []
    for section_id, label, wording in FIRST_SCREEN:
        section = by_id[section_id]
        if section_id in ONLY_WHEN_EVALUATED and section["verdict"] == NOT_EVALUATED:
            continue
        lines.append({"label": label, "verdict": section["verdict"],
                      "status": wording.get(section["verdict"], NOT_EVALUATED),
                      "text": section["reason"], "href": f"#s-{section_id}"})
    return lines


def assemble(ctx: Context, *, options: dict) -> dict:
    """The whole packet as data: what packet.json holds (figures still as SVG text);
    `options`: the review options it was made under (review.pipeline.ReviewOptions)."""
    study = ctx.study
    sections = build_sections(ctx)
    counts = {v: sum(s["verdict"] == v for s in sections)
              for v in (PASS, FAIL, NOT_EVALUATED)}
    return {
        "packet": {"format": PACKET_FORMAT, "version": PACKET_VERSION},
        "title": study.study.title,
        "objective": study.study.objective,
        "owners": study.study.owners,
        "baseline": study.baseline,
        "accsim_version": simulator.__version__,
        "model_version": simulator.MODEL_VERSION,
        "study": {"path": study.source.path, "sha256": study.source.sha256,
                  "canonical": study.study.model_dump(mode="json")},
        "options": options,
        "verdict": overall_verdict(sections),
        "verdict_counts": counts,
        "first_screen": first_screen(sections),
        "findings": ordered_findings(sections),
        "sections": sections,
        "results": [{"kind": "run", "path": r.file, "sha256": r.sha256,
                     "platform": r.spec.platform.label, "workload": r.spec.workload.label,
                     "mapping": r.spec.mapping.label} for r in ctx.records]
        + [{"kind": "run", "path": v.run.file, "sha256": v.run.sha256,
            "platform": v.run.spec.platform.label, "workload": v.run.spec.workload.label,
            "mapping": v.run.spec.mapping.label} for v in ctx.variants]
        + [{"kind": "serving", "path": r.file, "sha256": r.sha256, "platform": r.platform,
            "workload": r.subject, "mapping": "default"} for r in served(ctx)]
        + _sweep_files(ctx) + _assumption_files(ctx) + _deployment_files(ctx),
        **_capacity_stamp(ctx),
    }


def _capacity_stamp(ctx: Context) -> dict:
    """`capacity_ignored`: the runs made with --ignore-capacity whose chip cannot hold
    them (written only where there are any, so other packets stay as they were)."""
    ignored = [r.file for r in ctx.records
               if r.result.capacity is not None and r.result.capacity.ignored]
    return {"capacity_ignored": ignored} if ignored else {}


def _sweep_files(ctx: Context) -> list[dict]:
    """The sweep's export, when the study has a sweep."""
    record = ctx.sweep
    if isinstance(record, NotEvaluated):
        return []
    spec = record.data.sweep
    return [{"kind": "sweep", "path": record.file, "sha256": record.sha256,
             "platform": f"{spec.platform} (sweep {spec.name})",
             "workload": ", ".join(record.data.workloads), "mapping": "default"}]


def _assumption_files(ctx: Context) -> list[dict]:
    """The assumptions section's file, when the study asks for one."""
    record = ctx.assumptions
    if isinstance(record, NotEvaluated):
        return []
    head = record.data["assumptions"]
    return [{"kind": "assumptions", "path": record.file, "sha256": record.sha256,
             "platform": ", ".join(p["platform"] for p in record.data["platforms"]),
             "workload": head["workload"], "mapping": head["mapping"]}]


def _deployment_files(ctx: Context) -> list[dict]:
    """The deployment search's export, when the study has one."""
    record = ctx.deployment
    if isinstance(record, NotEvaluated):
        return []
    return [{"kind": "deployment", "path": record.file, "sha256": record.sha256,
             "platform": ", ".join(record.data["best"]),
             "workload": record.data["spec"]["model"], "mapping": "default"}]


def _environment(autoescape: bool) -> Environment:
    env = Environment(loader=PackageLoader("simulator.review", "templates"),
                      autoescape=autoescape, undefined=StrictUndefined,
                      keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["cell"] = cell_text
    env.filters["md"] = markdown
    env.filters["mdline"] = markdown_line
    # A link target inside the packet: anything but a plain path and fragment is
    # percent-encoded, so no target can close the link or start another.
    env.filters["mdurl"] = lambda href: quote(str(href), safe="/#~%._-")
    return env


def inline_svg(svg: str) -> str:
    """The <svg> element alone (no XML declaration or doctype), for inlining."""
    return svg[svg.index("<svg"):]


def rendered(packet: dict, svgs: dict[str, str]) -> dict[str, str]:
    """packet.md and index.html as packet.json's data renders them (`svgs`: each
    figure's inline <svg> by id)."""
    return {"packet.md": _environment(False).get_template("packet.md").render(p=packet),
            "index.html": _environment(True).get_template("index.html").render(
                p=packet, svgs=svgs)}


def write_packet(packet: dict, out: OutputFolder) -> dict:
    """Write figures, packet.json, packet.md and index.html into the packet folder
    (through its guard: no link followed); return the packet as written to
    packet.json (figures as file and sha256)."""
    svgs = {}
    for section in packet["sections"]:
        written = []
        for fig in section["figures"]:
            file = f"{FIGURES_FOLDER}/{fig['id']}.svg"
            data = out.write(file, fig["svg"])
            svgs[fig["id"]] = inline_svg(fig["svg"])
            written.append({"id": fig["id"], "title": fig["title"], "file": file,
                            "sha256": hashlib.sha256(data).hexdigest()})
        section["figures"] = written
    # recorded relative to the packet's folder (simulator.inputs.anchors): verify from anywhere
    packet["study"]["path"] = rebase(packet["study"]["path"], out.path)
    out.write("packet.json", json.dumps(packet, indent=1) + "\n")
    for name, text in rendered(packet, svgs).items():
        out.write(name, text)
    return packet
