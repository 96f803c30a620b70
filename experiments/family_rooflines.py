"""Decode at batch 1 of each shipped model family of DESIGN.md section 21 on
tpu_v5e_like against its roofline bound (the acceptance of issue 45: within 1.2x),
with the cache bytes per token and per request the step reads.

Run: `python experiments/family_rooflines.py [--context N]` (about 10 s). The weight
formats config.json declares fall back where the platform lacks them, as `accsim run`
does (simulator.frontends.hf.llm_command.LlmStep.on)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from simulator.inputs.platform import Platform
from simulator.frontends.hf import decode_workload, load_model_config, model_stats
from simulator.frontends.hf.quantization import fit_formats
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate

MODELS = ("deepseek_r1", "gemma_3_27b", "gpt_oss_20b", "jamba_v0_1",
          "llama_4_scout_17b_16e", "llama_3_1_8b")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=4096)
    args = parser.parse_args()
    platform = load_model(locate("tpu_v5e_like", "platform"), Platform)[0]
    listed = tuple(platform.systolic_array.input_dtypes)
    print(f"decode, batch 1, context {args.context}, tpu_v5e_like")
    print(f"{'model':24} {'simulated ms':>12} {'roofline ms':>11} {'ratio':>6} "
          f"{'cache B/token':>13} {'cache MB/request':>16}")
    hz = platform.clock_ghz * 1e9
    for name in MODELS:
        cfg = load_model_config(name)
        fitted, _ = fit_formats(dict(cfg.weight_formats), listed)
        cfg = replace(cfg, weight_formats=tuple(sorted(fitted.items())))
        total = simulate(Inputs(platform, decode_workload(cfg, batch=1,
                                                          context=args.context),
                                Mapping())).total
        stats = model_stats(cfg)
        print(f"{name:24} {1e3 * total.cycles / hz:12.3f} "
              f"{1e3 * total.roofline_bound_cycles / hz:11.3f} "
              f"{total.cycles / total.roofline_bound_cycles:6.3f} "
              f"{stats.kv_bytes_per_token:13,} "
              f"{stats.kv_bytes_per_request(args.context) / 1e6:16.2f}")


if __name__ == "__main__":
    main()
