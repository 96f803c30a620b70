"""`accsim verify DIR/packet.json`: a packet is verified file by file. The study file
and every result and figure file must match the sha256 the packet recorded; then each
operator-simulation result is verified as `accsim verify RESULT.json` verifies it
(a relative path recorded in the packet or a result is relative to the file recording
it, simulator.inputs.anchors, so a packet verifies from any directory)
(the command passes its own check in, so review never imports the command layer),
each serving result is served again from the spec it embeds and compared, environment
fields aside, and the sweep's export has its front checked and each front point
simulated again from the inputs it embeds (review.sweep.rerun_differences). Where all
of that agrees, the study is reviewed again under the options the packet records
(review.pipeline) and packet.json compared with what that review makes, and packet.md
and index.html with what packet.json renders to: the hashes say the files are the ones
the review wrote, this says packet.json says what they and the study decide.
A forged packet is bounded before any rerun: each file named once and read only inside
the packet's folder, all its serving reruns within one work bound, and no second
review of a study asking for more runs or sweep points than the packet holds."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Literal

from jinja2 import TemplateError
from pydantic import AfterValidator, ConfigDict, Field, field_validator

from simulator.inputs.anchors import anchor, anchored
from simulator.inputs.platform import Strict
from simulator.errors import AccsimError
from simulator.inputs.loader import read_bytes, read_json, validate_model
from simulator.review.assumption_study import (MAX_VERIFY_PLATFORMS, corner_runs,
                                               read_assumptions,
                                               rerun_differences as assumption_differences)
from simulator.output.files import OutputFolder
from simulator.review.packet import inline_svg, rendered
from simulator.review.deployment_search import check_verify_bounds
from simulator.review.packet_format import PACKET_FORMAT, PACKET_VERSION
from simulator.review.pipeline import Prepared, ReviewOptions, prepare, review_runs
from simulator.review.runs import open_cache
from simulator.review.serving_runs import ServingResultFile, rerun
from simulator.review.sweep import rerun_differences
from simulator.serving.verification import check_work
from simulator.sweep.executors import executor_for
from simulator.verification.rerun import Verification, comparable, differences


class _Read(Strict):
    """Only the packet fields verify reads (the packet holds much more, for people)."""

    model_config = ConfigDict(extra="ignore")


def _inside(path: str) -> str:
    """A file of the packet: a plain relative path inside its folder (a review writes
    only results/NAME and figures/NAME), so a forged packet cannot point verify at a
    file elsewhere."""
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in path \
            or "\x00" in path:
        raise ValueError("must be a plain relative path inside the packet's folder")
    return path


PacketPath = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_inside)]


class RecordedFile(_Read):
    path: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ResultEntry(RecordedFile):
    path: PacketPath
    kind: Literal["run", "serving", "sweep", "assumptions", "deployment"]


class Figure(_Read):
    file: PacketPath
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Section(_Read):
    figures: list[Figure] = []


class PacketMarker(_Read):
    """The format this accsim writes and reads (review.packet_format)."""

    format: Literal[PACKET_FORMAT]
    version: Literal[PACKET_VERSION]


class RecordedOptions(_Read):
    """The review options the packet was made under (review.pipeline.ReviewOptions)."""

    fusion: Literal["none", "epilogue", "auto"] | None
    ignore_capacity: bool


class PacketIndex(_Read):
    """What packet.json must hold for verify: its format, the study, the options it
    was reviewed under and every file it wrote."""

    packet: PacketMarker
    study: RecordedFile
    options: RecordedOptions
    results: list[ResultEntry] = Field(min_length=1)  # a review writes one at least
    sections: list[Section]

    @field_validator("results")
    @classmethod
    def _results_once(cls, results: list[ResultEntry]) -> list[ResultEntry]:
        return _named_once([entry.path for entry in results], results)

    @field_validator("sections")
    @classmethod
    def _figures_once(cls, sections: list[Section]) -> list[Section]:
        return _named_once([fig.file for s in sections for fig in s.figures], sections)


def _named_once(paths: list[str], value):
    """`value` if no file is named twice: a review writes each file once, so a forged
    packet cannot have verify hash or rerun one file thousands of times."""
    seen = set()
    for path in paths:
        if path in seen:
            raise ValueError(f"names {path} twice (a review writes each file once)")
        seen.add(path)
    return value


def _file_change(kind: str, path: Path, sha256: str, *,
                 packet: Path | None = None) -> str | None:
    """A file the packet names against the sha256 it recorded; one of the `packet`
    folder's own files (a result, a figure) that a link leads out of it is not read."""
    escape = _escape(path, packet) if packet is not None else None
    if escape:
        return f"{kind}: {path} ({escape}: not read)"
    try:
        now = hashlib.sha256(read_bytes(path)).hexdigest()
    except AccsimError:
        return f"{kind}: {path} (no longer readable)"
    return None if now == sha256 else f"{kind}: {path} (sha256 changed since the packet)"


