"""A multi-chip run (DESIGN.md section 14): the plan checked and the per-chip capacity
checked before any work, one chip's shard simulated through the one core entry point,
and the system figures derived from it.

One shard is simulated per distinct shape: the T chips of a stage run identical
shards, and a request's latency is the shard sequence (all stages in turn) plus the
collectives in it, which overlap no compute. System figures:
- time_s: the end-to-end time (the simulated sequence, collectives included);
- mfu: the FLOPs of all chips (T x the sequence's) over N x peak x time;
- energy_j: T x the sequence's dynamic energy (ICI included) + N chips' static power
  over the time (chips of idle stages leak too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from simulator.energy import static_power_w
from simulator.outputs import write_file
from simulator.report import result_dict
from simulator.simulate import Inputs, Progress, RunResult, simulate
from simulator.system.plan import Footprint, SystemPlan, check_capacity
from simulator.system.shard import Sharded


@dataclass(frozen=True)
class SystemRun:
    """A simulated system: the plan, one chip's result, its footprint."""

    plan: SystemPlan
    result: RunResult
    footprint: Footprint
    capacity_bytes: int | None
    tokens: int | None

    def figures(self) -> dict:
        """The result JSON's `system` block."""
        plan, total, platform = self.plan, self.result.total, self.result.platform
        derived = total.derived(platform)
        time_s = derived["time_s"]
        clock_hz = platform.clock_ghz * 1e9
        collective_s = total.collective_cycles / clock_hz
        dynamic_pj = total.energy_pj - total.energy_static_pj
        energy_j = plan.tp * dynamic_pj * 1e-12 + plan.chips * static_power_w(platform) \
            * time_s
        flops = plan.tp * total.model_flops
        return {
            "chips": plan.chips, "tp": plan.tp, "pp": plan.pp, "ep": plan.ep,
            "weight_bytes_per_chip": self.footprint.weight_bytes,
            "kv_bytes_per_chip": self.footprint.kv_bytes,
            "activation_bytes_per_chip": self.footprint.activation_bytes,
            "capacity_bytes_per_chip": self.capacity_bytes,
            "time_s": time_s,
            "collective_s": collective_s,
            "communication_fraction": collective_s / time_s if time_s else 0.0,
            "collectives_overlap_compute": False,
            "collective_sent_bytes_per_chip": total.collective_sent_bytes,
            "ici_energy_j": plan.tp * total.energy_ici_pj * 1e-12,
            "flops": flops,
            "mfu": flops / (plan.chips * platform.peak_flops * time_s) if time_s else 0.0,
            "energy_j": energy_j,
            "energy_j_per_chip": energy_j / plan.chips,
            "tokens": self.tokens,
            "tokens_per_s_per_chip": self.tokens / time_s / plan.chips
            if self.tokens and time_s else None,
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
            f"({100 * f['communication_fraction']:.1f}%, not overlapped with compute); "
            f"MFU {100 * f['mfu']:.1f}% of {f['chips']} chips; energy "
            f"{f['energy_j'] * 1e3:,.3f} mJ (ICI {f['ici_energy_j'] * 1e3:,.3f} mJ)"
            + tokens,
        ]


def simulate_system(inputs: Inputs, plan: SystemPlan, sharded: Sharded, *,
                    engine: str = "auto", progress: Progress | None = None) -> SystemRun:
    """Check the per-chip capacity (nothing is simulated if it fails), then simulate
    one chip's shard (built by simulator.system.shard, which checked the plan)."""
    platform_file = inputs.platform_source.path if inputs.platform_source else None
    platform = inputs.platform
    capacity = platform.offchip.capacity_bytes
    footprint = check_capacity(plan, sharded.limits, capacity, sharded.footprint,
                               platform_file=platform_file) if capacity else \
        sharded.footprint(plan)
    shard_inputs = Inputs(platform, sharded.workload, inputs.mapping,
                          inputs.platform_source, inputs.workload_source,
                          inputs.mapping_source)
    result = simulate(shard_inputs, engine=engine, progress=progress)
    return SystemRun(plan, result, footprint, capacity, sharded.tokens)


def rerun_figures(recorded: dict, result: RunResult) -> dict:
    """A recorded `system` block recomputed on a rerun of its shard (for accsim
    verify): the plan, footprint, capacity and tokens are taken as recorded (they come
    from the model, which the result does not embed), every timing and energy figure
    from the rerun."""
    plan = SystemPlan(**{key: recorded[key] for key in ("chips", "tp", "pp", "ep")})
    footprint = Footprint(recorded["weight_bytes_per_chip"], recorded["kv_bytes_per_chip"],
                          recorded["activation_bytes_per_chip"])
    run = SystemRun(plan, result, footprint, recorded["capacity_bytes_per_chip"],
                    recorded["tokens"])
    return json.loads(json.dumps(run.figures()))


def system_dict(run: SystemRun) -> dict:
    """The full result of one chip's shard with the `system` block beside it."""
    return {**result_dict(run.result), "system": run.figures()}


def write_system_json(run: SystemRun, path: str | Path) -> None:
    write_file(path, json.dumps(system_dict(run), indent=1) + "\n")
