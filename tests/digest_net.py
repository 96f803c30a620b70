"""What the byte-identity nets share (test_shipped_identical.py, the default model;
test_fusion_none_identical.py, --fusion none): experiments/shipped_digests.py loaded
as a module, and each pair as a test case, the LLM steps on platforms other than
HF_PLATFORM (most of the time, the 32 x 32 array above all) marked slow."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "shipped_digests.py"
HF_PLATFORM = "tpu_v5e_like"


def load_script():
    spec = importlib.util.spec_from_file_location("shipped_digests", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pair_case(name: str):
    arch, workload = name.split(" x ", 1)
    slow = workload.startswith("hf/") and arch != HF_PLATFORM
    return pytest.param(name, id=name, marks=[pytest.mark.slow] if slow else [])
