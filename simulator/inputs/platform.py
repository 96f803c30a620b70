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
                      ValidationError, field_validator, model_serializer, model_validator)
from pydantic_core import InitErrorDetails, PydanticCustomError

from simulator.inputs.dvfs import Dvfs, check_platform
from simulator.inputs.provenance import (Provenance, listed_values, numeric_leaves,
                                            provenance_errors)

from simulator.inputs.transposition import Transposition
from simulator.model.formats import WHOLE_BYTE
from simulator.model.sparsity import parse_pattern
from simulator.model.timing import FOLD_MODEL_CODES

# Formats of simulator.model.formats (fp8: either 8-bit float encoding; the MX formats share
# an 8-bit scale per block of 32).
Dtype = Literal["int8", "int16", "int32", "fp8", "bf16", "fp16", "fp32", "fp8_e4m3",
                "fp8_e5m2", "int4", "fp4_e2m1", "mxfp8", "mxfp6", "mxfp4", "mxint8"]
Dataflow = Literal["os", "ws", "is"]
FoldModel = Literal["pipelined", "scalesim"]
OutputPath = Literal["direct", "vector"]

# Bytes per element of the whole-byte formats (packed ones: simulator.model.formats).
DTYPE_BYTES: dict[str, int] = WHOLE_BYTE


def omit_when_empty(handler, model, fields: tuple[str, ...], info=None) -> dict:
    """A model's dump without the optional `fields` left empty, so adding them left
    every existing input's canonical form (and result digests) unchanged; a dump with
    context {"complete": True} keeps them (the walk over every numeric field)."""
    data = handler(model)
    if info is not None and (info.context or {}).get("complete"):
        return data
    for name in fields:
        if not data.get(name):
            data.pop(name, None)
    return data


def _negative_float(value) -> float | None:
    """The first negative (or non-finite) float inside a field's value, if any."""
    if isinstance(value, float):
        return value if value < 0 or not math.isfinite(value) else None
    if not isinstance(value, (dict, list, tuple)):  # most fields: no float inside
        return None
    return next((bad for item in (value.values() if isinstance(value, dict) else value)
                 if (bad := _negative_float(item)) is not None), None)


class Strict(BaseModel):
    """Base for every input model (DESIGN.md section 7): unknown keys are errors, models
    are immutable, values are not coerced (a boolean or a string is not a number), and
    every float is a finite, non-negative physical value (energy, power, bandwidth,
    clock, efficiency), so fields added later inherit those rules. Use PosFloat where
    zero is meaningless too. A model's validator is built on first use (defer_build):
    a command imports some 60 models and validates a few."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True,
                              allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _physical_floats(cls, value):
        bad = None if type(value) in (int, bool, str, type(None)) else _negative_float(value)
        if bad is not None:
            rule = "is negative" if math.isfinite(bad) else "is not a finite number"
            raise ValueError(f"{bad!r} {rule}; physical values are finite and >= 0")
        return value


PosFloat = Annotated[float, Field(gt=0)]


def _plain_text(text: str, *, allowed: str = "") -> str:
    bad = None if text.isprintable() else next(  # printable: no Cc, no Cf character
        (c for c in text if unicodedata.category(c) in ("Cc", "Cf") and c not in allowed), None)
    if bad is not None:
        raise ValueError(f"contains the control character {bad!r}; names and "
                         "descriptions are plain text")
    return text


# Text from input files, which reaches the terminal: no control characters (a name
# none at all, a description may hold newlines and tabs).
Name = Annotated[str, Field(min_length=1), AfterValidator(_plain_text)]
Text = Annotated[str, AfterValidator(lambda text: _plain_text(text, allowed="\n\t"))]


class SparsitySupport(Strict):
    """An N:M weight-sparsity pattern the array runs sparse (DESIGN.md section 17)."""

    pattern: str = Field(description="N:M, N kept of every M weights along k")
    speedup: float = Field(ge=1, allow_inf_nan=False,
                           description="array streaming speedup, at most M / N")
    metadata_bits: int | None = Field(
        default=None, ge=0, le=16, description="per kept value; default "
        "ceil(log2(C(M, N))) per group of M")

    @model_validator(mode="after")
    def _speedup_in_range(self) -> SparsitySupport:
        n, m = parse_pattern(self.pattern)
        if self.speedup > m / n:
            raise ValueError(f"speedup {self.speedup} of {self.pattern} is above M / N = "
                             f"{m / n:g} (the MACs it skips)")
        return self


class Evacuation(Strict):
    """How the vector unit copies one output tile out of the array's accumulators
    (output_path: vector): ceil(elements / elements_per_cycle) + tile_cycles, plus,
    with transpose_stationary, the stationary operand's tile passed through the vector
    unit's transpose at the same rate."""

    elements_per_cycle: PositiveInt = Field(
        description="accumulator elements the vector unit reads out per cycle")
    tile_cycles: int = Field(ge=0, le=2**40, description="fixed cost per output tile "
                             "(instruction issue, semaphore wait)")
    transpose_stationary: bool = Field(
        default=False, description="the stationary operand is transposed through the "
        "vector unit once per output tile")


