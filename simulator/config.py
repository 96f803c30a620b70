"""Platform schema: the systolic array, its buffers, DMA, off-chip memory, vector unit
and energy table, loaded from one YAML file (DESIGN.md section 2).

Units are in field names. `extra="forbid"` everywhere, so a misspelt key is an error
that names the file and the field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from simulator.timing import DATAFLOW_CODES

Dtype = Literal["int8", "int16", "int32", "fp8", "bf16", "fp16", "fp32"]
Dataflow = Literal["os", "ws", "is"]

DTYPE_BYTES: dict[str, int] = {
    "int8": 1, "fp8": 1, "int16": 2, "bf16": 2, "fp16": 2, "int32": 4, "fp32": 4,
}


class Strict(BaseModel):
    """Base for every input model: unknown keys are errors, models are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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

    bandwidth_gbps: float = Field(gt=0, description="GB/s, 1e9 bytes per second")
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

    mac_pj: dict[Dtype, float] = Field(description="per MAC, by input dtype")
    sram_read_pj_per_byte: float = Field(ge=0)
    sram_write_pj_per_byte: float = Field(ge=0)
    offchip_pj_per_byte: float = Field(ge=0)
    vector_op_pj: float = Field(ge=0)
    static_power: StaticPower


class Interconnect(Strict):
    """Chip-to-chip links (ICI, NVLink) that join N chips of this platform into one
    system (DESIGN.md section 14). Collectives use the ports the topology gives them."""

    topology: Literal["ring", "torus2d", "switch"]
    ports_per_chip: PositiveInt
    link_bandwidth_gbps: float = Field(gt=0, allow_inf_nan=False,
                                       description="GB/s per port, per direction")
    link_latency_cycles: int = Field(ge=0, description="per hop, at the chip clock")
    efficiency: float = Field(gt=0, le=1, allow_inf_nan=False,
                              description="sustained fraction of the links")
    pj_per_byte: float = Field(ge=0, allow_inf_nan=False, description="per byte per link")

    @model_validator(mode="after")
    def _ports_fit_topology(self) -> Interconnect:
        least = {"ring": 2, "torus2d": 4, "switch": 1}[self.topology]
        if self.ports_per_chip < least:
            raise ValueError(f"a {self.topology} needs at least {least} ports per chip, "
                             f"found {self.ports_per_chip}")
        if self.topology == "torus2d" and self.ports_per_chip % 2:
            raise ValueError("a torus2d splits its ports evenly over two dimensions: "
                             f"ports_per_chip must be even, found {self.ports_per_chip}")
        return self


class Platform(Strict):
    """One accelerator platform, loaded from arch_configs/*.yaml."""

    name: str = Field(min_length=1)
    description: str = ""
    clock_ghz: float = Field(gt=0)
    systolic_array: SystolicArray
    buffers: Buffers
    activation_memory_bytes: PositiveInt | None = Field(
        default=None, description="on-chip home for activations (TPU v1 unified buffer)")
    dma: Dma
    offchip: OffchipMemory
    vector_unit: VectorUnit
    energy: EnergyTable
    interconnect: Interconnect | None = Field(
        default=None, description="links to other chips; needed for more than one chip")

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
