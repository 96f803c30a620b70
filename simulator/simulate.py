"""Run a workload end to end: lower every operator, replay it on an engine, and gather
the metrics into one result with its manifest (DESIGN.md sections 3, 4, 6)."""

from __future__ import annotations

import math
import platform as host
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import version
from pathlib import Path, PurePath

import numpy as np

import simulator
from simulator.inputs.platform import Platform
from simulator.engines import choose_engine
from simulator.errors import AccsimError
from simulator.engines.outcome import Breakdown
from simulator.engines.runner import engine_runner
from simulator.inputs.run_inputs import Inputs
from simulator.invocation import invocation_cycles
from simulator.limits import MemoryBudget, tile_programs
from simulator.inputs.loader import Source
from simulator.mapping.plan import describe_mapping
from simulator.metrics.totals import (RUN_TERMS, OperatorResult, Totals, add_totals,
                                      invocation_totals, operator_result)
from simulator.program.tile_program import memory_params
from simulator.search.default import SearchCache
from simulator.search.fusion_plan import FusionGroup, fusion_groups
from simulator.lowering import lower_resolved
from simulator.search.resolve import fusion_adjacency, resolve_checked

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class RunResult:
    """A simulated workload: its inputs, the engine used, and one result per operator."""

    inputs: Inputs
    engine: str
    engine_reason: str
    operators: list[OperatorResult]
    invocation_cycles: int = 0   # one call's launch and host transfers (invocation.py)
    fusion: tuple[FusionGroup, ...] = ()   # the fusion plan's groups (DESIGN.md 15)
    fusion_adjacency: bool = False         # planned by adjacency: the workload has no edges

    @property
    def platform(self) -> Platform:
        return self.inputs.platform

    @property
    def mapping_mode(self) -> str:
        """Which mapping the run used: the searched default, a heuristic, or a plan
        (named by its file name: the manifest's inputs hold its path and digest, and a
        rerun from another directory reads the same plan by another path)."""
        source = self.inputs.mapping_source
        return describe_mapping(self.inputs.mapping,
                                PurePath(source.path).name if source else None)

    @property
    def operators_by_layer_type(self) -> dict[str, list[OperatorResult]]:
        """Operators grouped by layer_type, groups in order of first appearance."""
        groups: dict[str, list[OperatorResult]] = {}
        for op in self.operators:
            groups.setdefault(op.lowered.layer_type, []).append(op)
        return groups

    @property
    def by_layer_type(self) -> dict[str, Totals]:
        return {name: add_totals(op.totals for op in ops)
                for name, ops in self.operators_by_layer_type.items()}

    @cached_property
    def operators_total(self) -> Totals:
        """The operators' totals alone, without the call's cost."""
        return add_totals(r.totals for r in self.operators)

    @cached_property
    def total(self) -> Totals:
        """The operators' totals plus one call's (the invocation term), if any: their
        sum plus the call's, which is the sum over every operator and the call (each
        field summed left to right; the fastest peak, the first of equal rates)."""
        if not self.invocation_cycles:
            return self.operators_total
        return add_totals([self.operators_total,
                           invocation_totals(self.invocation_cycles, self.platform)])


def link_breakdown(cycles: int) -> Breakdown:
    """A collective's run: all its cycles on the links, none on the array or memory."""
    return Breakdown(**{**dict.fromkeys(RUN_TERMS, 0), "total_cycles": cycles,
                        "collective_cycles": cycles})


def simulate(inputs: Inputs, *, engine: str = "auto",
             progress: Progress | None = None,
             budget: MemoryBudget | None = None, fusion_report: bool = True,
             searches: SearchCache | None = None) -> RunResult:
    """Lower and replay every operator of the workload in order. The tile programs must
    fit `budget` (default: a quarter of RAM for this engine), else nothing runs; a GEMM
    program longer than the budget's block is generated and replayed block by block.
    `searches`: the default search's cache, for a caller that simulates many workloads
    sharing operators (default: one for this call; results are the same either way).
    fusion_report False: the fusion groups' savings (each member lowered, searched and
    replayed alone) are left out, for callers that read totals only."""
    used, reason = choose_engine(engine)
    replay = engine_runner(used)

    def path(source: Source | None) -> str | None:
        return source.path if source else None

    budget = budget or MemoryBudget.default(used)
    searches = SearchCache() if searches is None else searches
    resolved = resolve_checked(
        inputs.workload, inputs.mapping, inputs.platform,
        mapping_source=path(inputs.mapping_source),
        workload_source=path(inputs.workload_source),
        platform_source=path(inputs.platform_source), budget=budget, searches=searches)
    blocks = budget.block_steps
    with tile_programs():
        lowered = lower_resolved([r[:3] for r in resolved], inputs.platform,
                                 mapping_source=path(inputs.mapping_source),
                                 workload_source=path(inputs.workload_source),
                                 block_steps=blocks)
        memory = memory_params(inputs.platform)
        results = []
        for index, op in enumerate(lowered):
            if progress:
                progress(index, len(lowered), op.name)
            run = link_breakdown(op.collective.cycles) if op.collective else \
                replay(op.program, memory, block_steps=blocks).breakdown
            results.append(operator_result(op, run, inputs.platform, used))
        if progress:
            progress(len(lowered), len(lowered), "")
        groups = fusion_groups(resolved, lowered, inputs.mapping, inputs.platform,
                               lambda op: replay(op.program, memory,
                                                 block_steps=blocks).breakdown.total_cycles
                               * op.instances, searches) if fusion_report else []
    adjacency = bool(groups) and fusion_adjacency(inputs.workload, inputs.mapping)
    result = RunResult(inputs, used, reason, results,
                       invocation_cycles(inputs.workload, inputs.platform), tuple(groups),
                       adjacency)
    check_finite_energy(result.total, path(inputs.platform_source))
    return result


def check_finite_energy(total: Totals, platform_source: str | None) -> None:
    """A run's energy within a double's range: energy coefficients that valid files
    may hold (1e300 pJ per MAC) would otherwise write inf into tables and JSON."""
    if not math.isfinite(total.energy_pj):
        raise AccsimError("the run's energy passes a double's range (inf pJ): an energy "
                          "coefficient or static power is too large", file=platform_source,
                          field="energy")


def git_commit() -> str | None:
    """The commit of the checkout the package runs from, if it runs from one."""
    import subprocess  # here: only a result's manifest asks (2 ms of every start-up)
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(simulator.__file__).parent, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def manifest(result: RunResult) -> dict:
    """What produced a result: versions, engine, the canonical inputs embedded, and the
    assumed (and fitted) platform values it used, where the platform says which."""
    inputs = result.inputs

    def embedded(model, source: Source | None) -> dict:
        return {"path": source.path if source else None,
                "sha256": source.sha256 if source else None,
                "canonical": model.model_dump(mode="json")}

    listed = inputs.platform.assumptions()
    return {
        "accsim_version": simulator.__version__,
        "model_version": simulator.MODEL_VERSION,
        "git_commit": git_commit(),
        "environment": {"python": host.python_version(), "numpy": np.__version__,
                        "numba": version("numba"), "simpy": version("simpy")},
        "engine": result.engine,
        "engine_reason": result.engine_reason,
        "mapping_mode": result.mapping_mode,
        "inputs": {"platform": embedded(inputs.platform, inputs.platform_source),
                   "workload": embedded(inputs.workload, inputs.workload_source),
                   "mapping": embedded(inputs.mapping, inputs.mapping_source)},
    } | ({"assumptions": listed} if listed else {})
