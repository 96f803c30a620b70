"""`accsim verify` of what `accsim serve --json` wrote. A single-rate result is served
again from the spec its manifest records and compared figure by figure (environment
fields aside), after the files it names (platform, trace, model config) are checked
against the sha256 they had. A curve (--sweep-rate) or a rate search (--find-max-rate)
records no spec, so it is refused with a message saying what it is."""

from __future__ import annotations

import hashlib
import json
import math

from simulator.errors import AccsimError
from simulator.inputs.loader import dump_json, read_bytes, validate_model
from simulator.inputs.platform_file import platform_sha256
from simulator.serving.serve import prepare, serve
from simulator.serving.spec import DEFAULT_REQUESTS, ServeSpec
from simulator.verification.rerun import Verification, comparable, differences, model_change

# The work a rerun may take without --allow-long, in requests x tokens per request (a
# plain request counts 1): 100x what `accsim serve` of the shipped LLM example takes
# (DEFAULT_REQUESTS of 512 prompt + 128 output tokens: 640,000, a few seconds), so any
# result a person served interactively reruns, while a forged one within serve's own
# limits (1,000,000 requests of 16M tokens) is refused before any work.
WORK_PER_SERVE = DEFAULT_REQUESTS * (512 + 128)
MAX_VERIFY_WORK = 100 * WORK_PER_SERVE
# What each load costs beyond its requests (its arrivals, cost tables, percentiles and
# memory tails: about 26 ms measured), counted as a hundredth of the shipped example's
# work, so a forged curve of a hundred thousand loads of a few requests each is
# refused, not served for an hour.
WORK_PER_LOAD = WORK_PER_SERVE // 100


def check_work(spec: ServeSpec, *, loads: int = 1, file: str, field: str,
               allow_long: bool, each: str = "loads", spent: int = 0) -> int:
    """Refuse, before serving anything, a rerun whose recorded size exceeds the budget
    (MAX_VERIFY_WORK) unless allowed: requests (as recorded, or rate x duration) x
    (prompt + output tokens for an LLM), plus WORK_PER_LOAD, x the loads served
    (`each` names what they count: a deployment search serves at least one load a
    point); `spent`: the work of the reruns already let through beside it (a packet's
    other serving results), which share the bound. Returns its own work."""
    resolved = spec.resolved()
    if resolved.requests is not None:
        requests = resolved.requests
    elif resolved.duration_s is not None and resolved.rate is not None:
        requests = math.ceil(resolved.rate * resolved.duration_s)
    else:  # a trace: its length is bounded by the trace file's size, its loads are not
        requests = 0
    per_request = resolved.prompt_tokens + resolved.output_tokens if resolved.llm else 1
    work = (requests * per_request + WORK_PER_LOAD) * loads
    if work + spent > MAX_VERIFY_WORK and not allow_long:
        beside = f" (+ {spent:,} for the reruns before it)" if spent else ""
        raise AccsimError(f"rerunning it would serve ({requests:,} requests x "
                          f"{per_request:,} tokens + {WORK_PER_LOAD:,} for the load's "
                          f"setup) x {loads:,} {each} = {work:,}{beside}, over "
                          f"verify's bound of {MAX_VERIFY_WORK:,} (100x the shipped "
                          "example); give --allow-long to rerun it anyway",
                          file=file, field=field)
    return work


# A top-level key that only this kind of `serve --json` output has -> the command.
UNVERIFIABLE = {"curve": "accsim serve --sweep-rate", "max_rate_rps":
                "accsim serve --find-max-rate"}


def serving_kind(recorded) -> str | None:
    """The serve command that wrote a decoded result, or None if serve did not."""
    if not isinstance(recorded, dict):
        return None
    manifest = recorded.get("manifest")
    if isinstance(manifest, dict) and "serving" in manifest:
        return "accsim serve"
    return next((command for key, command in UNVERIFIABLE.items() if key in recorded),
                None)


def _need_dict(node, key: str, where: str, file: str) -> dict:
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, dict):
        raise AccsimError(f"not an accsim serve result ({where} is missing or not a "
                          "mapping)", file=file, field=where)
    return value


def _recorded_files(manifest: dict, serving: dict, file: str) -> list[tuple[str, dict]]:
    """(kind, {path, sha256}) of each file the run read, checked to be strings."""
    inputs = manifest.get("inputs") if isinstance(manifest.get("inputs"), dict) else {}
    named = [("platform", inputs.get("platform"), "manifest.inputs.platform"),
             ("trace", serving.get("trace"), "manifest.serving.trace"),
             ("model", serving.get("model"), "manifest.serving.model"),
             ("precision plan", serving.get("precision"), "manifest.serving.precision"),
             ("tiling plan", serving.get("mapping"), "manifest.serving.mapping")]
    files = []
    for kind, entry, where in named:
        if entry is None:
            continue
        if not isinstance(entry, dict) or any(
                entry.get(key) is not None and not isinstance(entry[key], str)
                for key in ("path", "sha256")):
            raise AccsimError("not a mapping of path and sha256 strings", file=file,
                              field=where)
        if entry.get("path") and entry.get("sha256"):
            files.append((kind, entry))
    return files


def _changed(kind: str, entry: dict) -> str | None:
    try:
        now = platform_sha256(entry["path"]) if kind == "platform" else \
            hashlib.sha256(read_bytes(entry["path"])).hexdigest()
    except AccsimError:
        return f"{kind}: {entry['path']} (no longer readable)"
    return None if now == entry["sha256"] else \
        f"{kind}: {entry['path']} (sha256 changed since the run)"


def verify_serving(file: str, recorded: dict, *, allow_long: bool = False
                   ) -> Verification:
    """Check a serve result's files and serve its recorded spec again (within the
    work bound unless `allow_long`)."""
    kind = serving_kind(recorded)
    if kind != "accsim serve":
        raise AccsimError(f"an `{kind}` result: it records no serving spec, so it cannot "
                          "be rerun and verified (verify a single-rate `accsim serve "
                          "--json` result)", file=file)
    manifest = recorded["manifest"]
    serving = _need_dict(manifest, "serving", "manifest.serving", file)
    raw_spec = _need_dict(serving, "spec", "manifest.serving.spec", file)
    try:
        spec = validate_model(raw_spec, ServeSpec, file=file)
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=file,
                          field=f"manifest.serving.spec.{exc.field or ''}".rstrip(".")
                          ) from None
    check_work(spec, file=file, field="manifest.serving.spec.requests",
               allow_long=allow_long)
    changed = [c for kind, entry in _recorded_files(manifest, serving, file)
               if (c := _changed(kind, entry))]
    model_changed = model_change(manifest, "serve again")
    if model_changed:
        return Verification(changed, [], model_changed)
    result, _ = serve(prepare(spec), spec)
    rerun = json.loads(dump_json(result))
    return Verification(changed, [text for _, text in
                                  differences(comparable(recorded), comparable(rerun))])
