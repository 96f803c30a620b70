"""Workload schema: an ordered list of operators from a closed list of kinds.

Every kind states its shape fields and, for vector kinds, its cost (DESIGN.md section
2). Compute kinds (gemm, conv2d) expose the GEMM they lower to; vector kinds expose rows
x cols of work, passes over it, and the real tensors they read and write.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, Union

from pydantic import (AfterValidator, Field, NonNegativeInt, PositiveInt, field_validator,
                      model_serializer, model_validator)

from simulator.inputs.platform import Dtype, Name, Strict, Text
from simulator.model.sparsity import parse_pattern

# Largest product of dimensions accepted, so that cycles and bytes stay far inside int64.
MAX_WORK = 2**62
# Largest system a collective or a system plan (simulator.system.parallelism) may name:
# far beyond any machine built, and small enough that every per-chip division and link
# count stays exact.
MAX_CHIPS = 2**16


def _checked_sparsity(value: str | float) -> str | float:
    """An N:M pattern (0 < N < M) or an unstructured density in (0, 1)."""
    if isinstance(value, str):
        parse_pattern(value)
    elif not 0 < value < 1:
        raise ValueError(f"sparsity density {value} must lie strictly between 0 and 1 "
                         "(the fraction of weights kept)")
    return value


# Weight sparsity (DESIGN.md section 17): "N:M" structured, or a density (unstructured,
# a bandwidth-only what-if).
Sparsity = Annotated[str | float, AfterValidator(_checked_sparsity)]


@dataclass(frozen=True)
class GemmShape:
    """One GEMM C(MxN) = A(MxK) . B(KxN), run `instances` times independently."""

    m: int
    n: int
    k: int
    instances: int  # gemm batch, conv groups

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k * self.instances


@dataclass(frozen=True)
class VectorShape:
    """rows x cols elements of work, `passes` sweeps; tiles are groups of rows."""

    rows: int
    cols: int
    passes: int
    cost_kind: str            # key into the platform's cycles_per_element
    input_elements: int       # real tensors read (all inputs)
    output_elements: int      # real tensor written


# What `repeat` means for an operator's weights (DESIGN.md section 19): each repeat is
# another layer's (distinct, the reading of an operator that says nothing) or the same
# weights called again (shared: a diffusion model's denoising steps, tied layers).
WeightReading = Literal["distinct", "shared"]
WEIGHTS_HELP = ("distinct: each repeat another layer's weights; shared: the same weights "
                "called again; unset: either, and the capacity rule reads both")


class OperatorBase(Strict):
    """Fields every operator has."""

    name: Name
    layer_type: Name = Field(description="free label; metrics group by it")
    dtype: Dtype | None = Field(default=None, description="default: the array's first")
    repeat: PositiveInt = Field(default=1, description="identical runs, simulated once")
    measured_s: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="seconds this operator took on real hardware, all repeats together "
        "(a profiler trace's); the report shows it beside the simulated time")
    inputs: list[Name] | None = Field(
        default=None, description="names of the earlier operators whose outputs this one "
        "reads: the edges the fusion planner follows (DESIGN.md section 15)")

    @model_serializer(mode="wrap")
    def _leave_out_unmeasured(self, handler):
        # Absent rather than null, so workloads without measurements dump (and embed in
        # results) exactly as they did before the field existed.
        fields = handler(self)
        for name in ("measured_s", "sparsity", "inputs", "weights", "kv_cache"):
            # added later, absent when unset
            if fields.get(name, 0) is None:
                fields.pop(name)
        return fields

    def _check_work(self, work: int) -> None:
        if work * self.repeat >= MAX_WORK:
            raise ValueError(f"work {work} x repeat {self.repeat} would overflow int64 cycles")


class Gemm(OperatorBase):
    """C = A . B; batch independent products (e.g. attention heads). B is the weight
    operand: `weight_dtype` (default: `dtype`) sets the bytes it moves, e.g. int8
    weights beside bf16 activations."""

    kind: Literal["gemm"]
    batch: PositiveInt = 1
    m: PositiveInt
    n: PositiveInt
    k: PositiveInt
    weight_dtype: Dtype | None = Field(default=None, description="B operand; default dtype")
    sparsity: Sparsity | None = Field(default=None, description="of B: N:M or a density")
    weights: WeightReading | None = Field(default=None, description=WEIGHTS_HELP)

    @model_validator(mode="after")
    def _fits_int64(self) -> Gemm:
        self._check_work(2 * self.batch * self.m * self.n * self.k)
        return self

    def gemm(self) -> GemmShape:
        return GemmShape(self.m, self.n, self.k, self.batch)

    @property
    def input_elements(self) -> int:
        return self.m * self.k


class Conv2d(OperatorBase):
    """2-D convolution, NHWC; lowered by im2col: M = batch*Ho*Wo, K = Cin/g*kh*kw,
    N = Cout/g, repeated per group. Ho = floor((H + 2p - d(kh-1) - 1)/s) + 1."""

    kind: Literal["conv2d"]
    batch: PositiveInt = 1
    h: PositiveInt
    w: PositiveInt
    cin: PositiveInt
    cout: PositiveInt
    kh: PositiveInt
    kw: PositiveInt
    stride: PositiveInt = 1
    padding: NonNegativeInt = 0
    dilation: PositiveInt = 1
    groups: PositiveInt = 1
    weight_dtype: Dtype | None = Field(default=None, description="kernel; default dtype")
    sparsity: Sparsity | None = Field(default=None, description="of the kernel: N:M or a "
                                      "density")
    weights: WeightReading | None = Field(default=None, description=WEIGHTS_HELP)

    @model_validator(mode="after")
    def _consistent(self) -> Conv2d:
        if self.cin % self.groups or self.cout % self.groups:
            raise ValueError(f"groups {self.groups} must divide cin {self.cin} "
                             f"and cout {self.cout}")
        if self.ho < 1 or self.wo < 1:
            raise ValueError(f"output size {self.ho}x{self.wo} is empty: the kernel "
                             "does not fit the padded input")
        self._check_work(2 * self.gemm().macs)
        return self

    def _out(self, size: int, kernel: int) -> int:
        return (size + 2 * self.padding - self.dilation * (kernel - 1) - 1) // self.stride + 1

    @property
    def ho(self) -> int:
        return self._out(self.h, self.kh)

    @property
    def wo(self) -> int:
        return self._out(self.w, self.kw)

    def gemm(self) -> GemmShape:
        return GemmShape(self.batch * self.ho * self.wo, self.cout // self.groups,
                         self.cin // self.groups * self.kh * self.kw, self.groups)


ElementwiseOp = Literal["add", "mul", "relu", "gelu", "silu"]
BINARY_OPS = {"add", "mul"}


class Elementwise(OperatorBase):
    """Cost: ceil(elements / lanes) * cycles_per_element[op], one pass; add and mul
    read two inputs."""

    kind: Literal["elementwise"]
    elements: PositiveInt
    op: ElementwiseOp

    def vector(self) -> VectorShape:
        inputs = 2 if self.op in BINARY_OPS else 1
        return VectorShape(self.elements, 1, 1, self.op, inputs * self.elements,
                           self.elements)


# Passes over the data per row-wise kind: reduction sums once; softmax finds the max,
# sums the exponentials, then normalises; norm takes mean and variance, then normalises.
ROW_PASSES = {"reduction": 1, "softmax": 3, "norm": 2}


class RowOperator(OperatorBase):
    """Cost: ceil(rows * cols / lanes) * cycles_per_element[kind] * passes, with passes
    reduction 1, softmax 3, norm 2. Reduction writes one element per row."""

    kind: Literal["reduction", "softmax", "norm"]
    rows: PositiveInt
    cols: PositiveInt

    def vector(self) -> VectorShape:
        elements = self.rows * self.cols
        out = self.rows if self.kind == "reduction" else elements
        return VectorShape(self.rows, self.cols, ROW_PASSES[self.kind], self.kind,
                           elements, out)


# Vector passes per state element and step of a selective scan: the decay multiply,
# the input multiply-add (dt B x) and the output multiply-add (C h, summed over the
# state), each one pipelined op as `mul` prices it.
SCAN_PASSES = 3


class Scan(OperatorBase):
    """A selective state-space scan (Mamba, Mamba2; DESIGN.md section 21) over `batch`
    sequences of `steps` tokens: each of `channels` channels keeps a `state`-wide
    state h, and per step h = exp(dt A) h + dt B x, y = C h (+ D x). Cost: ceil(rows x
    state / lanes) x cycles_per_element[mul] x SCAN_PASSES, rows = batch x steps x
    channels (a recurrence: vector work, step after step). Reads x, dt (one per head
    of `heads`), B and C (per group of `groups`) and the state cache; writes y and the
    state."""

    kind: Literal["scan"]
    batch: PositiveInt = 1
    steps: PositiveInt
    channels: PositiveInt
    state: PositiveInt
    heads: PositiveInt
    groups: PositiveInt = 1

    @model_validator(mode="after")
    def _fits_int64(self) -> Scan:
        self._check_work(self.batch * self.steps * self.channels * self.state
                         * SCAN_PASSES)
        return self

    def vector(self) -> VectorShape:
        states = self.batch * self.channels * self.state
        steps = self.batch * self.steps
        inputs = steps * (self.channels + self.heads + 2 * self.groups * self.state)
        return VectorShape(steps * self.channels, self.state, SCAN_PASSES, "mul",
                           inputs + states, steps * self.channels + states)


class Pool(OperatorBase):
    """A reduction over each output's window: rows = batch*Ho*Wo*channels outputs,
    cols = kh*kw; cost ceil(rows * cols / lanes) * cycles_per_element[pool], one pass.
    Reads the real input tensor once."""

    kind: Literal["pool"]
    batch: PositiveInt = 1
    h: PositiveInt
    w: PositiveInt
    channels: PositiveInt
    kh: PositiveInt
    kw: PositiveInt
    stride: PositiveInt = 1
    padding: NonNegativeInt = 0

    @model_validator(mode="after")
    def _non_empty(self) -> Pool:
        if self.ho < 1 or self.wo < 1:
            raise ValueError(f"output size {self.ho}x{self.wo} is empty")
        return self

    @property
    def ho(self) -> int:
        return (self.h + 2 * self.padding - self.kh) // self.stride + 1

    @property
    def wo(self) -> int:
        return (self.w + 2 * self.padding - self.kw) // self.stride + 1

    def vector(self) -> VectorShape:
        outputs = self.batch * self.ho * self.wo * self.channels
        return VectorShape(outputs, self.kh * self.kw, 1, "pool",
                           self.batch * self.h * self.w * self.channels, outputs)


class Attention(OperatorBase):
    """softmax(Q K^T / sqrt(head_dim)) V for `batch` sequences of `heads` query heads
    sharing `kv_heads` K/V heads (GQA: heads / kv_heads query heads per group, their
    K and V read once per group). Q has q_len rows, K and V kv_len; `causal`: query i
    (of q_len, the last q_len positions of kv_len) sees keys 0 .. kv_len - q_len + i.
    `kv_dtype` (default: `dtype`) sets the bytes K and V move (the KV cache);
    `kv_latent`: K and V are one cached tensor (MLA's latent), read once.

    Cost: the QK^T and PV products on the array (2 x visible pairs x head_dim MACs per
    head) and a softmax over the visible scores on the vector unit; lowered unfused
    (scores a real tensor) or `fuse: flash` (DESIGN.md section 9)."""

    kind: Literal["attention"]
    batch: PositiveInt = 1
    heads: PositiveInt
    kv_heads: PositiveInt
    q_len: PositiveInt
    kv_len: PositiveInt
    head_dim: PositiveInt
    causal: bool = False
    kv_dtype: Dtype | None = Field(default=None, description="K and V; default dtype")
    kv_cache: bool | None = Field(
        default=None, description="K and V are a cache a chip holds across steps (true: "
        "an LLM's, set by the HF frontend) or this operator's own activations (false); "
        "unset: either, and the capacity rule reads both (DESIGN.md section 19)")
    kv_latent: PositiveInt | None = Field(
        default=None, description="K and V are one cached tensor of this many elements "
        "per key and K/V head (multi-head latent attention's latent + RoPE key), read "
        "once for both products; unset: K and V apart, head_dim each")

    @model_validator(mode="after")
    def _consistent(self) -> Attention:
        if self.kv_latent is not None and self.kv_latent > 2 * self.head_dim:
            raise ValueError(f"kv_latent {self.kv_latent} is more than K and V apart "
                             f"(2 x head_dim {self.head_dim})")
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads {self.kv_heads} must divide heads {self.heads}")
        if self.causal and self.q_len > self.kv_len:
            raise ValueError(f"causal attention needs q_len {self.q_len} <= kv_len "
                             f"{self.kv_len} (the queries are the last q_len positions)")
        self._check_work(2 * self.batch * self.heads * self.q_len * self.kv_len
                         * self.head_dim * 2)
        return self

    @property
    def group(self) -> int:
        """Query heads per K/V head."""
        return self.heads // self.kv_heads

    @property
    def visible_pairs(self) -> int:
        """(query, key) pairs one head computes: all of them, or causal's triangle."""
        if not self.causal:
            return self.q_len * self.kv_len
        return self.q_len * (self.kv_len - self.q_len) + self.q_len * (self.q_len + 1) // 2

    @property
    def macs(self) -> int:
        """Model MACs: QK^T and PV over the visible pairs of every head."""
        return 2 * self.batch * self.heads * self.visible_pairs * self.head_dim


CollectiveKind = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                         "point_to_point"]


