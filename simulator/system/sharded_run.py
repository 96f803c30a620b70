"""A multi-chip run (DESIGN.md section 14): the plan checked and the per-chip capacity
checked before any work, one chip's shard simulated through the one core entry point,
and the system figures derived from it.

One shard is simulated per distinct shape: the T chips of a stage run identical
shards, and a request's latency is the shard sequence (all stages in turn) plus the
collectives in it, less the collective time the plan's overlap hides behind compute
(simulator.system.overlap; none by default). System figures:
- time_s: the end-to-end time (the simulated sequence, exposed collectives included);
- mfu: the model FLOPs of all chips (T x the sequence's, less the work on padded
  heads, simulator.system.padding) over N x peak x time;
- energy_j: T x the sequence's dynamic energy (ICI included) + N chips' static power
  over the time (chips of idle stages leak too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from simulator.inputs.anchors import relocated
from simulator.metrics.energy import static_power_w
from simulator.output.files import write_file
from simulator.present.run_report import result_dict
from simulator.simulate import Inputs, Progress, RunResult, simulate
from simulator.system.capacity import Capacity, Footprint, check
from simulator.system.overlap import Overlap, Step, overlap
from simulator.system.padding import HeadLayout, head_layout
from simulator.system.parallelism import SystemPlan
from simulator.system.shard import CONSUMED_BY, Sharded


@dataclass(frozen=True)
class SystemRun:
    """A simulated system: the plan, one chip's result, its footprint."""

    plan: SystemPlan
    result: RunResult
    footprint: Footprint
    capacity_bytes: int | None
    tokens: int | None
    heads: HeadLayout | None = None
    capacity: Capacity | None = None  # the check made before the run (None: rerun)

    def overlap(self) -> Overlap:
        """The shard's collective time split into exposed and hidden by the plan."""
        return overlap(shard_steps(self.result), self.plan.overlap, CONSUMED_BY)

    def padding_waste_flops(self) -> int:
        """FLOPs all T chips spend on padded heads."""
        if self.heads is None:
            return 0
        return sum(self.heads.waste_flops(op.lowered.layer_type, op.totals.model_flops)
                   for op in self.result.operators)

    def figures(self) -> dict:
        """The result JSON's `system` block."""
        plan, total, platform = self.plan, self.result.total, self.result.platform
        split = self.overlap()
        clock_hz = platform.clock_hz
        time_s = float(total.cycles - split.hidden_cycles) / clock_hz
        collective_s = total.collective_cycles / clock_hz
        dynamic_pj = total.energy_pj - total.energy_static_pj
        energy_j = plan.tp * dynamic_pj * 1e-12 + plan.chips * static_power_w(platform) \
            * time_s
        waste = self.padding_waste_flops()
        flops = plan.tp * total.model_flops - waste
        return {
            "chips": plan.chips, "tp": plan.tp, "pp": plan.pp, "ep": plan.ep,
            "weight_bytes_per_chip": self.footprint.weight_bytes,
            "kv_bytes_per_chip": self.footprint.kv_bytes,
            "activation_bytes_per_chip": self.footprint.activation_bytes,
            "capacity_bytes_per_chip": self.capacity_bytes,
            "time_s": time_s,
            "collective_s": collective_s,
            "communication_fraction": collective_s / time_s if time_s else 0.0,
            "collectives_overlap_compute": plan.overlap != "none",
            "collective_sent_bytes_per_chip": total.collective_sent_bytes,
            "ici_energy_j": plan.tp * total.energy_ici_pj * 1e-12,
            "flops": flops,
            "mfu": flops / (plan.chips * platform.peak_flops * time_s) if time_s else 0.0,
            "energy_j": energy_j,
            "energy_j_per_chip": energy_j / plan.chips,
            "tokens": self.tokens,
            "tokens_per_s_per_chip": self.tokens / time_s / plan.chips
            if self.tokens and time_s else None,
            "overlap": plan.overlap,
            "collective_exposed_s": float(split.exposed_cycles) / clock_hz,
            "collective_hidden_s": float(split.hidden_cycles) / clock_hz,
            "padding": padding_figures(self.heads, waste, plan.tp * total.model_flops),
        }

    def summary_lines(self) -> list[str]:
        f = self.figures()
        capacity = (f"{f['capacity_bytes_per_chip'] / 1e9:.2f} GB"
                    if f["capacity_bytes_per_chip"] else "unmodelled capacity")
        tokens = (f", {f['tokens_per_s_per_chip']:,.1f} tokens/s per chip"
                  if f["tokens_per_s_per_chip"] else "")
        return [
            f"fits on {f['chips']} chips: weights {f['weight_bytes_per_chip'] / 1e9:.2f} GB"
            f" + KV {f['kv_bytes_per_chip'] / 1e9:.2f} GB per chip of {capacity}",
            f"system {self.plan.flags()}: {f['time_s'] * 1e3:,.3f} ms end to end, "
            f"collectives {f['collective_s'] * 1e3:,.3f} ms "
            f"({100 * f['communication_fraction']:.1f}%, " + overlap_words(f) + "); "
            f"MFU {100 * f['mfu']:.1f}% of {f['chips']} chips; energy "
            f"{f['energy_j'] * 1e3:,.3f} mJ (ICI {f['ici_energy_j'] * 1e3:,.3f} mJ)"
            + tokens,
        ] + padding_lines(f["padding"])


