"""Output defects a newcomer hit (issue 23 item 8): the energy headline of a multi-chip
`serve` is the system's, every breakdown term has its own colour, `serve --plot` draws
the SLA, and the packet's breakdown figures of a workload share one scale."""

from __future__ import annotations

import json
import re
from pathlib import Path

from matplotlib.colors import to_rgba

from simulator.cli import main
from simulator.present.plots import COLOURS, SEGMENTS

REPO = Path(__file__).resolve().parent.parent
GPT2 = json.loads((REPO / "workloads/hf/gpt2.json").read_text())
TINY = json.dumps(GPT2 | {"n_layer": 2, "n_embd": 64, "n_head": 2, "n_inner": 128,
                          "vocab_size": 256, "n_positions": 64})
LLM = ["serve", "--model", "tiny.json", "--arch", "tpu_v5e_like", "--rate", "5",
       "--requests", "6", "--prompt-tokens", "16", "--output-tokens", "4"]
PLAIN = ["serve", "--arch", "tpu_v1", "--workload", "tpu_v1_mlp_b200", "--rate", "3000",
         "--requests", "300", "--max-batch", "4", "--max-wait-ms", "0.5"]


def test_multi_chip_serve_headlines_the_system_energy(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.json").write_text(TINY)
    assert main([*LLM, "--chips", "2", "--tp", "2", "--json", "r.json"]) == 0
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "r.json").read_text())
    line = next(line for line in printed.splitlines() if line.startswith("energy"))
    assert line.startswith("energy (system: 2 chips a replica)")
    system = result["system"]
    assert f"{result['energy_per_request_j'] * 2:,.4f} J/request" in line
    assert f"{system['energy_per_token_j']:,.5f} J/token; per chip " \
           f"{result['energy_per_request_j']:,.4f} J/request" in line
    assert main([*LLM, "--json", "one.json"]) == 0
    single = next(line for line in capsys.readouterr().out.splitlines()
                  if line.startswith("energy"))
    assert single.startswith("energy ") and "system" not in single and "per chip" \
        not in single


def test_every_breakdown_term_has_its_own_colour():
    assert len(COLOURS) == len(SEGMENTS)
    assert len({to_rgba(c) for c in COLOURS}) == len(SEGMENTS)


def _sla_labels(svg: str) -> list[str]:
    return re.findall(r"<!-- (SLA [^>]*?) -->", svg)


def test_serve_plot_draws_the_sla(tmp_path):
    plot = tmp_path / "cdf.svg"
    assert main([*PLAIN, "--sla", "latency_p99_ms=2,ttft_p50_ms=1", "--plot",
                 str(plot)]) == 0
    assert sorted(_sla_labels(plot.read_text())) == ["SLA latency p99 2 ms",
                                                      "SLA ttft p50 1 ms"]
    curve = tmp_path / "curve.svg"
    assert main([*PLAIN, "--sla", "latency_p95_ms=3", "--sweep-rate", "1000:3000:2",
                 "--plot", str(curve)]) == 0
    assert _sla_labels(curve.read_text()) == ["SLA latency p95 3 ms"]
    bare = tmp_path / "bare.svg"
    assert main([*PLAIN, "--plot", str(bare)]) == 0
    assert _sla_labels(bare.read_text()) == []
