"""Reading YAML/JSON inputs into the pydantic models, with errors that name the file,
the field and the rule, and finding shipped platforms and workloads by name.

Every reader of user files goes through the guards here (DESIGN.md section 7), so that
each new reader inherits them: `read_source` (regular files only, bounded size, UTF-8
text; `read_bytes` for binary files, `check_regular_file` for paths another library
opens), `parse_yaml` (duplicate keys rejected, YAML 1.2 scalars, no aliases, bounded
nesting) and `read_json` / `parse_json` (strict JSON: no NaN or Infinity, no duplicate
keys, bounded nesting). Writers use `dump_json` (strict JSON) and simulator.output.files (the
one guard for writing output files and folders).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import reprlib
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypeVar, get_args

import numpy as np
import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver
from pydantic import BaseModel, ValidationError

from simulator.errors import AccsimError
from simulator.output.terminal import plain

Model = TypeVar("Model", bound=BaseModel)

# Where shipped inputs live inside the installed package: (package, sub-folder).
SHIPPED_FOLDERS = {"platform": ("simulator.arch_configs", ""),
                   "workload": ("simulator.workloads", ""),
                   "mapping": ("simulator.workloads", "mappings")}

# Largest input file read (the largest shipped one is 12 KiB; a result JSON of a large
# workload a few MiB): a bigger one is refused before it is read.
MAX_INPUT_BYTES = 64 * 2**20
# Deepest nesting of lists and mappings accepted in YAML and JSON inputs (the schemas
# need 4; a deeper file is refused before the parser's recursion gets near Python's).
MAX_NESTING = 64
# The other missing fields an error names (then a count): a line, not a schema.
MISSING_NAMED = 6


@dataclass(frozen=True)
class Source:
    """Where an input came from, with the text's sha256 (for manifests)."""

    path: str
    sha256: str
    text: str


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def check_regular_file(path: str | Path) -> os.stat_result:
    """A path that exists and is a regular file (not a folder, FIFO or device), as
    os.stat gives it; an AccsimError naming the file otherwise (FileNotFoundError and
    OSError pass through to the caller)."""
    if "\x00" in str(path):  # os.stat would raise ValueError: no system takes such a name
        raise AccsimError("no file is named with a NUL character", file=str(path))
    refuse_empty_name(path, "input file")
    info = os.stat(path)
    kind = next((what for test, what in _FILE_KINDS if test(info.st_mode)), None)
    if kind is not None or not stat.S_ISREG(info.st_mode):
        raise AccsimError(f"is {kind or 'not a regular file'}, not an input file",
                          file=str(path))
    return info


