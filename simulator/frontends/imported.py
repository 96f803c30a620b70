"""What a frontend returns: the workload it read and the notes the user should see (what
was approximated, skipped or assumed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.inputs.workload import Workload


@dataclass(frozen=True)
class Imported:
    """What a frontend read: the workload, and what the user should know about it."""

    workload: Workload
    notes: list[str] = field(default_factory=list)
