"""What `accsim serve` runs, as one model: the YAML spec and the command-line flags
have the same fields (flags override the file)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from simulator.inputs.platform import COLLECTIVE_MODES, Dtype, Strict
from simulator.errors import AccsimError
from simulator.mapping.heuristics import heuristic as registered_heuristic
from simulator.mapping.plan import Mapping, with_heuristic
from simulator.numbers import decimal_float, decimal_int
from simulator.serving.pools import Disaggregation, disaggregation_rules
from simulator.serving.sla import check_sla
from simulator.system.parallelism import MAX_CHIPS
from simulator.system.parallelism import SystemPlan

DEFAULT_ARCH = "tpu_v1"
DEFAULT_WORKLOAD = "resnet50_b1"
# max_batch when none is given: a plain-serving batch, or vLLM's max_num_seqs.
DEFAULT_REQUESTS = 1000  # poisson/gamma runs given neither requests nor duration_s
DEFAULT_MAX_BATCH = {"static": 8, "dynamic": 8, "continuous": 256}
# Bounds checked before any work, so a spec too large is refused at once rather than
# run out of memory: a million requests take about a minute and 2 GB (a plain run
# serves ~30,000 a second), no model has a context of 16M tokens, and beyond 1e9 s
# (32 years) float64 seconds lose the microseconds a latency is made of.
MAX_REQUESTS = 1_000_000
MAX_TOKENS = 2**24
MAX_SEED = 2**63 - 1
MAX_RATE = 1e9            # requests/s
MAX_LOADS = 1000          # the offered rates of one latency-throughput curve
MAX_HORIZON_S = 1e9       # the last arrival, in simulated seconds
CV_RANGE = (0.01, 100.0)  # gamma shapes 1e4 .. 1e-4: numpy draws both exactly
MAX_ERROR_SAMPLES = 1000  # each sample is one exact simulation of an iteration
# A batch is simulated as one workload of max_batch samples (static batching pads to
# it): 16,384 is beyond any serving system's batch and simulates in about a second.
MAX_BATCH = 2**14
# Fields left out of a dump when unset (results dump as before these existed).
OPTIONAL_FIELDS = ("fusion", "heuristic", "precision", "overlap", "mapping_plan",
                   "collectives", "disaggregate", "prefix_hit_rate", "kv_host_tier",
                   "memory_tails", "power_cap_w")


class RateSweep(Strict):
    """`--sweep-rate A:B:N`: N offered rates from A to B requests/s, evenly spaced."""

    low: float = Field(gt=0, le=MAX_RATE, allow_inf_nan=False)
    high: float = Field(gt=0, le=MAX_RATE, allow_inf_nan=False)
    points: int = Field(ge=2, le=MAX_LOADS)

    @model_validator(mode="after")
    def _ordered(self) -> RateSweep:
        if self.high <= self.low:
            raise ValueError(f"sweep end {self.high} must exceed its start {self.low}")
        return self

    @property
    def rates(self) -> list[float]:
        step = (self.high - self.low) / (self.points - 1)
        return [self.low + i * step for i in range(self.points)]


def parse_sweep(text):
    """'A:B:N' -> the sweep's fields (a mapping passes through for YAML specs)."""
    if not isinstance(text, str):
        return text
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"expected A:B:N (start rate, end rate, points), got {text!r}")
    try:  # ASCII decimals (float() and int() read '1_0' and other scripts' digits)
        return {"low": decimal_float(parts[0].strip(), specials=True),
                "high": decimal_float(parts[1].strip(), specials=True),
                "points": decimal_int(parts[2].strip())}
    except ValueError:
        raise ValueError(f"expected numbers in A:B:N, got {text!r}") from None


