"""The deployment search's precision axis (DESIGN.md section 18): `plan-deployment
--precision` searches each plan beside the model's own formats, a point under a plan is
`accsim serve --precision P --find-max-rate` of that point (with --heuristic and
--fusion passed through as serve takes them), the capacity rule prunes at the plan's
weight bytes, and a serving sweep's `serving.precision` axis names plan files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_llama import TINY_LLAMA

from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.frontends import hf
from simulator.serving.precision import ServingPrecision

ROOT = Path(__file__).resolve().parents[1]
PLAN = str(ROOT / "experiments" / "studies" / "precision" / "int8_weights.yaml")
SLA = "ttft_p99_ms=0.15,tpot_p99_ms=0.06"
WORKLOAD = ["--prompt-tokens", "64", "--output-tokens", "8", "--requests", "48"]
# 1 x 1, 2 x 1 and 1 x 2 chips per replica, one replica, max batch 4 or 16.
GRID = ["--budget-chips", "2", "--replicas", "1", "--max-batch", "4,16"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The tiny model and a v5e copy whose HBM holds its weights in int8 on one chip
    but not in bf16."""
    folder = tmp_path_factory.mktemp("deploy_precision")
    model = folder / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    base = load_inputs("tpu_v5e_like", "gemm_4096", None).platform.model_dump(mode="json")
    weights = hf.model_stats(hf.load_model_config(str(model))).weight_bytes
    small = dict(base, name="small", offchip=dict(base["offchip"],
                                                  capacity_bytes=int(weights * 0.8)))
    (folder / "small.yaml").write_text(json.dumps(small))
    return {"model": str(model), "small": str(folder / "small.yaml"), "folder": folder,
            "weights": weights}


def plan_deployment(files, *extra) -> dict:
    out = files["folder"] / "plan.json"
    out.unlink(missing_ok=True)
    assert main(["plan-deployment", "--arch", files["small"], "--model", files["model"],
                 *WORKLOAD, "--sla", SLA, *GRID, "--json", str(out), *extra]) == 0
    return json.loads(out.read_text())


def serve_max_rate(files, row: dict, *extra) -> dict:
    out = files["folder"] / "serve.json"
    out.unlink(missing_ok=True)
    plan = ["--precision", row["precision_file"]] if row["precision_file"] else []
    assert main(["serve", "--arch", row["arch"], "--model", files["model"], *WORKLOAD,
                 "--sla", SLA, "--find-max-rate", "--chips", str(row["chips_per_replica"]),
                 "--tp", str(row["tp"]), "--pp", str(row["pp"]), "--replicas",
                 str(row["replicas"]), "--batching", row["batching"], "--max-batch",
                 str(row["max_batch"]), "--json", str(out), *plan, *extra]) == 0
    found = json.loads(out.read_text())
    at = next(e for e in found["evaluations"] if e["rate_rps"] == found["max_rate_rps"])
    return {"rate": found["max_rate_rps"], "tokens_per_s": at["figures"]["tokens_per_s"]}


def test_each_plan_is_searched_beside_the_baseline_and_pruned_at_its_own_bytes(
        files, capsys):
    result = plan_deployment(files, "--precision", PLAN)
    capsys.readouterr()
    rows = {(row["precision"], row["tp"], row["pp"], row["max_batch"]): row
            for row in result["points"]}
    assert len(rows) == len(result["points"]) == 12   # 3 splits x 2 batches x 2 plans
    for batch in (4, 16):
        # bf16 weights do not fit one chip; int8 ones do, so that point is searched.
        assert rows["none", 1, 1, batch]["status"] == "pruned"
        assert rows["none", 1, 1, batch]["reason"].startswith("capacity")
        assert rows["int8_weights", 1, 1, batch]["status"] == "searched"
        assert rows["int8_weights", 1, 1, batch]["precision_file"] == PLAN
        # Two chips of a tensor-parallel replica hold the bf16 weights; under the plan
        # they are searched too, as are two pipeline stages.
        assert rows["none", 2, 1, batch]["status"] == "searched"
        assert rows["int8_weights", 2, 1, batch]["status"] == "searched"
        assert rows["none", 1, 2, batch]["status"] == "searched"
        assert rows["int8_weights", 1, 2, batch]["status"] == "searched"
    # The capacity reason names the bytes at the model's own formats; under the plan
    # the GEMMs' weights are half as many bytes (the embedding table as it was).
    platform = load_inputs(files["small"], "gemm_4096", None).platform
    config = hf.load_model_config(files["model"])
    share = ServingPrecision.load(PLAN, platform).stored_bytes(
        hf.iteration_workload(config, prefill=[], decode=[1]), 2)
    assert share.weights_after * 2 == share.weights_before
    assert share.weight_bytes(files["weights"]) < int(files["weights"] * 0.8) < \
        files["weights"]


