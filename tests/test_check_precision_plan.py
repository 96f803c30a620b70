"""`accsim check` of a precision plan: told apart from a tiling plan, which shares its
top-level keys, and validated against its own schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.cli import main

ROOT = Path(__file__).resolve().parent.parent

SHIPPED_PLANS = sorted((ROOT / "experiments" / "studies" / "precision").glob("*.yaml"))


@pytest.mark.parametrize("plan", SHIPPED_PLANS, ids=[p.name for p in SHIPPED_PLANS])
def test_check_validates_a_precision_plan(plan, capsys):
    """`accsim check PLAN` told a precision plan for a tiling plan (they share default,
    layer_types and operators) and refused it: `default.weight: unknown field`."""
    assert main(["check", str(plan)]) == 0
    assert f"{plan}: valid precision plan (" in capsys.readouterr().out


def test_check_names_a_bad_precision_plans_field(tmp_path, capsys):
    plan = tmp_path / "p.yaml"
    plan.write_text("default: {weight: [int8, bf16], guardrail: {min_sqnr_db: .nan}}\n")
    assert main(["check", str(plan)]) == 1
    assert "default.guardrail.min_sqnr_db" in capsys.readouterr().err
    mapping = ROOT / "workloads" / "mappings" / "bert_base_fuse_gelu.yaml"
    assert main(["check", str(mapping)]) == 0
    assert "valid mapping" in capsys.readouterr().out
