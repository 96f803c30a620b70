"""Generate workloads/resnet50_b1.yaml: ResNet-50 v1.5 at batch 1, 224x224x3 input.

The network (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016, with
the v1.5 change of torchvision / NVIDIA's reference: the stride-2 of a downsampling
bottleneck sits on its 3x3 convolution, not on the first 1x1):

- conv1: 7x7/2, pad 3, 3 -> 64 channels, 224 -> 112;
- pool1: 3x3/2 max pool, pad 1, 112 -> 56;
- four stages of bottleneck blocks, [3, 4, 6, 3] blocks, widths 64/128/256/512 (x4 out),
  stride 1, 2, 2, 2 on the stage's first block. Each block is 1x1 (branch2a), 3x3 pad 1
  carrying the stride (branch2b), 1x1 (branch2c); the first block of each stage has a
  1x1 projection shortcut with the block's stride (branch1); the residual add is an
  `elementwise` `add`;
- avgpool: global 7x7 average pool; fc1000: a 1 x 1000 x 2048 GEMM.

ReLUs and batch norms are folded into the producing operator (inference graphs fuse
them), so they are not listed. Operator names follow the Caffe release
(res2a_branch2a, ...). dtype is left unset: it defaults to the platform's.

Run `python workloads/make_resnet50.py` to rewrite the YAML (deterministic) and print
the layer count and MAC total.
"""

from __future__ import annotations

from pathlib import Path

from simulator.workload import workload_yaml

OUTPUT = Path(__file__).with_name("resnet50_b1.yaml")

STAGES = [  # (stage number, blocks, bottleneck width, first-block stride)
    (2, 3, 64, 1),
    (3, 4, 128, 2),
    (4, 6, 256, 2),
    (5, 3, 512, 2),
]
EXPANSION = 4


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def operators() -> list[dict]:
    """The network as an ordered list of operator dicts (schema field order)."""
    ops: list[dict] = []

    def conv(name, layer_type, h, cin, cout, k, stride=1, padding=0):
        ops.append(dict(name=name, layer_type=layer_type, kind="conv2d", h=h, w=h,
                        cin=cin, cout=cout, kh=k, kw=k, stride=stride, padding=padding))
        return conv_out(h, k, stride, padding)

    size = conv("conv1", "conv.stem", 224, 3, 64, 7, stride=2, padding=3)
    ops.append(dict(name="pool1", layer_type="pool", kind="pool", h=size, w=size,
                    channels=64, kh=3, kw=3, stride=2, padding=1))
    size = conv_out(size, 3, 2, 1)
    channels = 64
    for stage, blocks, width, first_stride in STAGES:
        out_channels = width * EXPANSION
        for b in range(blocks):
            prefix = f"res{stage}{chr(ord('a') + b)}"
            stride = first_stride if b == 0 else 1
            conv(f"{prefix}_branch2a", "conv1x1", size, channels, width, 1)
            out = conv(f"{prefix}_branch2b", "conv3x3", size, width, width, 3,
                       stride=stride, padding=1)
            conv(f"{prefix}_branch2c", "conv1x1", out, width, out_channels, 1)
            if b == 0:
                conv(f"{prefix}_branch1", "conv.shortcut", size, channels, out_channels,
                     1, stride=stride)
            ops.append(dict(name=f"{prefix}_add", layer_type="residual_add",
                            kind="elementwise", elements=out * out * out_channels,
                            op="add"))
            size, channels = out, out_channels
    ops.append(dict(name="avgpool", layer_type="pool", kind="pool", h=size, w=size,
                    channels=channels, kh=size, kw=size, stride=1, padding=0))
    ops.append(dict(name="fc1000", layer_type="fc", kind="gemm", m=1, n=1000,
                    k=channels))
    return ops


def macs(op: dict) -> int:
    if op["kind"] == "conv2d":
        ho = conv_out(op["h"], op["kh"], op["stride"], op["padding"])
        return ho * ho * op["cout"] * op["cin"] * op["kh"] * op["kw"]
    if op["kind"] == "gemm":
        return op["m"] * op["n"] * op["k"]
    return 0


DESCRIPTION = (
    "ResNet-50 v1.5 (He et al., CVPR 2016; stride 2 on the 3x3 conv of downsampling "
    "bottlenecks, as in torchvision) at batch 1 on a 224x224x3 input: 53 convolutions, "
    "a 3x3/2 max pool, 16 residual adds, a global 7x7 average pool and a 1000-way fc. "
    "ReLUs and batch norms are folded into the producing operator. dtype is unset, so "
    "every operator uses the platform's default input dtype.")


def render(ops: list[dict]) -> str:
    """YAML text, one flow mapping per operator, fields in a fixed order."""
    return workload_yaml("resnet50_b1", DESCRIPTION, ops, "workloads/make_resnet50.py")


def main() -> None:
    ops = operators()
    OUTPUT.write_text(render(ops))
    convs = sum(op["kind"] == "conv2d" for op in ops)
    total = sum(macs(op) for op in ops)
    print(f"wrote {OUTPUT}: {len(ops)} operators, {convs} conv layers, "
          f"{total:,} MACs (conv + fc) = {total / 1e9:.3f} GMAC")


if __name__ == "__main__":
    main()