def collective_lines(result: RunResult) -> list[str]:
    """Each distinct collective of a shard, as it runs (DESIGN.md section 22): its
    group's placement, the algorithm per dimension, hops and time."""
    seen: dict = {}
    for op in result.operators:
        cost = op.lowered.collective
        if cost is not None and cost.time_s:
            key = (cost.kind, cost.chips, cost.payload_bytes)
            count = seen.get(key, (cost, 0))[1]
            seen[key] = (cost, count + op.lowered.runs)
    return [f"collective {cost.kind} of {cost.payload_bytes:,} B over {cost.chips} chips"
            f" ({cost.group}): {cost.algorithm}, {cost.hops} hops, "
            f"{cost.time_s * 1e6:,.2f} us x {count:,}" for cost, count in seen.values()]


def shard_steps(result: RunResult) -> list[Step]:
    """The shard's operators in order, each for one repetition of its body."""
    return [Step(op.lowered.name, op.lowered.kind,
                 Fraction(op.totals.cycles, op.lowered.repeat), op.lowered.repeat,
                 op.lowered.collective.kind if op.lowered.collective else None,
                 op.lowered.collective.chips if op.lowered.collective else 1)
            for op in result.operators]


def overlap_words(f: dict) -> str:
    """How the summary says what the collectives overlap."""
    if f["overlap"] == "none":
        return "not overlapped with compute"
    return (f"{f['collective_exposed_s'] * 1e3:,.3f} ms exposed, "
            f"{f['collective_hidden_s'] * 1e3:,.3f} ms hidden behind compute by overlap "
            f"{f['overlap']}")


def padding_figures(heads: HeadLayout | None, waste_flops: int,
                    computed_flops: int) -> dict | None:
    """The `padding` block: the heads as padded and the FLOPs spent on padding."""
    if heads is None:
        return None
    return {"heads": heads.heads, "padded_heads": heads.padded_heads,
            "heads_per_chip": heads.per_chip, "kv_heads": heads.kv_heads,
            "kv_heads_per_chip": heads.kv_per_chip, "waste_flops": waste_flops,
            "waste_fraction": waste_flops / computed_flops if computed_flops else 0.0}


def padding_lines(padding: dict | None) -> list[str]:
    """The summary's `padding` line, where any head is padded."""
    if not padding or padding["padded_heads"] == padding["heads"]:
        return []
    return [f"padding: {padding['heads']} query heads padded to {padding['padded_heads']}"
            f" ({padding['heads_per_chip']} per chip; {padding['kv_heads']} KV heads, "
            f"{padding['kv_heads_per_chip']} per chip); "
            f"{padding['waste_flops'] / 1e9:,.3f} GFLOP on padded heads, "
            f"{100 * padding['waste_fraction']:.1f}% of the FLOPs computed, "
            "not counted as model FLOPs"]


def simulate_system(inputs: Inputs, plan: SystemPlan, sharded: Sharded, *,
                    engine: str = "auto", progress: Progress | None = None,
                    ignore_capacity: bool = False) -> SystemRun:
    """Check the per-chip capacity (nothing is simulated if it fails, unless
    `ignore_capacity`), then simulate one chip's shard (built by
    simulator.system.shard, which checked the plan)."""
    platform_file = inputs.platform_source.path if inputs.platform_source else None
    platform = inputs.platform
    fit = check(plan, sharded.sizing, platform, ignore=ignore_capacity,
                platform_file=platform_file)
    shard_inputs = Inputs(platform, sharded.workload, inputs.mapping,
                          inputs.platform_source, inputs.workload_source,
                          inputs.mapping_source)
    result = simulate(shard_inputs, engine=engine, progress=progress)
    return SystemRun(plan, result, fit.footprint, fit.capacity_bytes, sharded.tokens,
                     sharded.heads, fit)


def rerun_figures(recorded: dict, result: RunResult) -> dict:
    """A recorded `system` block recomputed on a rerun of its shard (for accsim
    verify): the plan, footprint, capacity and tokens are taken as recorded (they come
    from the model, which the result does not embed), every timing and energy figure
    from the rerun."""
    plan = SystemPlan(**{key: recorded[key] for key in ("chips", "tp", "pp", "ep")},
                      overlap=recorded.get("overlap", "none"))
    footprint = Footprint(recorded["weight_bytes_per_chip"], recorded["kv_bytes_per_chip"],
                          recorded["activation_bytes_per_chip"])
    padding = recorded.get("padding")
    heads = head_layout(padding["heads"], padding["kv_heads"], plan.tp) if padding \
        else None
    run = SystemRun(plan, result, footprint, recorded["capacity_bytes_per_chip"],
                    recorded["tokens"], heads)
    return json.loads(json.dumps(run.figures()))


def system_dict(run: SystemRun, llm: dict | None = None) -> dict:
    """The full result of one chip's shard with the `system` block beside it (and the
    LLM figures and capacity stamp where they apply)."""
    capacity = run.capacity.record() if run.capacity else None
    return result_dict(run.result, system=run.figures(), llm=llm, capacity=capacity)


def write_system_json(run: SystemRun, path: str | Path, llm: dict | None = None) -> None:
    content = relocated(system_dict(run, llm), Path(path).parent)
    write_file(path, json.dumps(content, indent=1) + "\n")
