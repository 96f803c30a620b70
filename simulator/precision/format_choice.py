"""Applying a precision plan (DESIGN.md section 17): plan + workload + platform ->
the workload whose array operators carry the chosen dtypes and sparsity, and per
operator what was chosen, every format passed over with its reason, and the emulated
quality. A pure function: the simulator core runs the returned workload unchanged.

Per operator, roles resolve in the order weight, activation, kv: the first format of a
role's chain the platform supports (an input dtype of its array; packed activation
formats on gemms and convolutions only) and, where the entry sets a guardrail, whose
emulated GEMM keeps it, with the roles not yet resolved at the operator's own dtypes.
A role the entry leaves out keeps the operator's dtype (pinned, so that a new
activation dtype does not drag the weights along). Vector operators and collectives are not array operators and are left as they
are; an entry naming one is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simulator.inputs.platform import DTYPE_BYTES, Platform
from simulator.errors import AccsimError
from simulator.precision.emulate import Quality, gemm_quality
from simulator.precision.precision_plan import ROLES, PrecisionPlan, PrecisionSpec
from simulator.precision.tensors import gemm_dims, synthetic, user_tiles
from simulator.inputs.workload import Workload, is_attention, is_compute

# The operator field each role sets, by kind of array operator.
COMPUTE_FIELDS = {"weight": "weight_dtype", "activation": "dtype"}
ATTENTION_FIELDS = {"activation": "dtype", "kv": "kv_dtype"}


@dataclass(frozen=True)
class Fallback:
    """A format of a chain passed over, and why."""

    role: str
    format: str
    reason: str

    def as_dict(self) -> dict:
        return {"role": self.role, "format": self.format, "reason": self.reason}


@dataclass(frozen=True)
class OperatorPrecision:
    """What the plan made of one operator."""

    name: str
    layer_type: str
    formats: dict[str, str]
    sparsity: str | float | None
    fallbacks: tuple[Fallback, ...]
    quality: Quality | None
    tensors: str | None
    guardrail: dict | None

    def as_dict(self) -> dict:
        quality = self.quality.as_dict() if self.quality else \
            {"rel_error": None, "sqnr_db": None}
        return {"name": self.name, "layer_type": self.layer_type, "formats": self.formats,
                "sparsity": self.sparsity,
                "fallbacks": [f.as_dict() for f in self.fallbacks], **quality,
                "tensors": self.tensors, "guardrail": self.guardrail}

    def lines(self) -> list[str]:
        formats = ", ".join(f"{role} {dtype}" for role, dtype in self.formats.items())
        sparse = f", sparsity {self.sparsity}" if self.sparsity is not None else ""
        quality = ""
        if self.quality is not None:
            sqnr = "exact" if self.quality.sqnr_db is None else \
                f"SQNR {self.quality.sqnr_db:.1f} dB"
            quality = f"; emulated rel error {self.quality.rel_error:.3g}, {sqnr}"
        return [f"  {self.name}: {formats}{sparse}{quality}"] + [
            f"    fell back from {f.role} {f.format}: {f.reason}" for f in self.fallbacks]


@dataclass(frozen=True)
class AppliedPlan:
    """The workload with the plan's dtypes, and the per-operator records."""

    name: str
    file: str | None
    workload: Workload
    operators: tuple[OperatorPrecision, ...]

    def record(self) -> dict:
        """The result file's `precision` block."""
        return {"plan": self.name, "file": self.file,
                "operators": [op.as_dict() for op in self.operators]}

    def lines(self) -> list[str]:
        fallbacks = sum(len(op.fallbacks) for op in self.operators)
        head = (f"precision plan {self.name}: {len(self.operators)} operator(s) set, "
                f"{fallbacks} fallback(s)")
        return [head] + [line for op in self.operators for line in op.lines()]


def _unsupported(role: str, dtype: str, platform: Platform, op) -> str | None:
    """Why the platform cannot run `dtype` in `role` of `op`, or None."""
    if dtype not in platform.systolic_array.input_dtypes:
        return f"platform lacks {dtype}"
    if role == "activation" and dtype not in DTYPE_BYTES and not is_compute(op):
        return (f"{dtype} is a packed format; packed activations are modelled for gemm "
                "and conv2d only")
    return None


def _where(plan: PrecisionPlan, op, key: str) -> str:
    """The most specific entry setting `key` for `op`, as a field path."""
    if key in plan.operators.get(op.name, PrecisionSpec()).model_fields_set:
        return f"operators.{op.name}"
    if key in plan.layer_types.get(op.layer_type, PrecisionSpec()).model_fields_set:
        return f"layer_types.{op.layer_type}"
    return "default"


