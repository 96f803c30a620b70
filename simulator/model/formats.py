"""Number formats and the bytes a run of their elements occupies (DESIGN.md section 17).

Every format packs into whole-byte units of `unit_elements` elements: one element for
byte-sized formats, two for 4-bit ones (sub-byte operands are packed), and a block of
32 elements plus its shared 8-bit scale for the OCP MX v1.0 formats. A tensor or tile of
n elements occupies ceil(n / unit_elements) units, so byte counts stay integers
(int64 in the engines) while bytes per element are exact fractions (mxfp4: 17 bytes per
32 elements = 4.25 bits).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import gcd

from simulator.errors import AccsimError

MX_BLOCK = 32        # OCP MX v1.0: elements sharing one scale
MX_SCALE_BITS = 8    # OCP MX v1.0: the shared E8M0 scale


@dataclass(frozen=True)
class Format:
    """A number format: bits per element, and for a block-scaled one its block."""

    bits: int
    block: int = 1          # elements sharing one scale (1: no shared scale)
    scale_bits: int = 0     # bits of the shared scale per block

    @property
    def unit_elements(self) -> int:
        """Elements of the smallest whole-byte unit: a block, or enough packed
        sub-byte elements to fill whole bytes."""
        if self.block > 1:
            return self.block
        return 8 // gcd(self.bits, 8)

    @property
    def unit_bytes(self) -> int:
        bits = self.unit_elements * self.bits + self.scale_bits
        assert bits % 8 == 0, "a packing unit is whole bytes"
        return bits // 8

    @property
    def bytes_per_element(self) -> Fraction:
        return Fraction(self.unit_bytes, self.unit_elements)


# fp8 is the generic 8-bit float (either encoding); fp8_e4m3 / fp8_e5m2 name one.
FORMATS: dict[str, Format] = {
    "fp32": Format(32), "int32": Format(32), "bf16": Format(16), "fp16": Format(16),
    "int16": Format(16), "int8": Format(8), "fp8": Format(8), "fp8_e4m3": Format(8),
    "fp8_e5m2": Format(8), "int4": Format(4), "fp4_e2m1": Format(4),
    "mxfp8": Format(8, MX_BLOCK, MX_SCALE_BITS), "mxfp6": Format(6, MX_BLOCK, MX_SCALE_BITS),
    "mxfp4": Format(4, MX_BLOCK, MX_SCALE_BITS), "mxint8": Format(8, MX_BLOCK, MX_SCALE_BITS),
}
# Formats of whole bytes per element (no packing): what vector operators and attention
# activations may use (packed activations: gemm and conv2d only).
WHOLE_BYTE = {name: f.unit_bytes for name, f in FORMATS.items() if f.unit_elements == 1}
# Each format's (elements, bytes) per packing unit, and its bytes per element rounded up:
# the constants behind the byte counts below, read once per call instead of derived
# (the search counts bytes thousands of times per operator).
_UNITS = {name: (f.unit_elements, f.unit_bytes) for name, f in FORMATS.items()}
_CEIL_BYTES = {name: -(-f.unit_bytes // f.unit_elements) for name, f in FORMATS.items()}


def packed_bytes(dtype: str, elements):
    """Bytes of `elements` (an int or an int64 array) stored packed in `dtype`: whole
    packing units, the last one rounded up."""
    unit_elements, unit_bytes = _UNITS[dtype]
    if unit_elements == 1:
        return elements * unit_bytes
    return -(-elements // unit_elements) * unit_bytes


def ceil_element_bytes(dtype: str) -> int:
    """Bytes per element rounded up to a whole byte: an upper bound for sizing tiles."""
    return _CEIL_BYTES[dtype]


def whole_bytes(dtype: str, *, field: str, file: str | None = None) -> int:
    """Bytes per element of a whole-byte format. An LLM's weights, KV cache and
    activations, and a sharded workload's transfers, are sized in whole bytes per
    element, so a packed format (int4, fp4_e2m1, the MX formats) is refused there,
    naming where it was given (`field` of `file`), instead of failing deep inside."""
    if dtype in WHOLE_BYTE:
        return WHOLE_BYTE[dtype]
    raise AccsimError(f"{dtype!r} is not a whole-byte format: an LLM or a sharded "
                      f"workload is sized in whole bytes per element "
                      f"({', '.join(WHOLE_BYTE)})", field=field, file=file)


def whole_bytes_of(dtype: str | None, input_dtypes, *, file: str | None = None) -> int:
    """Bytes per element of an LLM's or a sharded workload's tensors: `dtype` (the
    --dtype given), else the platform's first input dtype (`input_dtypes`, read from
    the platform `file`), each a whole-byte format (whole_bytes)."""
    if dtype:
        return whole_bytes(dtype, field="--dtype")
    return whole_bytes(input_dtypes[0], field="systolic_array.input_dtypes[0]", file=file)
