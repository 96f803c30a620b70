"""Measured operator times for calibration (DESIGN.md section 16, docs/calibration.md):
a CSV of operator, shape, dtype and measured seconds, a PyTorch profiler (Kineto)
trace read by the importer (its operators carry measured_s), or an accsim workload
whose operators carry measured_s. Every source becomes operators with measured_s and
the sha256 of the file they came from."""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from simulator.numbers import decimal_float
from simulator.errors import AccsimError
from simulator.frontends.kineto import import_kineto
from simulator.inputs.loader import decode_text, parse_yaml, read_bytes, validate_model
from simulator.inputs.workload import Operator, Workload

OPERATOR = TypeAdapter(Operator)
COLUMNS = ("operator", "shape", "dtype", "measured_s")
# A measured time is at least a picosecond (a 1 THz clock's period): a shorter one is
# no operator's time, and its relative error would overflow the fit.
MIN_MEASURED_S = 1e-12


@dataclass(frozen=True)
class Measured:
    """The measured operators of one file and that file's sha256."""

    file: str
    sha256: str
    operators: list


def read_measured(path: str) -> Measured:
    """The operators of a .csv, a Kineto trace (.json, .json.gz) or a workload YAML,
    those with a measured time only."""
    data = read_bytes(path)
    sha = hashlib.sha256(data).hexdigest()
    if path.endswith((".json", ".json.gz")):
        operators = import_kineto(path).workload.operators
    elif path.endswith(".csv"):
        operators = _csv_operators(decode_text(data, file=path).text, path)
    elif path.endswith((".yaml", ".yml")):
        source = decode_text(data, file=path)
        operators = validate_model(parse_yaml(source.text, file=path), Workload,
                                   file=path).operators
    else:
        raise AccsimError("measurements must be a .csv, a Kineto trace (.json or "
                          ".json.gz) or a workload (.yaml) with measured_s", file=path)
    for op in operators:
        if op.measured_s is not None and 0 < op.measured_s < MIN_MEASURED_S:
            raise AccsimError(f"{op.name}: measured_s {op.measured_s:g} s is under "
                              f"{MIN_MEASURED_S:g} s, shorter than one clock period of "
                              "any accelerator (a unit mistake?)", file=path,
                              field="measured_s")
    measured = [op for op in operators if op.measured_s is not None and op.measured_s > 0]
    if len(measured) < 2:
        raise AccsimError(f"{len(measured)} operators carry a positive measured time; "
                          "calibration needs at least 2", file=path, field="measured_s")
    return Measured(path, sha, measured)


def _csv_rows(text: str, file: str):
    """(line, row by column name) of each row of a measurement CSV, each holding as
    many fields as its header (a short or long row, or a field past the csv module's
    limit, is refused naming the line, not read with its fields as None). A leading
    byte-order mark (a spreadsheet's UTF-8) is dropped; a column named twice is
    refused, not read from its last copy."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")))
    number = 1
    try:
        header = next(reader, [])
        missing = [name for name in COLUMNS if name not in header]
        if missing:
            raise AccsimError(f"missing columns {missing} (needed: {', '.join(COLUMNS)})",
                              file=file, field="header")
        twice = [name for name in COLUMNS if header.count(name) > 1]
        if twice:
            raise AccsimError(f"column {twice[0]!r} appears {header.count(twice[0])} "
                              "times; keep one", file=file, field="header")
        for number, row in enumerate((row for row in reader if row), start=2):
            if len(row) != len(header):  # (blank lines skipped, as DictReader skips them)
                raise AccsimError(f"{len(row)} fields where the header names "
                                  f"{len(header)}", file=file, field=f"line {number}")
            yield number, dict(zip(header, row))
    except csv.Error as exc:
        raise AccsimError(f"malformed CSV ({exc})", file=file,
                          field=f"line {number + 1}") from None


def _csv_operators(text: str, file: str) -> list:
    operators = []
    for number, row in _csv_rows(text, file):
        where = f"line {number}"
        fields = {"name": f"{row['operator']}_{number}", "layer_type": row["operator"],
                  "kind": row["operator"], **_shape(row["shape"], file, where)}
        if row["dtype"]:
            fields["dtype"] = row["dtype"]
        text = row["measured_s"]
        try:
            fields["measured_s"] = decimal_float(text.strip())
        except (AttributeError, ValueError):
            raise AccsimError(f"not an accsim operator: measured_s {text!r} is no number "
                              "(ASCII digits, point and exponent only)", file=file,
                              field=where) from None
        try:
            operators.append(OPERATOR.validate_python(fields))
        except (TypeError, ValueError, ValidationError) as exc:
            reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) \
                else f"measured_s {text!r} is no number"
            raise AccsimError(f"not an accsim operator: {reason}", file=file,
                              field=where) from None
    return operators


def _shape(text: str, file: str, where: str) -> dict:
    """`m=128 n=256 k=64` (spaces or semicolons between): whole numbers stay numbers,
    anything else (an elementwise op's name) stays text. A key given twice, or one a
    column gives (kind, dtype, measured_s), is refused: neither copy would be sure."""
    fields = {}
    for part in text.replace(";", " ").split():
        key, sep, value = part.partition("=")
        if not sep or not key or not value:
            raise AccsimError(f"shape {text!r}: {part!r} is not key=value", file=file,
                              field=where)
        if key in fields or key in ("kind", "dtype", "measured_s"):
            said = "is given twice" if key in fields else "is a column's, not the shape's"
            raise AccsimError(f"shape {text!r}: {key!r} {said}", file=file, field=where)
        fields[key] = int(value) if value.isascii() and value.isdigit() else value
    return fields
