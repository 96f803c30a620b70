"""`accsim verify DIR/packet.json`: a packet is verified file by file. The study file
and every result and figure file must match the sha256 the packet recorded; then each
operator-simulation result is verified as `accsim verify RESULT.json` verifies it, and
each serving result is served again from the spec it embeds and compared, environment
fields aside."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from simulator.verify import Verification, comparable, differences, verify


def _file_change(kind: str, path: Path, sha256: str) -> str | None:
    """A file the packet names against the sha256 it recorded."""
    try:
        now = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return f"{kind}: {path} (no longer readable)"
    return None if now == sha256 else f"{kind}: {path} (sha256 changed since the packet)"


def _serving_differences(path: Path) -> list[str]:
    from simulator.review.serving import rerun
    recorded = json.loads(path.read_text())
    again = json.loads(json.dumps(rerun(recorded)))
    found = []
    for index, (old, new) in enumerate(zip(recorded["points"], again["points"])):
        found += [text for _, text in differences(comparable(old), comparable(new),
                                                  f".points[{index}]")]
    return found


def verify_packet(packet_path: str, packet: dict) -> Verification:
    """Check a review packet's files and rerun every result it holds."""
    folder = Path(packet_path).parent
    study = packet["study"]
    changed = [c for c in [_file_change("study", Path(study["path"]), study["sha256"])]
               if c]
    found = []
    for entry in packet["results"]:
        change = _file_change("result", folder / entry["path"], entry["sha256"])
        if change:
            changed.append(change)
            continue
        if entry["kind"] == "serving":
            found += [f"{entry['path']}: {d}"
                      for d in _serving_differences(folder / entry["path"])]
            continue
        outcome = verify(str(folder / entry["path"]))
        changed += [f"{entry['path']}: {c}" for c in outcome.changed_sources]
        found += [f"{entry['path']}: {d}" for d in outcome.differences]
    for section in packet["sections"]:
        changed += [c for fig in section["figures"]
                    if (c := _file_change("figure", folder / fig["file"], fig["sha256"]))]
    return Verification(changed, found)
