"""Regenerate the review packets of the example studies in experiments/studies/.

Shows what `accsim review` writes for a finished study (ResNet-50 across the shipped
platforms: an SLA missed on the edge array, a rollback trigger that fires, bottleneck
expectations that do not hold) and for Llama-3.1-8B decode on tpu_v5e_like against an
HBM3 what-if (the decode step misses its latency SLA on both, a precision change without
a guardrail is flagged, and the serving sections wait for the serving simulator: not
evaluated, with the reason), and for ResNet-50 on the edge array with a design-space
sweep of its array size and DRAM bandwidth (the latency-power Pareto front; the sweep's
store is kept in the run cache, so a rerun simulates nothing), and for Llama-3.1-8B
decode in bf16 against int8 weights and an fp8 KV cache (precision variants simulated
against the baseline, with their fallbacks and emulated error), and the review
checklist's case study (gemm_winner_loses_in_production: a what-if with twice the
matrix units wins the synthetic 4096^3 GEMM by 1.8x yet misses the serving SLA on the
Splitwise trace, its decode tokens slowed by per-operator dispatch and its p99
latency tail's waiting mostly queueing for KV blocks; tests/test_review_case_study.py checks each claim
against the result files and verifies the packet). Packets go to
experiments/packets/STUDY/ (not checked in: result files record this machine's paths);
open its index.html.

    python experiments/make_packets.py [--out-root DIR] [--no-cache]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.cli import main as accsim

HERE = Path(__file__).resolve().parent
STUDIES = sorted((HERE / "studies").glob("*.yaml"))
OUT_ROOT = HERE / "packets"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-root", type=Path, default=OUT_ROOT)
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args()
    for study in STUDIES:
        command = ["review", str(study.relative_to(Path.cwd()) if study.is_relative_to(
            Path.cwd()) else study), "--out", str(args.out_root / study.stem)]
        if args.no_cache:
            command.append("--no-cache")
        code = accsim(command)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
