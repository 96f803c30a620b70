"""The weight formats a config.json declares in its `quantization_config` (DESIGN.md
sections 17 and 21), as the formats of simulator.model.formats, per role of weight.

Roles: "attention" (q/k/v/o and MLA's projections), "mlp" (dense MLPs), "experts"
(routed experts), "shared" (shared experts), "ssm" (state-space projections),
"router" and "lm_head". A method quantises the roles QUANTISED unless a
`modules_to_not_convert` pattern ends in the module that role lives in (MODULES); the
router and lm_head stay at the activation dtype, as the methods below leave them.
A method accsim does not know leaves every weight at the run's dtype (the run says so
in the model's description, not as an error: the file is still read unedited).
"""

from __future__ import annotations

from simulator.errors import AccsimError
from simulator.inputs.loader import excerpt
from simulator.model.formats import FORMATS

QUANTISED = ("attention", "mlp", "experts", "shared", "ssm")
# The module-name fragment by which a modules_to_not_convert pattern names each role.
MODULES = {"attention": ("self_attn", "attn"), "mlp": ("mlp",), "experts": ("experts",),
           "shared": ("shared_expert",), "ssm": ("mamba", "mixer"),
           "router": ("router", "gate"), "lm_head": ("lm_head",)}


def _fp8(q: dict) -> str:
    """DeepSeek-V3's block-scaled fp8 ({"quant_method": "fp8", "fmt": "e4m3"}); the
    fp32 scale per 128x128 block (4 bytes per 16,384 weights) is left out."""
    return f"fp8_{q.get('fmt', 'e4m3')}"


def _bits(q: dict) -> str | None:
    """GPTQ / AWQ integer weights of `bits` bits (group scales left out)."""
    bits = q.get("bits") or q.get("w_bit")
    return f"int{bits}" if f"int{bits}" in FORMATS else None


METHODS = {"mxfp4": lambda q: "mxfp4", "fp8": _fp8, "gptq": _bits, "awq": _bits}


def declared_formats(raw: dict, file: str | None) -> dict[str, str]:
    """Role -> format of the weights the config's quantization_config declares."""
    q = raw.get("quantization_config")
    if q is None:
        return {}
    if not isinstance(q, dict):
        raise AccsimError(f"must be an object, found {type(q).__name__}", file=file,
                          field="quantization_config")
    for key, kind, ok in (("quant_method", "a string", lambda v: isinstance(v, str)),
                          ("modules_to_not_convert", "a list of module names",
                           lambda v: isinstance(v, list) and all(isinstance(p, str)
                                                                 for p in v))):
        if q.get(key) is not None and not ok(q[key]):
            raise AccsimError(f"must be {kind}, found {excerpt(q[key])}", file=file,
                              field=f"quantization_config.{key}")
    method = METHODS.get(q.get("quant_method"))
    fmt = method(q) if method else None
    if fmt is None:
        return {}
    if fmt not in FORMATS:
        raise AccsimError(f"declares the weight format {fmt}, which accsim does not know "
                          f"(known: {', '.join(sorted(FORMATS))})", file=file,
                          field="quantization_config")
    kept = q.get("modules_to_not_convert") or []
    return {role: fmt for role in QUANTISED
            if not any(pattern.rsplit(".", 1)[-1] in MODULES[role] for pattern in kept)}


# Where a platform's array lacks a declared format, the weights are held in the next
# format of its chain the array lists (each holds the one before it, block scales
# included), else in the run's activation dtype (None), as a precision plan's
# fallback chain resolves (DESIGN.md section 17).
FALLBACKS = {"mxfp4": ("mxfp6", "mxfp8", "fp8_e4m3", "fp8"),
             "fp4_e2m1": ("mxfp4", "mxfp6", "mxfp8", "fp8_e4m3", "fp8"),
             "mxfp6": ("mxfp8", "fp8_e4m3", "fp8"), "mxfp8": ("fp8_e4m3", "fp8"),
             "fp8_e4m3": ("fp8",), "fp8_e5m2": ("fp8",), "int4": ("int8",)}


def fit_formats(formats: dict[str, str], listed: tuple[str, ...]
                ) -> tuple[dict[str, str], list[str]]:
    """The declared formats a platform whose array lists `listed` holds, and one line
    per role that fell back (what was declared, what is used, why)."""
    fitted, notes = {}, []
    for role, fmt in sorted(formats.items()):
        chain = (fmt, *FALLBACKS.get(fmt, ()))
        chosen = next((f for f in chain if f in listed), None)
        if chosen is not None:
            fitted[role] = chosen
        if chosen != fmt:
            notes.append(f"{role} weights declared {fmt}: the platform lacks it, held in "
                         f"{chosen or 'the activation dtype'}")
    return fitted, notes
