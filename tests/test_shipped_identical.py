"""Every shipped platform x workload, and every shipped Hugging Face model's prefill and
decode step, gives the result recorded in tests/data/shipped_digests.json (written by
experiments/shipped_digests.py on the code before issue 22's refactor): a change that
should move no figure moves none.

The default run covers every shipped workload on every platform and the LLM steps on
HF_PLATFORM; the LLM steps on the other platforms (most of the time, the 32 x 32 array
above all) are marked slow."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "shipped_digests.py"
HF_PLATFORM = "tpu_v5e_like"


def _script():
    spec = importlib.util.spec_from_file_location("shipped_digests", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DIGESTS = _script()
PAIRS = DIGESTS.shipped_pairs()
STORED = json.loads(DIGESTS.DIGESTS.read_text())


def _param(name: str):
    arch, workload = name.split(" x ", 1)
    slow = workload.startswith("hf/") and arch != HF_PLATFORM
    return pytest.param(name, id=name, marks=[pytest.mark.slow] if slow else [])


def test_the_stored_file_names_exactly_the_shipped_pairs():
    assert sorted(STORED) == sorted(PAIRS)


@pytest.mark.parametrize("name", [_param(name) for name in PAIRS])
def test_result_is_byte_identical_to_the_stored_one(name: str):
    now = DIGESTS.pair_digest(PAIRS[name])
    assert now == STORED[name], f"{name}: {DIGESTS.difference(STORED[name], now)}"


def test_a_pair_run_twice_in_one_process_gives_one_digest():
    # The second run meets the memoised default search the first one filled.
    load = PAIRS[f"{HF_PLATFORM} x resnet50_b1"]
    assert DIGESTS.pair_digest(load) == DIGESTS.pair_digest(load)
