"""Stable Diffusion XL as accsim workloads, for the MLPerf SDXL rows of
experiments/whole_models (issue 41): one denoising step of the UNet at a 1024 x 1024
image (a 128 x 128 x 4 latent) and the VAE decoder that turns the final latent into the
image. The shapes are stabilityai/stable-diffusion-xl-base-1.0's published configs
(unet/config.json and vae/config.json, as diffusers' UNet2DConditionModel and
AutoencoderKL build them):

- UNet: block_out_channels [320, 640, 1280], layers_per_block 2 (3 in the up blocks),
  down blocks DownBlock2D, CrossAttnDownBlock2D x 2; up blocks CrossAttnUpBlock2D x 2,
  UpBlock2D; transformer_layers_per_block [1, 2, 10] (the mid block 10);
  attention_head_dim [5, 10, 20] (diffusers reads it as the number of heads: 64 per
  head); cross_attention_dim 2048 over the 77 text tokens; GEGLU feed-forward of 4 x
  the width; GroupNorm of 32 groups.
- VAE decoder: block_out_channels [128, 256, 512, 512], layers_per_block 2 (3 ResNet
  blocks per up block), one single-head self-attention in the mid block, latent 4.

Left out as too small to matter: the timestep and pooled-text embeddings (a few
MFLOP), the text encoders (run once per prompt, about 0.1 TFLOP against the UNet's
tens), the scheduler's vector arithmetic. A GroupNorm is a `norm` over its rows; SiLU
and GELU are elementwise. Every repeat of a block is a distinct layer (its own
weights), as in the model; the 20 steps reuse the UNet's weights, so a measurement
runs this step workload `times: 20` instead of repeating it here.
"""

from __future__ import annotations

TEXT_TOKENS, TEXT_WIDTH, HEAD_DIM = 77, 2048, 64