class SystolicArray(Strict):
    """The MAC array: shape, dataflows it supports, its dtypes with their MAC rates and
    accumulators, and the sparsity patterns it runs sparse."""

    rows: PositiveInt
    cols: PositiveInt
    dataflows: list[Dataflow] = Field(min_length=1, description="supported; first is default")
    input_dtypes: list[Dtype] = Field(min_length=1, description="first is default")
    accumulator_dtype: Dtype
    output_dtype: Dtype
    count: PositiveInt = Field(
        default=1, description="identical arrays sharing the buffers and the off-chip "
        "server; a step's folds are spread over them (TPU v5e: 4 of 128x128)")
    fold_model: FoldModel = Field(
        default="pipelined", description="pipelined: the next fold's stationary operand "
        "shifts in while the current one streams (real arrays); scalesim: every fold "
        "pays SCALE-Sim v3's fill (what SCALE-Sim inputs and --validate scalesim use)")

    macs_per_cycle: dict[Dtype, PositiveInt] = Field(
        default={}, description="MACs per PE per cycle by input dtype; "
        "1 where absent")
    accumulator_dtypes: dict[Dtype, Dtype] = Field(
        default={}, description="accumulator by input dtype; "
        "accumulator_dtype where absent")
    sparsity: list[SparsitySupport] = Field(
        default=[], description="N:M patterns run sparse on the array")
    output_path: OutputPath = Field(
        default="direct", description="direct: results stream to the output buffer with "
        "the array; vector: every output tile is copied out of the accumulators by the "
        "vector unit (NeuronCore PSUM), at evacuation's rate (DESIGN.md section 15)")
    evacuation: Evacuation | None = Field(
        default=None, description="the vector unit's copy of an output tile out of the "
        "accumulators; required by output_path: vector")
    transpose: Transposition = Field(Transposition(), description="a transposed GEMM's costs")

    @model_validator(mode="after")
    def _rates_name_input_dtypes(self) -> SystolicArray:
        for name in ("macs_per_cycle", "accumulator_dtypes"):
            unknown = [d for d in getattr(self, name) if d not in self.input_dtypes]
            if unknown:
                raise ValueError(f"{name} names {unknown}, which are not input_dtypes")
        patterns = [s.pattern for s in self.sparsity]
        if len(set(patterns)) != len(patterns):
            raise ValueError(f"sparsity lists a pattern twice: {patterns}")
        if self.output_path == "vector" and self.evacuation is None:
            raise ValueError("output_path: vector needs evacuation (elements_per_cycle, "
                             "tile_cycles)")
        if self.output_path == "direct" and self.evacuation is not None:
            raise ValueError("evacuation is given but output_path is direct: set "
                             "output_path: vector or drop evacuation")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler, info) -> dict:
        data = omit_when_empty(handler, self, ("macs_per_cycle", "accumulator_dtypes",
                                               "sparsity", "evacuation"), info)
        if data.get("output_path") == "direct":  # defaults left out: older inputs keep
            data.pop("output_path")              # their canonical form
        if self.transpose == Transposition():
            data.pop("transpose")
        return data

    def rate(self, dtype: str) -> int:
        """MACs per PE per cycle in an input dtype."""
        return self.macs_per_cycle.get(dtype, 1)

    def accumulator(self, dtype: str) -> str:
        """The accumulator dtype of an input dtype."""
        return self.accumulator_dtypes.get(dtype, self.accumulator_dtype)

    def sparse_support(self, pattern: str) -> SparsitySupport | None:
        return next((s for s in self.sparsity if s.pattern == pattern), None)

    @property
    def default_dataflow(self) -> str:
        return self.dataflows[0]

    @property
    def fold_model_code(self) -> int:
        return FOLD_MODEL_CODES[self.fold_model]


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
    efficiency: float = Field(default=1.0, gt=0, le=1, allow_inf_nan=False,
                              description="sustained fraction of the rated bandwidth")
    capacity_bytes: PositiveInt | None = Field(
        default=None, description="off-chip capacity (HBM): what serving has for weights "
        "and KV cache; None: not modelled")


