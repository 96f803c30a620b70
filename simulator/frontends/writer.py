"""Workload YAML as the importers write it: readable, editable, and loading back to the
same Workload (DESIGN.md section 13)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from simulator.inputs.workload import Workload, workload_yaml

# Fields every operator has, written first so each line reads name, label, kind, shape;
# and the measurement, written last so the shape stays next to the kind.
LEADING_FIELDS = ("name", "layer_type", "kind")
TRAILING_FIELDS = ("measured_s",)

# Strings written bare in a flow mapping: they read back as the same string. Anything
# else (graph node names hold ':', ',', spaces...) is written double-quoted.
PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*")
YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def scalar(value) -> str:
    """One field value as YAML text."""
    if isinstance(value, str) and (not PLAIN.fullmatch(value)
                                   or value.lower() in YAML_WORDS):
        return json.dumps(value)  # a JSON string is a YAML double-quoted scalar
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        text = repr(value)  # shortest text that reads back as the same float
        # YAML 1.1 floats need a dot: 1e-05 would read back as a string.
        return text.replace("e", ".0e", 1) if "e" in text and "." not in text else text
    return str(value)


def operator_fields(operator) -> dict:
    """One operator's fields in a fixed order, leaving out those at their defaults
    (except the leading ones, which identify the operator), values as YAML text."""
    given = operator.model_dump(mode="json", exclude_defaults=True)
    fields = {key: getattr(operator, key) for key in LEADING_FIELDS}
    fields.update((key, value) for key, value in given.items()
                  if key not in fields and key not in TRAILING_FIELDS)
    fields.update((key, given[key]) for key in TRAILING_FIELDS if key in given)
    return {key: scalar(value) for key, value in fields.items()}


def workload_to_yaml(workload: Workload, *, made_by: str,
                     notes: Sequence[str] = ()) -> str:
    """YAML text of an imported workload: a header naming the command that made it,
    `notes` as comments (what the importer could not honour, counts of unsupported
    ops), then one flow mapping per operator."""
    header = [f"Imported by `{made_by}`; edit freely, it is plain accsim workload YAML.",
              *notes]
    return workload_yaml(scalar(workload.name), workload.description,
                         [operator_fields(op) for op in workload.operators], header)
