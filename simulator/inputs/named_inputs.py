"""Resolving the inputs a command names: shipped names or paths, SCALE-Sim files read
unchanged, and the kind of a file told by its keys. Experiments and tests load inputs
through `load_inputs` exactly as `accsim run` does."""

from __future__ import annotations

import os
from pathlib import Path

from simulator.frontends import scalesim
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.limits import MemoryBudget, parse_size
from simulator.inputs.loader import (Source, load_model, locate, path_exists,
                                     shipped_names)
from simulator.inputs.platform_file import load_platform
from simulator.mapping.heuristics import heuristic
from simulator.mapping.plan import Mapping, with_fusion, with_heuristic, with_orientation
from simulator.inputs.run_inputs import Inputs
from simulator.output.terminal import echo, plain, warn
from simulator.inputs.workload import Workload, unmatched_layer_types

SCHEMAS = {"platform": Platform, "workload": Workload, "mapping": Mapping}

DEFAULT_ARCH = "tpu_v1"
DEFAULT_WORKLOAD = "resnet50_b1"


def budget(engine: str, max_memory: str | None, *, trace: bool = False) -> MemoryBudget:
    """The memory the tile programs may take: --max-memory, or the engine's default."""
    max_bytes = None if max_memory is None else parse_size(max_memory)  # '' refused
    return MemoryBudget.default("simpy" if engine == "simpy" else "fast", trace=trace,
                                max_bytes=max_bytes)


def read_platform(arch: str) -> tuple[Platform, Source, list[str]]:
    """A platform by shipped name, YAML path or SCALE-Sim `.cfg` (read unchanged), its
    source, and the notes on what a .cfg holds that accsim does not honour."""
    if scalesim.is_scalesim_config(arch):
        platform, source, config = scalesim.load_config(arch)
        return platform, source, list(config.notes)
    return (*load_platform(locate(arch, "platform")), [])


def read_workload(workload: str, workload_format: str | None = None
                  ) -> tuple[Workload, Source, list[str]]:
    """A workload by shipped name, YAML path or SCALE-Sim `.csv` topology (conv or GEMM
    by its header, or as `workload_format` says), its source, and the topology's notes."""
    if workload_format is not None or scalesim.is_scalesim_topology(workload):
        trace, source, topology = scalesim.load_topology(workload, workload_format)
        return trace, source, [f"SCALE-Sim {topology.kind} topology {source.path}: {note}"
                               for note in topology.notes]
    return (*load_model(locate(workload, "workload"), Workload), [])


def show_notes(notes: list[str]) -> None:
    """What SCALE-Sim files hold that accsim does not honour, one line each."""
    for note in notes:
        echo(f"scalesim: {plain(note)}")


def load_inputs(arch: str, workload: str | None, mapping: str | None, *,
                validate: str | None = None, workload_format: str | None = None,
                heuristic_name: str | None = None, fusion: str | None = None,
                orientation: str | None = None,
                imported: tuple[Workload, Source] | None = None) -> Inputs:
    """Load the three inputs by shipped name or path. SCALE-Sim files are read unchanged:
    a `.cfg` platform, a `.csv` topology (conv or GEMM by its header, or as
    `workload_format` says); what they hold that accsim does not honour is printed.
    `validate="scalesim"`: unbounded buffers and one tile per GEMM (simulator.frontends.scalesim).
    `heuristic_name` fills the fields the plan leaves open (default: the search).
    `imported`: a workload already read by a frontend (`run --onnx`), used as is.
    `fusion`: the fusion planner's mode (--fusion; None: the plan's, else the default);
    SCALE-Sim validation runs operator at a time (fusion none), as SCALE-Sim does.
    `orientation`: the GEMMs' operand orientation mode (--orientation; None: the
    plan's, else auto: the search weighs both, DESIGN.md section 19)."""
    if heuristic_name is not None:
        if validate is not None:
            raise AccsimError("--validate scalesim makes its own plan (one tile per "
                              "GEMM); drop --heuristic", field="--heuristic")
        heuristic(heuristic_name)  # an unknown name errors here, naming the known ones
    workload = DEFAULT_WORKLOAD if workload is None else workload
    platform, platform_source, notes = read_platform(arch)
    if imported is not None:
        trace, workload_source = imported
    else:
        trace, workload_source, read = read_workload(workload, workload_format)
        notes += read
    if validate is not None:
        if mapping is not None:
            raise AccsimError("--validate scalesim makes its own plan (one tile per GEMM); "
                              "drop --mapping", file=mapping, field="--mapping")
        if fusion not in (None, "none"):
            raise AccsimError("--validate scalesim runs operator at a time, as SCALE-Sim "
                              "does (fusion none); drop --fusion", field="--fusion")
        platform = scalesim.validate_platform(platform, trace)
        notes += scalesim.validate_notes(platform)
        mapping_plan = scalesim.validate_mapping(trace, platform)
    show_notes(notes)
    if validate is not None:
        return Inputs(platform, trace, mapping_plan, platform_source, workload_source)
    if mapping is None:
        return Inputs(platform, trace, with_orientation(with_fusion(with_heuristic(
            Mapping(), heuristic_name), fusion), orientation),
                      platform_source, workload_source)
    plan, mapping_source = load_model(locate(mapping, "mapping"), Mapping)
    return Inputs(platform, trace, with_orientation(with_fusion(with_heuristic(
        plan, heuristic_name), fusion), orientation),
                  platform_source, workload_source, mapping_source)


