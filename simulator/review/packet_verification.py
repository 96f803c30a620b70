"""`accsim verify DIR/packet.json`: a packet is verified file by file. The study file
and every result and figure file must match the sha256 the packet recorded; then each
operator-simulation result is verified as `accsim verify RESULT.json` verifies it
(a relative path recorded in the packet or a result is relative to the file recording
it, simulator.inputs.anchors, so a packet verifies from any directory)
(the command passes its own check in, so review never imports the command layer),
each serving result is served again from the spec it embeds and compared, environment
fields aside, and the sweep's export has its front checked and each front point
simulated again from the inputs it embeds (review.sweep.rerun_differences)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field

from simulator.inputs.anchors import anchor, anchored
from simulator.inputs.platform import Strict
from simulator.errors import AccsimError
from simulator.inputs.loader import read_bytes, read_json, validate_model
from simulator.review.assumption_study import rerun_differences as assumption_differences
from simulator.review.packet_format import PACKET_FORMAT, PACKET_VERSION
from simulator.review.serving_runs import ServingResultFile, rerun
from simulator.review.sweep import rerun_differences
from simulator.serving.verification import check_work
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


class PacketIndex(_Read):
    """What packet.json must hold for verify: its format, the study and every file it
    wrote."""

    packet: PacketMarker
    study: RecordedFile
    results: list[ResultEntry] = Field(min_length=1)  # a review writes one at least
    sections: list[Section]


def _file_change(kind: str, path: Path, sha256: str) -> str | None:
    """A file the packet names against the sha256 it recorded."""
    try:
        now = hashlib.sha256(read_bytes(path)).hexdigest()
    except AccsimError:
        return f"{kind}: {path} (no longer readable)"
    return None if now == sha256 else f"{kind}: {path} (sha256 changed since the packet)"


def _serving_differences(path: Path, allow_long: bool) -> list[str]:
    content, source = read_json(path)
    content = anchored(content, path.parent)
    recorded = validate_model(content, ServingResultFile, file=source.path)
    check_work(recorded.serving.spec, loads=len(recorded.serving.rates_per_s),
               file=source.path, field="serving.spec.requests", allow_long=allow_long)
    again = json.loads(json.dumps(rerun(recorded.model_dump(mode="json"))))
    found = []
    for index, (old, new) in enumerate(zip(content["points"], again["points"])):
        found += [text for _, text in differences(comparable(old), comparable(new),
                                                  f".points[{index}]")]
    return found


def verify_packet(packet_path: str, packet: dict, *,
                  verify_file: Callable[[str], Verification],
                  allow_long: bool = False) -> Verification:
    """Check a review packet's files and rerun every result it holds; `verify_file`
    checks one run result file as `accsim verify` does; a serving result over
    verify's work bound is refused unless `allow_long` (serving.verification)."""
    folder = Path(packet_path).parent
    index = validate_model(packet, PacketIndex, file=packet_path)
    changed = [c for c in [_file_change("study", Path(anchor(index.study.path, folder)),
                                        index.study.sha256)] if c]
    found = []
    for entry in index.results:
        change = _file_change("result", folder / entry.path, entry.sha256)
        if change:
            changed.append(change)
            continue
        if entry.kind == "serving":
            found += [f"{entry.path}: {d}"
                      for d in _serving_differences(folder / entry.path, allow_long)]
            continue
        if entry.kind == "assumptions":
            found += [f"{entry.path}: {d}"
                      for d in assumption_differences(folder / entry.path)]
            continue
        if entry.kind == "deployment":  # its hash checked above; not rerun
            continue
        if entry.kind == "sweep":
            content, source = read_json(folder / entry.path)
            content = anchored(content, (folder / entry.path).parent)
            inputs, reran = rerun_differences(content, file=source.path)
            changed += [f"{entry.path}: {c}" for c in inputs]
            found += [f"{entry.path}: {d}" for d in reran]
            continue
        outcome = verify_file(str(folder / entry.path))
        changed += [f"{entry.path}: {c}" for c in outcome.changed_sources]
        found += [f"{entry.path}: {d}" for d in outcome.differences]
    for section in index.sections:
        changed += [c for fig in section.figures
                    if (c := _file_change("figure", folder / fig.file, fig.sha256))]
    return Verification(changed, found)
