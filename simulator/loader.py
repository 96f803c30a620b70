"""Reading YAML/JSON inputs into the pydantic models, with errors that name the file,
the field and the rule, and finding shipped platforms and workloads by name."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from simulator.errors import AccsimError

Model = TypeVar("Model", bound=BaseModel)

# Where shipped inputs live inside the installed package: (package, sub-folder).
SHIPPED_FOLDERS = {"platform": ("simulator.arch_configs", ""),
                   "workload": ("simulator.workloads", ""),
                   "mapping": ("simulator.workloads", "mappings")}


@dataclass(frozen=True)
class Source:
    """Where an input came from, with the text's sha256 (for manifests)."""

    path: str
    sha256: str
    text: str


def read_source(path: str | Path) -> Source:
    """Read an input file with its sha256; a missing or unreadable file is an AccsimError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AccsimError("file not found", file=str(path)) from None
    except OSError as exc:
        raise AccsimError(f"cannot read: {exc.strerror}", file=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AccsimError("not UTF-8 text", file=str(path)) from None
    return Source(str(path), hashlib.sha256(data).hexdigest(), text)


def parse_model(text: str, model: type[Model], *, file: str) -> Model:
    """Parse YAML (or JSON) text into `model`, raising one AccsimError on any fault."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise AccsimError(f"malformed YAML: {problem}", file=file, field=where) from None
    if not isinstance(raw, dict):
        raise AccsimError(f"expected a mapping of fields at the top, found "
                          f"{type(raw).__name__}", file=file)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, raw, file=file) from None


def validation_error(exc: ValidationError, raw: dict, *, file: str) -> AccsimError:
    """The first pydantic error as an AccsimError; the count of the rest is appended."""
    errors = exc.errors()
    # A misspelt key also makes the correct key missing: report the misspelling first.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    rule = first["msg"].removeprefix("Value error, ")
    field = field_path(first["loc"], raw)
    if first["type"] == "extra_forbidden":
        rule = "unknown field (misspelt?)"
    elif first["type"] == "missing":
        rule = "required field is missing"
        # The missing key is absent from the input, so field_path cannot see it.
        parent = first["loc"][:-1]
        field = (f"{field_path(parent, raw)}." if parent else "") + str(first["loc"][-1])
    if len(errors) > 1:
        rule += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return AccsimError(rule, file=file, field=field)


def field_path(loc: tuple, raw) -> str:
    """Dotted path of a pydantic location, with list items named where they have a name.

    Discriminated-union tags (the operator kind) that pydantic inserts are skipped.
    """
    parts: list[str] = []
    node = raw
    for key in loc:
        if isinstance(key, int):
            name = node[key].get("name") if isinstance(node, list) and key < len(node) \
                and isinstance(node[key], dict) else None
            parts.append(f"[{key}]" + (f"({name})" if name else ""))
            node = node[key] if isinstance(node, list) and key < len(node) else None
        elif isinstance(node, dict) and key in node or not isinstance(node, dict):
            parts.append(("." if parts else "") + str(key))
            node = node.get(key) if isinstance(node, dict) else None
        # else: a union tag inserted by pydantic, not a key of the input
    return "".join(parts) or "(top level)"


def load_model(path: str | Path, model: type[Model]) -> tuple[Model, Source]:
    """Read and validate one input file into `model`."""
    source = read_source(path)
    return parse_model(source.text, model, file=source.path), source


def shipped_folder(kind: str):
    """The folder of shipped inputs of a kind: package data when installed, else (code
    imported straight from a source checkout) the top-level folder it is built from."""
    package, sub = SHIPPED_FOLDERS[kind]
    try:
        folder = resources.files(package)
    except ModuleNotFoundError:
        folder = Path(__file__).resolve().parent.parent / package.rsplit(".", 1)[1]
    return folder / sub if sub else folder


# Sub-folders of shipped inputs whose files are shipped too, named "FOLDER/NAME": the
# what-if variants of real chips (a chip as it is keeps the plain name).
SHIPPED_SUBFOLDERS = {"platform": ("whatif",), "workload": (), "mapping": ()}


def shipped_names(kind: str) -> list[str]:
    """Names of the platforms, workloads or mappings shipped inside the package
    (what-if platforms as whatif/NAME)."""
    folder = shipped_folder(kind)
    names = [p.name.removesuffix(".yaml") for p in folder.iterdir()
             if p.name.endswith(".yaml")]
    for sub in SHIPPED_SUBFOLDERS[kind]:
        names += [f"{sub}/{p.name.removesuffix('.yaml')}" for p in (folder / sub).iterdir()
                  if p.name.endswith(".yaml")]
    return sorted(names)


def locate(name_or_path: str, kind: str) -> Path:
    """A path as given if it exists, else the shipped file of that name."""
    path = Path(name_or_path)
    if path.exists():
        return path
    if path.suffix not in {".yaml", ".yml", ".json"} and name_or_path in shipped_names(kind):
        return Path(str(shipped_folder(kind) / f"{name_or_path}.yaml"))
    if path.suffix in {".yaml", ".yml", ".json"} or "/" in name_or_path:
        return path
    raise AccsimError(f"no such file, and no shipped {kind} of that name "
                      f"(shipped: {', '.join(shipped_names(kind))})", file=name_or_path)
