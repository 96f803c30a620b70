"""Sweep specs: axes and links, ranges, sampling counts and seeds, constraints parsed
safely, keys by content, and the Pareto front against a brute-force check."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

import simulator
from simulator.errors import AccsimError
from simulator.sweep.pareto import pareto_mask
from simulator.sweep.jobs import make_plan
from simulator.sweep.sweep_spec import load_sweep

GEMM = """\
name: small_gemm
operators:
  - {name: g, layer_type: fc, kind: gemm, m: 128, n: 128, k: 256}
"""


def write_spec(tmp_path, body: str, name: str = "spec.yaml"):
    (tmp_path / "small_gemm.yaml").write_text(GEMM)
    path = tmp_path / name
    path.write_text("name: test\nplatform: edge_32x32\nworkloads: [small_gemm.yaml]\n"
                    + body)
    return path


def spec_error(tmp_path, body: str) -> str:
    with pytest.raises(AccsimError) as caught:
        make_plan(load_sweep(write_spec(tmp_path, body)))
    return caught.value.message()


AXES = """\
axes:
  systolic_array.rows: [8, 16, 32]
  systolic_array.cols: [8, 16, 32]
  buffers.weight_bytes: {log2_range: [16384, 131072]}
  offchip.bandwidth_gbps: {range: [5, 20, 5]}
"""


def test_grid_takes_every_combination_and_links_move_together(tmp_path):
    plan = make_plan(load_sweep(write_spec(tmp_path, AXES)))
    assert plan.samples == 3 * 3 * 4 * 4 == len(plan.jobs)
    linked = make_plan(load_sweep(write_spec(
        tmp_path, AXES + "  link: [systolic_array.rows, systolic_array.cols]\n")))
    assert linked.samples == 3 * 4 * 4
    assert all(job.point["systolic_array.rows"] == job.point["systolic_array.cols"]
               for job in linked.jobs)
    weights = sorted({job.point["buffers.weight_bytes"] for job in plan.jobs})
    assert weights == [16384, 32768, 65536, 131072]
    assert sorted({job.point["offchip.bandwidth_gbps"] for job in plan.jobs}) == [5, 10, 15, 20]
    job = plan.jobs[0]
    assert job.platform.systolic_array.rows == job.point["systolic_array.rows"]


def test_linked_axes_may_repeat_a_value_where_their_points_differ(tmp_path):
    plan = make_plan(load_sweep(write_spec(tmp_path, (
        "axes:\n  systolic_array.rows: [8, 8, 16]\n  systolic_array.cols: [8, 16, 16]\n"
        "  link: [systolic_array.rows, systolic_array.cols]\n"))))
    assert len(plan.jobs) == 3


def test_float_range_lands_on_its_end(tmp_path):
    plan = make_plan(load_sweep(write_spec(
        tmp_path, "axes:\n  clock_ghz: {range: [0.5, 1.0, 0.1]}\n")))
    assert [job.point["clock_ghz"] for job in plan.jobs] == [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


@pytest.mark.parametrize("method", ["random", "lhs"])
def test_random_and_lhs_give_n_points_reproducible_by_seed(tmp_path, method):
    def points(seed: int) -> list:
        spec = write_spec(tmp_path, AXES + f"sampling: {{method: {method}, n: 20, "
                          f"seed: {seed}}}\n")
        plan = make_plan(load_sweep(spec))
        assert plan.samples == 20
        return [tuple(sorted(job.point.items())) for job in plan.jobs]

    first = points(7)
    assert first == points(7)
    assert first != points(8)
    if method == "random":
        assert len(first) == len(set(first)) == 20  # distinct, without replacement


def test_lhs_spreads_every_axis_evenly(tmp_path):
    plan = make_plan(load_sweep(write_spec(
        tmp_path, AXES + "sampling: {method: lhs, n: 12, seed: 3}\n")))
    for axis, length in (("systolic_array.rows", 3), ("buffers.weight_bytes", 4)):
        counts = Counter(job.point[axis] for job in plan.jobs)
        assert len(counts) == length and set(counts.values()) == {12 // length}


@pytest.mark.parametrize("body, fragments", [
    ("axes:\n  systolic_array.rowz: [8]\n",
     ["axes.systolic_array.rowz", "systolic_array has no 'rowz'", "rows, cols"]),
    ("axes:\n  systolic_aray.rows: [8]\n", ["axes.systolic_aray.rows", "no 'systolic_aray'"]),
    ("axes:\n  buffers: [8]\n", ["axes.buffers", "is a table"]),
    ("axes:\n  systolic_array.rows: [8, -4]\n",
     ["axes.systolic_array.rows[1]", "value -4", "greater than 0"]),
    ("axes:\n  systolic_array.rows: {log2_range: [8, 12]}\n",
     ["axes.systolic_array.rows.log2_range", "powers of two"]),
    ("axes:\n  systolic_array.rows: {range: [8, 4, 1]}\n", ["hi >= lo"]),
    ("axes:\n  systolic_array.rows: [8]\n  systolic_array.cols: [8, 16]\n"
     "  link: [systolic_array.rows, systolic_array.cols]\n",
     ["axes.link", "same number of values"]),
    ("axes:\n  systolic_array.rows: [8]\n  link: [systolic_array.rows, clock_ghz]\n",
     ["axes.link", "'clock_ghz' is not an axis"]),
    ("axes:\n  systolic_array.rows: [8]\nsampling: {method: random}\n",
     ["sampling", "needs n"]),
    ("axes:\n  systolic_array.rows: [8, 16]\nsampling: {method: random, n: 3}\n",
     ["sampling.n", "more than the 2 points"]),
    ("axes:\n  systolic_array.rows: [8]\nobjectives: {speed: max}\n",
     ["objectives", "unknown objective 'speed'"]),
    ("axes:\n  systolic_array.rows: [8]\nmapping: default\n",
     ["mapping", "unknown field"]),    # a point given twice was counted twice and run once
    ("axes:\n  systolic_array.rows: [8, 16, 8]\n",
     ["axes.systolic_array.rows[2]", "value 8 repeats axes.systolic_array.rows[0]"]),
    ("axes:\n  offchip.bandwidth_gbps: [10, 10.0]\n",
     ["axes.offchip.bandwidth_gbps[1]", "value 10.0 repeats"]),
    ("axes:\n  systolic_array.rows: [8, 8, 16]\n  systolic_array.cols: [8, 8, 8]\n"
     "  link: [systolic_array.rows, systolic_array.cols]\n",
     ["axes.link", "point 1 (systolic_array.rows 8, systolic_array.cols 8) repeats "
      "point 0"]),
])
def test_bad_spec_names_file_field_and_rule(tmp_path, body, fragments):
    message = spec_error(tmp_path, body)
    assert "spec.yaml" in message
    for fragment in fragments:
        assert fragment in message


def test_invalid_combination_is_a_failed_job_with_its_reason(tmp_path):
    # bf16 alone is a fine dtype, but the platform's energy table has no bf16 MAC cost.
    plan = make_plan(load_sweep(write_spec(
        tmp_path, "axes:\n  systolic_array.input_dtypes: [[int8], [bf16]]\n")))
    good, bad = plan.jobs
    assert good.platform is not None and good.error is None
    assert bad.platform is None and "energy.mac_pj lacks" in bad.error


def constrained(expression: str) -> str:
    return AXES + f"constraints:\n  - {expression}\n"


def test_constraints_filter_points(tmp_path):
    plan = make_plan(load_sweep(write_spec(tmp_path, constrained(
        "systolic_array.rows * systolic_array.cols <= 2**8 and "
        "not offchip.bandwidth_gbps == 20"))))
    assert plan.samples == 144 and plan.excluded == 144 - len(plan.jobs)
    assert {(j.point["systolic_array.rows"], j.point["systolic_array.cols"])
            for j in plan.jobs} == {(8, 8), (8, 16), (16, 8), (16, 16), (8, 32), (32, 8)}
    assert all(j.point["offchip.bandwidth_gbps"] != 20 for j in plan.jobs)
    chained = make_plan(load_sweep(write_spec(tmp_path, constrained(
        "8 < systolic_array.rows <= 16 != systolic_array.cols"))))
    assert {j.point["systolic_array.rows"] for j in chained.jobs} == {16}
    assert {j.point["systolic_array.cols"] for j in chained.jobs} == {8, 32}


@pytest.mark.parametrize("expression, fragment", [
    ("__import__('os').system('true') == 0", "Call is not allowed"),
    ("(lambda: 1)() == 1", "is not allowed"),
    ("systolic_array.rows.__class__ == 1", "'systolic_array.rows.__class__' is not a "
     "platform field"),
    ("systolic_array.rowz > 1", "'systolic_array.rowz' is not a platform field"),
    ("systolic_array.rows", "must be a comparison"),
    ("systolic_array.rows if 1 else 2 > 1", "must be a comparison"),
    ("[x for x in (1,)] == 1", "ListComp is not allowed"),
    ("2 ** 10000 > systolic_array.rows", "constant integer of at most 64"),
    ("systolic_array.rows >", "not a valid expression"),
    ("systolic_array.rows / 0 > 1", "cannot be evaluated"),
])
def test_unsafe_or_bad_constraints_are_refused(tmp_path, expression, fragment):
    message = spec_error(tmp_path, constrained(repr(expression)))
    assert "constraints[0]" in message and fragment in message


def test_keys_follow_content_not_order_and_include_model_version(tmp_path, monkeypatch):
    forward = make_plan(load_sweep(write_spec(tmp_path, AXES)))
    reverse = make_plan(load_sweep(write_spec(tmp_path, """\