class ServeSpec(Strict):
    """A serving run: platform, what is served, arrivals, batching, replicas, SLA."""

    arch: str = DEFAULT_ARCH
    workload: str | None = Field(default=None, description="plain workload: one request "
                                 "is one inference")
    model: str | None = Field(default=None, description="LLM config (HF config.json or "
                              "shipped name): prefill and decode of every request")
    dtype: Dtype | None = Field(default=None, description="LLM weights and activations")
    arrival: Literal["poisson", "gamma", "trace"] = "poisson"
    rate: float | None = Field(default=None, gt=0, le=MAX_RATE, allow_inf_nan=False,
                               description="requests/s; with a trace, scales it to this")
    cv: float = Field(default=1.0, ge=CV_RANGE[0], le=CV_RANGE[1], allow_inf_nan=False,
                      description="gamma: coefficient of variation of the gaps")
    arrival_trace: str | None = Field(default=None, description="CSV path or shipped name")
    prompt_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS,
                               description="poisson/gamma LLM prompts")
    output_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS,
                               description="poisson/gamma LLM outputs")
    requests: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)
    duration_s: float | None = Field(default=None, gt=0, le=MAX_HORIZON_S,
                                     allow_inf_nan=False,
                                     description="stop arrivals after this long")
    batching: Literal["static", "dynamic", "continuous"] | None = None
    max_batch: int | None = Field(default=None, ge=1, le=MAX_BATCH)
    max_wait_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                      description="static: None waits to fill; "
                                      "dynamic: None is 0")
    max_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS, description="continuous: "
                            "tokens per iteration (chunked-prefill budget)")
    block_tokens: int = Field(default=16, ge=1, le=MAX_TOKENS,
                              description="KV-cache block size")
    kv_allocator: Literal["paged"] = "paged"
    replicas: int = Field(default=1, ge=1, le=MAX_CHIPS)
    chips: int | None = Field(default=None, ge=1, le=MAX_CHIPS,
                              description="chips per replica: tp x pp (default)")
    tp: int = Field(default=1, ge=1, le=MAX_CHIPS,
                    description="tensor parallelism per replica")
    pp: int = Field(default=1, ge=1, le=MAX_CHIPS, description="pipeline stages per replica")
    ep: int = Field(default=1, ge=1, le=MAX_CHIPS,
                    description="expert parallelism per replica")
    micro_batches: int | None = Field(default=None, ge=1, le=MAX_CHIPS,
                                      description="micro-batches in a replica's pipeline "
                                      "(default pp; 1 runs the stages in turn)")
    routing: Literal["round_robin", "least_loaded", "shared_queue"] = "round_robin"
    overlap: Literal["none", "independent", "decomposed"] | None = Field(
        default=None, description="collectives overlap compute in each iteration, as "
        "`accsim run --overlap` (DESIGN.md section 14; default none)")
    collectives: Literal[COLLECTIVE_MODES] | None = Field(  # type: ignore[valid-type]
        default=None, description="how each replica's collectives run, as `accsim run "
        "--collectives` (DESIGN.md section 22; default: the platform's)")
    fusion: Literal["none", "epilogue", "auto"] | None = Field(
        default=None, description="the fusion planner's mode for iteration costs "
        "(DESIGN.md section 15; default: the simulator's)")
    heuristic: str | None = Field(default=None, description="iteration operators take "
                                  "this heuristic's tilings instead of the search's")
    precision: str | None = Field(default=None, min_length=1, description="precision "
                                  "plan file applied to every iteration's operators "
                                  "before they are costed")
    mapping_plan: str | None = Field(default=None, min_length=1, description="tiling "
                                     "plan file (or "
                                     "shipped name) whose entries iteration operators "
                                     "take, as `accsim run --mapping`")
    prefix_hit_rate: float | None = Field(
        default=None, ge=0, le=1, allow_inf_nan=False, description="share of each "
        "prompt's tokens found in the prefix cache, whose prefill is skipped")
    kv_host_tier: bool | None = Field(
        default=None, description="preempted requests' KV goes out to host memory and "
        "comes back over runtime.host_link instead of being recomputed")
    memory_tails: bool | None = Field(
        default=None, description="report the share of each latency percentile lost "
        "to queueing, KV queueing, preemption and swaps (simulator.serving.tails)")
    disaggregate: Disaggregation | None = Field(
        default=None, description="prefill and decode pools, the KV moved between them "
        "(DESIGN.md section 20; default: co-located replicas)")
    power_cap_w: float | None = Field(
        default=None, gt=0, le=1e6, allow_inf_nan=False, description="each chip's power "
        "cap (DESIGN.md section 20; default: the platform's dvfs.power_cap_w)")
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    sla: dict[str, float] = Field(default_factory=dict)
    sweep_rate: RateSweep | None = None
    find_max_rate: bool = False
    bucket_bits: int = Field(default=3, ge=1, le=20, description="LLM iteration costs "
                             "simulated at sizes of this many significant bits and "
                             "interpolated between them")
    error_samples: int = Field(default=32, ge=0, le=MAX_ERROR_SAMPLES,
                               description="iterations sampled to measure the bucketing "
                               "error")

    @model_validator(mode="before")
    @classmethod
    def _trace_means_trace_arrivals(cls, raw):
        """A trace given without an arrival process is served as a trace."""
        if isinstance(raw, dict) and raw.get("arrival") is None and \
                raw.get("arrival_trace") is not None:
            return {**raw, "arrival": "trace"}
        return raw

    @model_serializer(mode="wrap")
    def _leave_out_unset_options(self, handler):
        # Absent rather than null, so results dump as they did before the fields existed.
        fields = handler(self)
        for name in OPTIONAL_FIELDS:
            if fields.get(name, 0) is None:
                fields.pop(name)
        return fields

    def mapping(self) -> Mapping:
        """The plan iteration costs run under: the default mapping in the spec's
        fusion mode, its open fields filled by the spec's heuristic (else the search)."""
        return with_heuristic(Mapping(fusion=self.fusion), self.heuristic)

    @field_validator("heuristic")
    @classmethod
    def _known_heuristic(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                registered_heuristic(value)
            except AccsimError as exc:  # a field error pydantic locates
                raise ValueError(exc.rule) from None
        return value

    @field_validator("sweep_rate", mode="before")
    @classmethod
    def _sweep(cls, value):
        return parse_sweep(value) if value is not None else None

    @field_validator("sla")
    @classmethod
    def _sla(cls, value: dict) -> dict:
        try:
            return check_sla(value)
        except AccsimError as exc:  # a field error pydantic locates
            raise ValueError(exc.rule) from None

    @model_validator(mode="after")
    def _consistent(self) -> ServeSpec:
        rules = [
            (self.workload is not None and self.model is not None, "model",
             "give a workload or a model, not both"),
            (self.arrival == "trace" and self.arrival_trace is None, "arrival_trace",
             "arrival trace needs arrival_trace (a CSV file or a shipped name)"),
            (self.arrival != "trace" and self.arrival_trace is not None, "arrival",
             f"arrival {self.arrival} conflicts with the arrival_trace given: use "
             "arrival trace to serve the trace, or drop arrival_trace"),
            (self.arrival != "trace" and self.rate is None and self.sweep_rate is None
             and not self.find_max_rate, "rate",
             f"arrival {self.arrival} needs a rate (requests/s)"),
            (self.batching == "continuous" and self.model is None, "batching",
             "continuous batching serves LLMs: give a model"),
            (self.find_max_rate and not self.sla, "find_max_rate",
             "find_max_rate needs an sla to meet"),
            (self.find_max_rate and self.sweep_rate is not None, "find_max_rate",
             "give sweep_rate or find_max_rate, not both"),
            (self.micro_batches is not None and self.pp == 1, "micro_batches",
             "micro-batches fill a pipeline: give pp > 1"),
            (self.replicas * (self.chips or self.tp * self.pp) > MAX_CHIPS, "replicas",
             f"{self.replicas:,} replicas x {self.chips or self.tp * self.pp:,} chips = "
             f"{self.replicas * (self.chips or self.tp * self.pp):,} chips, more than "
             f"the {MAX_CHIPS:,} a system may have"),
        ]
        for broken, field, rule in rules + self._ignored_rules() + self._load_rules() \
                + disaggregation_rules(self):
            if broken:  # AccsimError passes through pydantic with its field named
                raise AccsimError(rule, field=field)
        return self

    def _ignored_rules(self) -> list[tuple[bool, str, str]]:
        """An option set away from its default where the run would ignore it (issue
        42: `--cv` with poisson arrivals ran as if it were not given)."""
        def given(name: str) -> bool:
            return getattr(self, name) != type(self).model_fields[name].default

        batching = self.batching or ("continuous" if self.model else "dynamic")
        return [
            (given("cv") and self.arrival != "gamma", "cv",
             f"cv {self.cv:g} shapes gamma arrivals; {self.arrival} arrivals "
             + ("have cv 1" if self.arrival == "poisson" else "come from the trace")
             + ": use arrival gamma, or drop cv"),
            (self.arrival == "trace" and (given("prompt_tokens") or given("output_tokens")),
             "prompt_tokens" if given("prompt_tokens") else "output_tokens",
             "the arrival trace gives each request's prompt and output tokens: drop "
             "prompt_tokens and output_tokens, or serve poisson or gamma arrivals"),
            (batching != "continuous" and given("max_tokens"), "max_tokens",
             f"max_tokens is continuous batching's token budget; {batching} batching "
             "would ignore it: use batching continuous, or drop max_tokens"),
            (bool(self.kv_host_tier) and batching != "continuous", "kv_host_tier",
             f"the KV host tier takes preempted requests of continuous batching; "
             f"{batching} batching never preempts: use batching continuous, or drop "
             "kv_host_tier"),
            (self.prefix_hit_rate is not None and batching != "continuous",
             "prefix_hit_rate", f"the prefix cache skips prefill chunks of continuous "
             f"batching; {batching} batching would ignore it: use batching continuous, "
             "or drop prefix_hit_rate"),
            (batching == "continuous" and self.max_wait_ms is not None, "max_wait_ms",
             "max_wait_ms is static or dynamic batching's wait; continuous batching "
             "would ignore it: drop it"),
        ]

    def llm_only_rules(self) -> list[tuple[bool, str, str]]:
        """LLM options given to a plain workload's run, which ignores them: checked by
        `accsim serve` (a study's serving scope, shared by its LLMs and its plain
        workloads, sets them for the LLMs)."""
        def given(name: str) -> bool:
            return getattr(self, name) != type(self).model_fields[name].default

        return [
            (self.model is None and (given("prompt_tokens") or given("output_tokens")),
             "prompt_tokens" if given("prompt_tokens") else "output_tokens",
             "prompt and output tokens are an LLM's request lengths: give a model, or "
             "drop them"),
            (self.model is None and given("block_tokens"), "block_tokens",
             "block_tokens sizes an LLM's KV-cache blocks: give a model, or drop it")]

    def _load_rules(self) -> list[tuple[bool, str, str]]:
        """Poisson and gamma loads bounded before anything is drawn: the rate (or the
        sweep's ends) brings the requests within MAX_HORIZON_S, and a duration without
        a request count holds at most MAX_REQUESTS expected arrivals. Trace loads are
        checked as the trace is read."""
        if self.arrival == "trace":
            return []
        sweep = self.sweep_rate
        field = "rate" if sweep is None else "sweep_rate"  # a sweep runs its own rates
        rates = [sweep.low, sweep.high] if sweep else [self.rate] if self.rate else []
        requests = self.requests or DEFAULT_REQUESTS
        rules = []
        if self.duration_s is None and rates:  # else arrivals stop at duration_s
            slowest = min(rates)
            rules.append((requests / slowest > MAX_HORIZON_S, field,
                          f"{requests:,} requests at {slowest:g} requests/s take about "
                          f"{requests / slowest:.3g} s, beyond the {MAX_HORIZON_S:g} s a "
                          "run may simulate: raise the rate or ask for fewer requests"))
        if self.requests is None and self.duration_s is not None and rates:
            fastest = max(rates)
            expected = fastest * self.duration_s
            rules.append((expected > MAX_REQUESTS, "duration_s",
                          f"{fastest:g} requests/s for {self.duration_s:g} s is about "
                          f"{expected:.3g} requests, more than the {MAX_REQUESTS:,} a run "
                          "may serve: shorten the duration, lower the rate, or give "
                          "requests"))
        return rules

    @property
    def llm(self) -> bool:
        return self.model is not None

    @property
    def system(self):
        """The parallelism plan of each replica (simulator.system.parallelism)."""
        return SystemPlan(chips=self.chips or self.tp * self.pp, tp=self.tp, pp=self.pp,
                          ep=self.ep, overlap=self.overlap or "none")

    def resolved(self) -> ServeSpec:
        """The spec with its defaults filled in: the workload, the batching policy
        (continuous for LLMs, dynamic otherwise) and its max_batch."""
        batching = self.batching or ("continuous" if self.llm else "dynamic")
        unbounded = self.requests is None and self.duration_s is None
        return self.model_copy(update={
            "requests": DEFAULT_REQUESTS if unbounded and self.arrival != "trace"
            else self.requests,
            "workload": self.workload if self.llm or self.workload is not None
            else DEFAULT_WORKLOAD,
            "batching": batching,
            "max_batch": self.max_batch or DEFAULT_MAX_BATCH[batching]})

    def at_rate(self, rate: float) -> ServeSpec:
        return self.model_copy(update={"rate": rate})
