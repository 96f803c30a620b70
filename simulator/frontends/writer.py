"""Workload YAML as the importers write it: readable, editable, and loading back to the
same Workload (DESIGN.md section 13)."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.workload import Workload, workload_yaml

# Fields every operator has, written first so each line reads name, label, kind, shape.
LEADING_FIELDS = ("name", "layer_type", "kind")


def operator_fields(operator) -> dict:
    """One operator's fields in a fixed order, leaving out those at their defaults
    (except the leading ones, which identify the operator)."""
    given = operator.model_dump(mode="json", exclude_defaults=True)
    fields = {key: getattr(operator, key) for key in LEADING_FIELDS}
    fields.update((key, value) for key, value in given.items() if key not in fields)
    return fields


def workload_to_yaml(workload: Workload, *, made_by: str,
                     notes: Sequence[str] = ()) -> str:
    """YAML text of an imported workload: a header naming the command that made it,
    `notes` as comments (what the importer could not honour, counts of unsupported
    ops), then one flow mapping per operator."""
    header = [f"Imported by `{made_by}`; edit freely, it is plain accsim workload YAML.",
              *notes]
    return workload_yaml(workload.name, workload.description,
                         [operator_fields(op) for op in workload.operators], header)
