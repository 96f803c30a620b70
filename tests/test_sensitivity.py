"""accsim sensitivity (DESIGN.md section 16): every figure of the tornado equals a rerun
with the perturbed platform file, on three workloads; the CLI writes the table, JSON and
figure, and refuses unknown fields and metrics with one clear line."""

from __future__ import annotations

import json

import pytest
import yaml

from simulator.calibrate.sensitivity import METRICS, perturbed_raw, sensitivity
from simulator.cli import main
from simulator.inputs.named_inputs import load_inputs
from simulator.simulate import simulate

# (platform, workload, metric, fields): a timing field, a field whose low end is its
# value (reused run), and energy fields that the time metric skips by proof.
CASES = [
    ("tpu_v1", "gemm_4096", "time_s",
     ["offchip.efficiency", "dma.setup_cycles", "energy.static_power.array_w"]),
    ("tpu_v5e_like", "bert_base_s128", "time_s",
     ["vector_unit.cycles_per_element.softmax", "runtime.op_overhead_cycles",
      "energy.mac_pj.bf16", "energy.vector_op_pj"]),
    ("edge_32x32", "tpu_v1_mlp_b200", "energy_j",
     ["energy.offchip_pj_per_byte", "offchip.latency_cycles", "clock_ghz"]),
]


@pytest.mark.parametrize("arch, workload, metric, fields", CASES)
def test_tornado_equals_reruns_of_perturbed_files(tmp_path, arch, workload, metric,
                                                  fields):
    inputs = load_inputs(arch, workload, None)
    study = sensitivity(inputs, metric, fields=fields)
    measure = METRICS[metric][1]
    assert study.base == measure(simulate(inputs, engine="fast"))
    assert sorted(s.field for s in study.swings) == sorted(fields)
    for swing in study.swings:
        for end, figure in ((swing.low, swing.metric_low), (swing.high, swing.metric_high)):
            path = tmp_path / f"{swing.field}_{end}.yaml"
            path.write_text(yaml.safe_dump(perturbed_raw(inputs.platform, swing.field, end)))
            rerun = simulate(load_inputs(str(path), workload, None), engine="fast")
            assert figure == measure(rerun), (swing.field, end)
    spreads = [s.spread for s in study.swings]
    assert spreads == sorted(spreads, reverse=True)
    assert spreads[0] > 0


def test_cli_table_json_and_figure(tmp_path, capsys):
    out, plot = tmp_path / "t.json", tmp_path / "t.png"
    assert main(["sensitivity", "--arch", "tpu_v1", "--workload", "gemm_4096",
                 "--field", "offchip.efficiency", "--field", "dma.setup_cycles",
                 "--json", str(out), "--plot", str(plot)]) == 0
    text = capsys.readouterr().out
    assert "offchip.efficiency" in text and "elasticity" in text
    data = json.loads(out.read_text())
    assert [f["field"] for f in data["fields"]] == ["offchip.efficiency",
                                                   "dma.setup_cycles"]
    first = data["fields"][0]
    assert first["metric_low"] > data["base"] > first["metric_high"]
    assert first["elasticity"] < 0
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, fragment", [
    (["--field", "offchip.bandwidth_gbps"], "no assumed fields with a range"),
    (["--metric", "watts"], "invalid choice"),
])
def test_cli_refuses_bad_requests(capsys, argv, fragment):
    try:
        code = main(["sensitivity", "--arch", "tpu_v1", "--workload", "gemm_4096", *argv])
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
