"""Provenance as data (DESIGN.md section 16, issue 27 item 1): the table is validated,
every shipped platform annotates every numeric field, the table changes no figure, and
results list the assumed values they used."""

from __future__ import annotations

import json

import pytest
import yaml

from pydantic import BaseModel

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.run_inputs import Inputs
from simulator.inputs.loader import load_model, locate, shipped_names
from simulator.inputs.platform_file import load_platform
from simulator.present.run_report import result_dict
from simulator.simulate import simulate
from tests.platforms import BASE

PLATFORMS = shipped_names("platform")


def _numeric_schema_leaves(data, prefix=""):
    """Every number in a platform's YAML data, walked independently of the model."""
    if isinstance(data, dict):
        pairs = data.items()
    elif isinstance(data, list):
        pairs = enumerate(data)
    else:
        return [prefix] if isinstance(data, (int, float)) and not isinstance(data, bool) \
            else []
    return [leaf for key, value in pairs
            for leaf in _numeric_schema_leaves(value, f"{prefix}.{key}" if prefix
                                               else str(key))]


@pytest.mark.parametrize("name", PLATFORMS)
def test_every_numeric_field_of_a_shipped_platform_has_provenance(name):
    platform, _ = load_platform(locate(name, "platform"))
    leaves = _numeric_schema_leaves(platform.model_dump(mode="json"))
    assert len(leaves) > 25
    assert [leaf for leaf in leaves if leaf not in platform.provenance] == []
    assert platform.assumptions(), "every shipped platform assumes something"
    for path, entry in platform.provenance.items():
        if entry.kind == "published":
            assert entry.source


def _write(tmp_path, provenance: dict, **overrides) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**BASE, **overrides, "provenance": provenance}))
    return str(path)


@pytest.mark.parametrize("provenance, field, fragment", [
    ({"dma.setup_cycle": {"kind": "assumed", "range": [0, 4]}},
     "provenance.dma.setup_cycle", "names no numeric field"),
    ({"dma.setup_cycles": {"kind": "assumed", "range": [3, 4]}},
     "provenance.dma.setup_cycles", "does not contain the value 2"),
    ({"clock_ghz": {"kind": "published"}}, "provenance.clock_ghz", "needs source"),
    ({"clock_ghz": {"kind": "assumed"}}, "provenance.clock_ghz", "needs range"),
    ({"clock_ghz": {"kind": "derived", "from": ["systolic_array.row"]}},
     "provenance.clock_ghz", "systolic_array.row"),
    ({"dma.setup_cycles": {"kind": "assumed", "range": [0.5, 4]}},
     "provenance.dma.setup_cycles", "whole numbers"),
    ({"clock_ghz": {"kind": "assumed", "range": [2, 1]}}, "provenance.clock_ghz",
     "low end above"),
    ({"clock_ghz": {"kind": "fitted", "source": "m.csv"}}, "provenance.clock_ghz",
     "needs sha256"),
])
def test_bad_provenance_is_one_clear_error(tmp_path, provenance, field, fragment):
    path = _write(tmp_path, provenance)
    with pytest.raises(AccsimError) as caught:
        load_model(path, Platform)
    assert caught.value.file == path
    assert caught.value.field == field
    assert fragment in caught.value.rule


def test_bad_provenance_through_the_cli(tmp_path, capsys):
    path = _write(tmp_path, {"offchip.bandwidth_gbps": {"kind": "published"}})
    assert main(["check", path]) == 1
    err = capsys.readouterr().err
    assert f"{path}: provenance.offchip.bandwidth_gbps: a published value needs source" \
        in err and "Traceback" not in err


def test_provenance_changes_no_figure_and_is_not_canonical():
    inputs = load_inputs("tpu_v5e_like", "bert_base_s128", None)
    assert inputs.platform.provenance
    bare = Platform.model_validate(inputs.platform.model_dump(mode="json"))
    assert not bare.provenance
    assert bare.model_dump() == inputs.platform.model_dump()
    annotated = result_dict(simulate(inputs, engine="fast"))
    plain = result_dict(simulate(Inputs(bare, inputs.workload, inputs.mapping,
                                        inputs.platform_source, inputs.workload_source),
                                 engine="fast"))
    assert "assumptions" not in plain["manifest"]
    listed = annotated["manifest"].pop("assumptions")
    assert annotated == plain
    assert listed["offchip.efficiency"] == {"kind": "assumed", "range": [0.75, 0.95],
                                            "value": 0.9}
    assert "offchip.bandwidth_gbps" not in listed  # published: not listed


def test_result_lists_assumptions_and_verifies(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--arch", "tpu_v1", "--workload", "gemm_4096",
                 "--json", str(out)]) == 0
    listed = json.loads(out.read_text())["manifest"]["assumptions"]
    assert listed["dma.setup_cycles"] == {"kind": "assumed", "range": [0, 50], "value": 10}
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    edited = json.loads(out.read_text())
    edited["manifest"]["assumptions"]["dma.setup_cycles"]["value"] = 11
    (tmp_path / "e.json").write_text(json.dumps(edited))
    assert main(["verify", str(tmp_path / "e.json")]) != 0


def test_check_prints_the_assumed_fields_and_ranges(capsys):
    assert main(["check", "tpu_v5e_like"]) == 0
    out = capsys.readouterr().out
    assert "provenance: 30 assumed, 2 derived, 16 published" in out
    assert "assumed interconnect.link_latency_cycles = 1500  range [0, 3000]" in out
    assert "assumed vector_unit.cycles_per_element.softmax = 2  range [1, 4]" in out
    assert "unannotated" not in out


def _schema_numeric_paths(model, prefix=""):
    """Every numeric value of a platform found by walking the schema's fields (each
    pydantic model's declared fields, dicts by key, lists by index), not its dump."""
    if isinstance(model, BaseModel):
        items = [(name, getattr(model, name)) for name in type(model).model_fields
                 if name != "provenance"]
    elif isinstance(model, dict):
        items = list(model.items())
    elif isinstance(model, (list, tuple)):
        items = list(enumerate(model))
    else:
        return [prefix] if isinstance(model, (int, float)) and not isinstance(model, bool) \
            else []
    return [path for key, value in items
            for path in _schema_numeric_paths(value, f"{prefix}.{key}" if prefix
                                              else str(key))]


@pytest.mark.parametrize("name", PLATFORMS)
def test_a_schema_walk_finds_every_numeric_field_annotated(name):
    """Issue 27 acceptance: walked through the schema's declared fields (so a number
    the canonical dump leaves out would be found too), every numeric value of every
    shipped platform has a provenance entry, and the walk agrees with the dump's."""
    platform, _ = load_platform(locate(name, "platform"))
    walked = _schema_numeric_paths(platform)
    assert len(walked) > 25
    assert [path for path in walked if path not in platform.provenance] == []
    assert sorted(walked) == sorted(platform.numeric_fields())
