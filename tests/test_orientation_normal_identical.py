"""`--orientation normal` reproduces the figures of the code before operand orientation
existed exactly (issue 41's acceptance): every shipped pair run with every GEMM fixed
normal gives the digests in tests/data/shipped_digests_orientation_normal.json, written
by experiments/shipped_digests.py's net on the code before orientation (MODEL_VERSION
5). The net's manifest leaves out model_version and what orientation added to the
inputs (the mapping's `orientation`, the platform's `systolic_array.transpose`).

As in test_shipped_identical.py, the LLM steps on platforms other than HF_PLATFORM are
marked slow. One fixed mode is one code path whatever the pair, so the default run takes
the walk of tests/in_turn.py through the rest (each platform and workload, each model
and phase) and marks the others slow; `pytest -m slow` runs every pair, as does
`experiments/shipped_digests.py --orientation normal --check`."""

from __future__ import annotations

import json

import pytest

from digest_net import HF_PLATFORM, load_script, pair_cases

DIGESTS = load_script()
PAIRS = DIGESTS.shipped_pairs(orientation="normal")
STORED = json.loads(DIGESTS.digests_file(None, "normal").read_text())


def test_the_normal_file_names_exactly_the_shipped_pairs():
    assert sorted(STORED) == sorted(PAIRS)


@pytest.mark.parametrize("name", pair_cases(PAIRS, walk=True))
def test_orientation_normal_is_byte_identical_to_the_code_before_it(name: str):
    now = DIGESTS.pair_digest(PAIRS[name], fixed_mode=True)
    assert now == STORED[name], f"{name}: {DIGESTS.difference(STORED[name], now)}"


def test_the_normal_net_leaves_out_only_what_orientation_added():
    result = DIGESTS.stable_result(PAIRS[f"{HF_PLATFORM} x bert_base_s128"](),
                                   fixed_mode=True)
    assert "model_version" not in result["manifest"]
    canonical = result["manifest"]["inputs"]
    assert "orientation" not in canonical["mapping"]["canonical"]
    assert "transpose" not in canonical["platform"]["canonical"]["systolic_array"]
    assert "engine" in result["manifest"]