def _escape(path: Path, folder: Path) -> str | None:
    """Why `path`, its links followed, does not lie inside `folder`; None if it does."""
    try:
        inside = path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # RuntimeError: a link loop, before Python 3.13
        return "a link loop"
    return None if inside else "a link leading outside the packet's folder"


def _serving_result(path: Path, allow_long: bool,
                    spent: int) -> tuple[dict, ServingResultFile, int]:
    """A serving result file (its content, as recorded) and the work its rerun would
    take, within verify's bound beside the `spent` work of the packet's other serving
    results (one bound for them all, serving.verification.check_work)."""
    content, source = read_json(path)
    content = anchored(content, path.parent)
    recorded = validate_model(content, ServingResultFile, file=source.path)
    work = check_work(recorded.serving.spec, loads=len(recorded.serving.rates_per_s),
                      file=source.path, field="serving.spec.requests",
                      allow_long=allow_long, spent=spent)
    return content, recorded, work


def _serving_differences(content: dict, recorded: ServingResultFile) -> list[str]:
    """A serving result's points against its spec served again."""
    again = json.loads(json.dumps(rerun(recorded.model_dump(mode="json"))))
    found = []
    for index, (old, new) in enumerate(zip(content["points"], again["points"])):
        found += [text for _, text in differences(comparable(old), comparable(new),
                                                  f".points[{index}]")]
    return found


def verify_packet(packet_path: str, packet: dict, *,
                  verify_file: Callable[[str], Verification],
                  allow_long: bool = False, cache: str | None = None,
                  no_cache: bool = False) -> Verification:
    """Check a review packet's files, rerun every result it holds and, where all
    agree, review its study again and compare packet.json and the pages rendered from
    it; `verify_file` checks one run result file as `accsim verify` does; a serving
    result over verify's work bound (all of them together: checked before any is
    served) is refused unless `allow_long` (serving.verification); `cache`,
    `no_cache`: the run cache the rebuild reads, as `accsim review` takes them."""
    folder = Path(packet_path).parent
    index = validate_model(packet, PacketIndex, file=packet_path)
    changed = [c for c in [_file_change("study", Path(anchor(index.study.path, folder)),
                                        index.study.sha256)] if c]
    unchanged, served, assumed, spent = [], {}, {}, 0
    for entry in index.results:  # every hash, and all serving reruns' work, first
        change = _file_change("result", folder / entry.path, entry.sha256,
                              packet=folder)
        if change:
            changed.append(change)
            continue
        unchanged.append(entry)
        if entry.kind == "serving":
            content, recorded, work = _serving_result(folder / entry.path, allow_long,
                                                      spent)
            served[entry.path], spent = (content, recorded), spent + work
        if entry.kind == "assumptions":
            content, recorded = read_assumptions(folder / entry.path,
                                                 allow_long=allow_long)
            assumed[entry.path] = content
            for field, run in corner_runs(recorded):
                spent += check_work(run.spec, loads=len(run.rates_per_s),
                                    file=str(folder / entry.path), field=field,
                                    allow_long=allow_long, spent=spent)
    found, models = [], []
    shown = {"runs": sum(entry.kind == "run" for entry in index.results),
             "sweep points": 0}
    for entry in unchanged:
        if entry.kind == "serving":
            found += [f"{entry.path}: {d}"
                      for d in _serving_differences(*served[entry.path])]
            continue
        if entry.kind == "assumptions":
            found += [f"{entry.path}: {d}" for d in assumption_differences(
                assumed[entry.path], file=str(folder / entry.path))]
            continue
        if entry.kind == "deployment":  # its hash checked above; searched again below
            continue
        if entry.kind == "sweep":
            content, source = read_json(folder / entry.path)
            content = anchored(content, (folder / entry.path).parent)
            inputs, reran = rerun_differences(content, file=source.path)
            shown["sweep points"] += len(content["points"])  # a list: checked there
            changed += [f"{entry.path}: {c}" for c in inputs]
            found += [f"{entry.path}: {d}" for d in reran]
            continue
        outcome = verify_file(str(folder / entry.path))
        changed += [f"{entry.path}: {c}" for c in outcome.changed_sources]
        found += [f"{entry.path}: {d}" for d in outcome.differences]
        models += [f"{entry.path}: {outcome.model_changed}"] if outcome.model_changed else []
    figures = [fig for section in index.sections for fig in section.figures]
    changed += [c for fig in figures
                if (c := _file_change("figure", folder / fig.file, fig.sha256,
                                      packet=folder))]
    if not (changed or found or models):
        changed += _render_changes(folder, packet, figures)
        found += _rebuild_differences(packet_path, packet, index, shown, cache=cache,
                                      no_cache=no_cache, allow_long=allow_long)
    return Verification(changed, found, "; ".join(models) or None)


