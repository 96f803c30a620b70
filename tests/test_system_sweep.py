"""Sweep axes over the multi-chip plan (DESIGN.md sections 11 and 14): `system.tp`
beside platform fields, each point keyed with its plan, bad values refused."""

from __future__ import annotations

import pytest

from simulator.errors import AccsimError
from simulator.sweep.coordinator import run_sweep
from simulator.sweep.executors import Serial
from simulator.sweep.jobs import make_plan
from simulator.sweep.sweep_spec import load_sweep
from simulator.sweep.store import Store

SPEC = """\
name: tp
platform: tpu_v5e_like
workloads: [gemm_4096]
axes:
  system.tp: [1, 2, 4]
  offchip.bandwidth_gbps: [819.0, 1638.0]
"""


def test_system_tp_axis_shards_each_point(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    plan = make_plan(load_sweep(spec))
    assert len(plan.jobs) == 6 and len({job.key for job in plan.jobs}) == 6
    assert {job.system.tp for job in plan.jobs} == {1, 2, 4}
    with Store(tmp_path / "s.sqlite") as store:
        run_sweep(plan, store, Serial())
        rows = store.rows(status="ok")
    assert len(rows) == 6
    times = {(row["point"]["system.tp"], row["point"]["offchip.bandwidth_gbps"]):
             row["time_s"] for row in rows}
    # Column-parallel: each chip multiplies 1/T of the columns, so time falls with T.
    for bandwidth in (819.0, 1638.0):
        assert times[(1, bandwidth)] > times[(2, bandwidth)] > times[(4, bandwidth)]


@pytest.mark.parametrize("axis, rule", [
    ("system.tp: [0, 2]", "axes.system.tp[0]: value 0: must be a positive whole number"),
    ("system.tq: [2]", "axes.system.tq: no such system field"),
])
def test_bad_system_axis_names_the_axis(tmp_path, axis, rule):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("system.tp: [1, 2, 4]", axis))
    with pytest.raises(AccsimError) as info:
        load_sweep(spec)
    assert rule in str(info.value)


def test_plan_refused_at_a_point_is_a_failed_row(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("platform: tpu_v5e_like", "platform: tpu_v1")
                    .replace("offchip.bandwidth_gbps: [819.0, 1638.0]",
                             "offchip.bandwidth_gbps: [34.0]"))
    with Store(tmp_path / "s.sqlite") as store:
        run_sweep(make_plan(load_sweep(spec)), store, Serial())
        failed = store.rows(status="failed")
    assert len(failed) == 2  # tp 2 and 4: tpu_v1 has no interconnect
    assert all("has no interconnect table" in row["error"] for row in failed)