axes:
  offchip.bandwidth_gbps: [20, 15, 10, 5]
  buffers.weight_bytes: [131072, 65536, 32768, 16384]
  systolic_array.cols: [32, 16, 8]
  systolic_array.rows: [32, 16, 8]
""", name="other.yaml")))
    assert {j.key for j in forward.jobs} == {j.key for j in reverse.jobs}
    assert len({j.key for j in forward.jobs}) == len(forward.jobs)
    monkeypatch.setattr(simulator, "MODEL_VERSION", simulator.MODEL_VERSION + 1)
    bumped = make_plan(load_sweep(write_spec(tmp_path, AXES)))
    assert not {j.key for j in bumped.jobs} & {j.key for j in forward.jobs}


def brute_force_front(values: np.ndarray, senses: list[str]) -> list[bool]:
    sign = np.array([1 if s == "min" else -1 for s in senses])
    costs = values * sign
    front = []
    for i, j in itertools.product(range(len(costs)), repeat=2):
        if j == 0:
            front.append(True)
        if all(costs[j] <= costs[i]) and any(costs[j] < costs[i]):
            front[i] = False
    return front


@pytest.mark.parametrize("senses", [["min", "min"], ["min", "max"], ["max", "min", "max"]])
def test_pareto_front_equals_brute_force(senses):
    rng = np.random.default_rng(11)
    for size in (1, 2, 30, 700):  # 700 spans two blocks of the vectorised front
        values = rng.integers(0, 12, size=(size, len(senses))).astype(float)  # ties
        assert pareto_mask(values, senses).tolist() == brute_force_front(values, senses)
