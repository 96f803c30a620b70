"""The result model: typed, immutable views of the result files accsim writes (DESIGN.md
section 6), so that a reader (the review packet, a notebook) uses attributes instead of
string keys and the writer and its readers cannot drift apart.

`accsim run --json` is written from RunResultFile (report.result_dict builds it and dumps
it), so every key the file holds is a field here, in the file's order; a key the writer
added without a field here is an error, not a silent omission. Blocks other modules own
as plain data (an engine's per-run breakdown, buffer and byte counters, a collective's
figures, the embedded canonical inputs) stay dicts. An `accsim serve --json` result is
read through ServeResult, which names only the figures readers use (its writer lives in
serving/). read_result turns a decoded document into a model, a fault named by file and
field.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Literal, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model, model_serializer

from simulator.engines.outcome import OPTIONAL_TERMS
from simulator.inputs.loader import validate_model
from simulator.mapping.plan import without_unset
from simulator.metrics.totals import PEAK_FIELDS, Totals

Model = TypeVar("Model", bound=BaseModel)


class Written(BaseModel):
    """A block accsim writes in full: every key is a field (an unknown one is an error)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Read(BaseModel):
    """A block of which only the fields readers use are named; the rest is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class Environment(Written):
    python: str
    numpy: str
    numba: str
    simpy: str


class EmbeddedInput(Written):
    """One input as the result embeds it: its source file (None: built in) and its
    canonical form."""

    path: str | None
    sha256: str | None
    canonical: dict[str, Any]


class Manifest(Written):
    """What produced a result (simulate.manifest)."""

    accsim_version: str
    model_version: int
    git_commit: str | None
    environment: Environment
    engine: str
    engine_reason: str
    mapping_mode: str
    inputs: dict[str, EmbeddedInput]
    # the platform's assumed and fitted values with their provenance (only where the
    # platform has a provenance table; DESIGN.md section 16)
    assumptions: dict[str, dict[str, Any]] | None = None


class DerivedRecord(Written):
    """The figures Totals.as_dict derives on the platform: two sums and the ratios
    (the optional terms' fractions are added beside collective_fraction)."""

    memory_stall_cycles: int
    energy_pj: float
    time_s: float
    mfu: float
    overhead_fraction: float
    memory_stall_fraction: float
    vector_stall_fraction: float
    fill_fraction: float
    input_stall_fraction: float
    output_stall_fraction: float
    drain_fraction: float
    useful_fraction: float
    padding_fraction: float
    array_fill_fraction: float
    stationary_load_fraction: float
    skew_fraction: float
    array_setup_fraction: float
    refetch_ratio: float
    arithmetic_intensity: float
    machine_balance: float
    offchip_bandwidth_fraction: float
    roofline_fraction: float
    offchip_busy_fraction: float
    vector_busy_fraction: float
    collective_fraction: float
    energy_j: float
    average_power_w: float
    flops_per_joule: float
    energy_per_mac_pj: float
    area_mm2: float | None = None             # written only where the platform
    flops_per_s_per_mm2: float | None = None  # gives an area table
    # The input dtype whose peak MFU is relative to, written only where its MAC rate
    # differs from the platform default dtype's (DESIGN.md section 17).
    peak_dtype: str | None = None


def totals_record_fields() -> dict[str, tuple[Any, Any]]:
    """TotalsRecord's fields in the file's order: Totals' additive figures (the cycle
    terms as engines.outcome.Breakdown declares them), then DerivedRecord's, with each
    optional term (written only where non-zero) and its fraction optional."""
    hints = get_type_hints(Totals)
    additive = {f.name: (hints[f.name] | None, None) if f.name in OPTIONAL_TERMS
                else (hints[f.name], ...)
                for f in fields(Totals) if f.name not in PEAK_FIELDS}
    derived: dict[str, tuple[Any, Any]] = {}
    for name, info in DerivedRecord.model_fields.items():
        derived[name] = (info.annotation, info)
        if name == "collective_fraction":
            derived.update({term.replace("_cycles", "_fraction"): (float | None, None)
                            for term in OPTIONAL_TERMS})
    return {**additive, **derived}


TotalsRecord = create_model(
    "TotalsRecord", __base__=Written, __module__=__name__,
    __doc__="metrics.Totals as written (Totals.as_dict): the additive figures, two sums, "
            "then the ratios derived on the platform (the area ones only where it gives "
            "an area).",
    **totals_record_fields())


class GroupTotals(TotalsRecord):
    """A layer_type's or the workload's totals with the class holding most cycles."""

    bottleneck: str


class TilingRecord(Written):
    """The tiling an operator ran with (mapping.Tiling); vector operators use tm as
    rows per tile."""

    tm: int
    tn: int
    tk: int
    loop_order: str
    dataflow: str
    depth: int
    fuse: str | None
    heuristic: str
    # normal | transposed (operand orientation, DESIGN.md section 19): written where
    # transposed or an attention on the array; unit (array | vector) and K/V head
    # groups per program: attention only. Absent: normal, on the array.
    orientation: Literal["normal", "transposed"] | None = None
    unit: str | None = None
    groups: int | None = None

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler):
        return without_unset(handler(self))


class BottleneckRecord(Written):
    """The operator's class and, per rule tried up to it, each condition's value
    (bottleneck.Verdict.as_dict)."""

    bottleneck_class: str = Field(alias="class")
    rules_tried: list[dict[str, Any]]


