"""The figures the documentation quotes from a command's output match what the command
prints now (issue 42): experiments/readme_numbers.py --check over README.md and every
docs page fails this test, naming FILE:LINE, when a quoted figure moved, in an example
block or in a paragraph of prose under an accsim-figures marker (tests/
test_readme_numbers.py shows a moved figure of each kind failing the check). Figures in
prose that nothing checks are dated measurements with their command (`readme_numbers.py
--audit` lists the lines that are neither). Cost: every marked command run once, about
2-3 minutes on 2 shared cores; CI runs the check first with ACCSIM_DOCS_CACHE set, and
this test, given the same cache, reruns nothing of an unchanged tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from timed_cli import HANG_S

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "readme_numbers.py"


def test_every_quoted_figure_is_what_its_command_prints(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=4 * HANG_S,
                          env={**os.environ,
                               "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 quoted lines differ" in done.stdout
