"""Where a benchmark's child process runs so that it imports the package of a given
checkout (the `--code DIR` of bench_cost_table, bench_attention_search and
bench_serving_cache: before and after measured side by side)."""

from __future__ import annotations

import os
from pathlib import Path


def where(code: str | None) -> dict:
    """subprocess.run's cwd and env that import the package in `code` (python -m and -c
    put the working folder first on sys.path; None: this checkout)."""
    root = code or str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"]
                                if env.get("PYTHONPATH") else "")
    return {"cwd": root, "env": env}
