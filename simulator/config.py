"""Platform schema: the systolic array, its buffers, DMA, off-chip memory, vector unit
and energy table, loaded from one YAML file (DESIGN.md section 2).

Units are in field names. `extra="forbid"` everywhere, so a misspelt key is an error
that names the file and the field.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PositiveInt,
                      field_validator, model_validator)

from simulator.timing import DATAFLOW_CODES

Dtype = Literal["int8", "int16", "int32", "fp8", "bf16", "fp16", "fp32"]
Dataflow = Literal["os", "ws", "is"]

DTYPE_BYTES: dict[str, int] = {
    "int8": 1, "fp8": 1, "int16": 2, "bf16": 2, "fp16": 2, "int32": 4, "fp32": 4,
}


def _negative_float(value) -> float | None:
    """The first negative (or non-finite) float inside a field's value, if any."""
    if isinstance(value, float):
        return value if value < 0 or not math.isfinite(value) else None
    items = value.values() if isinstance(value, dict) else \
        value if isinstance(value, (list, tuple)) else ()
    return next((bad for item in items if (bad := _negative_float(item)) is not None),
                None)


class Strict(BaseModel):
    """Base for every input model (DESIGN.md section 7): unknown keys are errors, models
    are immutable, values are not coerced (a boolean or a string is not a number), and
    every float is a finite, non-negative physical value (energy, power, bandwidth,
    clock, efficiency), so fields added later inherit those rules. Use PosFloat where
    zero is meaningless too."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True,
                              allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _physical_floats(cls, value):
        bad = _negative_float(value)
        if bad is not None:
            raise ValueError(f"{bad!r} is negative; physical values are >= 0")
        return value


PosFloat = Annotated[float, Field(gt=0)]


def _plain_text(text: str, *, allowed: str = "") -> str:
    bad = next((c for c in text if unicodedata.category(c) in ("Cc", "Cf")
                and c not in allowed), None)
    if bad is not None:
        raise ValueError(f"contains the control character {bad!r}; names and "
                         "descriptions are plain text")
    return text


# Text from input files, which reaches the terminal: no control characters (a name
# none at all, a description may hold newlines and tabs).
Name = Annotated[str, Field(min_length=1), AfterValidator(_plain_text)]
Text = Annotated[str, AfterValidator(lambda text: _plain_text(text, allowed="\n\t"))]


class SystolicArray(Strict):
    """The MAC array: shape, dataflows it supports, and its dtypes."""

    rows: PositiveInt
    cols: PositiveInt
    dataflows: list[Dataflow] = Field(min_length=1, description="supported; first is default")
    input_dtypes: list[Dtype] = Field(min_length=1, description="first is default")
    accumulator_dtype: Dtype
    output_dtype: Dtype

    @property
    def default_dataflow(self) -> str:
        return self.dataflows[0]


class Buffers(Strict):
    """SRAM per operand: A (ifmap), B (weights), C (output, holds accumulator tiles)."""

    ifmap_bytes: PositiveInt
    weight_bytes: PositiveInt
    output_bytes: PositiveInt


class Dma(Strict):
    """The DMA engine: fixed setup per transfer."""

    setup_cycles: int = Field(ge=0, description="per transfer")


class OffchipMemory(Strict):
    """Off-chip memory (HBM, DDR): one server of this bandwidth and latency."""

    bandwidth_gbps: PosFloat = Field(description="GB/s, 1e9 bytes per second")
    latency_cycles: int = Field(ge=0)


class VectorCosts(Strict):
    """Cycles per element (per lane) of each vector kind; passes are fixed per kind."""

    add: PositiveInt
    mul: PositiveInt
    relu: PositiveInt
    gelu: PositiveInt
    silu: PositiveInt
    reduction: PositiveInt
    softmax: PositiveInt
    norm: PositiveInt
    pool: PositiveInt


class VectorUnit(Strict):
    """The vector unit: lanes and cycles per element by kind."""

    lanes: PositiveInt
    cycles_per_element: VectorCosts


class StaticPower(Strict):
    """Static (leakage and always-on) power per component, watts."""

    array_w: float = Field(ge=0)
    sram_w: float = Field(ge=0)
    offchip_w: float = Field(ge=0)
    vector_w: float = Field(ge=0)
    other_w: float = Field(ge=0)


class EnergyTable(Strict):
    """Energy per event, picojoules, and static power."""

    mac_pj: dict[Dtype, Annotated[float, Field(ge=0)]] = Field(description="per MAC, by input dtype")
    sram_read_pj_per_byte: float = Field(ge=0)
    sram_write_pj_per_byte: float = Field(ge=0)
    offchip_pj_per_byte: float = Field(ge=0)
    vector_op_pj: float = Field(ge=0)
    static_power: StaticPower


class Platform(Strict):
    """One accelerator platform, loaded from arch_configs/*.yaml."""

    name: Name
    description: Text = ""
    clock_ghz: PosFloat
    systolic_array: SystolicArray
    buffers: Buffers
    activation_memory_bytes: PositiveInt | None = Field(
        default=None, description="on-chip home for activations (TPU v1 unified buffer)")
    dma: Dma
    offchip: OffchipMemory
    vector_unit: VectorUnit
    energy: EnergyTable

    @model_validator(mode="after")
    def _mac_energy_covers_input_dtypes(self) -> Platform:
        missing = [d for d in self.systolic_array.input_dtypes if d not in self.energy.mac_pj]
        if missing:
            raise ValueError(f"energy.mac_pj lacks the array's input dtypes {missing}")
        return self

    @property
    def peak_flops(self) -> float:
        """2 * R * C * clock, in FLOP/s."""
        return 2.0 * self.systolic_array.rows * self.systolic_array.cols * self.clock_ghz * 1e9

    @property
    def bytes_per_cycle(self) -> float:
        """Off-chip bandwidth in bytes per cycle: GB/s over GHz."""
        return self.offchip.bandwidth_gbps / self.clock_ghz

    def dataflow_code(self, dataflow: str) -> int:
        return DATAFLOW_CODES[dataflow]
