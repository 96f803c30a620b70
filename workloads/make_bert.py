"""Generate workloads/bert_base_s128.yaml and workloads/bert_base_s512.yaml: ONE encoder
layer of BERT-base at batch 1, sequence length 128 and 512.

BERT-base (Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for
Language Understanding", NAACL 2019): 12 layers, hidden 768, 12 heads of 64, FFN 3072,
post-layer-norm (the original Transformer of Vaswani et al., 2017). Each trace holds one
encoder layer, repeat 1; the 12-layer model is twelve identical layers, so its time and
work are 12x the trace's (every operator's shape is the same in every layer). One layer
is shipped rather than `repeat: 12` on every operator because the issue asks for a layer
and because repeat would run each operator twelve times back to back, which is not the
model's order anyway.

With S tokens (batch 1, so GEMM M = S), operators in order:

- layer0_attn_qkv: Q, K and V projections as ONE gemm, S x 2304 x 768 (the three
  768-wide weight matrices concatenated). Optimised inference runtimes (FasterTransformer,
  TensorRT, XLA) fuse the three projections that share their input; one GEMM reads the
  S x 768 input once instead of three times and has the same MACs;
- layer0_attn_qk: scores Q.K^T, a batched gemm over the 12 heads, S x S x 64 each;
- layer0_attn_softmax: softmax over each score row, rows 12*S, cols S. The 1/sqrt(64)
  scale and the attention mask add are folded into it (not listed);
- layer0_attn_pv: context P.V, a batched gemm over the 12 heads, S x 64 x S each;
- layer0_attn_out: output projection, S x 768 x 768;
- layer0_attn_add: residual add, S*768 elements; layer0_attn_norm: layer norm, S x 768;
- layer0_mlp_up: S x 3072 x 768; layer0_mlp_gelu: GELU on its S*3072 outputs, right
  after it so that a mapping can fuse it (`fuse: layer0_mlp_gelu`, see
  workloads/mappings/bert_base_fuse_gelu.yaml);
- layer0_mlp_down: S x 768 x 3072;
- layer0_mlp_add: residual add, S*768; layer0_mlp_norm: layer norm, S x 768.

Bias adds are folded into the producing GEMM; head split / merge reshapes and
transposes are data layout and not listed. Operator names are the same at every
sequence length, so one mapping serves both files. dtype is left unset: it defaults to
the platform's.

Run `python workloads/make_bert.py` to rewrite both YAML files (deterministic) and print
each one's operator count and GEMM FLOP total.
"""

from __future__ import annotations

from pathlib import Path

from simulator.inputs.workload import workload_yaml

HERE = Path(__file__).parent
SEQUENCES = (128, 512)
HIDDEN = 768
HEADS = 12
HEAD_DIM = HIDDEN // HEADS  # 64
FFN = 3072


def output(seq: int) -> Path:
    return HERE / f"bert_base_s{seq}.yaml"


def operators(seq: int) -> list[dict]:
    """One encoder layer at sequence length `seq` as operator dicts (schema field order)."""
    s = seq

    def gemm(name, layer_type, m, n, k, batch=1):
        op = dict(name=name, layer_type=layer_type, kind="gemm")
        if batch != 1:
            op["batch"] = batch
        op.update(m=m, n=n, k=k)
        return op

    def rows(name, layer_type, kind, r, c):
        return dict(name=name, layer_type=layer_type, kind=kind, rows=r, cols=c)

    def elementwise(name, layer_type, elements, op):
        return dict(name=name, layer_type=layer_type, kind="elementwise",
                    elements=elements, op=op)

    return [
        gemm("layer0_attn_qkv", "attention.qkv", s, 3 * HIDDEN, HIDDEN),
        gemm("layer0_attn_qk", "attention.qk", s, s, HEAD_DIM, batch=HEADS),
        rows("layer0_attn_softmax", "attention.softmax", "softmax", HEADS * s, s),
        gemm("layer0_attn_pv", "attention.pv", s, HEAD_DIM, s, batch=HEADS),
        gemm("layer0_attn_out", "attention.out", s, HIDDEN, HIDDEN),
        elementwise("layer0_attn_add", "residual_add", s * HIDDEN, "add"),
        rows("layer0_attn_norm", "norm", "norm", s, HIDDEN),
        gemm("layer0_mlp_up", "mlp.up", s, FFN, HIDDEN),
        elementwise("layer0_mlp_gelu", "mlp.gelu", s * FFN, "gelu"),
        gemm("layer0_mlp_down", "mlp.down", s, HIDDEN, FFN),
        elementwise("layer0_mlp_add", "residual_add", s * HIDDEN, "add"),
        rows("layer0_mlp_norm", "norm", "norm", s, HIDDEN),
    ]


def gemm_flops(op: dict) -> int:
    """2 x MACs of a gemm operator (what the simulator reports as model FLOPs)."""
    if op["kind"] != "gemm":
        return 0
    return 2 * op.get("batch", 1) * op["m"] * op["n"] * op["k"]


def render(seq: int, ops: list[dict]) -> str:
    """YAML text, one flow mapping per operator, fields in a fixed order."""
    flops = sum(gemm_flops(op) for op in ops)
    description = (
        f"ONE encoder layer of BERT-base (Devlin et al., NAACL 2019: hidden {HIDDEN}, "
        f"{HEADS} heads of {HEAD_DIM}, FFN {FFN}, post-layer-norm) at batch 1, sequence "
        f"length {seq}; the 12-layer model is 12 of these. Q, K and V projections are "
        "one fused GEMM; attention is a batched GEMM over the heads; the score scale "
        "and mask are folded into the softmax and biases into the GEMMs. GEMM work "
        f"{flops:,} FLOPs. GELU directly follows mlp.up so a mapping can fuse it "
        "(workloads/mappings/bert_base_fuse_gelu.yaml). dtype is unset, so every "
        "operator uses the platform's default input dtype.")
    return workload_yaml(f"bert_base_s{seq}", description, ops,
                         ["Generated by workloads/make_bert.py; edit that script, "
                          "not this file."])


def main() -> None:
    for seq in SEQUENCES:
        ops = operators(seq)
        output(seq).write_text(render(seq, ops))
        flops = sum(gemm_flops(op) for op in ops)
        print(f"wrote {output(seq)}: {len(ops)} operators, {flops:,} GEMM FLOPs "
              f"= {flops / 1e9:.3f} GFLOP per layer")


if __name__ == "__main__":
    main()
