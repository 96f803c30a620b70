"""Bottleneck classes: one synthetic operator per class, and the classes the shipped
platforms give to operators whose behaviour is known (DESIGN.md section 4)."""

from __future__ import annotations

import pytest

from platforms import make_platform
from simulator.metrics.bottleneck import CLASSES, RULES, classify
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.loader import locate
from simulator.inputs.platform_file import load_platform
from simulator.inputs.platform import Platform
from simulator.mapping.plan import Mapping, TilingSpec
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Collective, Elementwise, Gemm, Workload

FAST = dict(offchip={"bandwidth_gbps": 1e6, "latency_cycles": 0}, dma={"setup_cycles": 0})
SLOW_FAR = dict(offchip={"bandwidth_gbps": 16.0, "latency_cycles": 100})
OS_8 = dict(tm=8, tn=8, dataflow="os", loop_order="mnk")


def gemm(name, m, n, k):
    return Gemm(name=name, layer_type="x", kind="gemm", m=m, n=n, k=k)


SYNTHETIC = {
    # M=1 row streaming 64x256 int8 weights at 1 byte/cycle: the server never rests.
    "memory-bandwidth": (gemm("g", 1, 64, 256), dict(dataflow="os"),
                         dict(offchip={"bandwidth_gbps": 1.0, "latency_cycles": 0})),
    # GELU at 4 cycles per element on 8 lanes, with memory that keeps up.
    "vector": (Elementwise(name="g", layer_type="x", kind="elementwise", elements=100000,
                           op="gelu"), {}, FAST),
    # Full 8x8 folds streaming K=2048: fill 14 cycles per 2048.
    "compute": (gemm("g", 64, 64, 2048), dict(tk=256, **OS_8), FAST),
    # K=4: each fold streams 4 cycles after 14 of fill.
    "array-fill": (gemm("g", 64, 64, 4), dict(tk=4, **OS_8), FAST),
    # M=1 on 8 array rows: 7/8 of every fold is padding.
    "mapping": (gemm("g", 1, 64, 2048), dict(tm=1, tn=8, tk=256, dataflow="os",
                                               loop_order="mnk"), FAST),
    # One-tile A and B buffers refetch every tile (2.4x compulsory); depth 1 and 112
    # cycles of latency stall every step while the server idles.
    "buffer-capacity": (gemm("g", 32, 16, 64), dict(tk=16, depth=1, **OS_8),
                        dict(buffers={"ifmap_bytes": 128, "weight_bytes": 128}, **SLOW_FAR)),
    # The same without the small buffers: stalls on latency alone.
    "memory-latency": (gemm("g", 32, 16, 64), dict(tk=16, depth=1, **OS_8), SLOW_FAR),
    # A collective runs on the chip-to-chip links alone.
    "interconnect": (Collective(name="g", layer_type="x", kind="collective",
                                collective="all_reduce", payload_bytes=4096, chips=4), {},
                     dict(interconnect={"topology": "ring", "ports_per_chip": 2,
                                        "link_bandwidth_gbps": 10.0,
                                        "link_latency_cycles": 10, "efficiency": 1.0,
                                        "pj_per_byte": 1.0})),
    # Every 8x8 output tile (K=8: 22 array cycles) copied out of the accumulators at one
    # element per cycle: 64 vector cycles per tile, the array waits on its slots.
    "evacuation": (gemm("g", 64, 64, 8), dict(tk=8, **OS_8),
                   dict(systolic_array={"output_path": "vector", "evacuation": {
                       "elements_per_cycle": 1, "tile_cycles": 0}}, **FAST)),
    # 7 of 8 rows, K=24: useful 55%, array fill 36%, padding 8%, no stalls to speak of.
    "balanced": (gemm("g", 7, 64, 24), dict(tm=7, tn=8, tk=24, dataflow="os",
                                             loop_order="mnk"), FAST),
}


def test_every_class_has_a_synthetic_operator():
    assert set(SYNTHETIC) == set(CLASSES)