class HostLink(Strict):
    """The host-to-device link of a call (PCIe, a host DMA): one transfer in and one
    out per call, each latency + bytes / bandwidth."""

    bandwidth_gbps: PosFloat = Field(le=1e9, description="GB/s, 1e9 bytes per second")
    latency_us: float = Field(ge=0, le=1e9, allow_inf_nan=False,
                              description="per transfer")


class Runtime(Strict):
    """Costs of running operators that no hardware block above accounts for."""

    op_overhead_cycles: int = Field(
        default=0, ge=0, le=2**40, description="fixed dispatch and synchronisation cost "
        "per operator instance, before its pipeline starts (breakdown term: overhead)")
    invocation_overhead_us: float = Field(
        default=0.0, ge=0, le=1e9, allow_inf_nan=False, description="launch and "
        "synchronisation of one call of the whole workload (one run, one serving "
        "iteration); breakdown term: invocation")
    host_link: HostLink | None = Field(
        default=None, description="link from the host over which a call's non-resident "
        "inputs arrive and its outputs leave; None: no transfer cost")

    @model_serializer(mode="wrap")
    def _dump(self, handler, info) -> dict:
        return omit_when_empty(handler, self, ("invocation_overhead_us", "host_link"),
                               info)


class Area(Strict):
    """Silicon area, for performance per mm^2: mm^2 per PE by input dtype, per MiB of
    SRAM in the three operand buffers, per vector lane, and fixed (an activation memory
    apart from the buffers belongs in fixed_mm2)."""

    pe_mm2: dict[Dtype, float] = Field(min_length=1, description="per PE, by input dtype")
    sram_mm2_per_mib: float = Field(ge=0, allow_inf_nan=False)
    vector_lane_mm2: float = Field(ge=0, allow_inf_nan=False)
    fixed_mm2: float = Field(default=0.0, ge=0, allow_inf_nan=False,
                             description="I/O, control, interconnect")

    @field_validator("pe_mm2")
    @classmethod
    def _positive_finite(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: v for k, v in value.items() if not (math.isfinite(v) and v > 0)}
        if bad:
            raise ValueError(f"mm^2 per PE must be positive and finite: {bad}")
        return value


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


# How a collective is run (DESIGN.md section 22): `auto` takes the cheapest algorithm
# per wiring dimension for the message size; `ring` is the flat ring of section 14
# (today's figures, exactly); the others pin one algorithm wherever it applies.
COLLECTIVE_MODES = ("auto", "ring", "direct", "halving_doubling", "tree")


class LinkDimension(Strict):
    """One dimension of the wiring (DESIGN.md section 22), inner dimensions first: a
    `ring` of `size` chips (joined end to end where `wraparound`, a line otherwise), a
    box of `size` chips `fully_connected` with `ports` ports to each peer, or a
    `switch` every chip reaches over `ports` ports. A `scale_out` dimension joins boxes
    (NICs): a group crosses it only when it outgrows one box. Link figures left out are
    the interconnect's own."""

    kind: Literal["ring", "fully_connected", "switch"]
    size: int | None = Field(default=None, ge=2, le=2**16, description="chips along "
                             "it (boxes, for scale_out); None: as many as a group needs")
    ports: PositiveInt = Field(description="ring: links per chip along it (2: one to "
                               "each neighbour); fully_connected: per peer; switch: "
                               "into the switch")
    wraparound: bool = Field(default=True, description="ring: its ends are joined")
    scale_out: bool = False
    link_bandwidth_gbps: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                              description="GB/s per port, per direction")
    link_latency_cycles: int | None = Field(default=None, ge=0, le=2**40,
                                            description="per hop, at the chip clock")
    efficiency: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    pj_per_byte: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @model_serializer(mode="wrap")
    def _dump(self, handler, info) -> dict:
        data = handler(self)
        if (info.context or {}).get("complete"):
            return data
        return {key: value for key, value in data.items()
                if value is not None and not (key == "scale_out" and not value)}


