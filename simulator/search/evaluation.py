"""One tiling of one operator lowered, replayed on the fast engine and totalled: the
search's step (search.operator), and how its results compare (`Evaluation.key`)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.engines.fast import run_fast
from simulator.inputs.platform import Platform
from simulator.inputs.workload import is_attention, is_compute
from simulator.lowering import lower_attention, lower_compute, lower_vector
from simulator.lowering.tile_table import TileTables
from simulator.mapping.plan import EpilogueMember, Tiling
from simulator.metrics.totals import operator_objectives
from simulator.program.streamed import DEFAULT_BLOCK_STEPS
from simulator.program.tile_program import TileProgram


@dataclass(frozen=True)
class Evaluation:
    """A simulated tiling of one operator: totals over all its runs."""

    tiling: Tiling
    cycles: int
    energy_pj: float

    def objective(self, name: str) -> float:
        """cycles, energy (pJ) or edp (pJ x cycles), over all runs."""
        if name == "cycles":
            return float(self.cycles)
        if name == "energy":
            return self.energy_pj
        return self.energy_pj * self.cycles

    def key(self, objective: str) -> tuple:
        """Smaller is better: the objective, then cycles, energy, canonical order."""
        return (self.objective(objective), self.cycles, self.energy_pj,
                self.tiling.sort_key())

    def as_dict(self) -> dict:
        return {"tiling": self.tiling.record(), "cycles": self.cycles,
                "energy_pj": self.energy_pj}

    @classmethod
    def from_dict(cls, data: dict) -> Evaluation:
        return cls(Tiling.from_record(data["tiling"]), int(data["cycles"]),
                   float(data["energy_pj"]))



def evaluate(op, tiling: Tiling, platform: Platform, memory, following,
             fused: tuple[EpilogueMember, ...] | None = None,
             tables: TileTables | None = None) -> Evaluation:
    """Lower, replay with the fast engine, and total one tiling of an operator (with
    `fused`: a GEMM or conv and those epilogue members, as one group; `tables`: the
    operator's per-tile tables so far, lower_compute's or lower_attention's). The
    lowering leaves the program's validation to run_fast, so it is validated once; a
    GEMM's lowering at another depth of a tiling replayed before (lower_compute shares
    its arrays) has only its header checked again."""
    if is_compute(op):
        lowered = lower_compute(op, tiling, platform, following=following, fused=fused,
                                check=False, tables=tables)
    elif is_attention(op):
        lowered = lower_attention(op, tiling, platform, tables=tables, check=False)
    else:
        lowered = lower_vector(op, tiling, platform, fused=fused or (), check=False,
                               block_steps=DEFAULT_BLOCK_STEPS)
    program = lowered.program
    replayed = _replayed_key(program, memory) if is_compute(op) and tables is not None \
        else None
    checked = replayed is not None and _same_arrays(tables.found(replayed), program)
    run = run_fast(program, memory, arrays_checked=checked).breakdown
    if replayed is not None and not checked:
        tables.keep(replayed, program)   # kept, so the ids stay its arrays'
    cycles, energy_pj = operator_objectives(lowered, run, platform)
    return Evaluation(tiling, int(cycles), float(energy_pj))


_ARRAYS = ("load_bytes", "compute_cycles", "vector_cycles", "acquire", "release",
           "store_bytes", "reload_of", "evacuation_cycles")


def _replayed_key(program, memory) -> tuple | None:
    """The TileTables key of a TileProgram's arrays, slots and the memory it is
    replayed under (None for a stream)."""
    if not isinstance(program, TileProgram):
        return None
    return ("replayed arrays", *(id(getattr(program, name)) for name in _ARRAYS),
            program.slots, memory)


def _same_arrays(before: TileProgram | None, program: TileProgram) -> bool:
    """Whether `program` has the very arrays and slots of `before` (a program run_fast
    replayed, so checked)."""
    return before is not None and before.slots == program.slots and all(
        getattr(before, name) is getattr(program, name) for name in _ARRAYS)
