"""Verifying what `accsim compare --json` wrote: one run result per platform, each the
document `accsim run --json` writes, so each is verified as a run result is (rerun
from its embedded inputs) and what differs is named by its platform."""

from __future__ import annotations

from collections.abc import Callable

from simulator.errors import AccsimError
from simulator.verification.rerun import RunKind, Verification, embedded_models, verify_run

# Results verified from one comparison without --allow-long: each is a full rerun, and
# a forged file could hold thousands (compare itself takes one --arch per platform).
MAX_VERIFY_COMPARED = 64


def compared_results(recorded) -> list | None:
    """A compare file's `platforms` list; None for a file of any other shape."""
    if isinstance(recorded, dict) and set(recorded) == {"workload", "platforms"} \
            and isinstance(recorded["platforms"], list):
        return recorded["platforms"]
    return None


def verify_compared(file: str, platforms: list, *, allow_long: bool,
                    run_kind: Callable[[str, dict, dict], RunKind]) -> Verification:
    """Every platform's result verified as a run result (`run_kind`: how one is
    checked, commands.verify.run_kind); changes and differences prefixed with
    `platforms[I](LABEL).result`, errors with the field they are under."""
    if not platforms:
        raise AccsimError("a comparison of no platform: nothing to verify", file=file,
                          field="platforms")
    if len(platforms) > MAX_VERIFY_COMPARED and not allow_long:
        raise AccsimError(f"{len(platforms):,} results, each rerun, over verify's bound "
                          f"of {MAX_VERIFY_COMPARED}; give --allow-long to rerun them "
                          "anyway", file=file, field="platforms")
    changed, different, model_changed = [], [], []
    for index, entry in enumerate(platforms):
        label = entry.get("label") if isinstance(entry, dict) else None
        where = f"platforms[{index}]" + (f"({label})" if isinstance(label, str) else "")
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
            raise AccsimError("not a compared result (an object with a `result` "
                              "object is expected)", file=file, field=where)
        result = entry["result"]
        try:
            models = embedded_models(result, file=file)
            found = verify_run(file, result, models, run_kind(file, result, models))
        except AccsimError as exc:
            raise AccsimError(exc.rule, file=exc.file, field=f"{where}.result"
                              + (f".{exc.field}" if exc.field else "")) from None
        changed += [f"{where}: {change}" for change in found.changed_sources]
        different += [f"{where}.result{text}" for text in found.differences]
        if found.model_changed:
            model_changed.append(f"{where}: {found.model_changed}")
    return Verification(changed, different, "; ".join(model_changed) or None)