class Interconnect(Strict):
    """Chip-to-chip links joining N chips (DESIGN.md sections 14, 22): the flat ring's
    shorthand (`topology`, `ports_per_chip`), the wiring (`dimensions`, else the
    shorthand's) and the chips sharing a device (simulator.collectives.devices)."""

    topology: Literal["ring", "torus2d", "switch"]
    ports_per_chip: PositiveInt
    link_bandwidth_gbps: float = Field(gt=0, allow_inf_nan=False,
                                       description="GB/s per port, per direction")
    link_latency_cycles: int = Field(ge=0, description="per hop, at the chip clock")
    efficiency: float = Field(gt=0, le=1, allow_inf_nan=False,
                              description="sustained fraction of the links")
    pj_per_byte: float = Field(ge=0, allow_inf_nan=False, description="per byte per link")
    collective_fixed_us: float = Field(
        default=0.0, ge=0, le=1e6, allow_inf_nan=False, description="per collective: "
        "start-up and final synchronisation, apart from the hops")
    dimensions: list[LinkDimension] | None = Field(default=None, min_length=1,
                                                   max_length=8)
    collectives: Literal[COLLECTIVE_MODES] = Field(  # type: ignore[valid-type]
        default="auto", description="algorithm choice (COLLECTIVE_MODES)")
    mesh: list[Annotated[int, Field(ge=1, le=2**16)]] | None = Field(
        default=None, min_length=1, max_length=8, description="chips of the tensor-"
        "parallel group along each dimension (`--mesh AxB`); None: the squarest")
    ranks_per_device: PositiveInt | None = Field(default=None, le=64)  # None: 1

    @model_serializer(mode="wrap")
    def _dump(self, handler, info) -> dict:
        data = omit_when_empty(handler, self, ("collective_fixed_us", "dimensions",
                                               "mesh", "ranks_per_device"), info)
        if data.get("collectives") == "auto" and not (info.context or {}).get("complete"):
            data.pop("collectives")
        return data

    @model_validator(mode="after")
    def _ports_fit_topology(self) -> Interconnect:
        least = {"ring": 2, "torus2d": 4, "switch": 1}[self.topology]
        if self.ports_per_chip < least:
            raise ValueError(f"a {self.topology} needs at least {least} ports per chip, "
                             f"found {self.ports_per_chip}")
        if self.topology == "torus2d" and self.ports_per_chip % 2:
            raise ValueError("a torus2d splits its ports evenly over two dimensions: "
                             f"ports_per_chip must be even, found {self.ports_per_chip}")
        if self.dimensions and sum(d.scale_out for d in self.dimensions) > 1:
            raise ValueError("dimensions: at most one scale_out level")
        if self.dimensions and any(d.scale_out for d in self.dimensions[:-1]):
            raise ValueError("dimensions: the scale_out level is the last (outermost)")
        return self


HOURS_PER_YEAR = 8766  # 365.25 days


