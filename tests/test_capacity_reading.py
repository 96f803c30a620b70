"""Capacity that matches what runs (issue 41 item 3, issue 42 item 4; DESIGN.md section
19): repeats over shared weights and attention K/V that are no cache, read both ways
where a workload leaves them unsaid, and one rule at a precision plan's formats on
every path (run, serve, review, the deployment search and the serving sweep's points).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from tiny_llama import TINY_LLAMA

from simulator.system.capacity import LARGEST, SMALLEST, operators_footprint
from simulator.cli import main
from simulator.errors import AccsimError
from simulator.frontends import hf
from simulator.review.pipeline import checked_variants, run_specs
from simulator.review.providers import model_workload
from simulator.review.study import load_study
from simulator.review.variants import apply_variants, variant_specs
from simulator.serving.serve import prepare
from simulator.serving.spec import ServeSpec
from simulator.inputs.loader import locate
from simulator.mapping.plan import Mapping
from simulator.inputs.platform_file import load_platform
from simulator.sweep.deploy import Deployment, search_platform
from simulator.sweep.task import evaluate_point
from simulator.system.parallelism import SystemPlan
from simulator.inputs.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
PLAN = str(ROOT / "experiments" / "studies" / "precision" / "int8_weights.yaml")
GIB16 = 16 * 2**30   # tpu_v5e_like's HBM

# An SDXL-like denoising loop: one UNet's weights (5.4 GB in bf16, as SDXL's 2.6 B
# parameters) called by 50 steps, and self-attention over a 64 x 64 latent (4,096
# tokens, 10 heads, batch 2 for classifier-free guidance) 10 times a step.
SDXL = {"name": "sdxl_like", "operators": [
    {"name": "unet_proj", "layer_type": "unet", "kind": "gemm", "batch": 40, "m": 64,
     "n": 8192, "k": 8192, "repeat": 50, "weights": "shared"},
    {"name": "self_attn", "layer_type": "unet", "kind": "attention", "batch": 2,
     "heads": 10, "kv_heads": 10, "q_len": 4096, "kv_len": 4096, "head_dim": 64,
     "repeat": 500, "kv_cache": False}]}


def unmarked(workload: dict) -> dict:
    return {**workload, "operators": [
        {k: v for k, v in op.items() if k not in ("weights", "kv_cache")}
        for op in workload["operators"]]}


def write(path: Path, data: dict) -> str:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_an_sdxl_like_loop_over_shared_weights_runs_on_a_16_gib_chip(tmp_path, capsys):
    workload = Workload.model_validate(SDXL)
    need = operators_footprint(workload.operators, 2)
    assert need.weight_bytes == 40 * 8192 * 8192 * 2          # one copy, not 50
    assert need.kv_bytes == 0                                 # no cache: activations
    kv, q = 2 * 2 * 10 * 4096 * 64 * 2, 2 * 10 * 4096 * 64 * 2    # the attention's own
    assert need.activation_bytes == max(2 * 40 * 64 * 8192 * 2, kv + 2 * q)
    assert need.total_bytes < GIB16
    assert main(["run", "--arch", "tpu_v5e_like", "--workload",
                 write(tmp_path / "sdxl.yaml", SDXL)]) == 0
    out = capsys.readouterr()
    assert "simulated 2 operators" in out.out
    assert "warning" not in out.out + out.err


def test_an_unsaid_reading_that_decides_warns_with_both_figures_and_runs(tmp_path,
                                                                        capsys):
    plain = Workload.model_validate(unmarked(SDXL))
    largest = operators_footprint(plain.operators, 2, LARGEST)
    least = operators_footprint(plain.operators, 2, SMALLEST)
    assert largest.weight_bytes == 50 * least.weight_bytes
    assert largest.kv_bytes == 500 * 2 * 2 * 10 * 4096 * 64 * 2 and least.kv_bytes == 0
    assert least.total_bytes < GIB16 < largest.total_bytes
    assert main(["run", "--arch", "tpu_v5e_like", "--workload",
                 write(tmp_path / "sdxl.yaml", unmarked(SDXL))]) == 0
    out = capsys.readouterr().out
    figures = re.search(r"warning: capacity depends on how the workload is read: each "
                        r"chip needs ([\d.]+) GB .* ([\d.]+) GB if the repeats share", out)
    assert figures, out[-600:]
    assert float(figures[1]) == pytest.approx(largest.total_bytes / 1e9, abs=0.01)
    assert float(figures[2]) == pytest.approx(least.total_bytes / 1e9, abs=0.01)
    assert "simulated 2 operators" in out


def test_what_no_reading_fits_is_refused_saying_so(tmp_path, capsys):
    big = unmarked(SDXL)
    big["operators"][0] = {**big["operators"][0], "batch": 160}   # 21.5 GB of weights
    assert main(["run", "--arch", "tpu_v5e_like", "--workload",
                 write(tmp_path / "big.yaml", big)]) == 1
    err = capsys.readouterr().err
    assert "does not fit 1 chip" in err and "even as the smallest reading" in err
    marked = {**big, "operators": [{**big["operators"][0], "weights": "distinct"},
                                   {**big["operators"][1], "kv_cache": True}]}
    assert main(["run", "--arch", "tpu_v5e_like", "--workload",
                 write(tmp_path / "marked.yaml", marked)]) == 1
    err = capsys.readouterr().err   # nothing left open: no reading to mention
    assert "does not fit 1 chip" in err and "reading" not in err


def test_the_fields_are_absent_from_a_workload_that_leaves_them_unset():
    dumped = Workload.model_validate(unmarked(SDXL)).model_dump(mode="json")
    assert all("weights" not in op and "kv_cache" not in op for op in dumped["operators"])
    marked = Workload.model_validate(SDXL).model_dump(mode="json")["operators"]
    assert (marked[0]["weights"], marked[1]["kv_cache"]) == ("shared", False)


def test_the_hf_frontend_marks_layer_weights_and_its_kv_cache(tmp_path, capsys):
    out = tmp_path / "llama.yaml"
    assert main(["import", "hf", "llama_3_1_8b", "--phase", "decode", "--context",
                 "512", "-o", str(out)]) == 0
    ops = yaml.safe_load(out.read_text())["operators"]
    attention = [op for op in ops if op["kind"] == "attention"]
    assert attention and all(op["kv_cache"] is True for op in attention)
    layered = [op for op in ops if op["kind"] == "gemm" and op.get("repeat", 1) > 1]
    assert layered and all(op["weights"] == "distinct" for op in layered)
    assert all("weights" not in op for op in ops if op.get("repeat", 1) == 1)


# --- one rule at the plan's formats on every path ------------------------------------

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A tiny Llama and a platform over tpu_v5e_like whose HBM holds the model's
    weights in int8 but not in bf16 (80% of them)."""
    folder = tmp_path_factory.mktemp("capacity_paths")
    model = folder / "config.json"
    model.write_text(json.dumps(TINY_LLAMA))
    weights = hf.model_stats(hf.load_model_config(str(model))).weight_bytes
    arch = write(folder / "small.yaml", {
        "base": "tpu_v5e_like", "name": "small",
        "offchip": {"capacity_bytes": int(weights * 0.8)}})
    return {"folder": folder, "model": str(model), "arch": arch, "weights": weights}