class OperatorRecord(Written):
    """One operator of a run: what it is, how it was tiled, its figures."""

    name: str
    layer_type: str
    kind: str
    unit: str
    runs: int
    instances: int
    repeat: int
    steps: int
    tiling: TilingRecord | None  # None: a collective takes no tiling
    fused: str | None
    onchip_home: bool
    buffers: dict[str, Any]
    per_run: dict[str, Any]
    bottleneck: BottleneckRecord
    per_instance_bytes: dict[str, Any]
    totals: TotalsRecord
    collective: dict[str, Any] | None = None  # written only for a collective
    # How an array operator ran where it differs from the default dtype's rate or has
    # sparse weights: run dtype, its MAC rate, sparsity and its mode (structured,
    # decompressed, bandwidth-only); written only then (lowering.Precision).
    precision: dict[str, Any] | None = None


class SystemRecord(Read):
    """The `system` block a multi-chip run's file carries (system.sharded_run writes it); the
    parallelism plan is what readers use."""

    chips: int
    tp: int
    pp: int
    ep: int
    overlap: str = "none"  # files written before overlap existed serialised them

    def plan(self) -> dict[str, int | str]:
        return {"chips": self.chips, "tp": self.tp, "pp": self.pp, "ep": self.ep,
                "overlap": self.overlap}


class LlmFigures(Written):
    """The model figures of an LLM run (`run --model`; frontends.hf.llm_figures.StepFigures),
    as numbers: sizes from the config, the step's simulated figures beside them."""

    model: str
    phase: str
    batch: int
    length: int
    tokens: int
    params_total: int
    params_active: int
    flops_per_token: int
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    weight_bytes: int
    step_flops: int
    offchip_bytes: int
    compulsory_bytes: int
    arithmetic_intensity: float
    machine_balance: float
    roofline_s: float
    simulated_s: float
    mfu: float
    tokens_per_s: float
    ms_per_token: float


class CapacityRecord(Written):
    """The capacity stamp of a run made with --ignore-capacity (capacity.Capacity):
    whether the chip's footprint fits, and whether a shortfall was ignored."""

    ignored: bool
    fits: bool | None                    # None: the platform gives no capacity
    needed_bytes_per_chip: int
    weight_bytes_per_chip: int
    kv_bytes_per_chip: int
    activation_bytes_per_chip: int
    capacity_bytes_per_chip: int | None


class FusionGroupRecord(Written):
    """One group of the fusion plan (fusion_plan.FusionGroup.as_dict)."""

    producer: str
    members: list[str]
    dropped: list[dict[str, str]]
    offchip_bytes_saved: int
    cycles_saved: int
    prologue: list[str] = []     # written only when the group has a prologue norm


class FusionRecord(Written):
    """The fusion plan of a run (DESIGN.md section 15), written only when it has groups:
    whether it followed adjacency (the workload names no inputs) and each group."""

    by_adjacency: bool
    groups: list[FusionGroupRecord]


class FallbackRecord(Written):
    """A format of a precision plan's chain passed over, and why."""

    role: str
    format: str
    reason: str


class PrecisionOperatorRecord(Written):
    """What a precision plan made of one operator (precision.format_choice): the formats per
    role, sparsity, fallbacks, and the emulated GEMM's quality against fp32 (None where
    nothing changed and no guardrail asked for it)."""

    name: str
    layer_type: str
    formats: dict[str, str]
    sparsity: str | float | None
    fallbacks: list[FallbackRecord]
    rel_error: float | None
    sqnr_db: float | None   # None: also where the emulation is exact
    tensors: str | None
    guardrail: dict[str, float] | None


class PrecisionRecord(Written):
    """The `precision` block of a run given `--precision PLAN`."""

    plan: str
    file: str | None
    operators: list[PrecisionOperatorRecord]


class RunResultFile(Written):
    """The file `accsim run --json` writes: manifest, operators, per-layer_type and
    workload totals; on a multi-chip system the `system` block, on an LLM run its
    model figures (`llm`), with --ignore-capacity the `capacity` stamp, and with
    --precision what the plan chose (`precision`)."""

    manifest: Manifest
    operators: list[OperatorRecord]
    layer_types: dict[str, GroupTotals]
    workload: GroupTotals
    fusion: FusionRecord | None = None
    system: SystemRecord | None = None
    llm: LlmFigures | None = None
    capacity: CapacityRecord | None = None
    precision: PrecisionRecord | None = None

    def dump(self) -> dict:
        """The JSON document: keys in field order, aliases as written, optional keys
        only where they were given."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class LatencyStats(Read):
    """A latency distribution of a serving result, ms (None where nothing was measured)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    max: float | None

    def at(self, percentile: str) -> float | None:
        """The figure by name ("p95"), as an SLA's bounds name it."""
        return getattr(self, percentile)


class ServeResult(Read):
    """The figures of an `accsim serve --json` result readers use: latency statistics
    (TTFT and TPOT for LLMs, else None), achieved rates, utilisation and counts."""

    latency_ms: LatencyStats | None
    ttft_ms: LatencyStats | None
    tpot_ms: LatencyStats | None
    throughput_rps: float
    tokens_per_s: float | None
    utilization: float
    completed: int
    dropped: int
    # per latency tail ("p50", "p95", "p99"): its value, its requests and each memory
    # cause's share (serving.tails); absent unless the run asked for it
    memory_tails: dict[str, Any] | None = None

    def stats(self, metric: str) -> LatencyStats | None:
        """The statistics of "latency", "ttft" or "tpot"."""
        return {"latency": self.latency_ms, "ttft": self.ttft_ms,
                "tpot": self.tpot_ms}[metric]


def read_result(raw, model: type[Model], *, file: str) -> Model:
    """A decoded result document as `model`; a bad one raises one AccsimError naming
    the file and the field."""
    return validate_model(raw, model, file=file)
