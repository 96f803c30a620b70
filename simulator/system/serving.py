"""Serving on multi-chip replicas (DESIGN.md section 14): a replica is a T x P group of
chips. Serving (simulator.serving) meets the Hugging Face frontend through three
functions; this module offers the same three for one chip of the group, so an
iteration costs one chip's shard with its collectives, the KV cache is per chip
(capacity minus the chip's weight shard, over the chip's KV bytes per token), and
`--replicas` multiplies groups. With P > 1 the replica's micro-batches are pipelined
over its stages (simulator.serving.engine.PipelinedReplica) and the bubble reported.
The plan's overlap hides collective time behind compute in an iteration as it does in
a run of the same step (`hidden_seconds`, simulator.system.overlap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from simulator.inputs.platform import Platform
from simulator.model.formats import whole_bytes_of
from simulator.system.overlap import Step, overlap
from simulator.system.parallelism import SystemPlan, check_plan
from simulator.system.shard import (CONSUMED_BY, insert_model_collectives,
                                    model_footprint, model_limits, shard_config)


@dataclass(frozen=True)
class ChipStats:
    """What serving reads of model_stats, for one chip of the group."""

    weight_bytes: int
    kv_bytes_per_token: int


class ShardedFrontend:
    """The frontend functions serving calls, answering for one chip of a T x P group."""

    def __init__(self, frontend, plan: SystemPlan, platform: Platform, *,
                 platform_file: str | None = None):
        self.frontend = frontend
        self.plan = plan
        self.platform = platform
        self.platform_file = platform_file
        self._sharded: tuple | None = None  # (config, its shard): the last config asked

    def _bytes(self, dtype: str | None) -> int:
        return whole_bytes_of(dtype, self.platform.systolic_array.input_dtypes,
                             file=self.platform_file)

    def load_model_config(self, name_or_path: str):
        config = self.frontend.load_model_config(name_or_path)
        check_plan(self.plan, self.platform, model_limits(config),
                   platform_file=self.platform_file, field=lambda name: f"--{name}")
        return config

    def model_stats(self, config, *, dtype: str | None = None) -> ChipStats:
        size = self._bytes(dtype)
        chip = model_footprint(config, self.plan, tokens=0, kv_tokens=1, logits_rows=0,
                               act_bytes=size, weight_bytes=size, kv_bytes=size)
        return ChipStats(chip.weight_bytes, chip.kv_bytes)

    def _shard(self, config):
        """The model one chip holds, sharded once per config object (serving asks every
        iteration of one)."""
        if self._sharded is None or self._sharded[0] is not config:
            self._sharded = (config, shard_config(config, self.plan))
        return self._sharded[1]

    def iteration_workload(self, config, *, prefill, decode, dtype: str | None = None):
        workload = self.frontend.iteration_workload(
            self._shard(config), prefill=prefill, decode=decode, dtype=dtype)
        tokens = sum(new for new, _ in prefill) + len(decode)
        ops = insert_model_collectives(workload, config, self.plan, tokens=tokens,
                                       act_bytes=self._bytes(dtype))
        return workload.model_copy(update={"operators": ops})


def hidden_seconds(mode: str, units: Sequence[tuple[object, float]],
                   clock_ghz: float) -> float:
    """Seconds of collective time that overlap `mode` hides behind compute in a
    sequence of fusion units, each given as the operator a run lists it under (its
    first) and its simulated seconds (all repetitions): what SystemRun.overlap hides
    in a run of the same operators."""
    if mode == "none":
        return 0.0
    hz = clock_ghz * 1e9
    steps = [Step(op.name, op.kind, Fraction(round(seconds * hz), op.repeat), op.repeat,
                  getattr(op, "collective", None), getattr(op, "chips", 1))
             for op, seconds in units]
    return float(overlap(steps, mode, CONSUMED_BY).hidden_cycles) / hz


def serving_system(plan: SystemPlan, replicas: int, figures: dict, *,
                   micro_batches: int, bubble: float | None) -> dict:
    """The `system` block of a serving result: the chips used, perf per chip and per
    joule. Serving's energy is one chip's of each group; a group's is N times that
    (exact for P = 1: T chips' dynamic and static energy; for P > 1 an upper bound,
    each stage's dynamic energy counted on every stage). The bubble is the stages'
    idle share of the time a micro-batch was in the pipeline (None for P = 1)."""
    chips = plan.chips * replicas
    per_chip = (lambda value: value / chips if value is not None else None)
    per_token = figures["energy_per_token_j"]
    group = per_token * plan.chips if per_token else None
    return {"chips_per_replica": plan.chips, "replicas": replicas, "chips": chips,
            "tp": plan.tp, "pp": plan.pp, "ep": plan.ep,
            "throughput_rps_per_chip": per_chip(figures["throughput_rps"]),
            "tokens_per_s_per_chip": per_chip(figures["tokens_per_s"]),
            "energy_per_token_j": group,
            "tokens_per_j": 1 / group if group else None,
            "micro_batches": micro_batches if plan.pp > 1 else None,
            "pipeline_bubble_fraction": bubble if plan.pp > 1 else None} | (
                {"overlap": plan.overlap} if plan.overlap != "none" else {})
