"""The operators of one decoder layer of each kind (DESIGN.md sections 9 and 21): a
mixer (attention: full, sliding-window or chunked; multi-head latent attention; a
state-space scan; or none) and a feed-forward block (dense MLP, MoE, or none), each
after its norm and before its residual add. Layers of one kind are identical, so one
is built and carries `repeat` = the count of such layers.

A step is a list of requests, each (new tokens, cached tokens, how many such
requests); projections and MLPs run over all the step's T tokens, attention per
request shape, a scan per request length.

- Attention keys: full reads every cached and new key; sliding reads the last
  `sliding_window`; chunked (Llama 4) reads the keys of the query's own chunk of
  `attention_chunk_size`, so a prompt is split at chunk boundaries.
- MLA (DeepSeek-V2/V3): q through its latent (q_a, norm, q_b), the kv latent and
  RoPE key (kv_a, norm), then either the naive form (kv_b up-projects every key read
  to heads x (nope + v), then attention with head_dim (qk + v) / 2, which gives the
  QK^T + PV MACs and the K + V bytes exactly) or the absorbed form (q_nope x W_UK per
  head, attention of all heads against the one cached latent + RoPE key as one K/V
  head of head_dim (2 x kv_lora_rank + rope) / 2, the output x W_UV per head), the
  one with fewer MACs for the step. The absorbed form's attention says `kv_latent`
  (latent + RoPE key elements): K and V are that one cached tensor, which a flash
  kernel reads once for both products (unfused, each product's kernel reads its own).
- Scan (Mamba, Mamba2): in_proj, the causal depthwise convolution (a reduction over
  `conv` taps per channel, reading the conv state in decode), its SiLU, (Mamba:
  x_proj, dt_proj), the `scan` kind over the state (Mamba2 over more than one token:
  the chunked SSD form on the array, _ssd), the gate silu(z) x y, (Mamba2: the gated
  RMSNorm), out_proj.
- MoE: with T tokens, top-k routing over E experts, the experts touched are
  min(E, T x k) and the busiest expert's tokens ceil(T x k / E x imbalance) (at
  most T, at least 1); every touched expert's GEMM is sized by the busiest; shared
  experts run over every token.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.frontends.hf.config import ModelConfig
from simulator.frontends.hf.families import (CHUNKED, FULL, MOE, NONE, SLIDING, SSM,
                                             Layer)


@dataclass(frozen=True)
class Precision:
    """Per-operand dtypes (None: the platform's default) and the MoE imbalance."""

    dtype: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    imbalance: float = 1.0


@dataclass(frozen=True)
class AttentionShape:
    """One attention operator: `batch` requests with the same query and key lengths."""

    batch: int
    q_len: int
    kv_len: int
    causal: bool


def busiest_expert_tokens(cfg: ModelConfig, tokens: int, imbalance: float) -> int:
    """ceil(T x k / E x imbalance), within 1 .. T."""
    busiest = math.ceil(tokens * cfg.experts_per_token / cfg.experts * imbalance)
    return max(1, min(tokens, busiest))


def experts_touched(cfg: ModelConfig, tokens: int) -> int:
    """min(E, T x k): the experts whose weights a step reads."""
    return min(cfg.experts, tokens * cfg.experts_per_token)


class Builder:
    """Operator dicts in order, each given the precision fields that apply to it; a
    GEMM's weight format is the run's weight dtype, else the format config.json
    declares for its role (simulator.frontends.hf.quantization)."""

    def __init__(self, cfg: ModelConfig, precision: Precision) -> None:
        self.cfg = cfg
        self.precision = precision
        self.ops: list[dict] = []

    def add(self, name: str, layer_type: str, kind: str, repeat: int,
            inputs: Sequence[str] = (), **shape) -> None:
        op = {"name": name, "layer_type": layer_type, "kind": kind, **shape}
        if inputs:   # the edges the fusion planner follows (DESIGN.md section 15)
            op["inputs"] = list(inputs)
        p = self.precision
        if p.dtype:
            op["dtype"] = p.dtype
        if kind == "gemm" and p.weight_dtype:
            op["weight_dtype"] = p.weight_dtype
        if kind == "attention" and p.kv_dtype:
            op["kv_dtype"] = p.kv_dtype
        if kind == "attention":  # an LLM's K and V stay on the chip across steps
            op["kv_cache"] = True
        if repeat > 1:
            op["repeat"] = repeat
            if kind == "gemm":  # one repeat per layer, each with its own weights
                op["weights"] = "distinct"
        self.ops.append(op)

    def gemm(self, name: str, layer_type: str, m: int, n: int, k: int, repeat: int,
             batch: int = 1, inputs: Sequence[str] = (), role: str | None = None) -> None:
        shape = {"batch": batch} if batch > 1 else {}
        declared = self.cfg.weight_format(role) if role else None
        if declared and not self.precision.weight_dtype:
            shape["weight_dtype"] = declared
        self.add(name, layer_type, "gemm", repeat, inputs, **shape, m=m, n=n, k=k)


@dataclass(frozen=True)
class Step:
    """What one step runs: requests as (new tokens, cached tokens) -> how many."""

    requests: Counter

    @property
    def tokens(self) -> int:
        return sum(new * count for (new, _), count in self.requests.items())


def _chunked_shapes(new: int, cached: int, chunk: int) -> list[tuple[int, int, bool]]:
    """(q_len, kv_len, causal) per chunk the new tokens fall in: each query reads the
    keys of its own chunk up to itself."""
    shapes, position, end = [], cached, cached + new
    while position < end:
        start = position - position % chunk
        last = min(end, start + chunk)
        shapes.append((last - position, last - start, last - position > 1))
        position = last
    return shapes


def attention_shapes(cfg: ModelConfig, mixer: str, step: Step) -> list[AttentionShape]:
    """The step's attention operators for layers of `mixer`, identical shapes grouped
    into one operator's batch."""
    shapes: Counter = Counter()
    for (new, cached), count in step.requests.items():
        if mixer == CHUNKED:
            for shape in _chunked_shapes(new, cached, cfg.chunk):
                shapes[shape] += count
            continue
        keys = new + cached
        if mixer == SLIDING:
            keys = min(keys, cfg.sliding_window)
        # One query sees every key it may: causal and full attention are the same work.
        shapes[(new, keys, new > 1 and new <= keys)] += count
    return [AttentionShape(count, q, kv, causal)
            for (q, kv, causal), count in sorted(shapes.items())]


def _attention_ops(b: Builder, p: str, shapes: Sequence[AttentionShape], n: int,
                   inputs: list[str], heads: int, kv_heads: int, head_dim: int,
                   kv_latent: int | None = None) -> list:
    names = []
    latent = {"kv_latent": kv_latent} if kv_latent else {}
    for shape in shapes:
        name = p + ("attn" if len(shapes) == 1 else f"attn_q{shape.q_len}_kv{shape.kv_len}")
        names.append(name)
        b.add(name, "attention.core", "attention", n, inputs, batch=shape.batch,
              heads=heads, kv_heads=kv_heads, q_len=shape.q_len, kv_len=shape.kv_len,
              head_dim=head_dim, causal=shape.causal, **latent)
    return names


def _attention(b: Builder, p: str, mixer: str, tokens: int, step: Step, n: int) -> str:
    """q/k/v, RoPE (not on Llama 4's NoPE global layers), attention, sinks, o."""
    cfg = b.cfg
    d = cfg.head_dim
    b.gemm(p + "qkv", "attention.qkv", tokens, (cfg.heads + 2 * cfg.kv_heads) * d,
           cfg.hidden, n, inputs=[p + "input_norm"], role="attention")
    attn_inputs = [p + "qkv"]
    if cfg.family.rotary and not (mixer == FULL and cfg.chunk):
        # x * cos + rotate(x) * sin on q and k, read with the table
        b.add(p + "rope", "rope", "elementwise", n, [p + "qkv"],
              elements=tokens * (cfg.heads + cfg.kv_heads) * d, op="mul")
        attn_inputs = [p + "rope", p + "qkv"]
    names = _attention_ops(b, p, attention_shapes(cfg, mixer, step), n, attn_inputs,
                           cfg.heads, cfg.kv_heads, d)
    if cfg.family.sinks:  # one learned logit per head joins each softmax's sum
        b.add(p + "sinks", "attention.sinks", "elementwise", n, names,
              elements=tokens * cfg.heads, op="add")
        names = [p + "sinks"]
    b.gemm(p + "o_proj", "attention.o", tokens, cfg.hidden, cfg.heads * d, n,
           inputs=names, role="attention")
    return p + "o_proj"


def mla_absorbed(cfg: ModelConfig, step: Step, shapes: Sequence[AttentionShape]) -> bool:
    """Whether the absorbed form has fewer MACs for this step than the naive one."""
    m, h, tokens = cfg.mla, cfg.heads, step.tokens
    pairs = sum(s.batch * (s.q_len * s.kv_len if not s.causal else
                           s.q_len * (s.kv_len - s.q_len) + s.q_len * (s.q_len + 1) // 2)
                for s in shapes)
    keys = sum(s.batch * s.kv_len for s in shapes)
    naive = keys * m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim) \
        + pairs * h * (m.qk_head_dim + m.v_head_dim)
    absorbed = tokens * h * m.kv_lora_rank * (m.qk_nope_head_dim + m.v_head_dim) \
        + pairs * h * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    return absorbed < naive


def _mla(b: Builder, p: str, mixer: str, tokens: int, step: Step, n: int) -> str:
    cfg = b.cfg
    m, h = cfg.mla, cfg.heads
    q_out = h * m.qk_head_dim
    if m.q_lora_rank:
        b.gemm(p + "q_a", "attention.q_a", tokens, m.q_lora_rank, cfg.hidden, n,
               inputs=[p + "input_norm"], role="attention")
        b.add(p + "q_a_norm", "norm", "norm", n, [p + "q_a"], rows=tokens,
              cols=m.q_lora_rank)
        b.gemm(p + "q_b", "attention.q_b", tokens, q_out, m.q_lora_rank, n,
               inputs=[p + "q_a_norm"], role="attention")
    else:
        b.gemm(p + "q_b", "attention.q", tokens, q_out, cfg.hidden, n,
               inputs=[p + "input_norm"], role="attention")
    b.gemm(p + "kv_a", "attention.kv_a", tokens, m.cached, cfg.hidden, n,
           inputs=[p + "input_norm"], role="attention")
    b.add(p + "kv_a_norm", "norm", "norm", n, [p + "kv_a"], rows=tokens,
          cols=m.kv_lora_rank)
    b.add(p + "rope", "rope", "elementwise", n, [p + "q_b", p + "kv_a"],
          elements=tokens * (h + 1) * m.qk_rope_head_dim, op="mul")
    shapes = attention_shapes(cfg, mixer, step)
    if mla_absorbed(cfg, step, shapes):
        b.gemm(p + "q_absorb", "attention.absorb", tokens, m.kv_lora_rank,
               m.qk_nope_head_dim, n, batch=h, inputs=[p + "rope"], role="attention")
        names = _attention_ops(b, p, shapes, n, [p + "q_absorb", p + "kv_a_norm"], h, 1,
                               -(-(2 * m.kv_lora_rank + m.qk_rope_head_dim) // 2),
                               kv_latent=m.cached)
        b.gemm(p + "v_up", "attention.absorb", tokens, m.v_head_dim, m.kv_lora_rank, n,
               batch=h, inputs=names, role="attention")
        names = [p + "v_up"]
    else:
        keys = sum(s.batch * s.kv_len for s in shapes)
        b.gemm(p + "kv_b", "attention.kv_b", keys, h * (m.qk_nope_head_dim + m.v_head_dim),
               m.kv_lora_rank, n, inputs=[p + "kv_a_norm"], role="attention")
        names = _attention_ops(b, p, shapes, n, [p + "rope", p + "kv_b"], h, h,
                               -(-(m.qk_head_dim + m.v_head_dim) // 2))
    b.gemm(p + "o_proj", "attention.o", tokens, cfg.hidden, h * m.v_head_dim, n,
           inputs=names, role="attention")
    return p + "o_proj"


def _scan(b: Builder, p: str, tokens: int, step: Step, n: int) -> str:
    """A Mamba / Mamba2 mixer (see the module's docstring)."""
    cfg = b.cfg
    s = cfg.ssm
    mamba2 = s.kind == "mamba2"
    in_width = 2 * s.inner + (2 * s.groups * s.state + s.heads if mamba2 else 0)
    b.gemm(p + "in_proj", "ssm.in_proj", tokens, in_width, cfg.hidden, n,
           inputs=[p + "input_norm"], role="ssm")
    b.add(p + "conv", "ssm.conv", "reduction", n, [p + "in_proj"],
          rows=tokens * s.conv_dim, cols=s.conv)
    b.add(p + "conv_act", "ssm.conv", "elementwise", n, [p + "conv"],
          elements=tokens * s.conv_dim, op="silu")
    scan_inputs = [p + "conv_act"]
    if not mamba2:
        b.gemm(p + "x_proj", "ssm.x_proj", tokens, s.dt_rank + 2 * s.state, s.inner, n,
               inputs=[p + "conv_act"], role="ssm")
        b.gemm(p + "dt_proj", "ssm.dt_proj", tokens, s.inner, s.dt_rank, n,
               inputs=[p + "x_proj"], role="ssm")
        scan_inputs = [p + "conv_act", p + "x_proj", p + "dt_proj"]
    lengths: Counter = Counter()
    for (new, _), count in step.requests.items():
        lengths[new] += count
    names = []
    for new, count in sorted(lengths.items()):
        suffix = "" if len(lengths) == 1 else f"_t{new}"
        if mamba2 and new > 1:
            names.append(_ssd(b, p, suffix, new, count, n, scan_inputs))
            continue
        names.append(p + "scan" + suffix)
        b.add(p + "scan" + suffix, "ssm.scan", "scan", n, scan_inputs, batch=count,
              steps=new, channels=s.inner, state=s.state, heads=s.heads,
              groups=s.groups)
    b.add(p + "gate_act", "ssm.gate", "elementwise", n, [p + "in_proj"],
          elements=tokens * s.inner, op="silu")
    b.add(p + "gate_mul", "ssm.gate", "elementwise", n, [*names, p + "gate_act"],
          elements=tokens * s.inner, op="mul")
    last = p + "gate_mul"
    if mamba2:
        b.add(p + "ssm_norm", "norm", "norm", n, [last], rows=tokens, cols=s.inner)
        last = p + "ssm_norm"
    b.gemm(p + "out_proj", "ssm.out_proj", tokens, cfg.hidden, s.inner, n,
           inputs=[last], role="ssm")
    return p + "out_proj"


def _ssd(b: Builder, p: str, suffix: str, new: int, count: int, n: int,
         inputs: list[str]) -> str:
    """Mamba2's scan of `count` sequences of `new` tokens in the chunked (SSD) form its
    kernels run, as matrix products on the array (Dao & Gu 2024, ssd_minimal): per
    chunk of Q tokens and head, the scores C B^T (Q x Q over the state), masked by the
    decay L = exp(segsum(A dt)) (an operand, as the reference materialises it), times X
    (Q x head_dim); the chunk's state B^T (decay x X); the states passed from chunk to
    chunk by the scan kind (one step per chunk); their contribution C state; the two
    parts added. A last partial chunk is computed whole (padded)."""
    cfg = b.cfg
    s = cfg.ssm
    q = min(s.chunk, new)
    chunks = -(-new // q)
    head = s.inner // s.heads
    blocks = count * chunks * s.heads
    x = count * new * s.inner
    name = lambda part: f"{p}ssd_{part}{suffix}"  # noqa: E731
    b.gemm(name("scores"), "ssm.scan", q, q, s.state, n, blocks, inputs=inputs)
    b.add(name("mask"), "ssm.scan", "elementwise", n, [name("scores")],
          elements=blocks * q * q, op="mul")
    b.gemm(name("diag"), "ssm.scan", q, head, q, n, blocks, inputs=[name("mask")])
    b.add(name("decay"), "ssm.scan", "elementwise", n, inputs, elements=x, op="mul")
    b.gemm(name("states"), "ssm.scan", s.state, head, q, n, blocks,
           inputs=[name("decay")])
    b.add(name("pass"), "ssm.scan", "scan", n, [name("states")], batch=count,
          steps=chunks, channels=s.inner, state=s.state, heads=s.heads,
          groups=s.groups)
    b.gemm(name("off"), "ssm.scan", q, head, s.state, n, blocks, inputs=[name("pass")])
    b.add(name("sum"), "ssm.scan", "elementwise", n, [name("diag"), name("off")],
          elements=x, op="add")
    return name("sum")


def _mlp(b: Builder, p: str, label: str, tokens: int, width: int, repeat: int,
         source: str, experts: int = 1, role: str = "mlp") -> str:
    """gate+up (or up), activation, gate x up, down; `experts` batched instances.
    Returns the name of the down projection (the MLP's output)."""
    cfg = b.cfg
    gated = cfg.family.gated_mlp
    b.gemm(f"{p}gate_up", f"{label}.gate_up" if experts == 1 else label, tokens,
           (2 if gated else 1) * width, cfg.hidden, repeat, experts, inputs=[source],
           role=role)
    act_label = f"{label}.act" if experts == 1 else label
    b.add(f"{p}act", act_label, "elementwise", repeat, [f"{p}gate_up"],
          elements=experts * tokens * width, op=cfg.family.activation)
    if gated:  # act(gate) x up: the up half read from gate_up's output
        b.add(f"{p}gate_mul", act_label, "elementwise", repeat,
              [f"{p}act", f"{p}gate_up"], elements=experts * tokens * width, op="mul")
    b.gemm(f"{p}down", f"{label}.down" if experts == 1 else label, tokens,
           cfg.hidden, width, repeat, experts,
           inputs=[f"{p}gate_mul" if gated else f"{p}act"], role=role)
    return f"{p}down"


def _ffn(b: Builder, p: str, ffn: str, tokens: int, n: int, source: str) -> list[str]:
    cfg = b.cfg
    if ffn != MOE:
        return [_mlp(b, p + "mlp_", "mlp", tokens, cfg.intermediate, n, source)]
    b.gemm(p + "router", "moe.router", tokens, cfg.experts, cfg.hidden, n,
           inputs=[source], role="router")
    busiest = busiest_expert_tokens(cfg, tokens, b.precision.imbalance)
    outputs = [_mlp(b, p + "experts_", "moe.experts", busiest, cfg.moe_intermediate, n,
                    source, experts_touched(cfg, tokens), role="experts")]
    if cfg.shared_intermediate:
        outputs.append(_mlp(b, p + "shared_", "mlp", tokens, cfg.shared_intermediate, n,
                            source, role="shared"))
    return outputs


def _norm(b: Builder, name: str, rows: int, repeat: int,
          inputs: Sequence[str] = ()) -> None:
    b.add(name, "norm", "norm", repeat, inputs, rows=rows, cols=b.cfg.hidden)


def layer(b: Builder, kind: Layer, n: int, p: str, step: Step,
          after: str | None) -> str:
    """One layer of `kind` repeated `n` times, its names prefixed `p`, after the
    operator named `after` (None: the embeddings). Returns its last operator."""
    mixer, ffn = kind
    tokens, cfg = step.tokens, b.cfg
    sandwich = cfg.family.sandwich_norms
    last = after
    # Edges (`inputs`) stay within the layer: its input is the previous layer's output.
    if mixer != NONE:
        _norm(b, p + "input_norm", tokens, n)
        if mixer == SSM:
            out = _scan(b, p, tokens, step, n)
        elif cfg.mla:
            out = _mla(b, p, mixer, tokens, step, n)
        else:
            out = _attention(b, p, mixer, tokens, step, n)
        if sandwich:  # Gemma: a norm on the block's output before the residual add
            _norm(b, p + "attn_out_norm", tokens, n, [out])
            out = p + "attn_out_norm"
        b.add(p + "attn_residual", "residual", "elementwise", n, [out],
              elements=tokens * cfg.hidden, op="add")
        last = p + "attn_residual"
    if ffn != NONE:
        _norm(b, p + "post_attention_norm", tokens, n, [last] if mixer != NONE else [])
        outputs = _ffn(b, p, ffn, tokens, n, p + "post_attention_norm")
        if sandwich:
            _norm(b, p + "mlp_out_norm", tokens, n, outputs)
            outputs = [p + "mlp_out_norm"]
        b.add(p + "mlp_residual", "residual", "elementwise", n, outputs,
              elements=tokens * cfg.hidden, op="add")
        last = p + "mlp_residual"
    return last


def prefixes(cfg: ModelConfig) -> list[tuple[Layer, int, str]]:
    """Each layer kind with its count and its operators' name prefix: none for a model
    of one kind (the names the shipped families always had), the kind otherwise."""
    groups = cfg.groups()
    if len(groups) == 1:
        return [(groups[0][0], groups[0][1], "")]
    return [((mixer, ffn), count, f"{mixer}_{ffn}.") for (mixer, ffn), count in groups]
