"""The parallelism plan's rules and the per-chip capacity check (DESIGN.md section 14)."""

from __future__ import annotations

import pytest

from platforms import make_platform
from simulator.errors import AccsimError
from simulator.system.capacity import Footprint, check_capacity, smallest_fitting
from simulator.system.parallelism import ModelLimits, SystemPlan, check_plan

LINKED = make_platform(interconnect={"topology": "torus2d", "ports_per_chip": 4,
                                     "link_bandwidth_gbps": 50.0,
                                     "link_latency_cycles": 100, "efficiency": 0.9,
                                     "pj_per_byte": 10.0})
DENSE = ModelLimits(heads=64, layers=80)
MOE = ModelLimits(heads=32, experts=8, layers=32)
GQA = ModelLimits(heads=64, kv_heads=8, layers=80)


def refusal(plan: SystemPlan, limits: ModelLimits, platform=LINKED) -> str:
    with pytest.raises(AccsimError) as info:
        check_plan(plan, platform, limits, platform_file="p.yaml")
    return str(info.value)


def test_valid_plans_pass():
    check_plan(SystemPlan(chips=16, tp=8, pp=2), LINKED, DENSE)
    check_plan(SystemPlan(chips=8, tp=8, ep=8), LINKED, MOE)
    check_plan(SystemPlan(), make_platform(), DENSE)  # one chip needs no links


@pytest.mark.parametrize("plan, limits, where, rule", [
    (SystemPlan(chips=8, tp=2, pp=2), DENSE, "--chips", "T x P = 2 x 2 = 4 must equal"),
    (SystemPlan(chips=3, tp=3), GQA, "--tp", "cannot be built: the 64 query heads padded "
     "to 66 give each chip 22, which read 4 of the 8 KV heads"),
    (SystemPlan(chips=2, pp=2), ModelLimits(heads=4, layers=1), "--pp",
     "exceeds the layers"),
    (SystemPlan(chips=6, tp=2, pp=3, ep=3), MOE, "--ep", "must divide the experts (8)"),
    (SystemPlan(chips=2, tp=2, ep=4), MOE, "--ep", "must divide the chips (2)"),
    (SystemPlan(chips=2, tp=2, ep=2), DENSE, "--ep", "needs a mixture-of-experts model"),
    (SystemPlan(chips=8, tp=2, pp=4, ep=4), MOE, "--ep", "must divide the tensor "
     "parallelism (2)"),
])
def test_each_broken_rule_has_one_clear_error(plan, limits, where, rule):
    message = refusal(plan, limits)
    assert message.startswith(f"{where}: ") and rule in message, message


def test_more_than_one_chip_needs_an_interconnect():
    message = refusal(SystemPlan(chips=2, tp=2), DENSE, platform=make_platform())
    assert message.startswith("p.yaml: interconnect: ")
    assert "has no interconnect table" in message


def footprint(plan: SystemPlan) -> Footprint:
    """A 140 GB model: weights split T x P ways, 2 GB of KV split T ways."""
    return Footprint(140 * 10**9 // plan.chips, 2 * 10**9 // plan.tp, 10**8)


def test_capacity_refusal_names_need_available_and_smallest_fit():
    with pytest.raises(AccsimError) as info:
        check_capacity(SystemPlan(chips=4, tp=4), DENSE, 16 * 10**9, footprint,
                       platform_file="p.yaml")
    message = str(info.value)
    assert message.startswith("p.yaml: offchip.capacity_bytes: ")
    need = footprint(SystemPlan(chips=4, tp=4)).total_bytes
    assert f"{need:,} bytes" in message and "16,000,000,000 bytes" in message
    # 140/N + 2/T + 0.1 GB: 9 chips (T = 1) need 17.7 GB, 10 chips as 2 x 5 need 15.1.
    assert "smallest fitting T x P: 2 x 5 (--chips 10 --tp 2 --pp 5 --ep 1" in message


def test_smallest_fit_has_fewest_chips_then_fewest_stages():
    fit = smallest_fitting(SystemPlan(), ModelLimits(heads=4, layers=4), 16 * 10**9,
                           footprint)
    # T divides 4 heads and P <= 4 layers: 10 chips can only be 2 x 5 (too many
    # stages), 11 has no split; 12 as 4 x 3 needs 11.67 + 0.5 + 0.1 GB.
    assert (fit.chips, fit.tp, fit.pp) == (12, 4, 3)
    assert footprint(fit).total_bytes <= 16 * 10**9
    assert smallest_fitting(SystemPlan(), DENSE, 10, footprint) is None


def test_fitting_plan_returns_its_footprint():
    plan = SystemPlan(chips=16, tp=16)
    assert check_capacity(plan, DENSE, 16 * 10**9, footprint) == footprint(plan)