@pytest.mark.parametrize("expected", list(SYNTHETIC))
def test_synthetic_operator_lands_in_its_class(expected):
    op, spec, platform_overrides = SYNTHETIC[expected]
    platform = make_platform(**platform_overrides)
    mapping = Mapping(operators={op.name: TilingSpec(**spec)})
    result = simulate(Inputs(platform, Workload(name="w", operators=[op]), mapping))
    verdict = result.operators[0].verdict
    assert verdict.bottleneck == expected, verdict.as_dict()
    # The evidence lists every rule tried, in precedence order, ending at the verdict.
    tried = [rule["class"] for rule in verdict.as_dict()["rules_tried"]]
    assert tried == list(CLASSES[:len(tried)])
    if expected != "balanced":
        assert tried[-1] == expected and verdict.evidence[-1]["held"]
        assert not any(rule["held"] for rule in verdict.evidence[:-1])


def test_precedence_is_the_table_order():
    # Metrics meeting every rule land in the first one.
    everything = {"offchip_busy_fraction": 0.9, "vector_busy_fraction": 0.9,
                  "useful_fraction": 0.9, "array_setup_fraction": 0.9,
                  "padding_fraction": 0.9, "refetch_ratio": 3.0,
                  "memory_stall_fraction": 0.9}
    assert classify(everything).bottleneck == RULES[0][0] == "memory-bandwidth"
    assert classify({**everything, "offchip_busy_fraction": 0.1}).bottleneck == "vector"


def one_gemm(m, n, k) -> Workload:
    return Workload(name="w", operators=[gemm("g", m, n, k)])


def shipped(name: str) -> Platform:
    return load_platform(locate(name, "platform"))[0]


def verdict_on(platform_name: str, workload: Workload) -> str:
    result = simulate(Inputs(shipped(platform_name), workload, Mapping()))
    return result.operators[0].verdict.bottleneck


def test_large_gemm_is_compute_bound_on_tpu_v5e_like():
    assert verdict_on("tpu_v5e_like", one_gemm(2048, 2048, 2048)) == "compute"


def test_batch_1_gemm_is_bandwidth_bound_unless_every_fold_fills():
    # 2048x2048 weights and a single row: TPU v1 streams 4 MiB at 34 GB/s. TPU v5e
    # shifts the next weight tile in while one streams, so it too waits on HBM; with
    # SCALE-Sim's fold model on one 256x256 array, each weight tile's fill (766 cycles
    # for T = 1) shows instead, where the GEMM runs normal as SCALE-Sim maps it.
    workload = one_gemm(1, 2048, 2048)
    assert verdict_on("tpu_v1", workload) == "memory-bandwidth"
    assert verdict_on("tpu_v5e_like", workload) == "memory-bandwidth"
    one_array = shipped("whatif/tpu_v5e_256x256")
    data = one_array.model_dump()
    data["systolic_array"]["fold_model"] = "scalesim"
    result = simulate(Inputs(Platform.model_validate(data), workload,
                             Mapping(orientation="normal")))
    assert result.operators[0].verdict.bottleneck == "array-fill"


def test_resnet50_on_tpu_v1_first_stage_not_memory_bound_last_stage_is():
    result = simulate(load_inputs("tpu_v1", "resnet50_b1", None))
    verdicts = {op.lowered.name: op for op in result.operators}
    first_stage = [op for name, op in verdicts.items()
                   if name.startswith("res2") and op.lowered.layer_type == "conv3x3"]
    last_stage = [op for name, op in verdicts.items()
                  if name.startswith("res5") and op.lowered.layer_type == "conv3x3"]
    assert len(first_stage) == len(last_stage) == 3
    for op in first_stage:
        # Activations stay in the unified buffer: no off-chip traffic for A or C.
        assert op.lowered.onchip_home
        assert not op.verdict.bottleneck.startswith("memory"), op.verdict.as_dict()
    for op in last_stage:
        assert op.verdict.bottleneck == "memory-bandwidth", op.verdict.as_dict()


@pytest.mark.parametrize("busy", [0.0, 0.49, 0.5, 0.65, 0.79])
def test_a_memory_stalled_operator_is_never_balanced(busy):
    # 85% memory-stalled, the server busy anywhere below the bandwidth rule's 80%:
    # the latency rule takes it (it once required busy < 50%, leaving a gap).
    metrics = {"offchip_busy_fraction": busy, "vector_busy_fraction": 0.0,
               "useful_fraction": 0.1, "array_setup_fraction": 0.03,
               "padding_fraction": 0.02, "refetch_ratio": 1.0,
               "memory_stall_fraction": 0.85}
    verdict = classify(metrics)
    assert verdict.bottleneck == "memory-latency"
    assert "memory_stall_fraction 0.85 >= 0.25" in verdict.reason()
