"""What the byte-identity nets share (test_shipped_identical.py, the default model;
test_fusion_none_identical.py, --fusion none; test_orientation_normal_identical.py):
experiments/shipped_digests.py loaded as a module, and each pair as a test case, the LLM
steps on platforms other than HF_PLATFORM (most of the time, the 32 x 32 array above
all) marked slow. A net of one fixed mode checks one code path whatever the pair: by
default it runs the walk of tests/in_turn.py (each platform and workload, each model and
phase), and the rest of its pairs are marked slow too; the default model's net, the
figures of today, runs every pair."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from in_turn import in_turn

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "shipped_digests.py"
HF_PLATFORM = "tpu_v5e_like"


def load_script():
    spec = importlib.util.spec_from_file_location("shipped_digests", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _axes(name: str) -> tuple[str, ...]:
    """A pair's values: (platform, workload), or (platform, model, phase) for an LLM
    step."""
    arch, workload = name.split(" x ", 1)
    return (arch, *workload.split()[:2]) if workload.startswith("hf/") else (arch, workload)


def pair_cases(names, *, walk: bool = False) -> list:
    """Each pair as a test case, those of LLM steps on platforms other than HF_PLATFORM
    marked slow; with `walk` (a net of one fixed mode), those off the walk too."""
    default = [name for name in names
               if not name.split(" x ", 1)[1].startswith("hf/")
               or name.startswith(f"{HF_PLATFORM} x ")]
    kept = set(default)
    if walk:
        plain = [_axes(name) for name in default if len(_axes(name)) == 2]
        llm = [_axes(name) for name in default if len(_axes(name)) == 3]
        walked = in_turn(plain) | (in_turn(llm) if llm else set())
        kept = {name for name in default if _axes(name) in walked}
    return [pytest.param(name, id=name, marks=() if name in kept else pytest.mark.slow)
            for name in names]
