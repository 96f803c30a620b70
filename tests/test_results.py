"""The result model (simulator.present.results): `accsim run --json` is written from it, a
result document reads back into it unchanged, and a bad document is one error naming
the file and the field."""

from __future__ import annotations

import copy
import json

import pytest

from simulator.inputs.named_inputs import load_inputs
from simulator.errors import AccsimError
from simulator.inputs.loader import dump_json
from simulator.present.run_report import result_dict, result_model, write_json
from simulator.present.results import RunResultFile, ServeResult, read_result
from simulator.serving.serve import prepare, serve
from simulator.serving.spec import ServeSpec
from simulator.simulate import simulate


@pytest.fixture(scope="module")
def document() -> dict:
    """A small run's result as its JSON file holds it."""
    result = simulate(load_inputs("tpu_v1", "gemm_4096", None))
    return json.loads(dump_json(result_dict(result)))


def test_written_from_the_model_and_read_back_unchanged(tmp_path, document):
    result = simulate(load_inputs("tpu_v1", "gemm_4096", None))
    model = result_model(result)
    write_json(result, tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text()
    assert text == dump_json(model.dump(), indent=1) + "\n"
    again = read_result(json.loads(text), RunResultFile, file="r.json")
    assert again == model
    assert list(again.dump()) == ["manifest", "operators", "layer_types", "workload"]
    assert json.dumps(again.dump()) == json.dumps(document)  # same keys, same order


def test_attributes_are_the_written_figures(document):
    model = read_result(document, RunResultFile, file="r.json")
    assert model.workload.cycles == document["workload"]["cycles"]
    assert model.workload.mfu == document["workload"]["mfu"]
    op, raw = model.operators[0], document["operators"][0]
    assert (op.name, op.unit, op.tiling.tm, op.totals.cycles) == \
        (raw["name"], raw["unit"], raw["tiling"]["tm"], raw["totals"]["cycles"])
    assert op.bottleneck.bottleneck_class == raw["bottleneck"]["class"]
    assert model.manifest.inputs["platform"].canonical["name"] == "tpu_v1"
    assert model.system is None


def test_optional_keys_are_written_only_where_given(document):
    """A collective's block and the platform's area figures are written only where
    they exist; the model keeps that, so a dump equals the document key for key."""
    raw = copy.deepcopy(document)
    raw["operators"][0]["collective"] = {"kind": "all_reduce", "chips": 4}
    raw["workload"]["area_mm2"] = 100.0
    raw["workload"]["flops_per_s_per_mm2"] = 1.5e12
    raw["workload"]["bottleneck"] = raw["workload"].pop("bottleneck")  # written last
    dumped = read_result(raw, RunResultFile, file="r.json").dump()
    assert json.dumps(dumped) == json.dumps(raw)
    plain = read_result(document, RunResultFile, file="r.json").dump()
    assert "collective" not in plain["operators"][0]
    assert "area_mm2" not in plain["workload"]


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["workload"].pop("cycles"), "workload.cycles"),
    (lambda d: d["operators"][0]["totals"].update(cycles="many"),
     "operators[0]"),
    (lambda d: d["operators"][0].update(tiles=3), "operators[0]"),
    (lambda d: d["manifest"].update(model_version=None), "manifest.model_version"),
])
def test_a_bad_document_names_file_and_field(document, change, field):
    raw = copy.deepcopy(document)
    change(raw)
    with pytest.raises(AccsimError) as caught:
        read_result(raw, RunResultFile, file="bad.json")
    assert caught.value.file == "bad.json"
    assert caught.value.field.startswith(field)


def test_a_writer_key_without_a_field_is_an_error_not_dropped(document):
    """Writer and reader cannot drift: a key the writer adds must be a field."""
    raw = copy.deepcopy(document)
    raw["workload"]["new_figure"] = 1.0
    with pytest.raises(AccsimError, match="unknown field") as caught:
        read_result(raw, RunResultFile, file="r.json")
    assert caught.value.field == "workload.new_figure"


def test_a_serving_result_reads_into_serve_result():
    spec = ServeSpec(arch="tpu_v1", workload="gemm_4096", rate=5.0, requests=8)
    raw = json.loads(json.dumps(serve(prepare(spec), spec)[0]))
    result = read_result(raw, ServeResult, file="s.json")
    assert result.stats("latency").at("p95") == raw["latency_ms"]["p95"]
    assert result.stats("tpot") is None and raw["tpot_ms"] is None
    assert (result.completed, result.throughput_rps) == \
        (raw["completed"], raw["throughput_rps"])
    with pytest.raises(AccsimError) as caught:
        read_result({**raw, "completed": "eight"}, ServeResult, file="s.json")
    assert (caught.value.file, caught.value.field) == ("s.json", "completed")
