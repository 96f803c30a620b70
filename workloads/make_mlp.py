"""Generate workloads/tpu_v1_mlp_b200.yaml: a TPU v1 style MLP stack at batch 200.

Source: Jouppi et al., "In-Datacenter Performance Analysis of a Tensor Processing Unit",
ISCA 2017, Table 1, MLP0: 5 fully connected layers, ReLU, 20M weights, batch size 200
(200 operations per weight byte). The paper does not publish the layer widths.
Assumption: five square 2048 x 2048 layers, 5 x 4,194,304 = 20,971,520 weights, within
5% of the paper's 20M. Each layer is a gemm with M = batch 200, N = 2048, K = 2048,
followed by an elementwise ReLU on its 200 x 2048 outputs (the last layer's too), kept
as its own operator so that a mapping can fuse it (`fuse: relu1` on fc1, ...). Biases
are folded into the GEMMs. dtype is left unset: it defaults to the platform's (int8 on
tpu_v1).

Run `python workloads/make_mlp.py` to rewrite the YAML (deterministic) and print the
operator count and GEMM FLOP total.
"""

from __future__ import annotations

from pathlib import Path

from simulator.workload import workload_yaml

OUTPUT = Path(__file__).with_name("tpu_v1_mlp_b200.yaml")
BATCH = 200
WIDTH = 2048
LAYERS = 5


def operators() -> list[dict]:
    """The stack as an ordered list of operator dicts (schema field order)."""
    ops: list[dict] = []
    for layer in range(1, LAYERS + 1):
        ops.append(dict(name=f"fc{layer}", layer_type="fc", kind="gemm", m=BATCH,
                        n=WIDTH, k=WIDTH))
        ops.append(dict(name=f"relu{layer}", layer_type="relu", kind="elementwise",
                        elements=BATCH * WIDTH, op="relu"))
    return ops


def gemm_flops(op: dict) -> int:
    """2 x MACs of a gemm operator (what the simulator reports as model FLOPs)."""
    return 2 * op["m"] * op["n"] * op["k"] if op["kind"] == "gemm" else 0


def render(ops: list[dict]) -> str:
    """YAML text, one flow mapping per operator, fields in a fixed order."""
    flops = sum(gemm_flops(op) for op in ops)
    weights = LAYERS * WIDTH * WIDTH
    description = (
        "TPU v1 style MLP (Jouppi et al., ISCA 2017, Table 1, MLP0: 5 FC layers, ReLU, "
        f"20M weights, batch {BATCH}). Layer widths are not published; assumed {LAYERS} "
        f"square {WIDTH} x {WIDTH} layers ({weights:,} weights), each a gemm M={BATCH} "
        f"N={WIDTH} K={WIDTH} followed by an elementwise ReLU. GEMM work {flops:,} "
        "FLOPs. Biases are folded into the GEMMs. dtype is unset, so every operator "
        "uses the platform's default input dtype.")
    return workload_yaml(f"tpu_v1_mlp_b{BATCH}", description, ops,
                         "workloads/make_mlp.py")


def main() -> None:
    ops = operators()
    OUTPUT.write_text(render(ops))
    flops = sum(gemm_flops(op) for op in ops)
    print(f"wrote {OUTPUT}: {len(ops)} operators, {flops:,} GEMM FLOPs "
          f"= {flops / 1e9:.3f} GFLOP")


if __name__ == "__main__":
    main()
