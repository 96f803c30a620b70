"""The shipped BERT-base encoder layers and the TPU v1 MLP stack: they load by shipped
name, are what their generators write, chain their shapes, carry the hand-computed FLOP
totals, and the GELU fusion mapping removes the GELU and moves its work onto the
MLP-up GEMM's vector epilogue (DESIGN.md section 2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.loader import shipped_folder, load_model, locate, shipped_names
from simulator.mapping.plan import Mapping
from simulator.simulate import simulate
from simulator.inputs.workload import Elementwise, Gemm, RowOperator, Workload, is_compute

BERT = {128: "bert_base_s128", 512: "bert_base_s512"}
MLP = "tpu_v1_mlp_b200"
# Not package data (pyproject ships workloads/*.yaml only): found in the checkout.
FUSE_GELU = Path(__file__).resolve().parents[1] / "workloads" / "mappings" \
    / "bert_base_fuse_gelu.yaml"

HIDDEN, HEADS, HEAD_DIM, FFN = 768, 12, 64, 3072

# The encoder layer's operators in order: (name, layer_type, kind).
BERT_ORDER = [
    ("layer0_attn_qkv", "attention.qkv", "gemm"),
    ("layer0_attn_qk", "attention.qk", "gemm"),
    ("layer0_attn_softmax", "attention.softmax", "softmax"),
    ("layer0_attn_pv", "attention.pv", "gemm"),
    ("layer0_attn_out", "attention.out", "gemm"),
    ("layer0_attn_add", "residual_add", "elementwise"),
    ("layer0_attn_norm", "norm", "norm"),
    ("layer0_mlp_up", "mlp.up", "gemm"),
    ("layer0_mlp_gelu", "mlp.gelu", "elementwise"),
    ("layer0_mlp_down", "mlp.down", "gemm"),
    ("layer0_mlp_add", "residual_add", "elementwise"),
    ("layer0_mlp_norm", "norm", "norm"),
]
BERT_LAYER_TYPES = {"attention.qkv", "attention.qk", "attention.softmax", "attention.pv",
                    "attention.out", "residual_add", "norm", "mlp.up", "mlp.gelu",
                    "mlp.down"}


def bert_gemm_flops(s: int) -> int:
    """GEMM FLOPs (2 per MAC) of one BERT-base encoder layer at batch 1, S tokens."""
    qkv = 2 * s * (3 * HIDDEN) * HIDDEN         # S x 2304 x 768
    qk = 2 * HEADS * s * s * HEAD_DIM           # 12 x (S x S x 64)
    pv = 2 * HEADS * s * HEAD_DIM * s           # 12 x (S x 64 x S)
    out = 2 * s * HIDDEN * HIDDEN               # S x 768 x 768
    up = 2 * s * FFN * HIDDEN                   # S x 3072 x 768
    down = 2 * s * HIDDEN * FFN                 # S x 768 x 3072
    return qkv + qk + pv + out + up + down


# By hand: 2*S*768*(2304 + 768 + 3072 + 3072) + 4*12*64*S^2 = 14,155,776*S + 3,072*S^2.
# S=128: 1,811,939,328 + 50,331,648 = 1,862,270,976 (1.86 GFLOP per layer).
# S=512: 7,247,757,312 + 805,306,368 = 8,053,063,680 (8.05 GFLOP per layer).
BERT_FLOPS = {128: 1_862_270_976, 512: 8_053_063_680}
# MLP: 5 layers x 2 x 200 x 2048 x 2048 = 5 x 1,677,721,600 = 8,388,608,000.
MLP_FLOPS = 8_388_608_000


def load_workload(name: str) -> Workload:
    return load_model(locate(name, "workload"), Workload)[0]


def gemm_flops(workload: Workload) -> int:
    return sum(2 * op.gemm().macs * op.repeat for op in workload.operators
               if is_compute(op))


def generator(module_name: str):
    path = shipped_folder("workload") / f"{module_name}.py"
    spec = importlib.util.spec_from_file_location(module_name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shipped_text(name: str) -> str:
    return (shipped_folder("workload") / f"{name}.yaml").read_text()


@pytest.mark.parametrize("name", [*BERT.values(), MLP])
def test_loads_by_shipped_name(name):
    assert name in shipped_names("workload")
    workload = load_workload(name)
    assert workload.name == name
    assert all(op.dtype is None and op.repeat == 1 for op in workload.operators)


@pytest.mark.parametrize("seq", sorted(BERT))
def test_bert_yaml_is_what_the_generator_writes(seq):
    module = generator("make_bert")
    assert module.render(seq, module.operators(seq)) == shipped_text(BERT[seq])


def test_mlp_yaml_is_what_the_generator_writes():
    module = generator("make_mlp")
    assert module.render(module.operators()) == shipped_text(MLP)


def test_flop_formula_matches_the_hand_totals():
    for seq, flops in BERT_FLOPS.items():
        assert bert_gemm_flops(seq) == flops
        assert 14_155_776 * seq + 3_072 * seq**2 == flops


@pytest.mark.parametrize("seq", sorted(BERT))
def test_bert_flop_total(seq):
    assert gemm_flops(load_workload(BERT[seq])) == BERT_FLOPS[seq]


def test_mlp_flop_total():
    assert gemm_flops(load_workload(MLP)) == MLP_FLOPS


@pytest.mark.parametrize("seq", sorted(BERT))
def test_bert_operator_order_and_labels(seq):
    ops = load_workload(BERT[seq]).operators
    assert [(op.name, op.layer_type, op.kind) for op in ops] == BERT_ORDER
    assert {op.layer_type for op in ops} == BERT_LAYER_TYPES


@pytest.mark.parametrize("seq", sorted(BERT))
def test_bert_shapes_chain(seq):
    s = seq
    ops = {op.name: op for op in load_workload(BERT[seq]).operators}

    def gemm(name):
        op = ops[name]
        assert isinstance(op, Gemm)
        return op.batch, op.m, op.n, op.k

    assert gemm("layer0_attn_qkv") == (1, s, 3 * HIDDEN, HIDDEN)
    assert gemm("layer0_attn_qk") == (HEADS, s, s, HEAD_DIM)
    assert gemm("layer0_attn_pv") == (HEADS, s, HEAD_DIM, s)
    assert gemm("layer0_attn_out") == (1, s, HIDDEN, HIDDEN)
    assert gemm("layer0_mlp_up") == (1, s, FFN, HIDDEN)
    assert gemm("layer0_mlp_down") == (1, s, HIDDEN, FFN)
    softmax = ops["layer0_attn_softmax"]
    assert isinstance(softmax, RowOperator)
    assert (softmax.rows, softmax.cols) == (HEADS * s, s)
    for name in ("layer0_attn_add", "layer0_mlp_add"):
        assert isinstance(ops[name], Elementwise)
        assert (ops[name].elements, ops[name].op) == (s * HIDDEN, "add")
    for name in ("layer0_attn_norm", "layer0_mlp_norm"):
        assert (ops[name].kind, ops[name].rows, ops[name].cols) == ("norm", s, HIDDEN)
    gelu = ops["layer0_mlp_gelu"]
    assert (gelu.elements, gelu.op) == (s * FFN, "gelu")


@pytest.mark.parametrize("seq", sorted(BERT))
def test_gelu_can_be_fused_into_mlp_up(seq):
    """What lowering checks for `fuse`: the GELU is the very next operator and has
    exactly batch*M*N elements of the GEMM's output."""
    ops = load_workload(BERT[seq]).operators
    names = [op.name for op in ops]
    up = ops[names.index("layer0_mlp_up")]
    following = ops[names.index("layer0_mlp_up") + 1]
    assert following.name == "layer0_mlp_gelu" and not is_compute(following)
    shape = following.vector()
    g = up.gemm()
    assert shape.rows * shape.cols == g.m * g.n * g.instances == seq * FFN