def warn_unmatched(inputs: Inputs, said: set[tuple[str, str]] | None = None) -> None:
    """One warning on stderr per layer_types entry of the tiling plan that selects no
    operator of the workload (workload.unmatched_layer_types), naming the plan file;
    `said`: warnings already given by the caller's other runs (calibrate's measured
    runs share a plan), said once."""
    shown = inputs.mapping_source.path if inputs.mapping_source else "--mapping"
    for warning in unmatched_layer_types(inputs.mapping.layer_types, inputs.workload):
        if said is None or (shown, warning) not in said:
            warn(shown, warning)
        if said is not None:
            said.add((shown, warning))


def check_distinct_platforms(every: list[Inputs], given: list[str], *,
                             field: str) -> None:
    """Each platform compared is one column: a platform file named twice (by a shipped
    name and its path, two paths to one file, a link) would print the same column
    twice. `given`: the names as the user gave them, `field`: where (--arch)."""
    seen: dict[tuple[int, int], str] = {}
    for inputs, name in zip(every, given):
        if inputs.platform_source is None:  # built in code: no file to name twice
            continue
        try:
            found = os.stat(inputs.platform_source.path)
        except OSError:
            continue  # read a moment ago; a file gone since is no duplicate
        key = (found.st_dev, found.st_ino)
        if key in seen:
            raise AccsimError(f"is the same platform file as {seen[key]!r} (each "
                              "platform compared is one column): give each platform once",
                              file=name, field=field)
        seen[key] = name


def locate_any(name: str, kind: str | None) -> str:
    """A path, or a shipped platform, workload or mapping of that name (as `run` finds
    them); `kind` narrows the search."""
    if path_exists(name) or kind is not None:
        return str(locate(name, kind or "platform"))
    for candidate in SCHEMAS:
        if name in shipped_names(candidate):
            return str(locate(name, candidate))
    if Path(name).suffix or "/" in name:
        return name  # a path: read_source names it if it is missing
    shipped = "; ".join(f"{kind}s {', '.join(shipped_names(kind))}" for kind in SCHEMAS)
    raise AccsimError(f"no such file, and nothing shipped of that name ({shipped})",
                      file=name)


def guess_kind(raw) -> str:
    """platform, workload or mapping by the top-level keys of decoded YAML: a list of
    operators is a workload, a `base` a platform, else the schema sharing the most keys (a platform missing
    a section is still told apart by the others)."""
    if not isinstance(raw, dict) or isinstance(raw.get("operators"), list):
        return "workload"
    if "base" in raw:  # only a platform file varies a base (simulator.inputs.platform_file)
        return "platform"
    shared = {kind: len(set(raw) & set(model.model_fields) - {"name", "description"})
              for kind, model in SCHEMAS.items()}
    return max(("platform", "mapping", "workload"), key=lambda kind: shared[kind])