def read_bytes(path: str | Path, *, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """An input file's bytes. Only a regular file of at most `max_bytes` is read (a
    FIFO or /dev/zero would block or never end); anything else is an AccsimError naming
    the file. Binary inputs (ONNX models, figures) are read through it."""
    with _regular(path, max_bytes) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise AccsimError(f"cannot read: {exc.strerror}", file=str(path)) from None
    if len(data) > max_bytes:
        raise AccsimError(f"larger than the {max_bytes:,} bytes an input file may have",
                          file=str(path))
    return data


@contextmanager
def _regular(path: str | Path, max_bytes: int):
    """The open file at `path` when it is a regular file of at most `max_bytes`: opened
    without blocking (a FIFO opens at once) and checked on the open descriptor, so a
    file swapped for a FIFO or a device after a check is still refused."""
    try:
        check_regular_file(path)  # the kind named before anything is opened
        path = Path(path)
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise AccsimError("file not found", file=str(path)) from None
    except OSError as exc:
        raise AccsimError(f"cannot read: {exc.strerror}", file=str(path)) from None
    with os.fdopen(handle, "rb") as source:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise AccsimError("is not a regular file, not an input file", file=str(path))
        if info.st_size > max_bytes:
            raise AccsimError(f"{info.st_size:,} bytes is larger than the {max_bytes:,} "
                              "bytes an input file may have", file=str(path))
        yield source


def file_sha256(path: str | Path, *, max_bytes: int) -> str:
    """The sha256 of a regular file of at most `max_bytes`, read in chunks (a file a
    result names, checked by `accsim verify`: a FIFO, a device or an endless file is
    refused, never read)."""
    digest = hashlib.sha256()
    with _regular(path, max_bytes) as handle:
        try:
            while len(chunk := handle.read(2**20)):
                digest.update(chunk)
                max_bytes -= len(chunk)
                if max_bytes < 0:
                    raise AccsimError("grew past the bytes it may have while read",
                                      file=str(path))
        except OSError as exc:
            raise AccsimError(f"cannot read: {exc.strerror}", file=str(path)) from None
    return digest.hexdigest()


def decode_text(data: bytes, *, file: str) -> Source:
    """Bytes read from `file` as UTF-8 text with their sha256 (no NUL bytes)."""
    if b"\x00" in data:
        raise AccsimError("binary data (NUL bytes), not a text file", file=file)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AccsimError(f"not UTF-8 text (byte {exc.start})", file=file) from None
    return Source(file, hashlib.sha256(data).hexdigest(), text)


def read_source(path: str | Path, *, max_bytes: int = MAX_INPUT_BYTES) -> Source:
    """Read an input file (through read_bytes) as UTF-8 text with its sha256."""
    return decode_text(read_bytes(path, max_bytes=max_bytes), file=str(path))


# --- YAML: a safe loader with duplicate keys refused and YAML 1.2 core-schema scalars.

def _yaml_error(problem: str, mark, *, file: str) -> AccsimError:
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
    return AccsimError(problem, file=file, field=where)


class _Refused(yaml.MarkedYAMLError):
    """Well-formed YAML that accsim's rules refuse (not a syntax error)."""


class _StrictRules:
    """YAML 1.2 scalars, no aliases and unique keys, over PyYAML's safe loading.

    YAML 1.1 (PyYAML's default) reads yes/no/on/off as booleans, 0100 as octal 64 and
    1_000 as 1000; here only true/false are booleans, yes/no/on/off are strings, and a
    number with a leading zero is refused as ambiguous."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(problem=f"alias *{event.anchor} is not accepted "
                                       "in accsim inputs (write the value out)",
                                       problem_mark=event.start_mark)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_NESTING:
                raise _Refused(
                    problem=f"nested deeper than {MAX_NESTING} levels",
                    problem_mark=self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: let PyYAML report it
                continue
            if first is not key_node.start_mark:
                raise _Refused(
                    problem=f"duplicate key {key!r} (first at line {first.line + 1}, "
                    f"again at line {key_node.start_mark.line + 1})",
                    problem_mark=key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        if _LEADING_ZERO.match(text):
            raise _Refused(
                problem=f"{text!r} has a leading zero (octal in YAML 1.1, decimal in "
                "YAML 1.2): write it without the zero, or quote it as text",
                problem_mark=node.start_mark)
        return int(text, 0) if text.lower().startswith(("0x", "0o")) else int(text)

    def construct_yaml_float(self, node):
        text = self.construct_scalar(node).lower()
        special = {".inf": "inf", "+.inf": "inf", "-.inf": "-inf", ".nan": "nan"}
        return float(special.get(text, text))


class _StrictLoader(_StrictRules, yaml.SafeLoader):
    """The rules over PyYAML's pure-Python reader, scanner and parser: the reference,
    and the one whose messages name a fault."""


if yaml.__with_libyaml__:
    class _StrictEventLoader(_StrictRules, Composer, yaml.cyaml.CParser,
                             SafeConstructor, Resolver):
        """The same rules, composer and constructor over libyaml's scanner and parser,
        about 7x faster on a platform file. PyYAML's parser is a port of libyaml's;
        tests/test_loader_libyaml.py checks that both give the same data."""

        def __init__(self, stream):
            yaml.cyaml.CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
else:  # PyYAML built without libyaml
    _StrictEventLoader = _StrictLoader


_LEADING_ZERO = re.compile(r"^[-+]?0[0-9]+$")
# YAML 1.2 core schema (plus leading-zero decimals, caught as ambiguous when built).
_CORE_SCALARS = (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$",
     "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
     r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+0123456789."))
for _loader in dict.fromkeys((_StrictLoader, _StrictEventLoader)):
    _loader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers
              if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
                             "tag:yaml.org,2002:float")]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    for _tag, _pattern, _first in _CORE_SCALARS:
        _loader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))
    _loader.add_constructor("tag:yaml.org,2002:int", _StrictRules.construct_yaml_int)
    _loader.add_constructor("tag:yaml.org,2002:float", _StrictRules.construct_yaml_float)


def parse_yaml(text: str, *, file: str):
    """YAML text as Python data, read by YAML 1.2 rules with duplicate keys, aliases
    and ambiguous leading-zero numbers refused; any fault is one AccsimError naming the
    file and the line. Read with libyaml's parser where PyYAML has it; a text it finds
    at fault is read again by the pure-Python one, whose messages the errors keep."""
    if _StrictEventLoader is not _StrictLoader:
        try:
            return yaml.load(text, Loader=_StrictEventLoader)  # noqa: S506 (a SafeLoader)
        except (yaml.YAMLError, RecursionError, ValueError, OverflowError):
            pass   # the reference below names the fault
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader)
    except _Refused as exc:
        raise _yaml_error(exc.problem, exc.problem_mark, file=file) from None
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or str(exc).splitlines()[0]
        raise _yaml_error(f"malformed YAML: {problem}", exc.problem_mark,
                          file=file) from None
    except yaml.YAMLError as exc:
        raise AccsimError(f"malformed YAML: {str(exc).splitlines()[0]}",
                          file=file) from None
    except (RecursionError, ValueError, OverflowError) as exc:
        raise AccsimError(f"malformed YAML: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0].split(';')[0] if str(exc) else ''}",
                          file=file) from None


# --- JSON: strict (RFC 8259 numbers only), unique keys, bounded nesting.

def _unique_pairs(pairs: list) -> dict:
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is out of the range of a float")
    return value


# A JSON string, or an unterminated one running to the end of the text: every opening
# quote matches (possessive, no backtracking), so removing the strings is one linear
# pass; a pattern that could fail would be retried at every later quote (quadratic in
# a text of escaped quotes, issue 42).
_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Bracket byte -> its step in depth: opening +1, closing -1.
_STEP = np.zeros(256, dtype=np.int64)
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1
_CHUNK = 2**20


def _nesting(structure: bytes) -> int:
    """Deepest bracket nesting of JSON text without its strings, counted until it
    passes MAX_NESTING: vectorised over chunks of the brackets, so a long line, string
    or nesting costs linear time and bounded memory."""
    brackets = structure.translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for start in range(0, len(brackets), _CHUNK):
        steps = _STEP[np.frombuffer(brackets, np.uint8, min(_CHUNK, len(brackets) - start),
                                    start)]
        running = np.cumsum(steps) + depth
        deepest = max(deepest, int(running.max()))
        if deepest > MAX_NESTING:
            break
        depth = int(running[-1])
    return deepest


def parse_json(text: str, *, file: str, max_values: int | None = None):
    """Strict JSON text as Python data: NaN/Infinity, duplicate keys and nesting deeper
    than MAX_NESTING are refused; with `max_values`, so is text of more values (counted
    as containers and separators outside strings, before parsing). Any fault is one
    AccsimError naming the file. A leading byte order mark is ignored, as RFC 8259
    lets a parser do (Windows editors write one; the YAML and CSV readers skip it)."""
    text = text.removeprefix("\ufeff")
    structure = _JSON_STRING.sub("", text).encode("utf-8")
    if _nesting(structure) > MAX_NESTING:
        raise AccsimError(f"JSON nested deeper than {MAX_NESTING} levels", file=file)
    if max_values is not None:
        values = structure.count(b",") + structure.count(b"[") + structure.count(b"{")
        if values > max_values:
            raise AccsimError(f"JSON of about {values:,} values, more than the "
                              f"{max_values:,} this file may hold", file=file)
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs,
                          parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise AccsimError(f"not JSON: {exc.msg}", file=file,
                          field=f"line {exc.lineno}, column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        rule = str(exc).split(";")[0]  # Python's int-digit limit adds advice on its API
        raise AccsimError(f"not strict JSON: {rule}", file=file) from None


def excerpt(value, limit: int = 80) -> str:
    """A bounded excerpt of a value read from a file, for an error message: its repr,
    long parts elided, cut to `limit` characters (the CLI escapes it on the way out)."""
    short = reprlib.Repr()  # bounded work however large the value
    short.maxlevel, short.maxlist, short.maxdict = 3, 8, 4
    short.maxstring = short.maxother = 60
    short.maxlong = 40
    text = short.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_json(path: str | Path, *, max_bytes: int = MAX_INPUT_BYTES):
    """A JSON file through read_source and parse_json: (data, its Source)."""
    source = read_source(path, max_bytes=max_bytes)
    return parse_json(source.text, file=source.path), source


def dump_json(data, **options) -> str:
    """Strict JSON text (a NaN or Infinity is a bug, raised as ValueError, never
    written as the non-JSON token)."""
    return json.dumps(data, allow_nan=False, **options)


def parse_model(text: str, model: type[Model], *, file: str) -> Model:
    """Parse YAML (or JSON) text into `model`, raising one AccsimError on any fault."""
    raw = parse_yaml(text, file=file)
    return validate_model(raw, model, file=file)


def validate_model(raw, model: type[Model], *, file: str) -> Model:
    """Validate decoded data (a mapping at the top) into `model`; one AccsimError."""
    if not isinstance(raw, dict):
        found = "an empty file" if raw is None else type(raw).__name__
        raise AccsimError(f"expected a mapping of fields at the top, found {found}",
                          file=file)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, raw, file=file, model=model) from None
    except RecursionError:
        raise AccsimError("nested too deeply", file=file) from None


def validation_error(exc: ValidationError, raw: dict, *, file: str,
                     model: type[BaseModel] | None = None) -> AccsimError:
    """The first pydantic error as an AccsimError; the other missing fields are named
    (a file written from scratch lacks several at once) and the count of the rest is
    appended. With the `model` validated, an unknown field names the closest known
    one."""
    errors = exc.errors()
    # A misspelt key also makes the correct key missing: report the misspelling first.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    rule = first["msg"].removeprefix("Value error, ")
    field = field_path(first["loc"], raw)
    if first["type"] == "extra_forbidden":
        rule = "unknown field (misspelt?)" + did_you_mean(first["loc"], model)
    elif first["type"] == "missing":
        rule = "required field is missing"
        field = _missing_path(first["loc"], raw)
    missing = [_missing_path(e["loc"], raw) for e in errors
               if e is not first and e["type"] == "missing"]
    if missing:
        unnamed = len(missing) - MISSING_NAMED
        rule += f" (missing too: {', '.join(missing[:MISSING_NAMED])}" + (
            f" and {unnamed} more)" if unnamed > 0 else ")")
    others = len(errors) - 1 - len(missing)
    if others:
        rule += f" (and {others} more error{'s' if others > 1 else ''})"
    return AccsimError(rule, file=file, field=field)


def _missing_path(loc: tuple, raw: dict) -> str:
    """The dotted path of a missing key (absent from the input, so field_path cannot
    see it: its parent's path and the key)."""
    parent = loc[:-1]
    return (f"{field_path(parent, raw)}." if parent else "") + str(loc[-1])


def did_you_mean(loc: tuple, model: type[BaseModel] | None) -> str:
    """`; did you mean 'x'?` with the known field of `model` at `loc` closest to the
    unknown key that ends it (difflib), or '' when none is close."""
    if model is None or not loc or not isinstance(loc[-1], str):
        return ""
    known = sorted({name for candidate in _models_at(model, loc[:-1])
                    for name in candidate.model_fields})
    match = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


def _models_at(model: type[BaseModel], loc: tuple) -> list[type[BaseModel]]:
    """The models a pydantic location may point into below `model`: list indices
    skipped, a union's members kept (a discriminator tag picks no field)."""
    candidates = [model]
    for key in loc:
        if isinstance(key, int):
            continue
        inner = [found for candidate in candidates if key in candidate.model_fields
                 for found in _models_in(candidate.model_fields[key].annotation)]
        candidates = inner or candidates  # a union tag: the members stay candidates
    return candidates


def _models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (inside lists, dicts, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [found for arg in get_args(annotation) for found in _models_in(arg)]


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
            parts.append(f"[{key}]" + (f"({plain(name)})" if isinstance(name, str)
                                        else ""))
            node = node[key] if isinstance(node, list) and key < len(node) else None
        elif isinstance(node, dict) and key in node or not isinstance(node, dict):
            text = str(key)
            shown = text if text and text.isprintable() else repr(text)
            parts.append(("." if parts else "") + shown)
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
        folder = Path(__file__).resolve().parents[2] / package.rsplit(".", 1)[1]
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


def refuse_empty_name(name_or_path: str | Path, kind: str, field: str | None = None) -> None:
    """An input named by an empty (or blank) string is refused: Path('') is the working
    folder, which a reader would take for the file (or a caller for no name given)."""
    if not str(name_or_path).strip():
        raise AccsimError(f"an empty name ({str(name_or_path)!r}) names no {kind}",
                          field=field)


def _refuse_near_miss(name_or_path: str, kind: str) -> None:
    """A missing file that is one step from what exists: a shipped name given with its
    suffix (tpu_v1.yaml), or a path given without it (arch_configs/tpu_v1), named
    with the spelling that works."""
    path = Path(name_or_path)
    stem = name_or_path[:-len(path.suffix)] if path.suffix else name_or_path
    if path.suffix in {".yaml", ".yml"} and stem in shipped_names(kind):
        raise AccsimError(f"file not found; the shipped {kind} of that name is given "
                          f"without the suffix: {stem}", file=name_or_path)
    if not path.suffix and Path(f"{name_or_path}.yaml").is_file():
        raise AccsimError(f"file not found; {name_or_path}.yaml is there",
                          file=name_or_path)


def path_exists(path: str | Path, field: str | None = None) -> bool:
    """Whether something is at `path` (pathlib's rule: a dangling link is nothing). A
    path the system will not look up (a name longer than it allows, a folder it may not
    search) is an AccsimError naming it, where pathlib raised OSError."""
    try:
        return Path(path).exists()
    except OSError as exc:
        raise AccsimError(f"cannot read: {exc.strerror}", file=str(path),
                          field=field) from None


def locate(name_or_path: str, kind: str) -> Path:
    """A path as given if it exists, else the shipped file of that name."""
    refuse_empty_name(name_or_path, kind)
    path = Path(name_or_path)
    if path_exists(path):
        return path
    if path.suffix not in {".yaml", ".yml", ".json"} and name_or_path in shipped_names(kind):
        return Path(str(shipped_folder(kind) / f"{name_or_path}.yaml"))
    if path.suffix in {".yaml", ".yml", ".json"} or "/" in name_or_path:
        _refuse_near_miss(name_or_path, kind)
        return path
    raise AccsimError(f"no such file, and no shipped {kind} of that name "
                      f"(shipped: {', '.join(shipped_names(kind))})", file=name_or_path)
