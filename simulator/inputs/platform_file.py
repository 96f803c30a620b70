"""A platform file is a whole platform, or a base plus overrides (DESIGN.md section 2):
`base: NAME_OR_PATH` names the platform it varies (a shipped name, or a path relative
to the file's folder) and every other field it gives overrides the base's. Mappings
merge key by key; a list or a scalar replaces the base's value whole (`null` drops an
optional table). A study's what-if variant (`set:` by dotted path) is applied by the
same rule (`overridden`), so a variant and a file over a base mean the same thing.

The provenance table follows the values: a base's entry for a field the file
overrides is dropped (a what-if value is not the base's citation) and the file's own
entries are added, so an overridden value cites the file's source.

The resolved platform is what every caller gets: what runs, what a result's manifest
embeds, and what its sha256 names. A file over a base is identified by the sha256 of
its chain (`platform_sha256`), so a result tells a changed base from an edit; a whole
platform keeps its file's sha256.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.loader import (Source, locate, parse_yaml, read_source, shipped_names,
                              validate_model)

BASE = "base"
PROVENANCE = "provenance"
# Longest chain of bases followed (a deeper one is refused; the shipped ones use 1).
MAX_BASES = 8


def nested(values: dict) -> dict:
    """Dotted field paths (`offchip.bandwidth_gbps: 1638`) as the nested mapping a file
    writes (`offchip: {bandwidth_gbps: 1638}`)."""
    tree: dict = {}
    for path, value in values.items():
        *tables, leaf = path.split(".")
        node = tree
        for table in tables:
            node = node.setdefault(table, {})
        node[leaf] = value
    return tree


def leaf_paths(overrides: dict, prefix: str = "") -> list[str]:
    """The dotted paths an override sets: a mapping is walked into (an empty one sets
    nothing), anything else (a list, a scalar, null) is set whole at its path."""
    paths: list[str] = []
    for key, value in overrides.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        paths += leaf_paths(value, path) if isinstance(value, dict) else [path]
    return paths


def _merged(base, override):
    """Mappings merged key by key; anything else replaces the base's value whole (the
    result shares the base's unmerged parts: overridden gives it a copy)."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merged(base[key], value) if key in base else copy.deepcopy(value)
    return merged


def overridden(base: dict, overrides: dict) -> dict:
    """A platform as a file holds it (provenance included) with `overrides` applied:
    fields merged as the module says, the base's provenance of every overridden field
    (or of anything under it) dropped, and the overrides' own provenance added."""
    fields = {key: value for key, value in overrides.items() if key != PROVENANCE}
    raw = _merged(copy.deepcopy({key: value for key, value in base.items()
                                 if key != PROVENANCE}), fields)
    changed = leaf_paths(fields)
    table = {path: entry for path, entry in (base.get(PROVENANCE) or {}).items()
             if not any(path == c or path.startswith(c + ".") for c in changed)}
    own = overrides.get(PROVENANCE) or {}
    if not isinstance(own, dict):
        raw[PROVENANCE] = own   # not a table: validation names the field
    elif table or own:
        raw[PROVENANCE] = {**table, **own}
    return raw


def _base_path(entry, file: str) -> Path:
    """The file a `base:` names: a path relative to the naming file's folder, else a
    shipped platform of that name."""
    if not isinstance(entry, str) or not entry.strip():
        raise AccsimError("must name a shipped platform or a platform file (a path "
                          "relative to this file's folder)", file=file, field=BASE)
    candidate = Path(entry) if Path(entry).is_absolute() else Path(file).parent / entry
    if candidate.is_file():
        return candidate
    if entry in shipped_names("platform"):
        return locate(entry, "platform")
    raise AccsimError(f"{entry!r}: no such platform file (looked for {candidate}), and "
                      "no shipped platform of that name (shipped: "
                      f"{', '.join(shipped_names('platform'))})", file=file, field=BASE)


def _chain(path: str | Path) -> list[tuple[Source, dict]]:
    """The file and its bases, the file first, each with its decoded YAML; a base that
    leads back to a file already in the chain is refused."""
    chain: list[tuple[Source, dict]] = []
    seen: dict[Path, str] = {}
    next_path: Path | None = Path(path)
    while next_path is not None:
        source = read_source(next_path)
        key = next_path.resolve()
        if key in seen:
            cycle = " -> ".join([*seen.values(), source.path])
            raise AccsimError(f"its bases form a cycle ({cycle})",
                              file=chain[-1][0].path, field=BASE)
        if len(chain) > MAX_BASES:
            raise AccsimError(f"more than {MAX_BASES} bases deep", file=chain[0][0].path,
                              field=BASE)
        seen[key] = source.path
        raw = parse_yaml(source.text, file=source.path)
        chain.append((source, raw))
        next_path = _base_path(raw[BASE], source.path) \
            if isinstance(raw, dict) and BASE in raw else None
    return chain


def resolved_raw(chain: list[tuple[Source, dict]]) -> dict:
    """The platform a chain gives, as a file holds it, before validation: each file's
    fields applied over its base, the deepest base first. Each base is validated on
    its own first, so a fault in it names the base's file."""
    raw = chain[-1][1]
    for index in range(len(chain) - 2, -1, -1):
        source, over = chain[index]
        base = validate_model(raw, Platform, file=chain[index + 1][0].path)
        if "name" not in over:
            raise AccsimError("a platform over a base names itself: give `name`",
                              file=source.path, field="name")
        raw = overridden(as_file(base), {k: v for k, v in over.items() if k != BASE})
    return raw


def as_file(platform: Platform) -> dict:
    """A validated platform as a file holds it: its canonical dump and provenance."""
    raw = platform.model_dump(mode="json")
    if platform.provenance:
        raw[PROVENANCE] = {path: entry.dump() for path, entry in
                           platform.provenance.items()}
    return raw


def chain_sha256(chain: list[tuple[Source, dict]]) -> str:
    """A whole platform's file sha256; for a file over bases, the sha256 of the
    files' sha256s, the file first, so a change in any of them changes it."""
    if len(chain) == 1:
        return chain[0][0].sha256
    joined = "\n".join(source.sha256 for source, _ in chain)
    return hashlib.sha256(joined.encode()).hexdigest()


def load_platform(path: str | Path) -> tuple[Platform, Source]:
    """A platform file with its bases resolved: the platform, and its source (the file's
    path and text, the chain's sha256). Errors name the file and field at fault."""
    chain = _chain(path)
    raw = resolved_raw(chain)
    platform = validate_model(raw, Platform, file=chain[0][0].path)
    source = chain[0][0]
    return platform, Source(source.path, chain_sha256(chain), source.text)


def platform_sha256(path: str | Path) -> str:
    """The sha256 load_platform gives the file at `path` (for verify)."""
    return chain_sha256(_chain(path))


def _at(raw, path: str):
    """The value at a dotted path of a platform as a file holds it (None: absent)."""
    node = raw
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def overrides_of(path: str | Path) -> tuple[str | None, list[tuple[str, object, object]]]:
    """What a platform file overrides: its base's path (None: a whole platform) and,
    for each field it sets (provenance aside), (dotted path, the base's value, its
    value); a value the base does not have is None."""
    chain = _chain(path)
    if len(chain) == 1:
        return None, []
    base = as_file(validate_model(resolved_raw(chain[1:]), Platform,
                                  file=chain[1][0].path))
    over = {key: value for key, value in chain[0][1].items()
            if key not in (BASE, PROVENANCE)}
    return chain[1][0].path, [(leaf, _at(base, leaf), _at(over, leaf))
                              for leaf in leaf_paths(over)]
