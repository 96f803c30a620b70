"""What one chip of a multi-chip system runs (DESIGN.md section 14): the workload's
shard under a plan, with the collectives it waits on inserted where they happen, and
its per-chip footprint for the capacity check.

The simulated sequence is what one request passes through, each operator on the chip
that runs it: the tensor-parallel shard of every layer (identical on the T chips of a
stage, so one is simulated), the P - 1 point-to-point transfers between stages, and the
all-reduces and all-to-alls. Pipeline stages hold different layers, but one request
visits them in turn, so its latency is the whole shard sequence plus the transfers.

Hugging Face models (Megatron): heads split T ways, padded up to a multiple of T where
T does not divide them (KV heads split or replicated as the chips' query heads need
them; simulator.system.padding), the MLP width T ways, the vocabulary T ways (lm_head
vocab-parallel), one all-reduce of tokens x hidden activations before each residual
add (after o_proj and after the MLP). With E > 1 (E divides T), each chip holds
experts / E experts, each split T / E ways; tokens are dispatched and combined by two
all-to-alls per MoE layer, and the MLP all-reduce remains where T > E.
Plain workloads (tensor_parallel): gemm and conv2d column-parallel (output columns /
channels split T ways), each preceded by an all-gather when its input arrives split;
batched GEMMs, grouped convs and attention split by heads or groups where they divide;
a GEMM the mapping plan names in `row_parallel` splits its K instead and is followed by
an all-reduce of its (full) output; vector operators work on their input as it lies;
pipeline stages split the operator list.
"""

from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import dataclass, replace

from simulator.inputs.platform import Platform
from simulator.model.formats import ceil_element_bytes, whole_bytes, whole_bytes_of
from simulator.frontends.hf.config import ModelConfig
from simulator.frontends.hf.stats import layer_params, role_params
from simulator.frontends.hf.stats import weight_bytes as weight_bytes_of
from simulator.frontends.hf.workloads import experts_touched
from simulator.system.capacity import (LARGEST, SMALLEST, Footprint, Sizing,
                                operator_output_bytes, operators_footprint,
                                planned_sizing, reading_is_open, stored_share)
from simulator.system.padding import HeadLayout, head_layout
from simulator.system.parallelism import ModelLimits, SystemPlan, check_plan
from simulator.inputs.workload import (Attention, Collective, Conv2d, Gemm, Workload,
                                is_collective)


@dataclass(frozen=True)
class Sharded:
    """One chip's share of a workload under a plan, and how to size any plan."""

    workload: Workload
    sizing: Sizing          # the footprint of any plan (simulator.system.capacity)
    tokens: int | None      # tokens one run processes (None: not a token workload)
    heads: HeadLayout | None = None  # a model's heads over T chips (None: no padding)


def collective(name: str, layer_type: str, kind: str, payload_bytes: int, chips: int,
               repeat: int = 1) -> Collective:
    return Collective(name=name, layer_type=layer_type, kind="collective",
                      collective=kind, payload_bytes=max(1, payload_bytes), chips=chips,
                      repeat=repeat)


def stage_layers(layers: int, stages: int) -> list[int]:
    """Layers per pipeline stage: contiguous, the remainder to the first stages."""
    base, extra = divmod(layers, stages)
    return [base + (1 if stage < extra else 0) for stage in range(stages)]


# --- Hugging Face models -------------------------------------------------------------