class Ops:
    """Collects operators, naming each by its place in the network."""

    def __init__(self, batch: int):
        self.batch, self.ops = batch, []

    def add(self, name: str, kind: str, layer_type: str, repeat: int = 1, **shape):
        op = {"name": name, "layer_type": layer_type, "kind": kind, **shape}
        if repeat > 1:
            op["repeat"] = repeat
        self.ops.append(op)

    def conv(self, name, h, cin, cout, k=3, stride=1, repeat=1):
        self.add(name, "conv2d", "conv", repeat, batch=self.batch, h=h, w=h, cin=cin,
                 cout=cout, kh=k, kw=k, stride=stride, padding=k // 2)

    def norm_silu(self, name, h, c, repeat=1):
        rows = self.batch * h * h
        self.add(f"{name}_norm", "norm", "norm", repeat, rows=rows, cols=c)
        self.add(f"{name}_silu", "elementwise", "act", repeat, elements=rows * c, op="silu")

    def resnet(self, name, h, cin, cout, repeat=1):
        """GroupNorm, SiLU, 3x3 conv, GroupNorm, SiLU, 3x3 conv, the shortcut (a 1x1
        conv where the width changes) and the residual add."""
        self.norm_silu(f"{name}_a", h, cin, repeat)
        self.conv(f"{name}_conv1", h, cin, cout, repeat=repeat)
        self.norm_silu(f"{name}_b", h, cout, repeat)
        self.conv(f"{name}_conv2", h, cout, cout, repeat=repeat)
        if cin != cout:
            self.conv(f"{name}_shortcut", h, cin, cout, k=1, repeat=repeat)
        self.add(f"{name}_add", "elementwise", "residual_add", repeat,
                 elements=self.batch * h * h * cout, op="add")

    def transformer(self, name, h, c, depth, cross=True, repeat=1):
        """Transformer2DModel: GroupNorm, proj_in, `depth` BasicTransformerBlocks
        (self-attention, cross-attention over the text, GEGLU feed-forward, each
        behind a LayerNorm with its residual add), proj_out, the residual add."""
        tokens, heads, b = h * h, c // HEAD_DIM, self.batch
        rows = b * tokens
        self.add(f"{name}_norm", "norm", "norm", repeat, rows=rows, cols=c)
        self.add(f"{name}_proj_in", "gemm", "proj", repeat, m=rows, n=c, k=c)
        blocks = repeat * depth
        for part in ("self", "cross") if cross else ("self",):
            self.add(f"{name}_{part}_norm", "norm", "norm", blocks, rows=rows, cols=c)
            if part == "self":
                self.add(f"{name}_qkv", "gemm", "attn_proj", blocks, m=rows, n=3 * c, k=c)
                kv_len = tokens
            else:
                self.add(f"{name}_cross_q", "gemm", "attn_proj", blocks, m=rows, n=c, k=c)
                self.add(f"{name}_cross_kv", "gemm", "attn_proj", blocks,
                         m=b * TEXT_TOKENS, n=2 * c, k=TEXT_WIDTH)
                kv_len = TEXT_TOKENS
            self.add(f"{name}_{part}_attention", "attention", "attention", blocks,
                     batch=b, heads=heads, kv_heads=heads, q_len=tokens, kv_len=kv_len,
                     head_dim=HEAD_DIM, kv_cache=False)
            self.add(f"{name}_{part}_out", "gemm", "attn_proj", blocks, m=rows, n=c, k=c)
            self.add(f"{name}_{part}_add", "elementwise", "residual_add", blocks,
                     elements=rows * c, op="add")
        if cross:
            self.add(f"{name}_ff_norm", "norm", "norm", blocks, rows=rows, cols=c)
            self.add(f"{name}_ff1", "gemm", "ff", blocks, m=rows, n=8 * c, k=c)
            self.add(f"{name}_geglu", "elementwise", "act", blocks, elements=rows * 4 * c,
                     op="gelu")
            self.add(f"{name}_gate", "elementwise", "act", blocks, elements=rows * 4 * c,
                     op="mul")
            self.add(f"{name}_ff2", "gemm", "ff", blocks, m=rows, n=c, k=4 * c)
            self.add(f"{name}_ff_add", "elementwise", "residual_add", blocks,
                     elements=rows * c, op="add")
        self.add(f"{name}_proj_out", "gemm", "proj", repeat, m=rows, n=c, k=c)
        self.add(f"{name}_add", "elementwise", "residual_add", repeat,
                 elements=rows * c, op="add")


def sdxl_unet_step(images: int, latent: int = 128) -> dict:
    """One UNet call for `images` images with classifier-free guidance (the
    unconditional and the prompted latent: batch 2 x images)."""
    o, h0, h1, h2 = Ops(2 * images), latent, latent // 2, latent // 4
    o.conv("conv_in", h0, 4, 320)
    o.resnet("down0_resnet", h0, 320, 320, repeat=2)
    o.conv("down0_downsample", h0, 320, 320, stride=2)
    o.resnet("down1_resnet0", h1, 320, 640)
    o.transformer("down1_attn", h1, 640, 2, repeat=2)
    o.resnet("down1_resnet1", h1, 640, 640)
    o.conv("down1_downsample", h1, 640, 640, stride=2)
    o.resnet("down2_resnet0", h2, 640, 1280)
    o.transformer("down2_attn", h2, 1280, 10, repeat=2)
    o.resnet("down2_resnet1", h2, 1280, 1280)
    o.resnet("mid_resnet", h2, 1280, 1280, repeat=2)
    o.transformer("mid_attn", h2, 1280, 10)
    # Up blocks: each ResNet block reads its input concatenated with a skip from the
    # down path (the skips, newest first: 1280, 1280, 640 | 640, 640, 320 | 320 x 3).
    o.resnet("up0_resnet01", h2, 2560, 1280, repeat=2)
    o.resnet("up0_resnet2", h2, 1920, 1280)
    o.transformer("up0_attn", h2, 1280, 10, repeat=3)
    o.conv("up0_upsample", h1, 1280, 1280)
    o.resnet("up1_resnet0", h1, 1920, 640)
    o.resnet("up1_resnet1", h1, 1280, 640)
    o.resnet("up1_resnet2", h1, 960, 640)
    o.transformer("up1_attn", h1, 640, 2, repeat=3)
    o.conv("up1_upsample", h0, 640, 640)
    o.resnet("up2_resnet0", h0, 960, 320)
    o.resnet("up2_resnet12", h0, 640, 320, repeat=2)
    o.norm_silu("out", h0, 320)
    o.conv("conv_out", h0, 320, 4)
    return {"name": f"sdxl_unet_step_{images}img", "operators": o.ops}


def sdxl_vae_decode(images: int, latent: int = 128) -> dict:
    """The VAE decoder: conv_in, the mid block (ResNet, single-head self-attention over
    every latent position, ResNet), four up blocks of 3 ResNet blocks each (the first
    three ending in a 2x nearest upsample and a 3x3 conv), GroupNorm, SiLU, conv_out."""
    o, h = Ops(images), latent
    o.conv("conv_in", h, 4, 512)
    o.resnet("mid_resnet", h, 512, 512, repeat=2)
    o.add("mid_attn_norm", "norm", "norm", rows=images * h * h, cols=512)
    o.add("mid_attn_qkv", "gemm", "attn_proj", m=images * h * h, n=3 * 512, k=512)
    o.add("mid_attention", "attention", "attention", batch=images, heads=1, kv_heads=1,
          q_len=h * h, kv_len=h * h, head_dim=512, kv_cache=False)
    o.add("mid_attn_out", "gemm", "attn_proj", m=images * h * h, n=512, k=512)
    widths = [(512, 512), (512, 512), (512, 256), (256, 128)]
    for i, (cin, cout) in enumerate(widths):
        if cin != cout:
            o.resnet(f"up{i}_resnet0", h, cin, cout)
            o.resnet(f"up{i}_resnet12", h, cout, cout, repeat=2)
        else:
            o.resnet(f"up{i}_resnet", h, cin, cout, repeat=3)
        if i < len(widths) - 1:
            h *= 2
            o.conv(f"up{i}_upsample", h, cout, cout)
    o.norm_silu("out", h, 128)
    o.conv("conv_out", h, 128, 3)
    return {"name": f"sdxl_vae_decode_{images}img", "operators": o.ops}
