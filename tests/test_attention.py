"""The attention operator kind: its schema, and its two lowerings (unfused and flash)."""

import pytest
from pydantic import ValidationError

from simulator.workload import Attention, Workload

ATTENTION = dict(name="attn", layer_type="attention.core", kind="attention", batch=1,
                 heads=32, kv_heads=8, q_len=16, kv_len=64, head_dim=128)


def test_attention_fields_validate_and_count_macs():
    op = Workload(name="w", operators=[{**ATTENTION, "causal": True}]).operators[0]
    assert isinstance(op, Attention)
    assert op.group == 4
    # Causal: query i of the last 16 positions sees 64 - 16 + i + 1 keys.
    pairs = sum(64 - 16 + i + 1 for i in range(16))
    assert op.visible_pairs == pairs
    assert op.macs == 2 * 32 * pairs * 128


@pytest.mark.parametrize("change, message", [
    ({"kv_heads": 5}, "kv_heads 5 must divide heads 32"),
    ({"head_dim": 0}, "greater than 0"),
    ({"q_len": -1}, "greater than 0"),
    ({"causal": True, "q_len": 65}, "q_len 65 <= kv_len 64"),
    ({"kv_dtype": "int4"}, "Input should be"),
])
def test_attention_rejects_bad_shapes(change, message):
    with pytest.raises(ValidationError, match=message):
        Workload(name="w", operators=[{**ATTENTION, **change}])


def test_weight_dtype_is_a_gemm_field():
    op = Workload(name="w", operators=[dict(name="g", layer_type="fc", kind="gemm", m=4,
                                            n=4, k=4, weight_dtype="int8")]).operators[0]
    assert op.weight_dtype == "int8"