def _render_changes(folder: Path, packet: dict, figures: list[Figure]) -> list[str]:
    """packet.md and index.html against what packet.json renders to (the pages people
    read carry the numbers the packet's data does)."""
    try:
        svgs = {Path(fig.file).stem: inline_svg(read_bytes(folder / fig.file).decode())
                for fig in figures}
        pages = rendered(packet, svgs)
    except (AccsimError, TemplateError, KeyError, TypeError, ValueError,
            AttributeError) as exc:
        return [f"packet.json: cannot be rendered ({type(exc).__name__}: {exc})"]
    return [f"{name}: not what packet.json renders to (edited since the review)"
            for name, text in pages.items()
            if _read(folder / name, folder) != text.encode()]


def _read(path: Path, folder: Path) -> bytes | None:
    """A page of the packet's folder; None where it cannot be read or a link leads
    out of the folder."""
    if _escape(path, folder):
        return None
    try:
        return read_bytes(path)
    except AccsimError:
        return None


ENVIRONMENT_SECTION = "environment"  # the section holding the machine's manifest


def _judged(packet: dict) -> dict:
    """What a packet says that its study and results decide: packet.json without what
    a second review may change with neither wrong: where files lie (the study's path,
    the cells of `path` columns: a review given relative paths records them so, and
    writes its variants into its own folder), a result's bytes (a run simulated again
    records another time and machine), a figure's bytes (checked by hash, not drawn
    again: they depend on the matplotlib version), the accsim version and the
    environment section's manifest of versions, commits and input files."""
    kept = {key: value for key, value in packet.items()
            if key not in ("accsim_version", "study", "results", "sections")}
    study = packet.get("study")
    kept["study"] = {k: v for k, v in study.items() if k != "path"} \
        if isinstance(study, dict) else study
    kept["results"] = [{k: v for k, v in entry.items() if k != "sha256"}
                       for entry in _items(packet.get("results")) if isinstance(entry, dict)]
    kept["sections"] = [_judged_section(section) for section in
                        _items(packet.get("sections")) if isinstance(section, dict)]
    return kept


def _items(value) -> list:
    """A list as it is, anything else (a forged packet's) as none."""
    return value if isinstance(value, list) else []


def _judged_section(section: dict) -> dict:
    kept = {key: value for key, value in section.items() if key not in ("figures", "tables")}
    kept["figures"] = [{k: fig.get(k) for k in ("id", "title")}
                       for fig in _items(section.get("figures")) if isinstance(fig, dict)]
    kept["tables"] = [_located_cells_blank(t) for t in _items(section.get("tables"))
                      if isinstance(t, dict)]
    if section.get("id") == ENVIRONMENT_SECTION:
        kept = {key: value for key, value in kept.items() if key not in ("text", "tables")}
    return kept


