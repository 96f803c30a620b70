"""The figures the documentation quotes from a command's output match what the command
prints now (issue 42): experiments/readme_numbers.py --check over README.md and every
docs page fails this test, naming FILE:LINE, when a quoted figure moved. Figures in
prose that no marked example regenerates are dated measurements with their command
(docs/README of each page says so beside them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "readme_numbers.py"


def test_every_quoted_figure_is_what_its_command_prints(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True, timeout=1200,
                          env={**os.environ,
                               "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 quoted lines differ" in done.stdout
