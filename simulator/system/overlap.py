"""Collectives that overlap compute (DESIGN.md section 14, `system.overlap`): how much
of one chip's collective time is exposed (the chip waits on the links) and how much is
hidden behind compute, from the simulated shard's operators in order.

The dependency rule, from the workload's order: a collective's input is the output of
the operator just before it, and its output is read by the operator just after it,
unless `consumed_by` names a later reader (the MoE combine is read by the residual add,
after the shared experts, which read the layer's own input). Operators between a
collective and its reader do not depend on it. Operators repeated together (one
decoder layer, repeated over the layers) form a body; every collective of a body
finishes before its next repetition starts.

- none: every operator waits for the one before it; all collective time is exposed.
- independent: one chip is one compute stream and one link queue, each in the
  workload's order; an operator starts when its stream is free and the collectives it
  reads have finished, a collective when the link is free and its input is ready.
- decomposed: as independent, and an all-gather read by a GEMM, or a reduce-scatter
  (or the reduce-scatter half of an all-reduce) fed by a GEMM, is split into its p - 1
  ring steps, overlapped with the GEMM cut into p chunks: one step exposed, and
  max(0, step - chunk) for each of the other p - 2 (the section 14 convention). A pair
  is decomposed only where the links are free when its GEMM starts; an all-gather
  keeps the independent schedule where that finishes its GEMM sooner.

Exposed time is the body's span less its compute, so 0 <= exposed <= total and
decomposed <= independent <= none (each adds freedom to the schedule before it).
Arithmetic is exact (fractions of cycles), so hidden + exposed = total exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

OVERLAP_MODES = ("none", "independent", "decomposed")


@dataclass(frozen=True)
class Step:
    """One operator of the shard sequence, for one repetition of its body."""

    name: str
    kind: str                 # the operator kind; "collective" for a collective
    cycles: Fraction          # one repetition's cycles
    repeat: int
    collective: str | None = None  # all_reduce, all_gather, ... (collectives only)
    chips: int = 1            # the collective's ring size

    @property
    def on_links(self) -> bool:
        return self.kind == "collective"


@dataclass(frozen=True)
class Overlap:
    """Collective cycles of the whole shard split into exposed and hidden."""

    mode: str
    total_cycles: Fraction
    exposed_cycles: Fraction

    @property
    def hidden_cycles(self) -> Fraction:
        return self.total_cycles - self.exposed_cycles


def decomposed_exposed(link: Fraction, steps: int, chips: int, gemm: Fraction) -> Fraction:
    """Exposed cycles of `steps` ring steps taking `link` cycles in all, overlapped with
    a GEMM of `gemm` cycles cut into `chips` chunks: one step exposed, then
    max(0, step - chunk) for each other step."""
    step, chunk = link / steps, gemm / chips
    return step + (steps - 1) * max(Fraction(0), step - chunk)


def reduce_scatter_share(step: Step) -> tuple[Fraction, int]:
    """The cycles and ring steps of a collective's reduce-scatter part (an all-reduce
    is a reduce-scatter then an all-gather, each half its time)."""
    if step.collective == "all_reduce":
        return step.cycles / 2, step.chips - 1
    return step.cycles, step.chips - 1


class BodySchedule:
    """One repetition of a body on one compute stream and one link queue."""

    def __init__(self, steps: Sequence[Step], mode: str,
                 consumed_by: Mapping[str, str]) -> None:
        self.steps, self.mode = steps, mode
        self.finish: list[Fraction] = []
        self.start: list[Fraction] = []
        self.compute_free = self.link_free = Fraction(0)
        self.waits: dict[int, list[int]] = {}
        for index, step in enumerate(steps):
            if step.on_links:
                reader = next((later for later in range(index + 1, len(steps))
                               if steps[later].name == consumed_by.get(step.name)),
                              index + 1)
                self.waits.setdefault(reader, []).append(index)

    def ready(self, index: int) -> Fraction:
        """When the operator's inputs are there: its collectives, and for a collective
        the operator before it."""
        times = [self.finish[c] for c in self.waits.get(index, ())]
        if self.steps[index].on_links and index:
            times.append(self.finish[index - 1])
        return max(times, default=Fraction(0))

    def span(self) -> Fraction:
        for index, step in enumerate(self.steps):
            if index < len(self.finish):  # a GEMM placed with the all-gather it reads
                continue
            if step.on_links:
                self.place_collective(index, step)
            else:
                self.place_compute(index, step)
        return max([self.compute_free, self.link_free, *self.finish])

    def record(self, start: Fraction, finish: Fraction) -> None:
        self.start.append(start)
        self.finish.append(finish)

    def place_compute(self, index: int, step: Step) -> None:
        start = max(self.compute_free, self.ready(index))
        self.record(start, start + step.cycles)
        self.compute_free = start + step.cycles

    def gemm_before(self, index: int) -> bool:
        return index > 0 and self.steps[index - 1].kind == "gemm"

    def place_collective(self, index: int, step: Step) -> None:
        decomposes = self.mode == "decomposed" and step.chips > 1
        if decomposes and step.collective == "all_gather" and self.reads_gemm(index):
            self.place_gathered_gemm(index, step)
            return
        ready = self.ready(index)
        if (decomposes and step.collective in ("reduce_scatter", "all_reduce")
                and self.gemm_before(index) and self.link_free <= self.start[index - 1]):
            part, steps = reduce_scatter_share(step)
            gemm = self.steps[index - 1].cycles
            cycles = step.cycles - part + decomposed_exposed(part, steps, step.chips, gemm)
            start = ready
        else:
            cycles, start = step.cycles, max(self.link_free, ready)
        self.record(start, start + cycles)
        self.link_free = start + cycles

    def reads_gemm(self, index: int) -> bool:
        """The all-gather is read by the GEMM right after it, which reads nothing else
        from the links."""
        after = index + 1
        return (after < len(self.steps) and self.steps[after].kind == "gemm"
                and self.waits.get(after) == [index])

    def place_gathered_gemm(self, index: int, step: Step) -> None:
        """An all-gather and the GEMM that reads it (placed together): the better of
        the gather then the GEMM, and the two decomposed into ring steps and chunks."""
        gemm = self.steps[index + 1]
        ready = self.ready(index)
        gather_start = max(self.link_free, ready)
        gather_end = gather_start + step.cycles
        plain_start = max(self.compute_free, gather_end)
        joint_start = max(self.compute_free, ready, self.link_free)
        joint_end = joint_start + gemm.cycles + decomposed_exposed(
            step.cycles, step.chips - 1, step.chips, gemm.cycles)
        if joint_end <= plain_start + gemm.cycles:
            self.record(joint_start, joint_end)      # the gather spans the GEMM
            self.record(joint_start, joint_end)
            self.compute_free = self.link_free = joint_end
        else:
            self.record(gather_start, gather_end)
            self.record(plain_start, plain_start + gemm.cycles)
            self.compute_free, self.link_free = plain_start + gemm.cycles, gather_end


def bodies(steps: Sequence[Step]) -> list[list[Step]]:
    """Runs of consecutive operators repeated the same number of times."""
    runs: list[list[Step]] = []
    for step in steps:
        if runs and runs[-1][0].repeat == step.repeat:
            runs[-1].append(step)
        else:
            runs.append([step])
    return runs


def overlap(steps: Sequence[Step], mode: str,
            consumed_by: Mapping[str, str] | None = None) -> Overlap:
    """The shard's collective time split into exposed and hidden under `mode`."""
    if mode not in OVERLAP_MODES:
        raise ValueError(f"unknown overlap {mode!r}; known: {', '.join(OVERLAP_MODES)}")
    total = sum((s.cycles * s.repeat for s in steps if s.on_links), Fraction(0))
    if mode == "none":
        return Overlap(mode, total, total)
    exposed = Fraction(0)
    for body in bodies(steps):
        compute = sum((s.cycles for s in body if not s.on_links), Fraction(0))
        span = BodySchedule(body, mode, consumed_by or {}).span()
        exposed += (span - compute) * body[0].repeat
    return Overlap(mode, total, exposed)
