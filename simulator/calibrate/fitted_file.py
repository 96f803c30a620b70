"""A fitted platform as its own file (DESIGN.md section 19): `base:` the platform as
written (its published values never move) and the fitted values only, each marked
`kind: fitted` with the measurement file and its sha256 (the range it was fitted in
kept). Read back through the platform loader before it is written, so the file written
is one `accsim run --arch` takes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from simulator.calibrate.measured_runs import Runs
from simulator.inputs.loader import locate, validate_model
from simulator.inputs.platform import Platform
from simulator.inputs.platform_file import BASE, as_file, nested, overridden


def base_reference(arch: str, output: str) -> str:
    """The platform as `base:` names it from the output's folder: a shipped name as
    given, a file by its path relative to that folder."""
    path = Path(locate(arch, "platform"))
    if not Path(arch).is_file():
        return arch
    return os.path.relpath(path.resolve(), Path(output).resolve().parent)


def fitted_platform_yaml(arch: str, platform: Platform, fitted: dict,
                         fields: dict, runs: Runs, output: str) -> str:
    """The text of the fitted platform file."""
    source = os.path.relpath(Path(runs.file).resolve(), Path(output).resolve().parent)
    raw = {"base": base_reference(arch, output),
           "name": f"{platform.name}_fitted",
           "description": f"{platform.name} with its assumed values {', '.join(fitted)} "
                          f"fitted to the measurements of {source} by accsim calibrate",
           **nested(fitted),
           "provenance": {name: {"kind": "fitted", "source": source,
                                 "sha256": runs.sha256,
                                 "range": [fields[name][1], fields[name][2]]}
                          for name in fitted}}
    text = (f"# {platform.name} fitted by `accsim calibrate` to {json.dumps(source)} "
            f"(sha256 {runs.sha256}); only the fitted values differ from the base, "
            "whose published values stay as written\n"
            + yaml.safe_dump(raw, sort_keys=False))
    validate_model(overridden(as_file(platform), {k: v for k, v in raw.items()
                                                   if k != BASE}), Platform, file=output)
    return text
