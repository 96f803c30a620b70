"""Numeric emulation of a format (DESIGN.md section 17): round fp32 values the way the
format stores them, and measure what that does to a GEMM against its fp32 reference.

Floats round to nearest, ties to even, subnormals included, saturating at the largest
finite value (a scaled tensor never reaches it; a user's unscaled bf16 tensor may).
Narrow formats (fp8, fp4, integers) first scale the tensor so its largest magnitude maps
to the format's largest value, per tensor or per channel; bf16/fp16/fp32 need no scale.
MX formats (OCP MX v1.0) share one power-of-two scale per block of 32 along the
reduction dim: 2^(floor(log2(block max)) - emax of the element format), elements in the
element format. Plain NumPy, so the simulator needs no extra package; the tests check
the rounding bit for bit against ml_dtypes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.model.formats import MX_BLOCK


@dataclass(frozen=True)
class Minifloat:
    """A binary float format: exponent and mantissa bits, and its largest finite value."""

    exponent_bits: int
    mantissa_bits: int
    max_value: float

    @property
    def min_exponent(self) -> int:
        """Exponent of the smallest normal value (1 - bias)."""
        return 2 - 2 ** (self.exponent_bits - 1)

    @property
    def max_exponent(self) -> int:
        """Exponent of the largest normal value (emax)."""
        return math.frexp(self.max_value)[1] - 1


# e4m3 (fn: no infinities, 448 largest), e5m2 (IEEE-like, 57344), e2m1 (6), e2m3 (7.5).
E4M3 = Minifloat(4, 3, 448.0)
FLOATS = {"fp32": None, "bf16": Minifloat(8, 7, 3.3895313892515355e38),
          "fp16": Minifloat(5, 10, 65504.0), "fp8": E4M3, "fp8_e4m3": E4M3,
          "fp8_e5m2": Minifloat(5, 2, 57344.0), "fp4_e2m1": Minifloat(2, 1, 6.0)}
INTEGERS = {"int32": 2**31 - 1, "int16": 2**15 - 1, "int8": 127, "int4": 7}
# Element format of each MX format (mxfp6: the E2M3 variant) and, for mxint8, its
# 8-bit two's-complement elements with 6 fraction bits (largest 127/64, emax 0).
MX_ELEMENTS = {"mxfp8": E4M3, "mxfp6": Minifloat(2, 3, 7.5),
               "mxfp4": Minifloat(2, 1, 6.0), "mxint8": None}
# Formats that need a scale to use their range (the wide floats do not).
SCALED = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", *INTEGERS}


def round_minifloat(x: np.ndarray, fmt: Minifloat) -> np.ndarray:
    """`x` rounded to `fmt`: nearest, ties to even, saturating; float32 out."""
    values = np.asarray(x, dtype=np.float64)
    magnitude = np.abs(values)
    _, exponent = np.frexp(magnitude)           # magnitude = m * 2**exponent, m in [.5, 1)
    exponent = np.maximum(exponent - 1, fmt.min_exponent)
    quantum = np.ldexp(1.0, exponent - fmt.mantissa_bits)
    rounded = np.minimum(np.rint(magnitude / quantum) * quantum, fmt.max_value)
    return (np.sign(values) * rounded).astype(np.float32)


def _integer_round(x: np.ndarray, largest: int) -> np.ndarray:
    return np.clip(np.rint(x), -largest, largest)


def _amax(x: np.ndarray, axis: int | None) -> np.ndarray:
    """Largest magnitude per tensor (axis None) or per channel (reducing `axis`); 1
    where it is zero, so an all-zero channel stays zero."""
    amax = np.max(np.abs(x), axis=axis, keepdims=axis is not None)
    return np.where(amax > 0, amax, 1.0)


def _scaled(x: np.ndarray, dtype: str, axis: int | None) -> np.ndarray:
    largest = float(INTEGERS[dtype]) if dtype in INTEGERS else FLOATS[dtype].max_value
    scale = _amax(x, axis) / largest
    scaled = x.astype(np.float64) / scale
    rounded = _integer_round(scaled, INTEGERS[dtype]) if dtype in INTEGERS else \
        round_minifloat(scaled, FLOATS[dtype])
    return (rounded * scale).astype(np.float32)


def _mx(x: np.ndarray, dtype: str, axis: int) -> np.ndarray:
    """Block-scaled along `axis` (the reduction dim): blocks of MX_BLOCK, the last one
    short where the dim is not a multiple."""
    moved = np.moveaxis(np.asarray(x, dtype=np.float32), axis, -1)
    out = np.empty_like(moved)
    element = MX_ELEMENTS[dtype]
    emax = 0 if element is None else element.max_exponent
    for start in range(0, moved.shape[-1], MX_BLOCK):
        block = moved[..., start:start + MX_BLOCK].astype(np.float64)
        amax = np.max(np.abs(block), axis=-1, keepdims=True)
        _, exponent = np.frexp(np.where(amax > 0, amax, 1.0))
        scale = np.ldexp(1.0, exponent - 1 - emax)
        if element is None:   # mxint8: multiples of 1/64 in [-2, 127/64]
            rounded = np.clip(np.rint(block / scale * 64), -128, 127) / 64
        else:
            rounded = round_minifloat(block / scale, element)
        out[..., start:start + MX_BLOCK] = rounded * scale
    return np.moveaxis(out, -1, axis)


def quantise(x: np.ndarray, dtype: str, *, axis: int | None = None,
             reduction_axis: int = -1) -> np.ndarray:
    """`x` as stored in `dtype` and read back as float32. Narrow formats scale per
    tensor (axis None) or per channel (the max taken along `axis`); MX formats scale
    per block along `reduction_axis`."""
    if dtype in MX_ELEMENTS:
        return _mx(x, dtype, reduction_axis)
    if dtype in SCALED:
        return _scaled(np.asarray(x, dtype=np.float32), dtype, axis)
    fmt = FLOATS[dtype]
    return np.asarray(x, dtype=np.float32) if fmt is None else round_minifloat(x, fmt)


def prune(b: np.ndarray, sparsity: str | float | None) -> np.ndarray:
    """Weights (K x N) with sparsity applied by magnitude: N:M keeps the N largest of
    each M along K, a density keeps that fraction of each column; None: unchanged."""
    if sparsity is None:
        return b
    out = np.array(b, dtype=np.float32)
    if isinstance(sparsity, str):
        kept, group = (int(part) for part in sparsity.split(":"))
        for start in range(0, out.shape[0], group):
            rows = out[start:start + group]
            drop = np.argsort(np.abs(rows), axis=0, kind="stable")[:max(len(rows) - kept, 0)]
            np.put_along_axis(rows, drop, 0.0, axis=0)
        return out
    drop = np.argsort(np.abs(out), axis=0, kind="stable")[:out.shape[0]
                                                         - math.ceil(sparsity * out.shape[0])]
    np.put_along_axis(out, drop, 0.0, axis=0)
    return out


@dataclass(frozen=True)
class Quality:
    """An emulated GEMM against its fp32 reference: relative Frobenius error and SQNR
    (None where the emulation is exact)."""

    rel_error: float
    sqnr_db: float | None

    def as_dict(self) -> dict:
        return {"rel_error": self.rel_error, "sqnr_db": self.sqnr_db}


def gemm_quality(a: np.ndarray, b: np.ndarray, *, a_dtype: str, b_dtype: str,
                 per_channel: bool, sparsity: str | float | None = None) -> Quality:
    """Emulate C = A (M x K) . B (K x N) with A in `a_dtype` (per row when per_channel)
    and B in `b_dtype` (per output column), B pruned by `sparsity`; accumulate in fp32
    and compare with the fp32 product of the original tensors. OverflowError where
    either product leaves fp32's range (no error figure could be given)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    qa = quantise(a, a_dtype, axis=1 if per_channel else None, reduction_axis=1)
    qb = quantise(prune(b, sparsity), b_dtype, axis=0 if per_channel else None,
                  reduction_axis=0)
    # An overflow is the error below: numpy's warning would print above it.
    with np.errstate(over="ignore", invalid="ignore"):
        reference = a @ b
        emulated = qa @ qb
        error = float(np.linalg.norm(emulated.astype(np.float64) - reference))
        norm = float(np.linalg.norm(reference.astype(np.float64)))
    if not (math.isfinite(error) and math.isfinite(norm)):
        raise OverflowError("the product of the sample tensors overflows fp32 (a value "
                            "or an outlier scale too large)")
    if error == 0.0:
        return Quality(0.0, None)
    if norm == 0.0:   # a zero reference the emulation misses: all error
        return Quality(1.0, 0.0)
    return Quality(error / norm, 20.0 * math.log10(norm / error))
