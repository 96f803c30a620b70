"""Where each numeric platform value comes from (DESIGN.md section 16): a `provenance:`
table of a platform file maps dotted field paths to published (with a source), derived
(from other fields), assumed (with the plausible range a sensitivity study perturbs it
across) or fitted (to a measurement file, by its sha256).

This module is pure data and rules (pydantic and the standard library only), so that
the platform schema (simulator.inputs.platform) can validate the table it carries without
importing anything above itself. The table is description, never input to the model:
the platform's canonical dump leaves it out, so results do not depend on it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Kind = Literal["published", "derived", "assumed", "fitted"]
# Kinds whose values a result's manifest lists: the guesses and the fits.
LISTED_KINDS = ("assumed", "fitted")
Number = int | float


class Provenance(BaseModel):
    """One field's provenance: its kind, its source, the fields it is derived from, the
    range it plausibly lies in (required for an assumed value)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True,
                              allow_inf_nan=False, populate_by_name=True)

    kind: Kind
    source: str | None = Field(default=None, min_length=1,
                               description="citation (published), measurement file "
                               "(fitted), or how it was derived")
    derived_from: list[str] | None = Field(default=None, alias="from", min_length=1,
                                           description="the fields a derived value "
                                           "comes from")
    range: list[Number] | None = Field(
        default=None, min_length=2, max_length=2,
        description="[low, high] the value plausibly lies in")
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$",
                               description="of the measurement file (fitted)")

    @model_validator(mode="after")
    def _kind_needs(self) -> Provenance:
        needs = {"published": ("source",), "derived": ("derived_from",),
                 "assumed": ("range",), "fitted": ("source", "sha256")}[self.kind]
        missing = [name for name in needs if getattr(self, name) is None]
        if missing:
            shown = ["from" if name == "derived_from" else name for name in missing]
            raise ValueError(f"a {self.kind} value needs {' and '.join(shown)}")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError(f"range {list(self.range)} has its low end above its high")
        return self

    def dump(self) -> dict:
        """The entry as a platform file writes it."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def numeric_leaves(data, prefix: str = "") -> dict[str, Number]:
    """Every number of a dumped platform by dotted path (list items by their index,
    mappings such as mac_pj by their key); booleans are not numbers."""
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return {prefix: data} if isinstance(data, (int, float)) \
            and not isinstance(data, bool) else {}
    leaves: dict[str, Number] = {}
    for key, value in items:
        leaves.update(numeric_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return leaves


def provenance_errors(table: dict[str, Provenance],
                      leaves: dict[str, Number]) -> list[tuple[str, str]]:
    """(field path, rule broken) for every entry that names no numeric field, derives
    from one that is not, or has a range excluding the value (or of another type)."""
    errors = []
    for path, entry in table.items():
        if path not in leaves:
            errors.append((path, "names no numeric field of this platform"))
            continue
        unknown = [name for name in entry.derived_from or () if name not in leaves]
        if unknown:
            errors.append((path, f"is derived from {unknown}, which are no numeric "
                                 "fields of this platform"))
        value = leaves[path]
        if entry.range is None:
            continue
        low, high = entry.range
        if isinstance(value, int) and not all(isinstance(end, int) for end in (low, high)):
            errors.append((path, f"range {[low, high]} of a whole-number field must be "
                                 "whole numbers"))
        elif not low <= value <= high:
            errors.append((path, f"range {[low, high]} does not contain the value "
                                 f"{value}"))
    return errors


def listed_values(table: dict[str, Provenance],
                  leaves: dict[str, Number]) -> dict[str, dict]:
    """The assumed and fitted values a platform holds with their provenance, for a
    result's manifest, in field order."""
    return {path: {**table[path].dump(), "value": value} for path, value in leaves.items()
            if path in table and table[path].kind in LISTED_KINDS}