class CostTable(Strict):
    """What a chip costs to run (DESIGN.md section 18), for cost per million tokens:
    a price per chip-hour (cloud), or a capital cost written off over a lifetime plus
    the power it draws at a price per kWh (owned). Description of the buyer's terms,
    never input to the timing or energy model."""

    price_per_chip_hour: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                              description="USD per chip-hour")
    capital_per_chip: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                           description="USD per chip, bought")
    lifetime_years: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                         description="years the capital is spread over")
    power_price_per_kwh: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                              description="USD per kWh drawn")

    @model_validator(mode="after")
    def _one_form(self) -> CostTable:
        owned = (self.capital_per_chip, self.lifetime_years, self.power_price_per_kwh)
        if self.price_per_chip_hour is not None:
            if any(value is not None for value in owned):
                raise ValueError("give price_per_chip_hour, or capital_per_chip + "
                                 "lifetime_years + power_price_per_kwh, not both")
        elif any(value is None for value in owned):
            raise ValueError("give price_per_chip_hour, or all of capital_per_chip, "
                             "lifetime_years and power_price_per_kwh")
        elif not math.isfinite(self.chip_hour(0.0)) or self.chip_hour(0.0) == 0:
            raise ValueError(f"capital_per_chip {self.capital_per_chip:g} over "
                             f"lifetime_years {self.lifetime_years:g} is no finite "
                             "price per chip-hour above 0")
        return self

    def chip_hour(self, watts_per_chip: float) -> float:
        """USD one chip costs an hour while drawing `watts_per_chip`."""
        if self.price_per_chip_hour is not None:
            return self.price_per_chip_hour
        return (self.capital_per_chip / (self.lifetime_years * HOURS_PER_YEAR)
                + watts_per_chip / 1e3 * self.power_price_per_kwh)


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
    interconnect: Interconnect | None = Field(
        default=None, description="links to other chips; needed for more than one chip")
    runtime: Runtime = Runtime()
    area: Area | None = Field(default=None, description="optional: perf per mm^2")
    cost: CostTable | None = Field(default=None, description="optional: cost per Mtok")
    dvfs: Dvfs | None = Field(default=None, description="optional: DVFS points and cap")
    provenance: dict[str, Provenance] = Field(
        default={}, description="dotted field path -> where its value comes "
        "from (DESIGN.md section 16); description only, left out of the canonical dump")

    @model_serializer(mode="wrap")
    def _dump(self, handler) -> dict:
        data = handler(self)
        data.pop("provenance", None)  # no figure depends on it: results stay as they were
        for name in ("cost", "dvfs"):  # absent: every existing platform's form unchanged
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _costs_have_provenance(self) -> Platform:
        """A cost is a buyer's term, not a measurement: each one given must be cited
        (published) or marked assumed in the provenance table."""
        if self.cost is None:
            return self
        given = [f"cost.{name}" for name, value in self.cost if value is not None]
        missing = [path for path in given if path not in self.provenance]
        if missing:
            raise ValidationError.from_exception_data("Platform", [InitErrorDetails(
                type=PydanticCustomError("provenance", "a cost must be cited or marked "
                                         "assumed: add a provenance entry for it"),
                loc=("provenance", path), input=path) for path in missing])
        return self

    _dvfs_fits = model_validator(mode="after")(check_platform)  # simulator.inputs.dvfs

    def numeric_fields(self) -> dict:
        """Every numeric value by dotted path, defaults the dump leaves out included."""
        return numeric_leaves(self.model_dump(mode="json", context={"complete": True}))

    def assumptions(self) -> dict[str, dict]:
        """The assumed and fitted values the platform holds, with their ranges and
        sources (what a result's manifest lists)."""
        return listed_values(self.provenance, self.numeric_fields())

    @model_validator(mode="after")
    def _mac_energy_covers_input_dtypes(self) -> Platform:
        missing = [d for d in self.systolic_array.input_dtypes if d not in self.energy.mac_pj]
        if missing:
            raise ValueError(f"energy.mac_pj lacks the array's input dtypes {missing}")
        if self.area is not None:
            missing = [d for d in self.systolic_array.input_dtypes
                       if d not in self.area.pe_mm2]
            if missing:
                raise ValueError(f"area.pe_mm2 lacks the array's input dtypes {missing}")
        return self

    @model_validator(mode="after")
    def _provenance_names_fields(self) -> Platform:
        # Last of the validators: a wrong field is named as such before the provenance
        # entry that describes it.
        errors = self.provenance and provenance_errors(self.provenance,
                                                       self.numeric_fields())
        if errors:
            raise ValidationError.from_exception_data("Platform", [InitErrorDetails(
                type=PydanticCustomError("provenance", rule), loc=("provenance", path),
                input=path) for path, rule in errors])
        return self

    @property
    def clock_hz(self) -> float:
        """Cycles per second: the time base of every cycles <-> seconds conversion."""
        return self.clock_ghz * 1e9

    @property
    def cycles_per_us(self) -> float:
        """Cycles per microsecond, for the fields given in microseconds."""
        return self.clock_ghz * 1e3

    def seconds(self, cycles):
        """`cycles` of this platform's clock in seconds (a scalar or an array)."""
        return cycles / self.clock_hz

    @property
    def pes(self) -> int:
        """Processing elements of all arrays: R * C * count."""
        array = self.systolic_array
        return array.rows * array.cols * array.count

    @property
    def peak_flops(self) -> float:
        """2 * R * C * count * clock x the MAC rate of the default input dtype, FLOP/s."""
        return self.peak_flops_for(self.systolic_array.input_dtypes[0])

    def peak_flops_for(self, dtype: str) -> float:
        """2 * R * C * count * clock x the MAC rate of `dtype`, in FLOP/s."""
        return 2.0 * self.pes * self.systolic_array.rate(dtype) * self.clock_ghz * 1e9

    @property
    def rated_bytes_per_cycle(self) -> float:
        """Rated off-chip bandwidth in bytes per cycle: GB/s over GHz."""
        return self.offchip.bandwidth_gbps / self.clock_ghz

    @property
    def bytes_per_cycle(self) -> float:
        """Sustained off-chip bandwidth in bytes per cycle: GB/s x efficiency over GHz
        (what the off-chip server of the engines runs at)."""
        return self.offchip.bandwidth_gbps * self.offchip.efficiency / self.clock_ghz

    @property
    def area_mm2(self) -> float | None:
        """Die area from the area table (PEs in the default input dtype, the buffers'
        SRAM, the vector lanes, fixed); None without one."""
        if self.area is None:
            return None
        area = self.area
        sram = self.buffers.ifmap_bytes + self.buffers.weight_bytes + self.buffers.output_bytes
        return (self.pes * area.pe_mm2[self.systolic_array.input_dtypes[0]]
                + sram / 2**20 * area.sram_mm2_per_mib
                + self.vector_unit.lanes * area.vector_lane_mm2 + area.fixed_mm2)