def test_fuse_mapping_names_mlp_up_and_gelu():
    plan = load_model(FUSE_GELU, Mapping)[0]
    assert {name: spec.fuse for name, spec in plan.operators.items()} == \
        {"layer0_mlp_up": "layer0_mlp_gelu"}


@pytest.fixture(scope="module", params=sorted(BERT), ids=lambda s: f"s{s}")
def fused_and_plain(request):
    name = BERT[request.param]
    # Operator at a time against only the plan's `fuse:` (the planner would fuse more),
    # both normal: a transposed GEMM's store is a vector pass of its own (section 19).
    plain = simulate(load_inputs("tpu_v5e_like", name, None, fusion="none",
                                 orientation="normal"))
    fused = simulate(load_inputs("tpu_v5e_like", name, str(FUSE_GELU), fusion="epilogue",
                                 orientation="normal"))
    return request.param, plain, fused


def test_fusing_gelu_removes_it_and_adds_vector_work_to_mlp_up(fused_and_plain):
    seq, plain, fused = fused_and_plain
    plain_ops = {op.lowered.name: op for op in plain.operators}
    fused_ops = {op.lowered.name: op for op in fused.operators}
    assert len(fused.operators) == len(plain.operators) - 1
    assert set(plain_ops) - set(fused_ops) == {"layer0_mlp_gelu"}
    before, after = plain_ops["layer0_mlp_up"], fused_ops["layer0_mlp_up"]
    assert before.lowered.fused is None and before.run.vector_busy_cycles == 0
    assert after.lowered.fused == "layer0_mlp_gelu"
    assert after.run.vector_busy_cycles > 0
    # The epilogue does the GELU's element work: one pass over S x 3072.
    assert after.lowered.counters.vector_elements == seq * FFN
    # The array work is unchanged; the GELU's own round trip off chip is gone.
    assert after.totals.model_flops == before.totals.model_flops
    gelu = plain_ops["layer0_mlp_gelu"]
    assert fused.total.offchip_bytes < plain.total.offchip_bytes
    assert after.totals.cycles < before.totals.cycles + gelu.totals.cycles
    # Both runs account for the layer's full GEMM work.
    assert plain.total.model_flops == fused.total.model_flops == BERT_FLOPS[seq]


def test_mlp_follows_tpu_v1_mlp0():
    ops = load_workload(MLP).operators
    assert len(ops) == 10
    fcs, relus = ops[0::2], ops[1::2]
    for layer, (fc, relu) in enumerate(zip(fcs, relus), start=1):
        assert (fc.name, fc.layer_type, fc.kind) == (f"fc{layer}", "fc", "gemm")
        assert (fc.batch, fc.m, fc.n, fc.k) == (1, 200, 2048, 2048)
        assert (relu.name, relu.kind, relu.op) == (f"relu{layer}", "elementwise", "relu")
        assert relu.elements == fc.m * fc.n  # fusable into its fc
    # Jouppi et al., ISCA 2017, Table 1: MLP0 has 5 FC layers and 20M weights.
    weights = sum(fc.k * fc.n for fc in fcs)
    assert weights == pytest.approx(20e6, rel=0.05)
