"""The README cites only files that exist in the repository (issue 23 item 8): every
path it names in inline code, a link or a command is checked here.

A token is a repository path when it has a slash and no placeholder (an upper-case
word such as NAME or PLATFORM stands for a name the user picks); a shipped name such as
`whatif/tpu_v5e_256x256` counts when the shipped file it names exists. Absolute paths
(/dev/zero) and home paths (~/.cache) are the system's, results/, figures/ and inputs/
are the files inside a review packet's folder, a glob must match a file, and the two
paths of SCALE-Sim's own repository are
allowed only on a line that says they are SCALE-Sim's."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
# Folders a path in a command line starts with when it is the repository's.
TOP = ("arch_configs/", "workloads/", "experiments/", "simulator/", "tests/", "docs/",
       ".ci/")
SCALESIM_PATHS = {"configs/scale.cfg", "topologies/conv_nets/alexnet.csv"}
PLACEHOLDER = re.compile(r"[A-Z]{3,}")
PACKET_FOLDERS = ("results/", "figures/", "inputs/")


def _mentions() -> list[tuple[int, str]]:
    found = []
    fenced = False
    for number, line in enumerate(README.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            found += [(number, t) for t in re.findall(r"[\w./-]+", line) if t.startswith(TOP)]
            continue
        found += [(number, t) for t in re.findall(r"`([^`\s]+)`", line)]
        found += [(number, t) for t in re.findall(r"\]\(([^)#\s]+)", line)]
    return [(n, t.rstrip(".,:;)")) for n, t in found if "/" in t and "://" not in t]


def _exists(token: str) -> bool:
    if "*" in token:
        return any(REPO.glob(token))
    return any((REPO / candidate).exists() for candidate in (
        token, f"arch_configs/{token}.yaml", f"workloads/{token}.yaml"))


def test_the_readme_names_paths():
    assert len(_mentions()) > 20  # the scan sees the README's paths at all


def test_every_repository_path_the_readme_names_exists():
    lines = README.splitlines()
    missing = []
    for number, token in _mentions():
        if token.startswith(("/", "~", "[") + PACKET_FOLDERS) or PLACEHOLDER.search(token):
            continue
        if token in SCALESIM_PATHS:
            assert "SCALE-Sim" in " ".join(lines[number - 3:number]), (number, token)
            continue
        if not _exists(token):
            missing.append(f"README.md line {number}: {token}")
    assert not missing, "\n".join(missing)