STEP = ["--phase", "decode", "--context", "64"]


def run_fits(small, *extra) -> bool:
    argv = ["run", "--arch", small["arch"], "--model", small["model"], *STEP, *extra]
    return main(argv) == 0


def serve_fits(small, precision: str | None) -> bool:
    spec = ServeSpec(model=small["model"], arch=small["arch"], rate=1, requests=4,
                     prompt_tokens=32, output_tokens=8, precision=precision)
    try:
        prepare(spec)
    except AccsimError as exc:
        assert "does not fit" in exc.rule
        return False
    return True


def search_fits(small, precision: str | None) -> bool:
    """The deployment search's verdict on one chip (plan-deployment's, and a serving
    sweep's point, which is one such search): its pruning says `capacity` where the
    chip cannot hold the replica; an SLA no schedule meets prunes a point that fits on
    its roofline bound instead, before any serving run."""
    spec = ServeSpec(model=small["model"], arch=small["arch"], rate=1, requests=4,
                     prompt_tokens=32, output_tokens=8, sla={"tpot_p99_ms": 1e-6})
    point = Deployment(small["arch"], SystemPlan(), 1, "continuous", 4, precision)
    (row,) = search_platform(spec, small["arch"], None, points=[point],
                             store=None).pruned
    assert row["reason"].startswith(("capacity", "bound")), row["reason"]
    return not row["reason"].startswith("capacity")