class Collective(OperatorBase):
    """Chip-to-chip communication over the platform's interconnect (DESIGN.md section
    14): `payload_bytes` per chip (the sender's buffer for point_to_point) among
    `chips` chips. Priced by simulator.collectives.cost on the links alone: it uses
    neither the array nor the vector unit, and overlaps no compute."""

    kind: Literal["collective"]
    collective: CollectiveKind
    payload_bytes: PositiveInt
    chips: int = Field(ge=2, le=MAX_CHIPS, description="chips taking part (2 for "
                       "point_to_point; at most a system's chips)")

    @model_validator(mode="after")
    def _pairs_for_point_to_point(self) -> Collective:
        if self.collective == "point_to_point" and self.chips != 2:
            raise ValueError(f"point_to_point joins 2 chips, found chips {self.chips}")
        return self


ComputeOperator = Gemm | Conv2d
VectorOperator = Elementwise | RowOperator | Pool | Scan
Operator = Annotated[Union[Gemm, Conv2d, Elementwise, RowOperator, Pool, Scan, Attention,
                           Collective],
                     Field(discriminator="kind")]
KINDS = ("gemm", "conv2d", "elementwise", "reduction", "softmax", "norm", "pool", "scan",
         "attention", "collective")


class Workload(Strict):
    """An ordered operator trace; operators run one after another."""

    name: Name
    description: Text = ""
    operators: list[Operator] = Field(min_length=1)
    resident: bool = Field(
        default=False, description="the call's inputs and outputs stay on the device "
        "between calls (no host-link transfer; DESIGN.md section 15)")

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # Absent when false, so workloads written before it existed dump as they did.
        fields = handler(self)
        if not fields.get("resident"):
            fields.pop("resident", None)
        return fields

    @field_validator("operators")
    @classmethod
    def _unique_names(cls, operators: list) -> list:
        seen: set[str] = set()
        for op in operators:
            if op.name in seen:
                raise ValueError(f"operator name {op.name!r} appears twice")
            for name in op.inputs or ():
                if name not in seen:
                    raise ValueError(f"operator {op.name!r}: inputs names {name!r}, which "
                                     "is not an earlier operator")
            seen.add(op.name)
        return operators


