"""The three inputs of a run (platform, workload, mapping) and where each came from:
what `simulate`, the search and every command pass around."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.inputs.platform import Platform
from simulator.inputs.loader import Source
from simulator.mapping.plan import Mapping
from simulator.inputs.workload import Workload


@dataclass(frozen=True)
class Inputs:
    """The three inputs of a run and where each came from (None: built in code)."""

    platform: Platform
    workload: Workload
    mapping: Mapping
    platform_source: Source | None = None
    workload_source: Source | None = None
    mapping_source: Source | None = None