def review_fits(small) -> tuple[bool, bool]:
    """The review's capacity check of the baseline run and of its precision variant
    (made as `accsim review` makes them, before any simulation)."""
    study_file = write(small["folder"] / "study.yaml", {
        "title": "capacity at the plan's formats", "objective": "fit", "owners": ["t"],
        "scope": {"platforms": [small["arch"]],
                  "models": [{"config": small["model"], "phase": "decode", "batch": 1,
                              "context": 64}]},
        "baseline": "small", "sla": {"latency_ms": {"p99": 50}},
        "precision_variants": [{"name": "int8_weights", "plan": PLAN}]})
    study = load_study(study_file)
    models = [(model, model_workload(model, study)) for model in study.study.scope.models]
    specs = run_specs(study, models, ignore_capacity=True)
    variants = checked_variants(study, variant_specs(study, specs, apply_variants(
        study, models), None, "inputs"), models, ignore_capacity=True)
    (spec,), (variant,) = specs, variants
    return spec.capacity.fits, variant.spec.capacity.fits


def test_every_path_agrees_on_fit_for_the_same_model_plan_and_split(small, capsys):
    verdicts = {
        "run": (run_fits(small), run_fits(small, "--precision", PLAN)),
        "serve": (serve_fits(small, None), serve_fits(small, PLAN)),
        "plan-deployment": (search_fits(small, None), search_fits(small, PLAN)),
        "review": review_fits(small),
    }
    capsys.readouterr()
    # bf16 weights do not fit the chip; the plan's int8 ones do, on every path
    assert verdicts == {path: (False, True) for path in verdicts}
    # and the --weight-dtype spelling of the same formats agrees with the plan
    assert run_fits(small, "--weight-dtype", "int8")


def test_run_and_serve_size_a_plans_weights_alike(small, capsys):
    """The capacity block of `run --precision` and of `serve --precision`
    (--ignore-capacity) hold the same weight bytes per chip: the model's, its array
    operators' at the plan's formats."""
    result = small["folder"] / "run.json"
    assert main(["run", "--arch", "tpu_v5e_like", "--model", small["model"], *STEP,
                 "--precision", PLAN, "--ignore-capacity", "--json", str(result)]) == 0
    ran = json.loads(result.read_text())["capacity"]
    spec = ServeSpec(model=small["model"], arch="tpu_v5e_like", rate=1, requests=4,
                     prompt_tokens=32, output_tokens=8, precision=PLAN)
    served = prepare(spec, ignore_capacity=True).capacity.footprint
    assert ran["weight_bytes_per_chip"] == served.weight_bytes
    assert served.weight_bytes < 0.6 * small["weights"]
    capsys.readouterr()


def test_run_serve_and_sweep_points_read_a_plain_workload_alike(tmp_path, capsys):
    """The SDXL-like loop unmarked (only the smaller reading fits) and one whose single
    copy of weights fits no 16 GiB chip: run, serve and a sweep's point agree."""
    platform = load_platform(locate("tpu_v5e_like", "platform"))[0]
    big = unmarked(SDXL)
    big["operators"][0] = {**big["operators"][0], "batch": 160}
    verdicts = {}
    for label, data in (("open", unmarked(SDXL)), ("big", big)):
        path = write(tmp_path / f"{label}.yaml", data)
        ran = main(["run", "--arch", "tpu_v5e_like", "--workload", path]) == 0
        try:
            setup = prepare(ServeSpec(workload=path, arch="tpu_v5e_like", rate=0.01,
                                      requests=2))
            served = setup.capacity.fits and setup.capacity.largest is not None
        except AccsimError as exc:
            assert "even as the smallest reading" in exc.rule
            served = False
        point = evaluate_point(platform, Workload.model_validate(data), Mapping())
        verdicts[label] = (ran, served, point["status"] == "ok")
    capsys.readouterr()
    assert verdicts == {"open": (True, True, True), "big": (False, False, False)}
