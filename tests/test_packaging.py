"""The package list in pyproject.toml names every subpackage of simulator/, so a
non-editable install (CI's, a user's `pip install .`) ships all of it."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(path.parent.relative_to(ROOT).parts)
             for path in (ROOT / "simulator").rglob("__init__.py")}
    assert sorted(found - listed) == []
