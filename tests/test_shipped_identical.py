"""Every shipped platform x workload, and every shipped Hugging Face model's prefill and
decode step, gives the result recorded in tests/data/shipped_digests.json (written by
experiments/shipped_digests.py before issue 22's refactor, and rewritten since only for
deliberate changes whose commits say which parts of which pairs moved): a change that
should move no figure moves none.

The default run covers every shipped workload on every platform and the LLM steps on
HF_PLATFORM; the LLM steps on the other platforms (most of the time, the 32 x 32 array
above all) are marked slow."""

from __future__ import annotations

import json

import pytest

from digest_net import HF_PLATFORM, load_script, pair_cases

DIGESTS = load_script()
PAIRS = DIGESTS.shipped_pairs()
STORED = json.loads(DIGESTS.DIGESTS.read_text())


def test_the_stored_file_names_exactly_the_shipped_pairs():
    assert sorted(STORED) == sorted(PAIRS)


@pytest.mark.parametrize("name", pair_cases(PAIRS))
def test_result_is_byte_identical_to_the_stored_one(name: str):
    now = DIGESTS.pair_digest(PAIRS[name])
    assert now == STORED[name], f"{name}: {DIGESTS.difference(STORED[name], now)}"


def test_a_pair_run_twice_in_one_process_gives_one_digest():
    # The second run meets the memoised default search the first one filled.
    load = PAIRS[f"{HF_PLATFORM} x resnet50_b1"]
    assert DIGESTS.pair_digest(load) == DIGESTS.pair_digest(load)
