"""The figures the documentation quotes from a command's output match what the command
prints now (issue 42): experiments/readme_numbers.py --check over README.md and every
docs page fails this test, naming FILE:LINE, when a quoted figure moved, in an example
block or in a paragraph of prose under an accsim-figures marker (tests/
test_readme_numbers.py shows a moved figure of each kind failing the check). Figures in
prose that nothing checks are dated measurements with their command or cite their
source (`readme_numbers.py --audit` lists the lines that are none of these; a cited
table of the code's own values is held to the code here). Cost: every marked
command run once, about 90 s of CPU (measured 2026-12-06: 346 s wall at load 16 on 2
shared cores); CI runs the check first with ACCSIM_DOCS_CACHE set, and this test, given
the same cache, reruns nothing of an unchanged tree."""

from __future__ import annotations

import os
import re
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


def test_the_bottleneck_table_is_the_rules_the_code_applies():
    """docs/concepts/timing.md's table of bottleneck classes cites RULES as its source:
    one row per rule, in order, with each threshold (a fraction as a percentage)."""
    from simulator.metrics.bottleneck import BALANCED, RULES

    page = SCRIPT.parent.parent / "docs" / "concepts" / "timing.md"
    text = page.read_text()
    table = text[text.index("| class | rule"):].split("\n\n")[0].splitlines()[2:]
    rows = [line.split("|")[1:3] for line in table]
    assert [name.strip() for name, _ in rows] == [name for name, _ in RULES] + [BALANCED]
    for (_, rule), (_, conditions) in zip(rows, RULES):
        written = sorted(float(n) for n in re.findall(r"[<>]=? (\d+(?:\.\d+)?)", rule))
        wanted = sorted({threshold if metric.endswith("_ratio") else threshold * 100
                         for metric, _, threshold in conditions})
        assert sorted(set(written)) == wanted, rule