def shard_config(cfg: ModelConfig, plan: SystemPlan) -> ModelConfig:
    """The model one chip of a tensor-parallel group holds (all layers). Latent
    attention splits its heads (q_b, kv_b, o and the absorbed products per head) and
    keeps the latent down-projections and the latent cache whole on every chip; a
    state-space mixer splits its channels, heads and B/C groups (each chip holds its
    share of the state)."""
    t, heads = plan.tp, model_heads(cfg, plan)
    ssm = cfg.ssm and replace(cfg.ssm, inner=math.ceil(cfg.ssm.inner / t),
                              heads=math.ceil(cfg.ssm.heads / t),
                              groups=math.ceil(cfg.ssm.groups / t))
    return replace(
        cfg, heads=heads.per_chip, kv_heads=heads.kv_per_chip,
        intermediate=math.ceil(cfg.intermediate / t), vocab=math.ceil(cfg.vocab / t),
        moe_intermediate=math.ceil(cfg.moe_intermediate / (t // plan.ep)),
        shared_intermediate=math.ceil(cfg.shared_intermediate / t), ssm=ssm)


def model_heads(cfg: ModelConfig, plan: SystemPlan) -> HeadLayout:
    """The query heads padded to a multiple of T, the KV heads replicated as chips need
    them (simulator.system.padding)."""
    return head_layout(cfg.heads, cfg.kv_heads, plan.tp)


def model_limits(cfg: ModelConfig) -> ModelLimits:
    return ModelLimits(heads=cfg.heads, kv_heads=cfg.kv_heads,
                       experts=cfg.experts or None, layers=cfg.layers)


def stage_weight_params(cfg: ModelConfig, plan: SystemPlan) -> list[int]:
    """Weight parameters one chip of each pipeline stage holds: its layers' shards, with
    the embedding on the first stage and the final norm and lm_head on the last."""
    shard = shard_config(cfg, plan)
    experts = cfg.experts // plan.ep if cfg.moe else 0
    stages = _stage_kinds(cfg, plan)
    embed = shard.vocab * shard.hidden
    norm = shard.hidden * (2 if cfg.family.norm == "layer" else 1)
    positions = (cfg.max_positions or 0) * cfg.hidden if cfg.family.learned_positions else 0
    head = embed  # lm_head, or the tied embedding the last stage multiplies by
    if plan.pp == 1:
        outer = [embed + positions + norm + (0 if cfg.tie_embeddings else head)]
    else:
        outer = [embed + positions] + [0] * (plan.pp - 2) + [norm + head]
    return [sum(layer_params(shard, experts, kind) for kind in kinds) + extra
            for kinds, extra in zip(stages, outer)]


def _stage_kinds(cfg: ModelConfig, plan: SystemPlan) -> list[tuple]:
    """The (mixer, ffn) of each pipeline stage's layers."""
    stages, start = [], 0
    for size in stage_layers(cfg.layers, plan.pp):
        stages.append(cfg.kinds[start:start + size])
        start += size
    return stages


def stage_cache_bytes(cfg: ModelConfig, plan: SystemPlan, kinds, *, kv_tokens: int,
                      requests: int | None, kv_bytes: int) -> int:
    """One chip's cache for a stage's layers: `kv_tokens` tokens over `requests`
    requests, each attention layer's capped by its window or chunk per request (None:
    requests unknown, no cap, one request's state), latent attention's latent whole on
    every chip, and each state-space layer's state share."""
    shard = shard_config(cfg, plan)
    per_token = (cfg.mla.cached if cfg.mla else 2 * shard.kv_heads * shard.head_dim)
    caps = {"sliding": cfg.sliding_window, "chunked": cfg.chunk}
    total = 0
    for mixer, _ in kinds:
        if mixer == "ssm":
            total += (requests or 1) * shard.ssm.state_elements
        elif mixer != "none":
            cap = caps.get(mixer)
            total += per_token * (min(kv_tokens, requests * cap) if cap and requests
                                  else kv_tokens)
    return total * kv_bytes


def model_footprint(cfg: ModelConfig, plan: SystemPlan, *, tokens: int, kv_tokens: int,
                    logits_rows: int, act_bytes: int, weight_bytes: int,
                    kv_bytes: int, requests: int | None = None) -> Footprint:
    """Per-chip bytes of the busiest pipeline stage: its weight shards
    (stage_weight_params, each role in the format config.json declares where it
    declares one), the cache of its layers for `kv_tokens` tokens of `requests`
    requests (stage_cache_bytes), and one layer's live activations."""
    shard = shard_config(cfg, plan)
    stages = _stage_kinds(cfg, plan)
    params = stage_weight_params(cfg, plan)
    busiest = max(range(plan.pp), key=lambda i: params[i])
    weights = params[busiest] * weight_bytes
    if cfg.weight_formats:   # declared formats: the model's bytes per parameter
        declared = Fraction(weight_bytes_of(cfg, role_params(cfg), weight_bytes, None),
                            sum(role_params(cfg).values()))
        weights = math.ceil(params[busiest] * declared)
    cache = max(stage_cache_bytes(cfg, plan, kinds, kv_tokens=kv_tokens,
                                  requests=requests, kv_bytes=kv_bytes)
                for kinds in stages)
    width = max(shard.intermediate, shard.moe_intermediate, shard.shared_intermediate)
    live = tokens * (2 * cfg.hidden + (shard.heads + 2 * shard.kv_heads) * shard.head_dim
                     + 2 * width) + logits_rows * shard.vocab
    return Footprint(weights, cache, live * act_bytes)


def insert_model_collectives(workload: Workload, cfg: ModelConfig, plan: SystemPlan, *,
                             tokens: int, act_bytes: int) -> list:
    """The shard's operators with the tensor-, expert- and pipeline-parallel
    collectives in place (DESIGN.md section 14)."""
    t = plan.tp
    activations = tokens * cfg.hidden * act_bytes
    dispatched = math.ceil(tokens / plan.ep) * cfg.experts_per_token * cfg.hidden \
        * act_bytes
    mlp_reduce = t > 1 and (plan.ep < t or not cfg.moe or cfg.shared_intermediate)
    ops = []
    for op in workload.operators:
        # A model with layers of several kinds prefixes each kind's operators
        # ("sliding_moe.attn_residual"); the collectives follow each kind's layers.
        prefix, _, base = op.name.rpartition(".")
        prefix = prefix + "." if prefix else ""
        if base == "experts_gate_up" and plan.ep > 1:
            ops.append(collective(prefix + "ep_dispatch", "collective.ep", "all_to_all",
                                  dispatched, plan.ep, op.repeat))
        if base == "attn_residual" and t > 1:
            ops.append(collective(prefix + "tp_attention_all_reduce", "collective.tp",
                                  "all_reduce", activations, t, op.repeat))
        if base == "mlp_residual" and mlp_reduce:
            ops.append(collective(prefix + "tp_mlp_all_reduce", "collective.tp",
                                  "all_reduce", activations, t, op.repeat))
        if op.name == "final_norm" and plan.pp > 1:
            ops.append(collective("pp_transfer", "collective.pp", "point_to_point",
                                  activations, 2, plan.pp - 1))
        ops.append(expert_share(op, cfg, plan, tokens))
        if base == "experts_down" and plan.ep > 1:
            ops.append(collective(prefix + "ep_combine", "collective.ep", "all_to_all",
                                  dispatched, plan.ep, op.repeat))
    return ops


# Collectives read by an operator other than the one after them (simulator.system.
# overlap): the MoE combine is added in by the residual add, after the shared experts,
# which read the layer's own input and so run while the combine is on the links.
CONSUMED_BY = {"ep_combine": "mlp_residual"}

EXPERT_OPERATORS = ("experts_gate_up", "experts_act", "experts_gate_mul", "experts_down")


def expert_share(op, cfg: ModelConfig, plan: SystemPlan, tokens: int):
    """With E > 1 a chip runs its share of the experts touched (each still sized by
    the busiest expert)."""
    if plan.ep == 1 or op.name.rpartition(".")[2] not in EXPERT_OPERATORS:
        return op
    touched = experts_touched(cfg, tokens)
    mine = math.ceil(touched / plan.ep)
    if isinstance(op, Gemm):
        return op.model_copy(update={"batch": mine})
    return op.model_copy(update={"elements": op.elements // touched * mine})


@dataclass(frozen=True)
class StepSizes:
    """The sizes of an LLM step (simulator.frontends.hf.step.LlmStep) on a platform:
    bytes per element of activations, weights and KV, and the tokens it holds."""

    act: int
    weight: int
    kv: int
    tokens: int        # tokens the step processes
    logits: int        # rows lm_head produces
    kv_tokens: int     # tokens of context the step's requests hold
    requests: int = 1

    @classmethod
    def of(cls, step, platform: Platform, platform_file: str | None = None) -> StepSizes:
        options = step.options
        act = whole_bytes_of(options.dtype, platform.systolic_array.input_dtypes,
                             file=platform_file)
        prefill = step.phase == "prefill"
        tokens = step.batch * (step.length if prefill else 1)
        return cls(act,
                   whole_bytes(options.weight_dtype, field="--weight-dtype")
                   if options.weight_dtype else act,
                   whole_bytes(options.kv_dtype, field="--kv-dtype")
                   if options.kv_dtype else act, tokens,
                   tokens if prefill and options.all_logits else step.batch,
                   step.batch * step.length, step.batch)


def model_sizing(step, platform: Platform, planned: Workload | None = None,
                 platform_file: str | None = None) -> Sizing:
    """The capacity sizing of an LLM step: model_footprint of its config for any plan;
    `planned`: the step's workload under a precision plan, whose weight and KV formats
    the footprint takes (simulator.system.capacity.planned_sizing, as serve's replicas do)."""
    cfg, sizes = step.config, StepSizes.of(step, platform, platform_file)

    def footprint(candidate: SystemPlan) -> Footprint:
        return model_footprint(cfg, candidate, tokens=sizes.tokens,
                               kv_tokens=sizes.kv_tokens, logits_rows=sizes.logits,
                               act_bytes=sizes.act, weight_bytes=sizes.weight,
                               kv_bytes=sizes.kv)

    sizing = Sizing(model_limits(cfg), footprint)
    if planned is None:
        return sizing
    share = stored_share(step.workload().operators, planned.operators, sizes.act)
    whole = footprint(SystemPlan(chips=1)).weight_bytes
    return planned_sizing(sizing, share, whole)


def serving_sizing(cfg: ModelConfig, platform: Platform, *, dtype: str | None,
                   tokens: int, kv_tokens: int, platform_file: str | None = None) -> Sizing:
    """The capacity sizing of serving a model: its weights, the KV cache of `kv_tokens`
    tokens and the activations of a `tokens`-token iteration, at one dtype (the
    platform's by default, as a sharded replica sizes its KV cache)."""
    size = whole_bytes_of(dtype, platform.systolic_array.input_dtypes, file=platform_file)

    def footprint(candidate: SystemPlan) -> Footprint:
        return model_footprint(cfg, candidate, tokens=tokens, kv_tokens=kv_tokens,
                               logits_rows=1, act_bytes=size, weight_bytes=size,
                               kv_bytes=size)

    return Sizing(model_limits(cfg), footprint)


def shard_model(step, plan: SystemPlan, platform: Platform, *,
                platform_file: str | None = None,
                planned: Workload | None = None) -> Sharded:
    """The shard of an LLM step (simulator.frontends.hf.llm_command.LlmStep) under a plan,
    which is checked first; `planned`: the step under a precision plan, whose formats
    its capacity sizing takes (model_sizing)."""
    cfg = step.config
    check_plan(plan, platform, model_limits(cfg), platform_file=platform_file)
    sizes = StepSizes.of(step, platform, platform_file)
    workload = replace(step, config=shard_config(cfg, plan)).workload()
    ops = insert_model_collectives(workload, cfg, plan, tokens=sizes.tokens,
                                   act_bytes=sizes.act)
    shard = workload.model_copy(update={
        "name": f"{workload.name}_{plan_label(plan)}",
        "description": f"One chip of {plan.chips} ({plan.flags()}): "
                       f"{workload.description}",
        "operators": ops})
    return Sharded(Workload.model_validate(shard.model_dump()),
                   model_sizing(step, platform, planned, platform_file), sizes.tokens,
                   model_heads(cfg, plan))


def plan_label(plan: SystemPlan) -> str:
    return f"tp{plan.tp}_pp{plan.pp}" + (f"_ep{plan.ep}" if plan.ep > 1 else "")


# --- plain workloads ---------------------------------------------------------------
# How an activation lies over the T chips of a tensor-parallel group: each chip holds
# all of it (whole) or a 1/T part (split).
WHOLE, SPLIT = "whole", "split"
# What a user's own collective leaves behind.
LAYOUT_AFTER = {"all_reduce": WHOLE, "all_gather": WHOLE, "reduce_scatter": SPLIT}


@dataclass(frozen=True)
class ShardStep:
    """One operator's share on a chip, with the collectives it waits on before it runs
    and those that follow it."""

    before: tuple
    shard: object
    after: tuple


def splits_by_groups(op, t: int) -> bool:
    """Whether the operator splits T ways along independent groups (a batched GEMM's
    batch of heads, a grouped conv's groups, attention's heads with their K/V heads),
    so each chip works on the part of a split input it already holds."""
    if isinstance(op, Gemm):
        return op.batch > 1 and op.batch % t == 0
    if isinstance(op, Conv2d):
        return op.groups % t == 0
    if isinstance(op, Attention):
        return op.heads % t == 0 and (op.kv_heads % t == 0 or t % op.kv_heads == 0)
    return False


def group_shard(op, t: int):
    """The operator's 1/T share along its groups (splits_by_groups holds)."""
    if isinstance(op, Gemm):
        return op.model_copy(update={"batch": op.batch // t})
    if isinstance(op, Conv2d):
        return op.model_copy(update={"groups": op.groups // t, "cin": op.cin // t,
                                     "cout": op.cout // t})
    # attention: K/V heads split with the query heads, or one per chip when fewer
    return op.model_copy(update={"heads": op.heads // t,
                                 "kv_heads": max(1, op.kv_heads // t)})


def column_shard(op, t: int):
    """A GEMM's or conv's share with its output columns / channels split T ways."""
    if isinstance(op, Gemm):
        return op.model_copy(update={"n": math.ceil(op.n / t)})
    return op.model_copy(update={"cout": math.ceil(op.cout // op.groups / t)
                                 * op.groups})


def vector_shard(op, t: int):
    """A vector operator's work split T ways."""
    if hasattr(op, "elements"):
        return op.model_copy(update={"elements": math.ceil(op.elements / t)})
    if hasattr(op, "channels"):
        return op.model_copy(update={"channels": math.ceil(op.channels / t)})
    return op.model_copy(update={"rows": math.ceil(op.rows / t)})


def tensor_parallel(ops: list, t: int, row_parallel: frozenset[str], act: int,
                    layout: str = WHOLE) -> tuple[list[ShardStep], str]:
    """Each operator's share on one of T chips and the collectives its data needs
    (Megatron's rules), walking the activation's layout from `layout`:
    a row-parallel GEMM (named in the plan) splits K, takes its input as it lies and is
    followed by an all-reduce of its partial sums (its output whole); an operator that
    splits by groups (heads, conv groups) takes a split input as it lies; a
    column-parallel GEMM or conv needs its whole input, so an all-gather of a split one
    precedes it (its output split); attention that cannot split by heads runs whole on
    a gathered input; a vector operator works on its input as it lies (a split input:
    split work; a whole one: the whole work on every chip). Returns the steps and the
    layout after the last."""
    steps = []
    for op in ops:
        before, after = (), ()
        if t == 1:
            shard = op
        elif is_collective(op):
            shard, layout = op, LAYOUT_AFTER.get(op.collective, layout)
        elif op.name in row_parallel:
            shard = op.model_copy(update={"k": math.ceil(op.k / t)})
            after = (collective(f"{op.name}_all_reduce", "collective.tp", "all_reduce",
                                operator_output_bytes(shard, act), t, op.repeat),)
            layout = WHOLE
        elif splits_by_groups(op, t):
            shard, layout = group_shard(op, t), SPLIT
        elif isinstance(op, (Gemm, Conv2d, Attention)):
            if layout == SPLIT:
                before = (collective(f"{op.name}_all_gather", "collective.tp",
                                     "all_gather", input_bytes(op, act), t, op.repeat),)
            if isinstance(op, Attention):
                shard, layout = op, WHOLE
            else:
                shard, layout = column_shard(op, t), SPLIT
        else:
            shard = vector_shard(op, t) if layout == SPLIT else op
        steps.append(ShardStep(before, shard, after))
    return steps, layout


def input_bytes(op, dtype_bytes: int) -> int:
    """The bytes of a GEMM's A operand, a conv's input or attention's Q, K and V: what
    an all-gather assembles before the operator runs."""
    if isinstance(op, Gemm):
        return op.batch * op.m * op.k * dtype_bytes
    if isinstance(op, Conv2d):
        return op.batch * op.h * op.w * op.cin * dtype_bytes
    return op.batch * (op.heads * op.q_len + 2 * op.kv_heads * op.kv_len) \
        * op.head_dim * dtype_bytes


def shard_plain(workload: Workload, plan: SystemPlan, platform: Platform, *,
                platform_file: str | None = None,
                row_parallel: frozenset[str] = frozenset()) -> Sharded:
    """A GEMM/conv trace split T ways (tensor_parallel: column-parallel with the
    all-gathers a split input needs, row-parallel with an all-reduce for the GEMMs named
    in `row_parallel`, split by heads or groups where the operator allows) and P ways
    into stages of contiguous operators, one point-to-point transfer of the stage's last
    output between stages. The plan is checked first."""
    limits = ModelLimits(layers=len(workload.operators))
    check_plan(plan, platform, limits, platform_file=platform_file)
    sizes = stage_layers(len(workload.operators), plan.pp)
    act = whole_bytes_of(None, platform.systolic_array.input_dtypes, file=platform_file)
    staged, start, layout = [], 0, WHOLE
    for stage, size in enumerate(sizes):
        steps, layout = tensor_parallel(workload.operators[start:start + size], plan.tp,
                                        row_parallel, act, layout)
        for step in steps:
            staged += [*step.before, step.shard, *step.after]
        start += size
        if stage < plan.pp - 1 and size:
            staged.append(collective(f"pp_transfer_{stage + 1}", "collective.pp",
                                     "point_to_point",
                                     operator_output_bytes(staged[-1], act)
                                     * staged[-1].repeat,
                                     2))
    shard = workload.model_copy(update={
        "name": f"{workload.name}_{plan_label(plan)}",
        "description": f"One chip of {plan.chips} ({plan.flags()}), column-parallel"
                       + (f" but {', '.join(sorted(row_parallel))} row-parallel"
                          if row_parallel and plan.tp > 1 else "") + ": "
                       f"{workload.description}",
        "operators": staged})

    return Sharded(Workload.model_validate(shard.model_dump()),
                   plain_sizing(workload, platform, row_parallel), None)


def plain_sizing(workload: Workload, platform: Platform,
                 row_parallel: frozenset[str] = frozenset()) -> Sizing:
    """The capacity sizing of a plain workload: under any plan, the footprint of the
    busiest stage's shard (simulator.system.capacity.operators_footprint: repeats and KV
    counted), as shard_plain would split it, under the largest reading of the workload
    and, where it leaves the reading open, the smallest too. Operators without a dtype
    take the platform's first input dtype, a packed one (int4) counted at whole bytes per
    element: an upper bound, as tiles are sized (sharding it is refused: shard_plain)."""
    act = ceil_element_bytes(platform.systolic_array.input_dtypes[0])

    def under(reading: str):
        def footprint(candidate: SystemPlan) -> Footprint:
            steps, _ = tensor_parallel(workload.operators, candidate.tp, row_parallel, act)
            shards = [step.shard for step in steps]
            start, stages = 0, []
            for size in stage_layers(len(shards), candidate.pp):
                stages.append(operators_footprint(shards[start:start + size], act,
                                                  reading))
                start += size
            return max(stages, key=lambda need: need.total_bytes)
        return footprint

    return Sizing(ModelLimits(layers=len(workload.operators)), under(LARGEST),
                  under(SMALLEST) if reading_is_open(workload.operators) else None)