def test_a_plan_point_is_serve_precision_find_max_rate_of_it(files, capsys):
    flags = ("--heuristic", "min_offchip", "--fusion", "none")
    result = plan_deployment(files, "--precision", PLAN, "--no-baseline", *flags)
    capsys.readouterr()
    assert {row["precision"] for row in result["points"]} == {"int8_weights"}
    searched = [row for row in result["points"] if row["status"] == "searched"]
    assert {(row["tp"], row["pp"]) for row in searched} == {(1, 1), (2, 1), (1, 2)}
    assert len(searched) == 6
    for row in searched:
        brute = serve_max_rate(files, row, *flags)
        assert (row["sla_rate_rps"], row["tokens_per_s"]) == \
            (brute["rate"], brute["tokens_per_s"])
    # The heuristic and the fusion mode reach the points: the default search's
    # figures differ.
    plain = plan_deployment(files, "--precision", PLAN, "--no-baseline")
    capsys.readouterr()
    assert [row["tokens_per_s"] for row in plain["points"] if row["status"] == "searched"] \
        != [row["tokens_per_s"] for row in searched]


def test_a_serving_sweep_precision_axis_names_plan_files(files, capsys):
    folder = files["folder"]
    (folder / "int8.yaml").write_text(Path(PLAN).read_text())
    spec = folder / "sweep.yaml"
    spec.write_text(f"""\
name: tiny_precision
platform: {Path(files["small"]).name}
serving:
  model: config.json
  prompt_tokens: 64
  output_tokens: 8
  requests: 48
  sla: {{ttft_p99_ms: 0.15, tpot_p99_ms: 0.06}}
axes:
  serving.precision: [none, int8.yaml]
  serving.max_batch: [4]
objectives: {{tokens_per_s_per_chip: max}}
""")
    store, out = folder / "sweep.sqlite", folder / "sweep.json"
    assert main(["sweep", "run", str(spec), "--store", str(store)]) == 0
    text = capsys.readouterr().out
    assert "serving.precision=none" in text and "serving.precision=int8.yaml" in text
    # The int8 point is plan-deployment's point (same key: the plan by content),
    # read back from the store, not computed again.
    assert main(["plan-deployment", "--arch", files["small"], "--model", files["model"],
                 *WORKLOAD, "--sla", SLA, "--budget-chips", "1", "--max-batch", "4",
                 "--precision", str(folder / "int8.yaml"), "--store", str(store),
                 "--json", str(out)]) == 0
    assert "2 already stored, 0 computed" in capsys.readouterr().out
    rows = {row["precision"]: row for row in json.loads(out.read_text())["points"]}
    assert rows["none"]["status"] == "pruned" and rows["int8"]["status"] == "searched"


@pytest.mark.parametrize("extra, message", [
    (["--precision", "missing.yaml"], "missing.yaml"),
    (["--no-baseline"], "--no-baseline: --no-baseline leaves no precision to search"),
    (["--fusion", "everything"], "invalid choice"),
])
def test_bad_precision_input_gets_one_clear_error(files, capsys, extra, message):
    code = None
    try:
        code = main(["plan-deployment", "--arch", files["small"], "--model",
                     files["model"], *WORKLOAD, "--sla", SLA, *GRID, *extra])
    except SystemExit as exc:  # argparse's own refusal of a choice
        code = exc.code
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