@dataclass
class _Resolver:
    """One plan applied to one platform; emulations of identical tiles are reused."""

    plan: PrecisionPlan
    platform: Platform
    file: str | None
    cache: dict = field(default_factory=dict)

    def emulate(self, op, spec: PrecisionSpec, formats: dict[str, str]) -> tuple[Quality,
                                                                                    str]:
        dims = gemm_dims(op)
        samples = self.plan.samples
        b_role = "kv" if is_attention(op) else "weight"
        per_channel = spec.scaling != "per_tensor"
        own = spec.tensors is not None
        key = (op.name if own else None, dims, formats["activation"], formats[b_role],
               spec.sparsity, per_channel)
        if key not in self.cache:
            try:
                a, b, described = synthetic(dims, samples)
            except OverflowError as exc:
                raise AccsimError(f"{op.name}: {exc}", file=self.file,
                                  field="samples.outlier_scale") from None
            if own:
                base = Path(self.file).parent if self.file else Path(".")
                a, b = user_tiles(op, spec.tensors, base, samples, (a, b))
                described = f"user tensors ({a.shape[0]}x{a.shape[1]}x{b.shape[1]})"
            try:
                quality = gemm_quality(a, b, a_dtype=formats["activation"],
                                       b_dtype=formats[b_role], per_channel=per_channel,
                                       sparsity=None if is_attention(op) else spec.sparsity)
            except OverflowError as exc:
                raise AccsimError(f"{op.name}: {exc}", file=self.file, field=(
                    f"operators.{op.name}.tensors" if own else "samples")) from None
            self.cache[key] = quality, described
        return self.cache[key]

    def operator(self, op) -> tuple[object, OperatorPrecision | None]:
        spec = self.plan.spec_for(op)
        fields = ATTENTION_FIELDS if is_attention(op) else COMPUTE_FIELDS
        own = self.plan.operators.get(op.name, PrecisionSpec()).model_fields_set
        for key in own & {*ROLES, "sparsity"}:
            if key not in fields and not (key == "sparsity" and is_compute(op)):
                raise AccsimError(f"{op.kind} {op.name} has no {key} to set",
                                  file=self.file, field=f"operators.{op.name}.{key}")
        chains = {role: getattr(spec, role) for role in fields if getattr(spec, role)}
        sparsity = spec.sparsity if is_compute(op) else None
        if not chains and sparsity is None:
            return op, None
        act = op.dtype or self.platform.systolic_array.input_dtypes[0]
        formats = {role: getattr(op, name, None) or act for role, name in fields.items()}
        original = dict(formats)
        fallbacks: list[Fallback] = []
        for role in (r for r in ROLES if r in chains):
            formats[role] = self._choose(op, spec, role, chains[role], formats, fallbacks)
        changed = formats != original or sparsity is not None
        quality, described = self.emulate(op, spec, formats) if changed or \
            spec.guardrail else (None, None)
        update = {name: formats[role] for role, name in fields.items()
                  if formats[role] != original[role] or (changed and role != "activation")}
        if sparsity is not None:
            update["sparsity"] = sparsity
        guardrail = spec.guardrail.model_dump(exclude_none=True) if spec.guardrail else None
        record = OperatorPrecision(op.name, op.layer_type, formats, sparsity,
                                   tuple(fallbacks), quality, described, guardrail)
        return op.model_copy(update=update), record

    def _choose(self, op, spec: PrecisionSpec, role: str, chain: list[str],
                formats: dict[str, str], fallbacks: list[Fallback]) -> str:
        for dtype in chain:
            reason = _unsupported(role, dtype, self.platform, op)
            if reason is None and spec.guardrail is not None:
                quality, _ = self.emulate(op, spec, {**formats, role: dtype})
                reason = spec.guardrail.failure(quality.rel_error, quality.sqnr_db)
            if reason is None:
                return dtype
            fallbacks.append(Fallback(role, dtype, reason))
        reasons = "; ".join(f"{f.format}: {f.reason}" for f in fallbacks if f.role == role)
        raise AccsimError(f"no format of the chain {chain} fits operator {op.name} on "
                          f"{self.platform.name} ({reasons})", file=self.file,
                          field=f"{_where(self.plan, op, role)}.{role}")


def apply_plan(plan: PrecisionPlan, workload: Workload, platform: Platform, *,
               file: str | None = None, emulations: dict | None = None) -> AppliedPlan:
    """The workload with the plan applied to its array operators, and what was chosen
    for each operator the plan sets. `file`: the plan's path (errors name it; tensor
    paths are relative to it). `emulations`: a dict kept across calls with the same
    plan, file and platform (serving applies the plan to many workloads), so an
    emulated GEMM is not emulated again."""
    known = {op.name: op for op in workload.operators}
    for name in plan.operators:
        if name not in known:
            raise AccsimError(f"no operator {name!r} in workload {workload.name}",
                              file=file, field=f"operators.{name}")
        if not (is_compute(known[name]) or is_attention(known[name])):
            raise AccsimError(f"{known[name].kind} {name} is not an array operator; a "
                              "precision plan sets GEMMs, convolutions and attention",
                              file=file, field=f"operators.{name}")
    resolver = _Resolver(plan, platform, file, {} if emulations is None else emulations)
    operators, records = [], []
    for op in workload.operators:
        if is_compute(op) or is_attention(op):
            op, record = resolver.operator(op)
            if record is not None:
                records.append(record)
        operators.append(op)
    return AppliedPlan(plan.name, file, workload.model_copy(update={"operators": operators}),
                       tuple(records))