def is_compute(op) -> bool:
    """True for the operators that lower to one GEMM on the systolic array."""
    return isinstance(op, (Gemm, Conv2d))


def is_attention(op) -> bool:
    """True for attention, which lowers to its own program (lowering.attention)."""
    return isinstance(op, Attention)


def is_collective(op) -> bool:
    """True for operators that run on the chip-to-chip links."""
    return isinstance(op, Collective)


def workload_yaml(name: str, description: str, operators: list[dict],
                  header: Sequence[str]) -> str:
    """Workload YAML as the generator scripts in workloads/ and the importers write it:
    `header` lines as comments, the description folded at 88 columns, one flow mapping
    per operator with its fields in order."""
    lines = [f"# {line}" for line in header]
    lines += [f"name: {name}", "description: >-",
             textwrap.fill(description, width=88, initial_indent="  ",
                           subsequent_indent="  "),
             "operators:"]
    for op in operators:
        fields = ", ".join(f"{key}: {value}" for key, value in op.items())
        lines.append(f"  - {{{fields}}}")
    return "\n".join(lines) + "\n"


def unmatched_layer_types(names: Iterable[str], workload: Workload) -> list[str]:
    """A plan's layer_types entries (tiling or precision) that select no operator of
    the workload, each as `layer_types.NAME: rule`. Not an error: one plan may serve
    several workloads of a model family (a dense and an MoE model, say); but a
    misspelt layer_type leaves its operators on the defaults, so commands say so."""
    present = sorted({op.layer_type for op in workload.operators})
    shown = ", ".join(present[:8]) + (f" and {len(present) - 8} more"
                                      if len(present) > 8 else "")
    return [f"layer_types.{name}: no operator of layer_type {name!r} in workload "
            f"{workload.name!r} (its layer_types: {shown})"
            for name in names if name not in present]