def _located_cells_blank(table: dict) -> dict:
    """The table with the cells of its `path` columns blanked."""
    located = {index for index, column in enumerate(_items(table.get("columns")))
               if isinstance(column, dict) and column.get("format") == "path"}
    if not located or not isinstance(table.get("rows"), list):
        return table
    return {**table, "rows": [[None if index in located else cell
                               for index, cell in enumerate(row)]
                              if isinstance(row, list) else row
                              for row in table["rows"]]}


def _rebuild_differences(packet_path: str, packet: dict, index: PacketIndex,
                         shown: dict[str, int], *, cache: str | None, no_cache: bool,
                         allow_long: bool) -> list[str]:
    """The study reviewed again under the packet's options, into a scratch folder
    (reading the run cache as `accsim review` does; a serving run or deployment search
    over verify's bounds refused unless `allow_long`, as a serving result's rerun is),
    and packet.json compared with what that review makes of it, and the deployment
    search's export (step 1 reruns every other result) with the one it writes. A
    study asking for more runs or sweep points than the packet `shown` holds (a review
    writes a result of each) is not reviewed again: a forged study could ask for
    hours of them beside a packet of one result."""
    folder = Path(packet_path).parent
    study_path = anchor(index.study.path, folder)
    options = ReviewOptions(index.options.fusion, index.options.ignore_capacity)
    searched = [entry.path for entry in index.results if entry.kind == "deployment"]

    spent = 0  # the serving runs' work so far: one bound for the whole review

    def bounded(spec, loads: int) -> None:
        nonlocal spent
        spent += check_work(spec, loads=loads, file=study_path, field="scope.serving",
                            allow_long=allow_long, spent=spent)

    try:
        prepared = prepare(study_path, options)
        check_verify_bounds(prepared.study, allow_long=allow_long)
        _check_shown(prepared, shown, study_path, allow_long=allow_long)
        with tempfile.TemporaryDirectory(prefix="accsim-verify-") as scratch, \
                OutputFolder.plain(scratch) as out, \
                (open_cache(cache, no_cache=no_cache) or nullcontext()) as run_cache:
            again = review_runs(prepared, out, cache=run_cache, engine="auto",
                                executor=executor_for("processes", None),
                                first="reviewing again",
                                check_serving=bounded).packet
            exports = {path: (_json_or_none(folder / path), _json_or_none(out.path / path))
                       for path in searched}
    except AccsimError as error:
        return [f"packet.json: its study could not be reviewed again ({error})"]
    again = json.loads(json.dumps(again))  # as packet.json holds it
    found = [f"packet.json: {text}"
             for _, text in differences(_judged(packet), _judged(again))]
    return found + [f"{path}: {text}" for path, (old, new) in exports.items()
                    for _, text in differences(old, new)]


def _check_shown(prepared: Prepared, shown: dict[str, int], study_path: str, *,
                 allow_long: bool) -> None:
    """Refuse a study asking for more runs or sweep points (counted, not laid out)
    than the packet holds results of, or, unless `allow_long`, for the assumptions of
    more platforms than verify's bound (review.assumption_study)."""
    study = prepared.study
    if study.study.assumptions is not None and not allow_long \
            and len(study.platforms) > MAX_VERIFY_PLATFORMS:
        raise AccsimError(f"its assumptions section would take {len(study.platforms):,} "
                          f"platforms' tornadoes, over verify's bound of "
                          f"{MAX_VERIFY_PLATFORMS}; give --allow-long to compute them "
                          "anyway", file=study_path, field="assumptions")
    asked = {"runs": len(study.platforms) * len(study.mappings)
             * (len(study.workloads) + len(prepared.models)),
             "sweep points": len(study.sweep.jobs) if study.sweep is not None else 0}
    for what, count in asked.items():
        if count > shown[what]:
            raise AccsimError(f"it asks for {count:,} {what}, the packet holds "
                              f"{shown[what]:,}: a review writes a result of each",
                              file=study_path, field="scope")


def _json_or_none(path: Path):
    try:
        return read_json(path)[0]
    except AccsimError:
        return None
