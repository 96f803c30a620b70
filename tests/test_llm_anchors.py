"""The LLM anchors of experiments/llm_anchors.py, pinned (the LLM issue's acceptance):
Llama-3.1-8B bf16 on tpu_v5e_like, under the default mapping (the searched default)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "llm_anchors.py"


def _anchors():
    spec = importlib.util.spec_from_file_location("llm_anchors", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_decode_step_is_within_1_3x_of_weights_and_kv_over_bandwidth():
    anchors = _anchors()
    row = anchors.decode_anchor("default")
    # The formula counts the embedding table, which a step does not read: the ratio may
    # fall a little below 1, but not far either way.
    assert 1 / anchors.DECODE_RATIO_MAX <= row["ratio"] <= anchors.DECODE_RATIO_MAX
    assert row["bottleneck"] == "memory-bandwidth"


def test_prefill_2048_is_compute_bound_at_half_of_peak_or_more():
    anchors = _anchors()
    row = anchors.prefill_anchor("default")
    assert row["bottleneck"] == "compute"
    assert row["mfu"] >= anchors.PREFILL_MFU_MIN
