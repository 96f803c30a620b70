"""Counters safe at scale (issue 41): every byte, step and cycle count is exact for
operands of up to 2**40 elements, on both engines, and what would pass int64 is refused.

The 157,440-token Llama-3.1-8B prefill failed with "load_bytes: negative at step 974":
a vector operator's per-tile share of its input, total * edge // rows, passed int64
(4.5e9 input elements x 2.0e9 rows). Shares are now exact (footprint.row_shares), and
programs of more steps than a block stream (GEMMs and vector operators alike).

The DES engine keeps Python objects per step (about 1 KB and 20 us a step), so the
extreme shapes it replays are cut into at most 64 steps (tiles of up to 2**40 elements
on a platform with buffers to hold them); the fast engine replays the same shapes as
streams of 16-step blocks, its counters from the loop nest's closed form, so the two
engines' counters come from independent forms of the loop nest.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from platforms import make_platform

from simulator.engines.fast import run_fast
from simulator.errors import AccsimError
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.workload import Workload
from simulator.limits import MemoryBudget
from simulator.lowering import lower_vector
from simulator.lowering.vector_stream import VectorStream
from simulator.mapping.footprint import row_shares
from simulator.mapping.plan import EpilogueMember, Mapping, Tiling, TilingSpec
from simulator.model.loop_nest import c_offchip_bytes, lru_fetches
from simulator.program.tile_program import memory_params
from simulator.simulate import Inputs, simulate

SCALE = settings(max_examples=60, deadline=None)
BIG_BUFFER = 2**44
# A 128 x 128 array whose buffers hold a tile of 2**40 elements, so extreme operands
# are cut into few steps.
HUGE = make_platform(systolic_array={"rows": 128, "cols": 128},
                     buffers={"ifmap_bytes": BIG_BUFFER, "weight_bytes": BIG_BUFFER,
                              "output_bytes": BIG_BUFFER},
                     vector_unit={"lanes": 128})
E, ACC, OUT = 1, 4, 1    # the test platform's int8 inputs, int32 accumulators, int8 out


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 2**51), rows=st.integers(1, 2**48), data=st.data())
def test_row_shares_are_exact_past_int64(total, rows, data):
    edges = sorted(data.draw(st.lists(st.integers(0, rows), min_size=1, max_size=8)))
    got = row_shares(total, np.array(edges, np.int64), rows)
    assert got.tolist() == [total * e // rows for e in edges]


def _vector_op(kind: str, size: int) -> dict:
    if kind == "pool":   # rows of unequal share of the input
        return {"name": "v", "layer_type": "pool", "kind": "pool", "batch": 1,
                "h": size + 3, "w": 7, "channels": 3, "kh": 3, "kw": 2, "stride": 2}
    if kind == "norm":
        return {"name": "v", "layer_type": "norm", "kind": "norm", "rows": size,
                "cols": 96}
    return {"name": "v", "layer_type": "act", "kind": "elementwise", "op": kind,
            "elements": size}


@SCALE
@given(kind=st.sampled_from(["mul", "add", "silu", "norm", "pool"]),
       size=st.integers(1, 600), rows_per_tile=st.integers(1, 200),
       block=st.sampled_from([1, 3, 16, 10**6]), gated=st.booleans())
def test_a_streamed_vector_program_is_the_whole_one(kind, size, rows_per_tile, block,
                                                    gated):
    platform = make_platform(buffers={"ifmap_bytes": 2**30, "weight_bytes": 2**30,
                                      "output_bytes": 2**30})
    ops = Workload.model_validate({"name": "w", "operators": [
        _vector_op(kind, size),
        {"name": "g", "layer_type": "act", "kind": "elementwise", "op": "mul",
         "elements": 1}]}).operators
    op = ops[0]
    members = ()
    if gated:   # a vector run: a binary member streams its second operand per tile
        gate = ops[1].model_copy(update={"elements": op.vector().output_elements})
        members = (EpilogueMember(gate, streamed=True),)
    tiling = Tiling(min(rows_per_tile, op.vector().rows), 1, 1, "mnk", "os", depth=2)
    whole = lower_vector(op, tiling, platform, fused=members)
    streamed = lower_vector(op, tiling, platform, fused=members, block_steps=block)
    assert streamed.counters == whole.counters
    if whole.program.steps > block:
        assert isinstance(streamed.program, VectorStream)
        gathered = streamed.program.materialize()
        for name in ("load_bytes", "compute_cycles", "vector_cycles", "acquire",
                     "release", "store_bytes", "reload_of"):
            np.testing.assert_array_equal(getattr(gathered, name),
                                          getattr(whole.program, name), err_msg=name)
        assert streamed.program.compute_total() == whole.program.compute_total()
    memory = memory_params(platform)
    assert run_fast(streamed.program, memory, block_steps=block).breakdown == \
        run_fast(whole.program, memory).breakdown
    # The counters are the tensors' bytes: each tile's shares add up to them.
    c, shape = whole.counters, op.vector()
    loads = shape.input_elements * E + sum(shape.output_elements * E for _ in members)
    assert c.sram_read == {"ifmap": loads, "output": shape.output_elements * E}
    assert int(whole.program.load_bytes.sum()) == (0 if whole.onchip_home else loads)


def test_the_157440_token_prefills_gate_multiply_lowers():
    """The operator and tiling that failed: mlp_gate_mul of Llama-3.1-8B at 1230 x 128
    tokens (2,257,059,840 elements, two inputs) in tiles of 2,095,692 elements."""
    platform = load_inputs("tpu_v5e_like", "gemm_4096", None).platform
    op = Workload.model_validate({"name": "w", "operators": [
        {"name": "mlp_gate_mul", "layer_type": "mlp.act", "kind": "elementwise",
         "op": "mul", "elements": 2_257_059_840}]}).operators[0]
    lowered = lower_vector(op, Tiling(2_095_692, 1, 1, "mnk", "os", depth=2), platform)
    program = lowered.program
    assert program.steps == 1077
    assert (program.load_bytes >= 0).all() and (program.store_bytes >= 0).all()
    assert int(program.load_bytes.sum()) == 2 * 2_257_059_840 * 2     # bf16 inputs
    assert int(program.store_bytes.sum()) == 2_257_059_840 * 2
    assert lowered.counters.offchip_read == {"a": 2 * 2_257_059_840 * 2}


def _gemm_shapes():
    """(M, N, K) with every operand at most 2**40 elements and the largest of them at
    least 2**36, and tile counts per dim (so that a run has at most 64 steps)."""
    def shapes(m):
        return st.integers(max(0, 36 - m), 40 - m).flatmap(
            lambda k: st.integers(0, 40 - max(m, k)).map(
                lambda n: (2**m + (m > 3), 2**n, 2**k - (k > 3))))
    return st.tuples(st.integers(0, 40).flatmap(shapes),
                     st.tuples(*[st.sampled_from([1, 2, 4])] * 3))


def _simulated(ops, spec: dict, engine: str, block_steps: int | None = None):
    workload = Workload.model_validate({"name": "w", "operators": ops})
    budget = MemoryBudget(2**33, MemoryBudget.default(engine).bytes_per_step,
                          block_steps=block_steps)
    return simulate(Inputs(HUGE, workload, Mapping(default=TilingSpec(**spec))),
                    engine=engine, budget=budget).operators[0]


def _inside(order: str, counts: dict, dim: str) -> int:
    return math.prod(counts[d] for d in order[order.index(dim) + 1:])


@SCALE
@given(case=_gemm_shapes(), order=st.sampled_from(["mnk", "nkm", "kmn", "knm"]),
       dataflow=st.sampled_from(["os", "ws", "is"]), depth=st.integers(1, 2))
def test_extreme_gemms_count_exactly_on_both_engines(case, order, dataflow, depth):
    (m, n, k), (cm, cn, ck) = case
    tm, tn, tk = -(-m // cm), -(-n // cn), -(-k // ck)
    ops = [{"name": "g", "layer_type": "fc", "kind": "gemm", "m": m, "n": n, "k": k}]
    spec = dict(heuristic="array_aligned", tm=tm, tn=tn, tk=tk, loop_order=order,
                dataflow=dataflow, depth=depth)
    des = _simulated(ops, spec, "simpy")             # whole program, step by step
    fast = _simulated(ops, spec, "fast", block_steps=16)  # streamed, closed form
    assert fast.lowered.counters == des.lowered.counters
    assert fast.run == des.run
    c = des.lowered.counters
    counts = {"m": -(-m // tm), "n": -(-n // tn), "k": -(-k // tk)}
    a_passes = int(lru_fetches(counts["n"], _inside(order, counts, "n"), c.slots["ifmap"]))
    b_passes = int(lru_fetches(counts["m"], _inside(order, counts, "m"),
                               c.slots["weight"]))
    g = type("G", (), {"m": m, "n": n})
    assert c.macs == m * n * k
    assert c.compulsory == {"a": m * k * E, "b": k * n * E, "c": m * n * OUT}
    assert c.offchip_read["a"] == a_passes * m * k * E
    assert c.offchip_read["b"] == b_passes * k * n * E
    assert c.offchip_read["c"] + c.offchip_write == \
        int(c_offchip_bytes(g, OUT, ACC, counts["k"], c.spills))
    assert c.useful_array_cycles == m * n * k / (128 * 128)
    everything = [c.macs, c.offchip_write, *c.offchip_read.values(),
                  *c.sram_read.values(), *c.sram_write.values(),
                  *c.sram_read_elements.values(), *vars(des.run).values()]
    assert all(value >= 0 for value in everything)
    assert des.run.busy_cycles >= c.useful_array_cycles
    assert des.run.total_cycles >= max(c.useful_array_cycles,
                                       sum(c.offchip_read.values()) / HUGE.bytes_per_cycle)


@SCALE
@given(exponent=st.integers(30, 40), steps=st.integers(1, 64),
       kind=st.sampled_from(["mul", "add", "silu"]))
def test_extreme_vector_operators_count_exactly_on_both_engines(exponent, steps, kind):
    elements = 2**exponent - 3
    ops = [_vector_op(kind, elements)]
    spec = dict(heuristic="array_aligned", rows_per_tile=-(-elements // steps), depth=2)
    des = _simulated(ops, spec, "simpy")
    fast = _simulated(ops, spec, "fast", block_steps=4)
    assert fast.lowered.counters == des.lowered.counters
    assert fast.run == des.run
    c = des.lowered.counters
    inputs = 2 if kind in ("mul", "add") else 1
    assert c.offchip_read == {"a": inputs * elements * E}
    assert c.offchip_write == elements * E
    assert c.vector_elements == elements
    cost = getattr(HUGE.vector_unit.cycles_per_element, kind)
    tiles = np.diff(np.minimum(np.arange(steps + 1) * spec["rows_per_tile"], elements))
    assert des.run.busy_cycles == sum(-(-int(t) // 128) * cost for t in tiles if t)


def test_what_would_pass_int64_is_refused_naming_the_operator():
    """2**60 MACs in 2**60 one-element steps, each waiting 2**32 cycles of latency: the
    cycles pass int64 (the workload's own check, its FLOPs, passes); refused before
    any lowering, naming the operator and the limit."""
    slow = make_platform(offchip={"latency_cycles": 2**32})
    workload = Workload.model_validate({"name": "w", "operators": [
        {"name": "g", "layer_type": "fc", "kind": "gemm", "m": 2**20, "n": 2**20,
         "k": 2**20}]})
    spec = TilingSpec(heuristic="array_aligned", tm=1, tn=1, tk=1)
    with pytest.raises(AccsimError, match=re.escape("past int64 (2**62 allowed)")) as caught:
        simulate(Inputs(slow, workload, Mapping(default=spec)),
                 budget=MemoryBudget(2**33))
    assert caught.value.field == "operators.g"
