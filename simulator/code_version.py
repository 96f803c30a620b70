"""The code's own identity, for caches that keep results across runs (`accsim review`'s
run cache): a result computed by other code is not reused, even where MODEL_VERSION was
not bumped for the change that made it differ."""

from __future__ import annotations

import hashlib
from pathlib import Path

import simulator


def code_version() -> str:
    """sha256 of the package version, MODEL_VERSION and every Python source file of the
    simulator package (each file's path relative to the package, its length and its
    bytes, in path order). It reads every source file (about 250), so a command computes
    it once and passes it on."""
    root = Path(simulator.__file__).resolve().parent
    digest = hashlib.sha256(f"{simulator.__version__}\0{simulator.MODEL_VERSION}\0"
                            .encode())
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
