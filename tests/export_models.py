"""A tiny Llama-shaped config.json for the export tests: every table of an export is
filled from it in seconds, where a real model's grids take minutes."""

import json
from pathlib import Path

from simulator.collectives.cost import collective_cost
from simulator.inputs.platform import Platform
from simulator.inputs.loader import load_model, locate
from simulator.mapping.plan import Mapping
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload

TINY = {"_name_or_path": "acme/tiny-llama", "architectures": ["LlamaForCausalLM"],
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "vocab_size": 1000, "max_position_embeddings": 512, "torch_dtype": "bfloat16"}
TINY_ID = "acme/tiny-llama"


def tiny_config(folder: Path, **changes) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps({**TINY, **changes}))
    return path


def platform(name: str = "tpu_v5e_like") -> Platform:
    return load_model(locate(name, "platform"), Platform)[0]


def simulated_seconds(op, name: str = "tpu_v5e_like") -> float:
    """One layer of `op` simulated on its own, independently of the export's memo."""
    p = platform(name)
    single = op.model_copy(update={"repeat": 1, "inputs": None})
    total = simulate(Inputs(p, Workload(name="t", operators=[single]), Mapping())
                     ).operators_total
    return total.cycles / (p.clock_ghz * 1e9)


def run_seconds(operators, name: str = "tpu_v5e_like") -> float:
    """The operators (repeats dropped, edges kept) simulated as one workload, as
    `accsim run` simulates a step: fused by the default plan."""
    p = platform(name)
    ops = [op.model_copy(update={"repeat": 1}) for op in operators]
    total = simulate(Inputs(p, Workload(name="t", operators=ops), Mapping())
                     ).operators_total
    return total.cycles / (p.clock_ghz * 1e9)


def layer_and_head(workload) -> tuple[list, list]:
    """An iteration's operators of one layer (its collectives included), and its head
    (final norm, LM head; the final norm's edge from the layer dropped)."""
    head = [op for op in workload.operators if op.name in ("final_norm", "lm_head")]
    layer = [op for op in workload.operators if op not in head]
    return layer, [head[0].model_copy(update={"inputs": None}), *head[1:]]


def layer_compute_seconds(layer, name: str = "tpu_v5e_like") -> float:
    """The layer as `accsim run` simulates it, less its collectives (the tools time
    those from their own tables or networks)."""
    p = platform(name)
    links = sum(collective_cost(op.collective, op.payload_bytes, op.chips, p).time_s
                for op in layer if op.kind == "collective")
    return run_seconds(layer, name) - links


# A layer's exported rows are its fusion units costed one by one (as `accsim serve`
# costs them); `accsim run` simulates the layer whole. The two differ where a fused
# norm's place depends on the producer's tiling (simulator.search.resolve.fusion_units):
# at most 1.4% on the tiny model's grids (measured over prefill 1-512 tokens and
# decode batches 1-64).
RUN_AGREEMENT = 0.02
