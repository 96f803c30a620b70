"""Where a path recorded in a result file points (DESIGN.md section 6): a relative path
a result, a serving result or a review packet records is relative to the folder of the
file that records it, never to the working directory of whoever reads it. So a packet
or result verifies from any directory, and a folder moved together with its inputs
still verifies; an absolute path is kept as it is.

Writers call `relocated` (paths as the user gave them, relative to the working
directory, become relative to the output file's folder); `accsim verify` calls
`anchored` (recorded relative paths become paths to open). Recorded paths are the
`path` of every {path, sha256} record (the inputs a manifest embeds, a trace, a model
config, a sweep spec) and the file-valued fields of a serving spec (a value that names
no file there is a shipped name, kept as it is).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

# The serving spec's fields that hold a file path or a shipped name.
SPEC_FILE_FIELDS = ("arch", "workload", "model", "arrival_trace", "precision",
                    "mapping_plan")


def _is_spec(node: dict) -> bool:
    """A serving spec as `accsim serve` records it (it always has arch and arrival)."""
    return "arch" in node and "arrival" in node


def _walk(node, move: Callable[[str], str], is_file: Callable[[str], bool]):
    """The decoded JSON with `move` applied to every recorded path."""
    if isinstance(node, list):
        return [_walk(item, move, is_file) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _walk(value, move, is_file) for key, value in node.items()}
    if "sha256" in out and isinstance(out.get("path"), str):
        out["path"] = move(out["path"])
    if _is_spec(out):
        for key in SPEC_FILE_FIELDS:
            value = out.get(key)
            if isinstance(value, str) and is_file(value):
                out[key] = move(value)
    return out


def relocated(content, folder: str | Path):
    """`content` (decoded JSON) as a file in `folder` records it: each relative path,
    relative to the working directory, made relative to `folder`."""
    return _walk(content, lambda path: rebase(path, folder),
                 lambda value: Path(value).is_file())


def recorded_paths(content) -> list[str]:
    """Every input file `content` (decoded JSON) records, as `relocated` finds them:
    the files a result was computed from."""
    found: list[str] = []
    _walk(content, lambda path: found.append(path) or path,
          lambda value: Path(value).is_file())
    return found


def rebase(path: str, folder: str | Path) -> str:
    """A path given relative to the working directory, as a file in `folder` records
    it (an absolute path as it is)."""
    if os.path.isabs(path):
        return path
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(folder))).as_posix()


def anchor(path: str, folder: str | Path) -> str:
    """A path a file in `folder` records, as a path to open."""
    if os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(os.path.abspath(folder), path))


def anchored(content, folder: str | Path):
    """`content` (decoded JSON read from a file in `folder`) with each relative path it
    records resolved against `folder`."""
    return _walk(content, lambda path: anchor(path, folder),
                 lambda value: Path(anchor(value, folder)).is_file())
