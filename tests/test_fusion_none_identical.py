"""`--fusion none` reproduces the operator-at-a-time figures exactly (issue 24's
acceptance): every shipped pair run under `fusion: none` gives the digests in
tests/data/shipped_digests_fusion_none.json, written by experiments/shipped_digests.py
--fusion none on the code before the planner became the default (MODEL_VERSION 3), and
checked then against that code's default digests with only the mapping's `fusion`
field apart. The manifest of this net leaves out model_version (the default model moved
to 4; this mode did not) and what operand orientation (MODEL_VERSION 6) added to the
inputs; its GEMMs run normal. Since MODEL_VERSION 6 the pairs with attention carry its
figures as kernels run it (DESIGN.md section 19), rewritten deliberately; the GEMM and
vector operators' figures are MODEL_VERSION 3's still.

As in test_shipped_identical.py, the LLM steps on platforms other than HF_PLATFORM are
marked slow. One fixed mode is one code path whatever the pair, so the default run takes
the walk of tests/in_turn.py through the rest (each platform and workload, each model
and phase) and marks the others slow; `pytest -m slow` runs every pair, as does
`experiments/shipped_digests.py --fusion none --check`."""

from __future__ import annotations

import json

import pytest

from digest_net import HF_PLATFORM, load_script, pair_cases

DIGESTS = load_script()
PAIRS = DIGESTS.shipped_pairs("none", "normal")   # GEMMs normal: orientation came later
STORED = json.loads(DIGESTS.digests_file("none").read_text())


def test_the_none_file_names_exactly_the_shipped_pairs():
    assert sorted(STORED) == sorted(PAIRS)


@pytest.mark.parametrize("name", pair_cases(PAIRS, walk=True))
def test_fusion_none_is_byte_identical_to_the_operator_at_a_time_model(name: str):
    now = DIGESTS.pair_digest(PAIRS[name], fixed_mode=True)
    assert now == STORED[name], f"{name}: {DIGESTS.difference(STORED[name], now)}"


def test_the_none_net_leaves_out_only_the_model_version():
    result = DIGESTS.stable_result(PAIRS[f"{HF_PLATFORM} x bert_base_s128"](),
                                   fixed_mode=True)
    assert "model_version" not in result["manifest"]
    assert result["manifest"]["inputs"]["mapping"]["canonical"]["fusion"] == "none"
    assert "engine" in result["manifest"]
