"""The precision plan (DESIGN.md section 17): per operator name or layer_type (and a
default), a fallback chain of formats for the weights, the activations and the KV cache,
weight sparsity, an optional guardrail, and where the emulation's sample tensors come
from. Entries merge field by field, most specific winning, as a mapping plan's do.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from simulator.inputs.platform import Dtype, Name, PosFloat, Strict, Text
from simulator.inputs.workload import Sparsity

Chain = list[Dtype]
ROLES = ("weight", "activation", "kv")


class Guardrail(Strict):
    """The quality an operator's emulated GEMM must keep against fp32, else the format
    falls back: a largest relative error, a smallest SQNR in dB, or both."""

    max_rel_error: PosFloat | None = None
    min_sqnr_db: float | None = Field(default=None, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_bound(self) -> Guardrail:
        if self.max_rel_error is None and self.min_sqnr_db is None:
            raise ValueError("a guardrail sets max_rel_error, min_sqnr_db or both")
        return self

    def failure(self, rel_error: float, sqnr_db: float | None) -> str | None:
        """Why emulated figures break the guardrail, or None when they hold."""
        if self.max_rel_error is not None and not rel_error <= self.max_rel_error:
            return f"guardrail: rel error {rel_error:.3g} > {self.max_rel_error:g}" \
                if rel_error == rel_error else "guardrail: rel error is not a number"
        if self.min_sqnr_db is not None and sqnr_db is not None and \
                not sqnr_db >= self.min_sqnr_db:  # NaN (an overflowed sample) fails
            return f"guardrail: SQNR {sqnr_db:.1f} dB < {self.min_sqnr_db:g} dB" \
                if sqnr_db == sqnr_db else "guardrail: SQNR is not a number"
        return None


class Tensors(Strict):
    """A user's sample tensors for one operator (.npy, read without pickle): `a` the
    activation rows (rows x K; attention: Q, rows x head_dim), `b` the weights (K x N;
    attention: the K cache, rows x head_dim). Paths are relative to the plan file."""

    a: Text | None = None
    b: Text | None = None


class PrecisionSpec(Strict):
    """Formats of one entry: each role a fallback chain, first supported and passing
    format wins; a role left out keeps the operator's own dtype."""

    weight: Chain | None = Field(default=None, min_length=1)
    activation: Chain | None = Field(default=None, min_length=1)
    kv: Chain | None = Field(default=None, min_length=1)
    sparsity: Sparsity | None = None
    guardrail: Guardrail | None = None
    scaling: Literal["per_tensor", "per_channel"] | None = Field(
        default=None, description="scale of the narrow formats (default per_channel: "
        "weights per output column, activations per row)")
    tensors: Tensors | None = None


class Samples(Strict):
    """Synthetic sample tensors (seeded): activations `normal` or `heavy_tailed`
    (Student's t with 4 degrees of freedom, a fraction of outlier channels along K
    scaled up); weights normal. At most rows x cols x k of each GEMM is emulated."""

    activations: Literal["normal", "heavy_tailed"] = "heavy_tailed"
    outlier_fraction: float = Field(default=0.01, ge=0, le=1)
    outlier_scale: PosFloat = 30.0
    seed: int = Field(default=0, ge=0)
    rows: PositiveInt = Field(default=64, le=4096)
    cols: PositiveInt = Field(default=64, le=4096)
    k: PositiveInt = Field(default=1024, le=16384)


class PrecisionPlan(Strict):
    """Precision by operator name, by layer_type, and a default, most specific winning."""

    name: Name = "precision"
    description: Text = ""
    default: PrecisionSpec = PrecisionSpec()
    layer_types: dict[Name, PrecisionSpec] = {}
    operators: dict[Name, PrecisionSpec] = {}
    samples: Samples = Samples()

    @model_validator(mode="after")
    def _tensors_per_operator(self) -> PrecisionPlan:
        if self.default.tensors is not None or any(
                spec.tensors is not None for spec in self.layer_types.values()):
            raise ValueError("tensors are named per operator (operators.NAME.tensors), "
                             "not in the default or a layer_type")
        return self

    def spec_for(self, op) -> PrecisionSpec:
        """Default, then the layer_type's entry, then the operator's own, field by
        field (a field an entry leaves unset does not override)."""
        merged: dict = {}
        for spec in (self.default, self.layer_types.get(op.layer_type),
                     self.operators.get(op.name)):
            if spec is not None:
                merged.update({key: getattr(spec, key) for key in spec.model_fields_set})
        return PrecisionSpec.model_construct(**{**PrecisionSpec().__dict__, **merged})


def reads_as_precision_plan(raw) -> bool:
    """Whether decoded YAML is a precision plan rather than a tiling plan, which shares
    its top-level keys (default, layer_types, operators): it has samples, or one of its
    entries sets a field of a precision spec (weight, kv, guardrail...), none of which
    a tiling spec has."""
    if not isinstance(raw, dict):
        return False
    entries = [raw.get("default")]
    for section in (raw.get("layer_types"), raw.get("operators")):
        if isinstance(section, dict):
            entries += section.values()
    return "samples" in raw or any(
        isinstance(entry, dict) and set(entry) & set(PrecisionSpec.model_fields)
        for entry in entries)
